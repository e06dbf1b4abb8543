// The three mounts the driver makes: a tmpfs under its data directory so keys
// never touch a disk, read-only bind mounts of volume directories onto
// kubelet's target paths, and their removal.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/status.h"
#include "volume/mountinfo.h"

namespace certmount {

// Mode of the data tmpfs root. 0700: pods never traverse this path (the
// kernel resolves a bind mount's source once, at mount time, and the pod sees
// only the mounted volume directory), so nobody but root needs even search
// permission here; it also keeps the list of volume ids private.
inline constexpr mode_t kDataTmpfsMode = 0700;

// At most this many mounts stacked on one target are removed by Unmount.
inline constexpr int kMaxStackedMounts = 32;

// Ensures a tmpfs (nosuid,nodev,noexec, mode 0700) is mounted at `dir`,
// creating `dir` and its parents if missing. A no-op when the visible mount
// at `dir` already is a tmpfs (a driver restart, where the old tmpfs still
// backs the pods' bind mounts and must not be hidden). When `dir` is a mount
// point of another type (typically a hostPath bind onto a disk), a tmpfs is
// mounted on top of it, because private keys must not land on persistent
// storage. Asks the kernel about `dir` alone (statx, statfs); reads the
// mount table only on a kernel that does not report mount roots.
Status MountTmpfsIfNeeded(const std::string& dir, Env* env);

// Bind-mounts `source_dir` onto `target_dir` (both must exist) read-only,
// nosuid, nodev, noexec. The mount is created with those flags before it is
// attached (Env::MountReadOnlyBind), so every copy that shared propagation
// makes, e.g. the host's copy of a mount made in a container, has them too.
// Only on a kernel without the new mount API (before 5.12) does it fall
// back to a bind followed by a read-only remount, whose flags reach this
// mount namespace's copy only; if that remount fails the bind is undone
// before returning the error, so no writable mount is ever left. Does not
// check whether `target_dir` is already mounted (that needs a mountinfo
// read, which the caller may already have); calling it twice stacks a mount.
Status BindMountReadOnly(const std::string& source_dir, const std::string& target_dir, Env* env);

// Unmounts `target` until nothing is mounted there any more (stacked mounts
// are removed one by one, at most kMaxStackedMounts). OK when `target` is not
// a mount point (EINVAL) or does not exist (ENOENT), so it is idempotent.
// No MNT_DETACH: kubelet removes the target directory after
// NodeUnpublishVolume returns and expects it really unmounted; a busy mount
// is reported as UNAVAILABLE so kubelet retries. Symlinks are not followed.
Status Unmount(const std::string& target, Env* env);

// Where a directory lives, as mountinfo names it: the device of the
// filesystem it is on and its path inside that filesystem (comparable with
// MountInfoEntry::root), plus the mount it was found through.
struct FsLocation {
  unsigned major = 0;
  unsigned minor = 0;
  std::string path_in_fs;
  const MountInfoEntry* mount = nullptr;
};

// Locates `dir` (absolute, canonical) through the nearest mount point at or
// above it. nullopt when the table has no mount above it.
std::optional<FsLocation> LocateInFs(const MountTable& table, const std::string& dir);

// Whether `entry` shows `where` or a directory below it (same device, root at
// or below where.path_in_fs); with `exactly`, only `where` itself.
bool ShowsDirectory(const MountInfoEntry& entry, const FsLocation& where, bool exactly);

// Who holds a target path in the mount table, from one volume's point of
// view. The driver acts on a target only when it is kThisVolume: a mount
// point, a path or a row alone proves nothing (docs/design.md, Ownership).
enum class TargetHolder {
  kNothing,            // not a mount point
  kThisVolume,         // the visible mount is a bind of the volume's data directory
  kThisVolumeCovered,  // the volume's bind is there, under another mount
  kOther,              // a mount point, none of whose mounts is the volume's
};

// Who holds `target` (absolute, canonical) for the volume whose data
// directory is `volume_data_dir` (absolute, canonical, on the volumes tmpfs).
TargetHolder WhoHolds(const MountTable& table, const std::string& target,
                      const std::string& volume_data_dir);

// What the kernel proves about `target` (absolute, canonical) for the volume
// whose data directory is `volume_data_dir` (absolute, canonical), from two
// per-path syscalls instead of the whole mount table (about 1.5 MB to read
// and parse on a node with 10,000 volumes):
//   kThisVolume  statx reports `target` (not following a symlink) as a mount
//                root, so the mount path lookup reaches there, the one
//                umount2(target) removes, is the topmost one at target; and
//                that root is the data directory's own inode (lstat: same
//                device, same inode number). The device names the volumes
//                filesystem's superblock (the kernel assigns it; no mount can
//                claim another's), and a directory has exactly one name in
//                it, so the visible mount shows exactly that directory.
//   kNothing     `target` does not exist: nothing can be mounted there.
// nullopt whenever the answer needs the table: not a mount point (a mount
// hidden under a covered parent is only in the table), another mount, ours
// under another mount, a data directory that is gone or not a directory, a
// kernel that does not report mount roots, any other error. WhoHolds decides
// those.
std::optional<TargetHolder> ProveHolder(const std::string& target,
                                        const std::string& volume_data_dir, Env* env);

// WhoHolds for one target: ProveHolder's answer when it has one, otherwise
// the mount table's, read through `env`.
Result<TargetHolder> WhoHoldsTarget(const std::string& target, const std::string& volume_data_dir,
                                    Env* env);

// Unmounts the visible mount at `target` once: UMOUNT_NOFOLLOW, no
// MNT_DETACH (a busy mount is UNAVAILABLE, kubelet retries). Never loops:
// callers establish with WhoHolds that this one layer is theirs.
Status UnmountTop(const std::string& target, Env* env);

// Every mount point whose visible mount shows `dir` or a directory below it
// (absolute, canonical); what keeps a directory from being deleted while a
// pod still sees it.
std::vector<std::string> MountPointsShowing(const MountTable& table, const std::string& dir);

// Whether the visible mount at `target` is a bind of "<id>/data" on a tmpfs
// other than the one now at `volumes_root`: the volume's directory on a
// volumes tmpfs the driver lost (it restarted without the host's tmpfs, and
// the pod still holds a bind of the old one).
bool ShowsLostVolumesTmpfs(const MountTable& table, const std::string& target,
                           const std::string& volume_id, const std::string& volumes_root);

// Makes `data_dir` (created when missing) a writable view of the directory
// the mount at `target` shows: a bind of the target, remounted read-write,
// nosuid, nodev, noexec. Renewals written to `data_dir` then reach the pod.
Status ReattachThroughTarget(const std::string& target, const std::string& data_dir, Env* env);

// Unmounts what ReattachThroughTarget mounted at `data_dir`, if anything
// (a mount point there has another device than its parent directory).
Status DetachReattached(const std::string& data_dir, Env* env);

// For each directory name directly below `volumes_root` (absolute,
// canonical): the mount points whose visible mount shows that directory or
// something below it. One pass over the table, for the startup sweep.
std::map<std::string, std::vector<std::string>> MountPointsByVolume(
    const MountTable& table, const std::string& volumes_root);

// When the visible mount at `target` shows `data_dir` or a directory below
// it (same device as the mount data_dir lives on, and a mountinfo root at or
// below data_dir's path inside that filesystem), returns that directory as a
// path under `data_dir`; nullopt otherwise. `data_dir` may be the data tmpfs
// itself or any directory on it (e.g. one volume's directory). Both paths
// absolute and canonical.
std::optional<std::string> BindSourceUnder(const MountTable& table, const std::string& target,
                                           const std::string& data_dir);

// Whether `target` is a mount whose source is `data_dir` or lies below it
// (see BindSourceUnder).
bool IsMountedFrom(const MountTable& table, const std::string& target, const std::string& data_dir);

}  // namespace certmount
