#include "state/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace certmount {
namespace {

constexpr mode_t kPrivateMode = 0600;

// Closes the descriptor on every return path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

Status EnsurePrivateFile(const std::string& path) {
  // O_NOFOLLOW: a symlink planted at the database path must not redirect us.
  FileDescriptor fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, kPrivateMode));
  if (fd.get() < 0) {
    return Status::Internal("cannot create state database " + path + ": " + ErrnoText());
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) {
    return Status::Internal("cannot stat state database " + path + ": " + ErrnoText());
  }
  if (!S_ISREG(info.st_mode)) {
    return Status::Internal("state database " + path + " is not a regular file");
  }
  if ((info.st_mode & 07777) != kPrivateMode) {
    if (fchmod(fd.get(), kPrivateMode) != 0) {
      return Status::Internal("cannot chmod state database " + path + " to 0600: " + ErrnoText());
    }
    if (fstat(fd.get(), &info) != 0 || (info.st_mode & 07777) != kPrivateMode) {
      return Status::Internal("state database " + path + " does not keep mode 0600");
    }
  }
  return Status::Ok();
}

}  // namespace certmount
