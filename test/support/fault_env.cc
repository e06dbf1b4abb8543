#include "support/fault_env.h"

namespace certmount::testing {

void FaultInjectionEnv::FailNth(std::string operation, int nth, int error_number) {
  std::lock_guard lock(mu_);
  fault_operation_ = std::move(operation);
  fault_nth_ = calls_[fault_operation_] + nth;
  fault_errno_ = error_number;
}

int FaultInjectionEnv::calls(const std::string& operation) const {
  std::lock_guard lock(mu_);
  auto it = calls_.find(operation);
  return it == calls_.end() ? 0 : it->second;
}

void FaultInjectionEnv::HoldRemoveTree(std::string path) {
  std::lock_guard lock(mu_);
  hold_path_ = std::move(path);
  held_ = released_ = false;
}

void FaultInjectionEnv::WaitUntilRemoveTreeHeld() {
  std::unique_lock lock(mu_);
  hold_changed_.wait(lock, [&] { return held_; });
}

void FaultInjectionEnv::ReleaseRemoveTree() {
  std::lock_guard lock(mu_);
  released_ = true;
  hold_changed_.notify_all();
}

Status FaultInjectionEnv::RemoveTree(const std::string& path) {
  {
    std::unique_lock lock(mu_);
    if (!hold_path_.empty() && path == hold_path_) {
      hold_path_.clear();
      held_ = true;
      hold_changed_.notify_all();
      hold_changed_.wait(lock, [&] { return released_; });
    }
  }
  return EnvWrapper::RemoveTree(path);
}

Status FaultInjectionEnv::Check(const std::string& operation, const std::string& path) {
  std::lock_guard lock(mu_);
  int n = ++calls_[operation];
  if (operation == fault_operation_ && n == fault_nth_) {
    return ErrnoStatus(fault_errno_, "injected " + operation, path);
  }
  return Status::Ok();
}

Status FaultInjectionEnv::CreateDir(const std::string& path, mode_t mode,
                                    std::optional<gid_t> gid) {
  CERTMOUNT_RETURN_IF_ERROR(Check("CreateDir", path));
  return EnvWrapper::CreateDir(path, mode, gid);
}

Status FaultInjectionEnv::WriteNewFile(const std::string& path, std::string_view contents,
                                       mode_t mode, std::optional<gid_t> gid) {
  CERTMOUNT_RETURN_IF_ERROR(Check("WriteNewFile", path));
  return EnvWrapper::WriteNewFile(path, contents, mode, gid);
}

Status FaultInjectionEnv::EnsureFile(const std::string& path, mode_t mode) {
  CERTMOUNT_RETURN_IF_ERROR(Check("EnsureFile", path));
  return EnvWrapper::EnsureFile(path, mode);
}

Result<std::unique_ptr<FileLock>> FaultInjectionEnv::LockFile(const std::string& path,
                                                              std::string_view contents) {
  CERTMOUNT_RETURN_IF_ERROR(Check("LockFile", path));
  return EnvWrapper::LockFile(path, contents);
}

Result<std::string> FaultInjectionEnv::ReadFile(const std::string& path) {
  CERTMOUNT_RETURN_IF_ERROR(Check("ReadFile", path));
  return EnvWrapper::ReadFile(path);
}

Result<FileStat> FaultInjectionEnv::Stat(const std::string& path) {
  CERTMOUNT_RETURN_IF_ERROR(Check("Stat", path));
  return EnvWrapper::Stat(path);
}

Result<MountRootStat> FaultInjectionEnv::LStatMountRoot(const std::string& path) {
  CERTMOUNT_RETURN_IF_ERROR(Check("LStatMountRoot", path));
  return EnvWrapper::LStatMountRoot(path);
}

Status FaultInjectionEnv::SyncDir(const std::string& path) {
  CERTMOUNT_RETURN_IF_ERROR(Check("SyncDir", path));
  return EnvWrapper::SyncDir(path);
}

Status FaultInjectionEnv::Rename(const std::string& from, const std::string& to) {
  CERTMOUNT_RETURN_IF_ERROR(Check("Rename", from));
  return EnvWrapper::Rename(from, to);
}

Status FaultInjectionEnv::Symlink(const std::string& target, const std::string& link_path) {
  CERTMOUNT_RETURN_IF_ERROR(Check("Symlink", link_path));
  return EnvWrapper::Symlink(target, link_path);
}

Status FaultInjectionEnv::Mount(const std::string& source, const std::string& target,
                                const std::string& fstype, unsigned long flags,
                                const std::string& data) {
  CERTMOUNT_RETURN_IF_ERROR(Check("Mount", target));
  return EnvWrapper::Mount(source, target, fstype, flags, data);
}

Status FaultInjectionEnv::MountReadOnlyBind(const std::string& source, const std::string& target) {
  CERTMOUNT_RETURN_IF_ERROR(Check("MountReadOnlyBind", target));
  return EnvWrapper::MountReadOnlyBind(source, target);
}

}  // namespace certmount::testing
