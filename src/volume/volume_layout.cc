#include "volume/volume_layout.h"

#include <nlohmann/json.hpp>

#include "volume/paths.h"

namespace certmount {

namespace {

constexpr char kSecretsFile[] = "secret-attributes.json";
constexpr char kDescriptionFile[] = "volume.json";

// Replaces dir/name with `contents` (mode 0600) in one rename, durably.
Status WriteFileAtomically(const std::string& dir, const std::string& name,
                           const std::string& contents, Env* env) {
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(dir, 0700));
  const std::string path = dir + "/" + name;
  const std::string staging = path + ".tmp";
  (void)env->Remove(staging);
  CERTMOUNT_RETURN_IF_ERROR(env->WriteNewFile(staging, contents, 0600, std::nullopt));
  CERTMOUNT_RETURN_IF_ERROR(env->Rename(staging, path));
  return env->SyncDir(dir);
}

}  // namespace

VolumeLayout VolumeLayout::For(const std::string& data_root, const std::string& volume_id) {
  VolumeLayout layout;
  layout.root = VolumesRoot(data_root) + "/" + volume_id;
  layout.data = layout.root + "/data";
  layout.private_dir = layout.root + "/private";
  return layout;
}

Status SaveSecretAttributes(const VolumeLayout& layout,
                            const std::map<std::string, std::string>& secrets, Env* env) {
  if (secrets.empty()) return Status::Ok();
  return WriteFileAtomically(layout.private_dir, kSecretsFile, nlohmann::json(secrets).dump(), env);
}

Status SaveVolumeDescription(const VolumeLayout& layout, const VolumeRecord& volume, Env* env) {
  nlohmann::json description = {
      {"volume_id", volume.volume_id},
      {"target_path", volume.target_path},
      {"pod_namespace", volume.pod_namespace},
      {"pod_name", volume.pod_name},
      {"pod_uid", volume.pod_uid},
      {"service_account", volume.service_account},
      {"issuer", volume.issuer},
      {"attributes", volume.attributes},
  };
  if (volume.file_group.has_value()) description["file_group"] = *volume.file_group;
  return WriteFileAtomically(layout.root, kDescriptionFile, description.dump(), env);
}

Result<VolumeRecord> LoadVolumeDescription(const VolumeLayout& layout, const std::string& volume_id,
                                           Env* env) {
  const std::string path = layout.root + "/" + kDescriptionFile;
  CERTMOUNT_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto text_field = [&](const char* key) -> std::optional<std::string> {
    if (!parsed.is_object() || !parsed.contains(key) || !parsed[key].is_string()) {
      return std::nullopt;
    }
    return parsed[key].get<std::string>();
  };
  VolumeRecord volume;
  std::pair<const char*, std::string*> fields[] = {
      {"volume_id", &volume.volume_id},
      {"target_path", &volume.target_path},
      {"pod_namespace", &volume.pod_namespace},
      {"pod_name", &volume.pod_name},
      {"pod_uid", &volume.pod_uid},
      {"service_account", &volume.service_account},
      {"issuer", &volume.issuer},
  };
  for (auto& [key, out] : fields) {
    std::optional<std::string> value = text_field(key);
    if (!value.has_value()) return Status::DataLoss(path + ": " + key + " is missing");
    *out = std::move(*value);
  }
  if (volume.volume_id != volume_id) {
    return Status::DataLoss(path + " describes volume " + volume.volume_id.substr(0, 200));
  }
  const nlohmann::json& attributes = parsed["attributes"];
  if (!attributes.is_object()) return Status::DataLoss(path + ": attributes is not an object");
  for (const auto& [key, value] : attributes.items()) {
    if (!value.is_string()) return Status::DataLoss(path + ": attribute " + key + " is not text");
    volume.attributes[key] = value.get<std::string>();
  }
  if (parsed.contains("file_group")) {
    if (!parsed["file_group"].is_number_unsigned()) {
      return Status::DataLoss(path + ": file_group is not a group id");
    }
    volume.file_group = parsed["file_group"].get<uint32_t>();
  }
  return volume;
}

Result<std::map<std::string, std::string>> LoadSecretAttributes(const VolumeLayout& layout,
                                                                Env* env) {
  const std::string path = layout.private_dir + "/" + kSecretsFile;
  Result<std::string> text = env->ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::map<std::string, std::string>();
    return text.status();
  }
  nlohmann::json parsed = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return Status::DataLoss(path + " is not a JSON object");
  std::map<std::string, std::string> secrets;
  for (const auto& [key, value] : parsed.items()) {
    if (!value.is_string())
      return Status::DataLoss(path + ": value of " + key + " is not a string");
    secrets[key] = value.get<std::string>();
  }
  return secrets;
}

}  // namespace certmount
