#include "csi/endpoint.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace certmount {

Result<std::string> ParseUnixEndpoint(const std::string& endpoint) {
  constexpr std::string_view kScheme = "unix://";
  if (endpoint.rfind(kScheme, 0) != 0) {
    return Status::InvalidArgument("--endpoint: \"" + endpoint +
                                   "\" must be unix:///absolute/path");
  }
  std::string path = endpoint.substr(kScheme.size());
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument("--endpoint: \"" + endpoint +
                                   "\" must name an absolute path (unix:///...)");
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::InvalidArgument("--endpoint: socket path is longer than " +
                                   std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  return path;
}

Status PrepareSocketPath(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::FailedPrecondition("cannot inspect " + path + ": " + std::strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Status::FailedPrecondition(path + " exists and is not a socket; refusing to replace it");
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  const int connect_errno = errno;
  close(fd);
  if (live) {
    return Status::AlreadyExists(path + " is served by another running process");
  }
  if (connect_errno != ECONNREFUSED && connect_errno != ENOENT) {
    return Status::FailedPrecondition("cannot probe " + path + ": " + std::strerror(connect_errno));
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::FailedPrecondition("cannot remove stale socket " + path + ": " +
                                      std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace certmount
