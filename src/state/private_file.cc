#include "state/private_file.h"

namespace certmount {

Status EnsurePrivateFile(const std::string& path, Env* env) {
  constexpr mode_t kPrivateMode = 0600;
  const std::string context = "state database " + path;
  // A full disk is worth telling apart; anything else wrong with the
  // database file is the data root's damage, INTERNAL as it always was.
  auto failed = [&](const Status& status) {
    if (status.code() == Code::kResourceExhausted) return status.WithContext(context);
    return Status::Internal(context + ": " + status.message());
  };
  if (Status ensured = env->EnsureFile(path, kPrivateMode); !ensured.ok()) return failed(ensured);
  Result<FileStat> stat = env->LStat(path);
  if (!stat.ok()) return failed(stat.status());
  if (stat->permissions != kPrivateMode) {
    return Status::Internal(context + " does not keep mode 0600");
  }
  return Status::Ok();
}

}  // namespace certmount
