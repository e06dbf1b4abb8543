// An Env that fails the Nth call of a named operation with a chosen errno,
// and counts calls, so tests can put an I/O error at any step of a sequence.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "common/env.h"

namespace certmount::testing {

class FaultInjectionEnv : public EnvWrapper {
 public:
  FaultInjectionEnv() : EnvWrapper(Env::Default()) {}

  // The `nth` call (1-based, counted from now) of `operation` ("CreateDir",
  // "WriteNewFile", "EnsureFile", "LockFile", "ReadFile", "Stat", "LStatMountRoot", "SyncDir",
  // "Rename", "Symlink", "Mount", "MountReadOnlyBind") fails with `error_number`; every other
  // call goes to the real filesystem.
  void FailNth(std::string operation, int nth, int error_number);
  int calls(const std::string& operation) const;

  // The next RemoveTree of exactly `path` reports that it started and waits
  // for ReleaseRemoveTree() before it runs: holds an operation at that step
  // so a test can send a second one in, whatever the timing.
  void HoldRemoveTree(std::string path);
  void WaitUntilRemoveTreeHeld();
  void ReleaseRemoveTree();

  Status CreateDir(const std::string& path, mode_t mode, std::optional<gid_t> gid) override;
  Status WriteNewFile(const std::string& path, std::string_view contents, mode_t mode,
                      std::optional<gid_t> gid) override;
  Status EnsureFile(const std::string& path, mode_t mode) override;
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                             std::string_view contents) override;
  Result<std::string> ReadFile(const std::string& path) override;
  Result<FileStat> Stat(const std::string& path) override;
  Result<MountRootStat> LStatMountRoot(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Symlink(const std::string& target, const std::string& link_path) override;
  Status Mount(const std::string& source, const std::string& target, const std::string& fstype,
               unsigned long flags, const std::string& data) override;
  Status MountReadOnlyBind(const std::string& source, const std::string& target) override;
  Status RemoveTree(const std::string& path) override;

 private:
  Status Check(const std::string& operation, const std::string& path);

  mutable std::mutex mu_;
  std::map<std::string, int> calls_;
  std::string fault_operation_;
  int fault_nth_ = 0;
  int fault_errno_ = 0;
  std::condition_variable hold_changed_;
  std::string hold_path_;
  bool held_ = false;
  bool released_ = false;
};

}  // namespace certmount::testing
