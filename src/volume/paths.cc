#include "volume/paths.h"

#include <climits>
#include <vector>

#include "common/logging.h"

namespace certmount {
namespace {

bool IsSafeIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Splits an absolute path into components; returns an empty message when
// every component is a real name, else which rule failed.
std::string SplitNormalised(std::string_view path, std::vector<std::string_view>& components) {
  if (path.empty() || path[0] != '/') return "is not absolute";
  if (path.size() > 1 && path.back() == '/') return "ends with '/'";
  size_t start = 1;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view component = path.substr(start, slash - start);
    if (component.empty()) return "contains \"//\"";
    if (component == "." || component == "..") return "contains a \".\" or \"..\" component";
    components.push_back(component);
    start = slash + 1;
  }
  return "";
}

// Whether `components` begins with all of `prefix`, leaving at least one more.
bool StrictlyBelow(const std::vector<std::string_view>& components,
                   const std::vector<std::string_view>& prefix) {
  if (components.size() <= prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (components[i] != prefix[i]) return false;
  }
  return true;
}

}  // namespace

Status ValidateVolumeId(std::string_view id) {
  auto invalid = [&](std::string_view rule) {
    return Status::InvalidArgument("volume id " + QuoteUserValue(id) + " " + std::string(rule));
  };
  if (id.empty()) return invalid("is empty");
  if (id.size() > kMaxVolumeIdLength) {
    return invalid("is longer than " + std::to_string(kMaxVolumeIdLength) + " bytes");
  }
  for (char c : id) {
    if (!IsSafeIdChar(c)) return invalid("may contain only letters, digits, '.', '_' and '-'");
  }
  if (id == "." || id == "..") return invalid("is \".\" or \"..\"");
  if (id.find("..") != std::string_view::npos) return invalid("contains \"..\"");
  return Status::Ok();
}

Status ValidateTargetPath(const std::string& target, const std::string& target_root, Env* env) {
  auto invalid = [&](const std::string& why) {
    // Up to PATH_MAX bytes from kubelet, or from a hostile caller of the
    // socket: quoted, so the message stays short and on one line.
    return Status::InvalidArgument("target path " + QuoteUserValue(target, 512) + " " + why);
  };
  if (target.size() >= PATH_MAX) return invalid("is too long");
  if (target.find('\0') != std::string::npos) return invalid("contains a NUL byte");
  std::vector<std::string_view> components;
  if (std::string why = SplitNormalised(target, components); !why.empty()) return invalid(why);

  CERTMOUNT_ASSIGN_OR_RETURN(std::string real_root, env->RealPath(target_root));
  std::vector<std::string_view> written_root_components, real_root_components;
  std::string written_why = SplitNormalised(target_root, written_root_components);
  SplitNormalised(real_root, real_root_components);
  size_t root_depth = 0;
  if (StrictlyBelow(components, real_root_components)) {
    root_depth = real_root_components.size();
  } else if (written_why.empty() && StrictlyBelow(components, written_root_components)) {
    root_depth = written_root_components.size();
  } else {
    return invalid("is not below " + target_root);
  }

  // Check every component below the root with lstat, from the top down, so
  // a symlink planted anywhere on the way is caught before it is followed.
  std::string prefix;
  for (size_t i = 0; i < root_depth; ++i) prefix.append("/").append(components[i]);
  for (size_t i = root_depth; i < components.size(); ++i) {
    prefix.append("/").append(components[i]);
    bool is_target = i + 1 == components.size();
    Result<FileStat> stat = env->LStat(prefix);
    if (!stat.ok()) {
      if (stat.status().code() != Code::kNotFound) return stat.status();
      if (is_target) return Status::Ok();
      return Status::FailedPrecondition("parent of target path \"" + target +
                                        "\" does not exist: " + prefix + " is missing");
    }
    if (stat->type == FileStat::Type::kSymlink) return invalid("has a symlink at " + prefix);
    if (stat->type != FileStat::Type::kDirectory) {
      return invalid("has a non-directory at " + prefix);
    }
  }
  return Status::Ok();
}

Result<bool> EnsureTargetDirectory(const std::string& target, Env* env) {
  Status created = env->CreateDir(target, 0750, std::nullopt);
  if (created.ok()) return true;
  if (created.code() != Code::kAlreadyExists) return created;
  CERTMOUNT_ASSIGN_OR_RETURN(FileStat stat, env->LStat(target));
  if (stat.type != FileStat::Type::kDirectory) {
    return Status::FailedPrecondition("target path " + target + " exists and is not a directory");
  }
  return false;
}

std::string VolumesRoot(const std::string& data_root) { return data_root + "/volumes"; }

Result<VolumePaths> VolumePaths::Make(const std::string& data_root, std::string_view volume_id) {
  CERTMOUNT_RETURN_IF_ERROR(ValidateVolumeId(volume_id));
  return VolumePaths{VolumesRoot(data_root) + "/" + std::string(volume_id)};
}

}  // namespace certmount
