#include "volume/mount.h"

#include <sys/mount.h>

#include <cstdio>
#include <string_view>

namespace certmount {
namespace {

constexpr unsigned long kLockedDownFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;

// Whether `path` equals `dir` or lies below it, by whole components.
bool IsAtOrBelow(std::string_view path, std::string_view dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  if (path.substr(0, dir.size()) != dir) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

}  // namespace

Status MountTmpfsIfNeeded(const std::string& dir, Env* env) {
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(dir, kDataTmpfsMode));
  // mountinfo prints canonical paths, so compare against one.
  CERTMOUNT_ASSIGN_OR_RETURN(std::string canonical, env->RealPath(dir));
  CERTMOUNT_ASSIGN_OR_RETURN(MountTable table, MountTable::Read(env));
  const MountInfoEntry* top = table.TopMountAt(canonical);
  if (top != nullptr && top->fstype == "tmpfs") return Status::Ok();
  char options[32];
  std::snprintf(options, sizeof options, "mode=%04o", static_cast<unsigned>(kDataTmpfsMode));
  return env->Mount("tmpfs", canonical, "tmpfs", kLockedDownFlags, options)
      .WithContext("mounting the data tmpfs");
}

Status BindMountReadOnly(const std::string& source_dir, const std::string& target_dir, Env* env) {
  Status attached = env->MountReadOnlyBind(source_dir, target_dir);
  if (attached.code() != Code::kUnimplemented) {
    return attached.WithContext("bind-mounting " + source_dir + " read-only");
  }
  // A kernel before 5.12: bind, then remount. Peers that receive the bind
  // through propagation keep it writable (the remount does not propagate).
  CERTMOUNT_RETURN_IF_ERROR(env->Mount(source_dir, target_dir, "", MS_BIND, "")
                                .WithContext("bind-mounting " + source_dir));
  // A bind mount ignores MS_RDONLY and friends on creation; only a remount
  // of the bind applies them.
  Status remounted =
      env->Mount("", target_dir, "", MS_BIND | MS_REMOUNT | MS_RDONLY | kLockedDownFlags, "");
  if (remounted.ok()) return Status::Ok();
  remounted = remounted.WithContext("remounting the bind read-only");
  Status undone = env->Unmount(target_dir, 0);
  // Nothing can have opened the new mount yet except by accident; if the
  // plain unmount still fails, detaching at least removes it from the path.
  if (!undone.ok()) undone = env->Unmount(target_dir, MNT_DETACH);
  if (!undone.ok()) {
    return Status::Internal(remounted.ToString() + "; undoing the writable bind mount at " +
                            target_dir + " failed too: " + undone.ToString());
  }
  return remounted;
}

Status Unmount(const std::string& target, Env* env) {
  // umount2 itself answers "is it still a mount point?": EINVAL once nothing
  // is mounted at target any more. That avoids an O(mounts) mountinfo read
  // per call, which would make startup with many volumes quadratic.
  for (int i = 0; i < kMaxStackedMounts; ++i) {
    Status status = env->Unmount(target, UMOUNT_NOFOLLOW);
    if (status.code() == Code::kInvalidArgument || status.code() == Code::kNotFound) {
      return Status::Ok();
    }
    if (!status.ok()) return status;
  }
  return Status::Internal(target + " is still a mount point after " +
                          std::to_string(kMaxStackedMounts) + " unmounts");
}

std::optional<std::string> BindSourceUnder(const MountTable& table, const std::string& target,
                                           const std::string& data_dir) {
  const MountInfoEntry* mounted = table.TopMountAt(target);
  if (mounted == nullptr) return std::nullopt;
  // Find the mount data_dir lives on by walking up to the nearest mount
  // point: O(depth * log mounts), never a scan of the table.
  std::string containing_point = data_dir;
  const MountInfoEntry* data_mount = nullptr;
  while (!containing_point.empty()) {
    data_mount = table.TopMountAt(containing_point);
    if (data_mount != nullptr) break;
    size_t slash = containing_point.find_last_of('/');
    if (slash == std::string::npos) break;
    containing_point =
        slash == 0 ? (containing_point == "/" ? "" : "/") : containing_point.substr(0, slash);
  }
  if (data_mount == nullptr || data_mount == mounted) return std::nullopt;
  if (mounted->major != data_mount->major || mounted->minor != data_mount->minor) {
    return std::nullopt;
  }
  // data_dir as a path inside its filesystem, comparable with mountinfo roots.
  std::string below_point = data_dir.substr(containing_point == "/" ? 0 : containing_point.size());
  std::string data_root = data_mount->root == "/" ? below_point : data_mount->root + below_point;
  if (data_root.empty()) data_root.push_back('/');  // not = "/": GCC 12 -O3 -Wrestrict
  if (!IsAtOrBelow(mounted->root, data_root)) return std::nullopt;
  std::string_view rest =
      std::string_view(mounted->root).substr(data_root == "/" ? 0 : data_root.size());
  if (!rest.empty() && rest[0] == '/') rest.remove_prefix(1);
  if (rest.empty()) return data_dir;
  return (data_dir == "/" ? "" : data_dir) + "/" + std::string(rest);
}

bool IsMountedFrom(const MountTable& table, const std::string& target,
                   const std::string& data_dir) {
  return BindSourceUnder(table, target, data_dir).has_value();
}

}  // namespace certmount
