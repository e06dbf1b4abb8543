// One certmountd per data root. Two drivers on the same state would each run
// the startup cleanup and delete the other's in-flight (still unmounted)
// volumes, so the second one must not start. (A DaemonSet rolling update with
// maxSurge can briefly run two driver pods on one node.)
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace certmount {

class DataRootLock {
 public:
  // Takes an exclusive flock on <data_root>/certmountd.lock, creating it
  // (0600) and writing this process's pid into it. FAILED_PRECONDITION naming
  // the holder's pid when another process holds it. The lock is released
  // when the object is destroyed or the process dies, however it dies.
  static Result<std::unique_ptr<DataRootLock>> Acquire(const std::string& data_root);

  // Owns `fd`, an open lock file; Acquire is the way to get one.
  explicit DataRootLock(int fd) : fd_(fd) {}
  ~DataRootLock();
  DataRootLock(const DataRootLock&) = delete;
  DataRootLock& operator=(const DataRootLock&) = delete;

 private:
  int fd_;
};

}  // namespace certmount
