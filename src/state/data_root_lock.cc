#include "state/data_root_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace certmount {

Result<std::unique_ptr<DataRootLock>> DataRootLock::Acquire(const std::string& data_root) {
  const std::string path = data_root + "/certmountd.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Status::FailedPrecondition("cannot open " + path + ": " + std::strerror(errno));
  }
  auto lock = std::make_unique<DataRootLock>(fd);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[32] = {};
    ssize_t n = pread(fd, holder, sizeof(holder) - 1, 0);
    std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "unknown";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    if (error == EWOULDBLOCK) {
      return Status::FailedPrecondition("another certmountd (pid " + pid + ") is using " +
                                        data_root + " (it holds " + path + ")");
    }
    return Status::FailedPrecondition("cannot lock " + path + ": " + std::strerror(error));
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    return Status::FailedPrecondition("cannot write " + path + ": " + std::strerror(errno));
  }
  return lock;
}

DataRootLock::~DataRootLock() { close(fd_); }

}  // namespace certmount
