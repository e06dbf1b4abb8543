#include "renew/volume_health.h"

#include <time.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "issue/attributes.h"
#include "volume/volume_layout.h"

namespace certmount {

namespace {

// Lexical only (no file-system access): trailing slashes and "." / ".."
// components do not make two spellings of one target path differ.
std::string Normalised(const std::string& path) {
  std::string normal = std::filesystem::path(path).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

// What is wrong with the volume's certificate and its renewal, as phrases.
std::vector<std::string> CertificateProblems(const VolumeRecord& volume, int64_t now) {
  std::vector<std::string> problems;
  if (volume.not_after.has_value() && *volume.not_after <= now) {
    problems.push_back("certificate " + volume.serial + " expired at " +
                       FormatUnixTime(*volume.not_after));
  }
  if (volume.renewal_attempts > 0) {
    std::string failing = "renewal failing: " + std::to_string(volume.renewal_attempts) +
                          " failed attempt" + (volume.renewal_attempts == 1 ? "" : "s");
    if (!volume.last_error.empty()) failing += ", last error: " + volume.last_error;
    if (volume.next_issuance_at.has_value()) {
      failing += ", next attempt at " + FormatUnixTime(*volume.next_issuance_at);
    }
    problems.push_back(failing);
  }
  return problems;
}

// The files the pod should see but does not, or attributes that no longer
// parse; nullopt when all is there. The names come from the pod's
// attributes; they are read through the target path, which is what the pod
// sees.
std::optional<std::string> FilesProblem(const VolumeRecord& volume, const AttributeRules& rules,
                                        const VolumeLayout& layout, const std::string& volume_path,
                                        Env* env) {
  std::map<std::string, std::string> attributes = volume.attributes;
  Result<std::map<std::string, std::string>> secrets = LoadSecretAttributes(layout, env);
  if (secrets.ok()) attributes.insert(secrets->begin(), secrets->end());
  Result<CertificateSpec> spec = ParseVolumeAttributes(attributes, rules);
  if (!spec.ok()) return "attributes no longer parse: " + spec.status().message();
  std::vector<std::string> expected = {spec->certificate_file, spec->private_key_file,
                                       spec->ca_file};
  if (!spec->credential_bundle_file.empty()) expected.push_back(spec->credential_bundle_file);
  if (spec->pkcs12_enable) expected.push_back(spec->pkcs12_filename);
  if (spec->jks_enable) {
    expected.push_back(spec->jks_filename);
    expected.push_back(spec->jks_truststore_filename);
  }
  std::string missing;
  for (const std::string& name : expected) {
    Result<std::string> contents = env->ReadFile(Normalised(volume_path) + "/" + name);
    if (contents.ok() && !contents->empty()) continue;
    missing += (missing.empty() ? "" : ", ") + name;
  }
  if (missing.empty()) return std::nullopt;
  return "files missing at " + volume_path + ": " + missing;
}

}  // namespace

std::string FormatUnixTime(int64_t unix_seconds) {
  const time_t time = static_cast<time_t>(unix_seconds);
  struct tm utc {};
  gmtime_r(&time, &utc);
  char text[32];
  strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

VolumeHealthChecker::VolumeHealthChecker(std::string data_root, AttributeRules rules, Store* store,
                                         Env* env, const Clock* clock)
    : data_root_(std::move(data_root)),
      rules_(std::move(rules)),
      store_(store),
      env_(env),
      clock_(clock) {}

Result<VolumeHealth> VolumeHealthChecker::Check(const std::string& volume_id,
                                                const std::string& volume_path) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::optional<VolumeRecord> row, store_->GetVolume(volume_id));
  if (!row.has_value() || !row->mounted) {
    return Status::NotFound("no published volume " + volume_id);
  }
  if (Normalised(row->target_path) != Normalised(volume_path)) {
    return Status::NotFound("volume " + volume_id + " is not published at " + volume_path);
  }
  const VolumeRecord& volume = *row;
  const VolumeLayout layout = VolumeLayout::For(data_root_, volume_id);
  const int64_t now = clock_->NowUnix();

  VolumeHealth health;
  // The visible names are symlinks into the current generation, whose files
  // the walk counts once. A failed walk reports 0 rather than failing the
  // stats call.
  const Result<int64_t> bytes = env_->RegularFileBytesUnder(layout.data);
  health.bytes_used = bytes.ok() ? *bytes : 0;
  std::vector<std::string> problems = CertificateProblems(volume, now);
  if (std::optional<std::string> files = FilesProblem(volume, rules_, layout, volume_path, env_)) {
    problems.push_back(*files);
  }

  if (problems.empty()) {
    health.message = "certificate " + volume.serial + " valid until " +
                     FormatUnixTime(volume.not_after.value_or(0)) + ", next renewal at " +
                     FormatUnixTime(volume.next_issuance_at.value_or(0));
    return health;
  }
  health.abnormal = true;
  for (size_t i = 0; i < problems.size(); ++i) {
    health.message += (i == 0 ? "" : "; ") + problems[i];
  }
  return health;
}

}  // namespace certmount
