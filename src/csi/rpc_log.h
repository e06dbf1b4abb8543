// Runs one RPC handler body: times it, turns any escaping exception into
// INTERNAL (no exception may cross a gRPC handler), and logs one line with
// the method, volume id, status code and duration. Never logs request bodies,
// so no key or token can reach the log. Once shutdown has begun
// (RpcTracker::BeginShutdown) the body is not run and the call is UNAVAILABLE,
// so kubelet retries it against the next certmountd.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string_view>

#include "common/status.h"

namespace certmount {

grpc::Status RunRpc(std::string_view method, std::string_view volume_id,
                    const std::function<Status()>& body);

// How many RunRpc bodies are running. Shutdown waits on this rather than on
// gRPC's own Shutdown deadline, which also waits out idle connections (and
// kubelet keeps one open all the time).
class RpcTracker {
 public:
  static RpcTracker& Instance();
  // Returns true once no handler runs, false if `deadline` came first.
  bool WaitIdleUntil(std::chrono::steady_clock::time_point deadline);
  // Counts a handler in; false (nothing counted) once shutdown has begun.
  bool Enter();
  void Exit();
  // From now on Enter refuses.
  void BeginShutdown();

 private:
  std::mutex mu_;
  std::condition_variable idle_;
  int running_ = 0;
  bool shutting_down_ = false;
};

}  // namespace certmount
