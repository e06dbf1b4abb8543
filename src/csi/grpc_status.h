// The one place where domain errors become gRPC status codes.
#pragma once

#include <grpcpp/grpcpp.h>

#include "common/status.h"

namespace certmount {

// The longest status message a caller sees. gRPC sends it as a header, and a
// C-core client refuses headers over 8 KiB in all with RESOURCE_EXHAUSTED,
// which would hide the real code.
inline constexpr size_t kMaxStatusMessageBytes = 4096;

// Maps a domain Status to the gRPC status kubelet sees. Never UNKNOWN: an
// unexpected failure is INTERNAL with its message, and every message is cut
// to kMaxStatusMessageBytes (BoundMessage).
grpc::Status ToGrpcStatus(const Status& status);

}  // namespace certmount
