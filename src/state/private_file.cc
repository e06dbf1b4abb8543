#include "state/private_file.h"

namespace certmount {

Status EnsurePrivateFile(const std::string& path, Env* env) {
  constexpr mode_t kPrivateMode = 0600;
  const std::string context = "state database " + path;
  if (Status ensured = env->EnsureFile(path, kPrivateMode); !ensured.ok()) {
    return ensured.WithContext(context);
  }
  Result<FileStat> stat = env->LStat(path);
  if (!stat.ok()) return stat.status().WithContext(context);
  if (stat->permissions != kPrivateMode) {
    return Status::Internal(context + " does not keep mode 0600");
  }
  return Status::Ok();
}

}  // namespace certmount
