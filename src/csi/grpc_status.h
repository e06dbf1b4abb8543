// The one place where domain errors become gRPC status codes.
#pragma once

#include <grpcpp/grpcpp.h>

#include "common/status.h"

namespace certmount {

// Maps a domain Status to the gRPC status kubelet sees. Never UNKNOWN: an
// unexpected failure is INTERNAL with its message.
grpc::Status ToGrpcStatus(const Status& status);

}  // namespace certmount
