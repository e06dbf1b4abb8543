#include "volume/mount.h"

#include <linux/magic.h>
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

// Whether the visible mount at `dir` (canonical) is a tmpfs, asked of the
// kernel for that one path: a mount root whose filesystem is a tmpfs. A
// directory on a tmpfs that is not itself a mount point does not count (the
// driver's tmpfs is mounted at `dir`). nullopt when only the mount table can
// tell (the kernel does not report mount roots, or a call failed).
std::optional<bool> TmpfsMountedAt(const std::string& dir, Env* env) {
  Result<MountRootStat> at = env->LStatMountRoot(dir);
  if (!at.ok() || !at->mount_root.has_value()) return std::nullopt;
  if (!*at->mount_root) return false;
  Result<uint64_t> magic = env->FilesystemMagic(dir);
  if (!magic.ok()) return std::nullopt;
  return *magic == TMPFS_MAGIC;
}

}  // namespace

Status MountTmpfsIfNeeded(const std::string& dir, Env* env) {
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(dir, kDataTmpfsMode));
  // mountinfo prints canonical paths, so compare against one.
  CERTMOUNT_ASSIGN_OR_RETURN(std::string canonical, env->RealPath(dir));
  std::optional<bool> tmpfs = TmpfsMountedAt(canonical, env);
  if (!tmpfs.has_value()) {
    CERTMOUNT_ASSIGN_OR_RETURN(MountTable table, MountTable::Read(env));
    const MountInfoEntry* top = table.TopMountAt(canonical);
    tmpfs = top != nullptr && top->fstype == "tmpfs";
  }
  if (*tmpfs) return Status::Ok();
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

std::optional<FsLocation> LocateInFs(const MountTable& table, const std::string& dir) {
  const MountInfoEntry* mount = table.ContainingMount(dir);
  if (mount == nullptr) return std::nullopt;
  const std::string& point = mount->mount_point;
  std::string below_point = dir.substr(point == "/" ? 0 : point.size());
  std::string path = mount->root == "/" ? below_point : mount->root + below_point;
  if (path.empty()) path.push_back('/');  // not = "/": GCC 12 -O3 -Wrestrict
  return FsLocation{mount->major, mount->minor, std::move(path), mount};
}

bool ShowsDirectory(const MountInfoEntry& entry, const FsLocation& where, bool exactly) {
  if (&entry == where.mount) return false;
  if (entry.major != where.major || entry.minor != where.minor) return false;
  return exactly ? entry.root == where.path_in_fs : IsAtOrBelow(entry.root, where.path_in_fs);
}

TargetHolder WhoHolds(const MountTable& table, const std::string& target,
                      const std::string& volume_data_dir) {
  const MountInfoEntry* top = table.TopMountAt(target);
  if (top == nullptr) return TargetHolder::kNothing;
  std::optional<FsLocation> data = LocateInFs(table, volume_data_dir);
  if (!data.has_value()) return TargetHolder::kOther;
  if (ShowsDirectory(*top, *data, /*exactly=*/true)) return TargetHolder::kThisVolume;
  for (const MountInfoEntry* mount : table.MountsAt(target)) {
    if (ShowsDirectory(*mount, *data, /*exactly=*/true)) return TargetHolder::kThisVolumeCovered;
  }
  return TargetHolder::kOther;
}

std::optional<TargetHolder> ProveHolder(const std::string& target,
                                        const std::string& volume_data_dir, Env* env) {
  Result<MountRootStat> at_target = env->LStatMountRoot(target);
  if (!at_target.ok()) {
    if (at_target.status().code() == Code::kNotFound) return TargetHolder::kNothing;
    return std::nullopt;
  }
  // Only a mount root can be a mount of the volume; anything else (or a
  // kernel that cannot tell) goes to the table, which also lists mounts that
  // path lookup no longer reaches.
  if (at_target->mount_root != true || at_target->stat.type != FileStat::Type::kDirectory) {
    return std::nullopt;
  }
  // lstat: a data directory replaced by a symlink proves nothing.
  Result<FileStat> data = env->LStat(volume_data_dir);
  if (!data.ok() || data->type != FileStat::Type::kDirectory) return std::nullopt;
  if (at_target->stat.device != data->device || at_target->stat.inode != data->inode) {
    return std::nullopt;
  }
  return TargetHolder::kThisVolume;
}

Result<TargetHolder> WhoHoldsTarget(const std::string& target, const std::string& volume_data_dir,
                                    Env* env) {
  if (std::optional<TargetHolder> proven = ProveHolder(target, volume_data_dir, env)) {
    return *proven;
  }
  CERTMOUNT_ASSIGN_OR_RETURN(MountTable table, MountTable::Read(env));
  return WhoHolds(table, target, volume_data_dir);
}

Status UnmountTop(const std::string& target, Env* env) {
  return env->Unmount(target, UMOUNT_NOFOLLOW).WithContext("unmounting " + target);
}

std::vector<std::string> MountPointsShowing(const MountTable& table, const std::string& dir) {
  std::vector<std::string> points;
  std::optional<FsLocation> where = LocateInFs(table, dir);
  if (!where.has_value()) return points;
  for (const MountInfoEntry& entry : table.entries()) {
    if (ShowsDirectory(entry, *where, /*exactly=*/false) &&
        table.TopMountAt(entry.mount_point) == &entry) {
      points.push_back(entry.mount_point);
    }
  }
  return points;
}

bool ShowsLostVolumesTmpfs(const MountTable& table, const std::string& target,
                           const std::string& volume_id, const std::string& volumes_root) {
  const MountInfoEntry* top = table.TopMountAt(target);
  const MountInfoEntry* volumes = table.TopMountAt(volumes_root);
  if (top == nullptr || top->fstype != "tmpfs" || top->root != "/" + volume_id + "/data") {
    return false;
  }
  return volumes == nullptr || volumes->major != top->major || volumes->minor != top->minor;
}

Status ReattachThroughTarget(const std::string& target, const std::string& data_dir, Env* env) {
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(data_dir, 0755));
  CERTMOUNT_RETURN_IF_ERROR(env->Mount(target, data_dir, "", MS_BIND, "")
                                .WithContext("bind-mounting " + target + " at " + data_dir));
  Status writable = env->Mount("", data_dir, "", MS_BIND | MS_REMOUNT | kLockedDownFlags, "");
  if (writable.ok()) return Status::Ok();
  (void)env->Unmount(data_dir, UMOUNT_NOFOLLOW);
  return writable.WithContext("remounting " + data_dir + " writable");
}

Status DetachReattached(const std::string& data_dir, Env* env) {
  Result<FileStat> data = env->LStat(data_dir);
  Result<FileStat> parent = env->LStat(data_dir.substr(0, data_dir.rfind('/')));
  if (!data.ok() || !parent.ok() || data->device == parent->device) return Status::Ok();
  return UnmountTop(data_dir, env);
}

std::map<std::string, std::vector<std::string>> MountPointsByVolume(
    const MountTable& table, const std::string& volumes_root) {
  std::map<std::string, std::vector<std::string>> shown;
  std::optional<FsLocation> where = LocateInFs(table, volumes_root);
  if (!where.has_value()) return shown;
  const size_t skip = where->path_in_fs == "/" ? 1 : where->path_in_fs.size() + 1;
  for (const MountInfoEntry& entry : table.entries()) {
    if (!ShowsDirectory(entry, *where, /*exactly=*/false) || entry.root.size() <= skip ||
        table.TopMountAt(entry.mount_point) != &entry) {
      continue;
    }
    std::string_view rest = std::string_view(entry.root).substr(skip);
    shown[std::string(rest.substr(0, rest.find('/')))].push_back(entry.mount_point);
  }
  return shown;
}

std::optional<std::string> BindSourceUnder(const MountTable& table, const std::string& target,
                                           const std::string& data_dir) {
  const MountInfoEntry* mounted = table.TopMountAt(target);
  if (mounted == nullptr) return std::nullopt;
  std::optional<FsLocation> data = LocateInFs(table, data_dir);
  if (!data.has_value() || !ShowsDirectory(*mounted, *data, /*exactly=*/false)) {
    return std::nullopt;
  }
  std::string_view rest =
      std::string_view(mounted->root).substr(data->path_in_fs == "/" ? 0 : data->path_in_fs.size());
  if (!rest.empty() && rest[0] == '/') rest.remove_prefix(1);
  if (rest.empty()) return data_dir;
  return (data_dir == "/" ? "" : data_dir) + "/" + std::string(rest);
}

bool IsMountedFrom(const MountTable& table, const std::string& target,
                   const std::string& data_dir) {
  return BindSourceUnder(table, target, data_dir).has_value();
}

}  // namespace certmount
