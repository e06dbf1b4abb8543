// The file, lock and mount syscalls, behind one seam at the bottom of the layers (LevelDB style);
// every layer's file I/O and errno mapping (ErrnoStatus) goes through it, so tests can inject
// faults such as ENOSPC on the third write without a full disk. Production passes Env::Default().
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace certmount {

// Turns a failed syscall's errno into a Status whose message names the
// operation, the path, and the errno ("rename(/a -> /b): No space left on
// device (ENOSPC)"). The code follows the errno: ENOENT -> NOT_FOUND,
// EEXIST/ENOTEMPTY -> ALREADY_EXISTS, ENOSPC/EDQUOT/ENOMEM -> RESOURCE_EXHAUSTED,
// EINVAL -> INVALID_ARGUMENT, EBUSY/EAGAIN(=EWOULDBLOCK) -> UNAVAILABLE (retry
// later),
// EROFS/ENOTDIR/ELOOP -> FAILED_PRECONDITION, anything else -> INTERNAL.
// Callers rely on this mapping (e.g. Unmount treats EINVAL as "not mounted"),
// and fault-injecting test Envs build their errors with it too.
Status ErrnoStatus(int error_number, std::string_view operation, std::string_view path);

// What lstat reports about a path, reduced to what the volume layer decides on.
struct FileStat {
  enum class Type { kRegular, kDirectory, kSymlink, kOther };
  Type type = Type::kOther;
  mode_t permissions = 0;  // the 07777 bits
  uid_t uid = 0;
  gid_t gid = 0;
  dev_t device = 0;
  int64_t size = 0;  // bytes; meaningful for regular files
  uint64_t inode = 0;
  int64_t modified_ns = 0;  // mtime, nanoseconds since the epoch
};

// What statx(2) reports about a path itself: LStat's answer, and whether a
// mount is attached there.
struct MountRootStat {
  FileStat stat;
  // Whether `path` is the root of the mount that path lookup reaches there
  // (STATX_ATTR_MOUNT_ROOT): true exactly when something is mounted at
  // `path`, and then `stat` describes the root of the visible (topmost) mount
  // there, which is what umount2(path) would remove. nullopt when the kernel
  // does not report the attribute (before 5.8).
  std::optional<bool> mount_root;
};

// An advisory lock on a file, held until this handle is destroyed or the
// process dies, however it dies. Env::LockFile is the way to get one.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class Env {
 public:
  virtual ~Env() = default;

  // Creates one directory with exactly `mode` (umask does not apply) and, when
  // `gid` is set, that group. ALREADY_EXISTS if the path exists.
  virtual Status CreateDir(const std::string& path, mode_t mode, std::optional<gid_t> gid) = 0;
  // Sets mode and (when given) group of an existing directory; fails instead
  // of following a symlink.
  virtual Status SetDirPermissions(const std::string& path, mode_t mode,
                                   std::optional<gid_t> gid) = 0;
  // Creates a new file (never follows or replaces an existing path), writes
  // all of `contents`, applies exactly `mode` and (when given) the group, and
  // fsyncs it before returning.
  virtual Status WriteNewFile(const std::string& path, std::string_view contents, mode_t mode,
                              std::optional<gid_t> gid) = 0;
  // Makes `path` a regular file with exactly `mode`: when missing it is
  // created empty, never more open than `mode` even for a moment (umask does
  // not apply); when present it keeps its contents and gets `mode`. Never
  // follows a symlink: a symlink or any other non-regular file at `path` is
  // FAILED_PRECONDITION.
  virtual Status EnsureFile(const std::string& path, mode_t mode) = 0;
  // Opens `path` (creating it 0600 when missing, never following a symlink)
  // and takes an exclusive, non-blocking flock(2) on it; once held, replaces
  // the file's contents with `contents` (e.g. the holder's pid, so whoever
  // finds the lock taken can name the holder). UNAVAILABLE when another open
  // file holds the lock, one in this process included. The lock lasts as long
  // as the returned handle.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                                     std::string_view contents) = 0;
  // Reads a whole file; works for /proc files whose size reads as 0.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // fsyncs a directory so renames and creations inside it are durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // rename(2): atomically replaces `to` when it exists.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Creates `link_path` as a symlink whose content is `target`.
  virtual Status Symlink(const std::string& target, const std::string& link_path) = 0;
  // The content of a symlink.
  virtual Result<std::string> ReadLink(const std::string& path) = 0;
  // lstat(2): describes the path itself, never a symlink's target.
  virtual Result<FileStat> LStat(const std::string& path) = 0;
  // stat(2): describes what the path leads to, following symlinks (kubelet
  // swaps a projected token through its ..data symlink; the new file shows
  // as a new inode).
  virtual Result<FileStat> Stat(const std::string& path) = 0;
  // statx(2) with AT_SYMLINK_NOFOLLOW: describes `path` itself like LStat
  // (a symlink, never its target), and whether it is a mount root. One
  // syscall whatever the size of the mount table.
  virtual Result<MountRootStat> LStatMountRoot(const std::string& path) = 0;
  // statfs(2)'s f_type: the magic number of the filesystem type (TMPFS_MAGIC,
  // ...) of the mount `path` leads to, following symlinks.
  virtual Result<uint64_t> FilesystemMagic(const std::string& path) = 0;
  // access(2) with R_OK: OK when the process's real ids may read `path`.
  virtual Status CheckReadable(const std::string& path) = 0;
  // Names in a directory, sorted, without "." and "..".
  virtual Result<std::vector<std::string>> ListDirectory(const std::string& path) = 0;
  // Removes a file, a symlink (not its target) or an empty directory.
  virtual Status Remove(const std::string& path) = 0;
  // rmdir(2): removes an empty directory, never a file or a mount point
  // (UNAVAILABLE, EBUSY). OK if `path` does not exist.
  virtual Status RemoveEmptyDirectory(const std::string& path) = 0;
  // Removes `path` and everything below it without following symlinks and
  // without descending into a mount point (FAILED_PRECONDITION, so a stray
  // mount never has its contents deleted). OK if `path` does not exist.
  virtual Status RemoveTree(const std::string& path) = 0;
  // realpath(3): the absolute path with symlinks, "." and ".." resolved.
  virtual Result<std::string> RealPath(const std::string& path) = 0;
  // mount(2). Empty `source`, `fstype` or `data` are passed as NULL.
  virtual Status Mount(const std::string& source, const std::string& target,
                       const std::string& fstype, unsigned long flags, const std::string& data) = 0;
  // umount2(2).
  virtual Status Unmount(const std::string& target, int flags) = 0;
  // Attaches a bind mount of `source` (that mount only, no submounts) at
  // `target` that is read-only, nosuid, nodev and noexec before it becomes
  // visible: open_tree(OPEN_TREE_CLONE) makes a detached copy,
  // mount_setattr(2) sets the flags on it, move_mount(2) attaches it. Every
  // copy that mount propagation makes (the host's, through a Bidirectional
  // mount) therefore has the flags too. A symlink at `target` is not
  // followed. UNIMPLEMENTED when the kernel lacks these calls (before 5.12);
  // on any failure nothing is attached.
  virtual Status MountReadOnlyBind(const std::string& source, const std::string& target) = 0;

  // mkdir -p: creates every missing directory of the absolute `path` with
  // `mode`, through CreateDir (so wrappers see each step). Existing
  // components are left as they are; the last one must be a directory
  // (FAILED_PRECONDITION otherwise, including when it is a symlink).
  Status CreateDirectories(const std::string& path, mode_t mode);

  // Replaces `path` with a file holding exactly `contents` and `mode` such
  // that readers see the old file or the whole new one, also after a crash:
  // WriteNewFile(`path`.tmp) (synced), Rename over `path`, SyncDir of the
  // parent, each through the virtual calls so wrappers see every step. A
  // stale `path`.tmp left by a crash is removed first. When a step before
  // the rename fails, the temp file is removed and `path` is untouched; when
  // the final SyncDir fails, `path` is whole but may not survive a crash.
  // Not for concurrent writers of one path.
  Status ReplaceFile(const std::string& path, std::string_view contents, mode_t mode);

  // The total size of the regular files below the directory `dir`, walked
  // with ListDirectory and LStat without following symlinks. Entries that
  // vanish during the walk are skipped; NOT_FOUND if `dir` does not exist.
  Result<int64_t> RegularFileBytesUnder(const std::string& dir);

  // The real filesystem; process-wide.
  static Env* Default();
};

// Forwards every call to another Env; test doubles derive from it and
// override only the operations they interfere with.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}

  Status CreateDir(const std::string& path, mode_t mode, std::optional<gid_t> gid) override {
    return target_->CreateDir(path, mode, gid);
  }
  Status SetDirPermissions(const std::string& path, mode_t mode,
                           std::optional<gid_t> gid) override {
    return target_->SetDirPermissions(path, mode, gid);
  }
  Status WriteNewFile(const std::string& path, std::string_view contents, mode_t mode,
                      std::optional<gid_t> gid) override {
    return target_->WriteNewFile(path, contents, mode, gid);
  }
  Status EnsureFile(const std::string& path, mode_t mode) override {
    return target_->EnsureFile(path, mode);
  }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                             std::string_view contents) override {
    return target_->LockFile(path, contents);
  }
  Result<std::string> ReadFile(const std::string& path) override { return target_->ReadFile(path); }
  Status SyncDir(const std::string& path) override { return target_->SyncDir(path); }
  Status Rename(const std::string& from, const std::string& to) override {
    return target_->Rename(from, to);
  }
  Status Symlink(const std::string& target, const std::string& link_path) override {
    return target_->Symlink(target, link_path);
  }
  Result<std::string> ReadLink(const std::string& path) override { return target_->ReadLink(path); }
  Result<FileStat> LStat(const std::string& path) override { return target_->LStat(path); }
  Result<FileStat> Stat(const std::string& path) override { return target_->Stat(path); }
  Result<MountRootStat> LStatMountRoot(const std::string& path) override {
    return target_->LStatMountRoot(path);
  }
  Result<uint64_t> FilesystemMagic(const std::string& path) override {
    return target_->FilesystemMagic(path);
  }
  Status CheckReadable(const std::string& path) override { return target_->CheckReadable(path); }
  Result<std::vector<std::string>> ListDirectory(const std::string& path) override {
    return target_->ListDirectory(path);
  }
  Status Remove(const std::string& path) override { return target_->Remove(path); }
  Status RemoveEmptyDirectory(const std::string& path) override {
    return target_->RemoveEmptyDirectory(path);
  }
  Status RemoveTree(const std::string& path) override { return target_->RemoveTree(path); }
  Result<std::string> RealPath(const std::string& path) override { return target_->RealPath(path); }
  Status Mount(const std::string& source, const std::string& target, const std::string& fstype,
               unsigned long flags, const std::string& data) override {
    return target_->Mount(source, target, fstype, flags, data);
  }
  Status Unmount(const std::string& target, int flags) override {
    return target_->Unmount(target, flags);
  }
  Status MountReadOnlyBind(const std::string& source, const std::string& target) override {
    return target_->MountReadOnlyBind(source, target);
  }

 protected:
  Env* target() const { return target_; }

 private:
  Env* target_;
};

}  // namespace certmount
