#include "volume/volume_layout.h"

#include <nlohmann/json.hpp>

#include "volume/paths.h"

namespace certmount {

namespace {

constexpr char kSecretsFile[] = "secret-attributes.json";

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
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(layout.private_dir, 0700));
  const std::string path = layout.private_dir + "/" + kSecretsFile;
  const std::string staging = path + ".tmp";
  (void)env->Remove(staging);
  CERTMOUNT_RETURN_IF_ERROR(
      env->WriteNewFile(staging, nlohmann::json(secrets).dump(), 0600, std::nullopt));
  CERTMOUNT_RETURN_IF_ERROR(env->Rename(staging, path));
  return env->SyncDir(layout.private_dir);
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
    if (!value.is_string()) return Status::DataLoss(path + ": value of " + key + " is not a string");
    secrets[key] = value.get<std::string>();
  }
  return secrets;
}

}  // namespace certmount
