#include "common/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace certmount {

Status ErrnoStatus(int error_number, std::string_view operation, std::string_view path) {
  const char* name = strerrorname_np(error_number);
  std::string message = std::string(operation) + "(" + std::string(path) +
                        "): " + std::strerror(error_number) + " (" +
                        (name != nullptr ? name : std::to_string(error_number)) + ")";
  switch (error_number) {
    case ENOENT:
      return Status::NotFound(std::move(message));
    case EEXIST:
    case ENOTEMPTY:
      return Status::AlreadyExists(std::move(message));
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
      return Status::ResourceExhausted(std::move(message));
    case EINVAL:
      return Status::InvalidArgument(std::move(message));
    case EBUSY:
    case EAGAIN:  // also EWOULDBLOCK
      return Status::Unavailable(std::move(message));
    case EROFS:
    case ENOTDIR:
    case ELOOP:
      return Status::FailedPrecondition(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

namespace {

// ENOSYS from the new mount API means a kernel without it (open_tree and
// move_mount came in 5.2, mount_setattr in 5.12): UNIMPLEMENTED, so the
// caller can fall back. Anything else maps as ErrnoStatus says.
Status NewMountApiStatus(int error_number, std::string_view operation, std::string_view path) {
  Status status = ErrnoStatus(error_number, operation, path);
  if (error_number == ENOSYS) return Status::Unimplemented(status.message());
  return status;
}

// Owns a file descriptor; close errors on the success path are checked by
// Close(), the destructor only covers early returns.
class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes now and reports whether the kernel accepted it.
  bool Close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};
using UniqueDir = std::unique_ptr<DIR, DirCloser>;

FileStat::Type TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return FileStat::Type::kRegular;
  if (S_ISDIR(mode)) return FileStat::Type::kDirectory;
  if (S_ISLNK(mode)) return FileStat::Type::kSymlink;
  return FileStat::Type::kOther;
}

FileStat ToFileStat(const struct stat& st) {
  FileStat result;
  result.type = TypeOf(st.st_mode);
  result.permissions = st.st_mode & 07777;
  result.uid = st.st_uid;
  result.gid = st.st_gid;
  result.device = st.st_dev;
  result.size = static_cast<int64_t>(st.st_size);
  result.inode = static_cast<uint64_t>(st.st_ino);
  result.modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return result;
}

FileStat ToFileStat(const struct statx& stx) {
  FileStat result;
  result.type = TypeOf(stx.stx_mode);
  result.permissions = stx.stx_mode & 07777;
  result.uid = stx.stx_uid;
  result.gid = stx.stx_gid;
  result.device = makedev(stx.stx_dev_major, stx.stx_dev_minor);
  result.size = static_cast<int64_t>(stx.stx_size);
  result.inode = stx.stx_ino;
  result.modified_ns = stx.stx_mtime.tv_sec * 1'000'000'000 + stx.stx_mtime.tv_nsec;
  return result;
}

Status WriteAll(int fd, std::string_view contents, const std::string& path) {
  while (!contents.empty()) {
    ssize_t written = ::write(fd, contents.data(), contents.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    contents.remove_prefix(static_cast<size_t>(written));
  }
  return Status::Ok();
}

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;  // closing it releases the flock
};

// fchown (group only) then fchmod, in that order because chown clears the
// set-id bits a mode may carry.
Status ApplyPermissions(int fd, const std::string& path, mode_t mode, std::optional<gid_t> gid) {
  if (gid.has_value() && ::fchown(fd, static_cast<uid_t>(-1), *gid) != 0) {
    return ErrnoStatus(errno, "fchown", path);
  }
  if (::fchmod(fd, mode) != 0) return ErrnoStatus(errno, "fchmod", path);
  return Status::Ok();
}

// Names in an open directory, without "." and "..". Takes its own duplicate
// of `dir_fd` because closedir closes the descriptor it was given.
Result<std::vector<std::string>> ListOpenDir(int dir_fd, const std::string& path) {
  int dup_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return ErrnoStatus(errno, "dup", path);
  UniqueDir dir(::fdopendir(dup_fd));
  if (dir == nullptr) {
    int saved = errno;
    ::close(dup_fd);
    return ErrnoStatus(saved, "fdopendir", path);
  }
  ::rewinddir(dir.get());
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* entry = ::readdir(dir.get())) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
    errno = 0;
  }
  if (errno != 0) return ErrnoStatus(errno, "readdir", path);
  std::sort(names.begin(), names.end());
  return names;
}

bool IsMountRoot(int dir_fd, const char* name) {
  struct statx stx {};
  if (::statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) != 0) {
    return false;
  }
  return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
         (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

// Empties the directory open as `dir_fd`, never leaving its filesystem.
Status RemoveContents(int dir_fd, dev_t device, const std::string& path) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> names, ListOpenDir(dir_fd, path));
  for (const std::string& name : names) {
    std::string child = path + "/" + name;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return ErrnoStatus(errno, "lstat", child);
    }
    if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != device || IsMountRoot(dir_fd, name.c_str())) {
        return Status::FailedPrecondition("refusing to remove " + child + ": it is a mount point");
      }
      UniqueFd child_fd(
          ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!child_fd.valid()) return ErrnoStatus(errno, "open", child);
      CERTMOUNT_RETURN_IF_ERROR(RemoveContents(child_fd.get(), device, child));
      if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return ErrnoStatus(errno, "rmdir", child);
      }
    } else if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoStatus(errno, "unlink", child);
    }
  }
  return Status::Ok();
}

class PosixEnv final : public Env {
 public:
  Status CreateDir(const std::string& path, mode_t mode, std::optional<gid_t> gid) override {
    // Created 0700 and widened afterwards, so the directory is never briefly
    // more open than intended whatever the umask.
    if (::mkdir(path.c_str(), 0700) != 0) return ErrnoStatus(errno, "mkdir", path);
    return SetDirPermissions(path, mode, gid);
  }

  Status SetDirPermissions(const std::string& path, mode_t mode,
                           std::optional<gid_t> gid) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "open", path);
    return ApplyPermissions(fd.get(), path, mode, gid);
  }

  Status WriteNewFile(const std::string& path, std::string_view contents, mode_t mode,
                      std::optional<gid_t> gid) override {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return ErrnoStatus(errno, "open", path);
    CERTMOUNT_RETURN_IF_ERROR(ApplyPermissions(fd.get(), path, mode, gid));
    CERTMOUNT_RETURN_IF_ERROR(WriteAll(fd.get(), contents, path));
    if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync", path);
    if (!fd.Close()) return ErrnoStatus(errno, "close", path);
    return Status::Ok();
  }

  Status EnsureFile(const std::string& path, mode_t mode) override {
    // Created 0600 (narrowed further by the umask) and set to `mode` below.
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return ErrnoStatus(errno, "open", path);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "fstat", path);
    if (!S_ISREG(st.st_mode)) return Status::FailedPrecondition(path + " is not a regular file");
    if ((st.st_mode & 07777) == mode) return Status::Ok();
    return ApplyPermissions(fd.get(), path, mode, std::nullopt);
  }

  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                             std::string_view contents) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoStatus(errno, "open", path);
    auto lock = std::make_unique<PosixFileLock>(fd);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return ErrnoStatus(errno, "flock", path);
    if (::ftruncate(fd, 0) != 0) return ErrnoStatus(errno, "ftruncate", path);
    CERTMOUNT_RETURN_IF_ERROR(WriteAll(fd, contents, path));
    return std::unique_ptr<FileLock>(std::move(lock));
  }

  Result<std::string> ReadFile(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "open", path);
    std::string contents;
    char buffer[65536];
    for (;;) {
      ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
      if (got < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "read", path);
      }
      if (got == 0) break;
      contents.append(buffer, static_cast<size_t>(got));
    }
    return contents;
  }

  Status SyncDir(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "open", path);
    if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync", path);
    return Status::Ok();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(errno, "rename", from + " -> " + to);
    }
    return Status::Ok();
  }

  Status Symlink(const std::string& target, const std::string& link_path) override {
    if (::symlink(target.c_str(), link_path.c_str()) != 0) {
      return ErrnoStatus(errno, "symlink", link_path + " -> " + target);
    }
    return Status::Ok();
  }

  Result<std::string> ReadLink(const std::string& path) override {
    std::string buffer(256, '\0');
    for (;;) {
      ssize_t length = ::readlink(path.c_str(), buffer.data(), buffer.size());
      if (length < 0) return ErrnoStatus(errno, "readlink", path);
      if (static_cast<size_t>(length) < buffer.size()) {
        buffer.resize(static_cast<size_t>(length));
        return buffer;
      }
      buffer.resize(buffer.size() * 2);
    }
  }

  Result<FileStat> LStat(const std::string& path) override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "lstat", path);
    return ToFileStat(st);
  }

  Result<FileStat> Stat(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", path);
    return ToFileStat(st);
  }

  Result<MountRootStat> LStatMountRoot(const std::string& path) override {
    struct statx stx {};
    if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0) {
      return ErrnoStatus(errno, "statx", path);
    }
    MountRootStat result{ToFileStat(stx), std::nullopt};
    if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0) {
      result.mount_root = (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
    }
    return result;
  }

  Result<uint64_t> FilesystemMagic(const std::string& path) override {
    struct statfs fs {};
    if (::statfs(path.c_str(), &fs) != 0) return ErrnoStatus(errno, "statfs", path);
    return static_cast<uint64_t>(fs.f_type);
  }

  Status CheckReadable(const std::string& path) override {
    if (::access(path.c_str(), R_OK) != 0) return ErrnoStatus(errno, "access", path);
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListDirectory(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "open", path);
    return ListOpenDir(fd.get(), path);
  }

  Status Remove(const std::string& path) override {
    if (::remove(path.c_str()) != 0) return ErrnoStatus(errno, "remove", path);
    return Status::Ok();
  }

  Status RemoveEmptyDirectory(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(errno, "rmdir", path);
    return Status::Ok();
  }

  Status RemoveTree(const std::string& path) override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::Ok();
      return ErrnoStatus(errno, "lstat", path);
    }
    if (!S_ISDIR(st.st_mode)) {
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        return ErrnoStatus(errno, "unlink", path);
      }
      return Status::Ok();
    }
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "open", path);
    if (IsMountRoot(fd.get(), "")) {
      return Status::FailedPrecondition("refusing to remove " + path + ": it is a mount point");
    }
    CERTMOUNT_RETURN_IF_ERROR(RemoveContents(fd.get(), st.st_dev, path));
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(errno, "rmdir", path);
    return Status::Ok();
  }

  Result<std::string> RealPath(const std::string& path) override {
    std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr),
                                                         &std::free);
    if (resolved == nullptr) return ErrnoStatus(errno, "realpath", path);
    return std::string(resolved.get());
  }

  Status Mount(const std::string& source, const std::string& target, const std::string& fstype,
               unsigned long flags, const std::string& data) override {
    auto or_null = [](const std::string& s) { return s.empty() ? nullptr : s.c_str(); };
    if (::mount(or_null(source), target.c_str(), or_null(fstype), flags, or_null(data)) != 0) {
      return ErrnoStatus(errno, "mount", target);
    }
    return Status::Ok();
  }

  Status Unmount(const std::string& target, int flags) override {
    if (::umount2(target.c_str(), flags) != 0) return ErrnoStatus(errno, "umount", target);
    return Status::Ok();
  }

  Status MountReadOnlyBind(const std::string& source, const std::string& target) override {
    // Closing the fd of a tree that was never attached unmounts it, so every
    // early return leaves nothing behind.
    UniqueFd tree(::open_tree(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (!tree.valid()) return NewMountApiStatus(errno, "open_tree", source);
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
      return NewMountApiStatus(errno, "mount_setattr", source);
    }
    if (::move_mount(tree.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
      return NewMountApiStatus(errno, "move_mount", target);
    }
    return Status::Ok();
  }
};

}  // namespace

Env* Env::Default() {
  static PosixEnv env;  // stateless, so destruction order at exit is harmless
  return &env;
}

Status Env::CreateDirectories(const std::string& path, mode_t mode) {
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument("CreateDirectories needs an absolute path, got \"" + path +
                                   "\"");
  }
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && prefix.back() != '/') {
      Status created = CreateDir(prefix, mode, std::nullopt);
      if (!created.ok() && created.code() != Code::kAlreadyExists) return created;
    }
    if (slash == std::string::npos) break;
  }
  CERTMOUNT_ASSIGN_OR_RETURN(FileStat last, LStat(path));
  if (last.type != FileStat::Type::kDirectory) {
    return Status::FailedPrecondition(path + " exists and is not a directory");
  }
  return Status::Ok();
}

Status Env::ReplaceFile(const std::string& path, std::string_view contents, mode_t mode) {
  const std::string temp_path = path + ".tmp";
  Status removed = Remove(temp_path);
  if (!removed.ok() && removed.code() != Code::kNotFound) return removed;
  Status replaced = WriteNewFile(temp_path, contents, mode, std::nullopt);
  if (replaced.ok()) replaced = Rename(temp_path, path);
  if (!replaced.ok()) {
    (void)Remove(temp_path);  // best effort; NOT_FOUND when it was never created
    return replaced;
  }
  const size_t slash = path.find_last_of('/');
  return SyncDir(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

Result<int64_t> Env::RegularFileBytesUnder(const std::string& dir) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(dir));
  int64_t total = 0;
  for (const std::string& name : names) {
    const std::string child = dir + "/" + name;
    Result<FileStat> stat = LStat(child);
    if (!stat.ok() && stat.status().code() == Code::kNotFound) continue;
    if (!stat.ok()) return stat.status();
    if (stat->type == FileStat::Type::kRegular) total += stat->size;
    if (stat->type != FileStat::Type::kDirectory) continue;
    Result<int64_t> below = RegularFileBytesUnder(child);
    if (!below.ok() && below.status().code() == Code::kNotFound) continue;
    if (!below.ok()) return below.status();
    total += *below;
  }
  return total;
}

}  // namespace certmount
