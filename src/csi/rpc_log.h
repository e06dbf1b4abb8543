// Runs one RPC handler body: times it, turns any escaping exception into
// INTERNAL (no exception may cross a gRPC handler), and logs one line with
// the method, volume id, status code and duration. Never logs request bodies,
// so no key or token can reach the log.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string_view>

#include "common/status.h"

namespace certmount {

grpc::Status RunRpc(std::string_view method, std::string_view volume_id,
                    const std::function<Status()>& body);

}  // namespace certmount
