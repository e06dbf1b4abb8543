// The unix socket kubelet dials.
#pragma once

#include <string>

#include "common/status.h"

namespace certmount {

// "unix:///csi/csi.sock" -> "/csi/csi.sock". Anything else is INVALID_ARGUMENT.
Result<std::string> ParseUnixEndpoint(const std::string& endpoint);

// Makes `path` free for a new listener: a stale socket that nobody accepts
// on is removed; a live one (another certmountd) is ALREADY_EXISTS; a path
// that is not a socket is FAILED_PRECONDITION and left alone.
Status PrepareSocketPath(const std::string& path);

}  // namespace certmount
