// One certmountd per data root. Two drivers on the same state would each run
// the startup cleanup and delete the other's in-flight (still unmounted)
// volumes, so the second one must not start. (A DaemonSet rolling update with
// maxSurge can briefly run two driver pods on one node.)
#pragma once

#include <memory>
#include <string>

#include "common/env.h"
#include "common/status.h"

namespace certmount {

class DataRootLock {
 public:
  // Takes the lock on <data_root>/certmountd.lock through env->LockFile,
  // writing this process's pid into it. FAILED_PRECONDITION (the driver
  // cannot start) naming the holder's pid when another process (or another
  // DataRootLock) holds it, or with LockFile's error (which names the errno)
  // when locking fails otherwise. The lock is released when the
  // object is destroyed or the process dies, however it dies.
  static Result<std::unique_ptr<DataRootLock>> Acquire(const std::string& data_root, Env* env);

  // Holds `lock`; Acquire is the way to get one.
  explicit DataRootLock(std::unique_ptr<FileLock> lock) : lock_(std::move(lock)) {}

 private:
  std::unique_ptr<FileLock> lock_;
};

}  // namespace certmount
