#include "state/data_root_lock.h"

#include <unistd.h>

namespace certmount {

Result<std::unique_ptr<DataRootLock>> DataRootLock::Acquire(const std::string& data_root,
                                                            Env* env) {
  const std::string path = data_root + "/certmountd.lock";
  Result<std::unique_ptr<FileLock>> lock = env->LockFile(path, std::to_string(getpid()) + "\n");
  if (lock.ok()) return std::make_unique<DataRootLock>(std::move(*lock));
  if (lock.status().code() != Code::kUnavailable) {
    return Status::FailedPrecondition("cannot lock " + lock.status().message());
  }
  Result<std::string> holder = env->ReadFile(path);
  std::string pid = holder.ok() ? *holder : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return Status::FailedPrecondition("another certmountd (pid " + (pid.empty() ? "unknown" : pid) +
                                    ") is using " + data_root + " (it holds " + path + ")");
}

}  // namespace certmount
