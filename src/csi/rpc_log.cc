#include "csi/rpc_log.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>

#include "csi/grpc_status.h"

namespace certmount {

grpc::Status RunRpc(std::string_view method, std::string_view volume_id,
                    const std::function<Status()>& body) {
  const auto started = std::chrono::steady_clock::now();
  RpcTracker::Instance().Enter();
  Status status;
  try {
    status = body();
  } catch (const std::exception& e) {
    status = Status::Internal(std::string("unexpected exception: ") + e.what());
  } catch (...) {
    status = Status::Internal("unexpected non-standard exception");
  }
  RpcTracker::Instance().Exit();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
          .count();
  const auto level = status.ok() ? spdlog::level::info : spdlog::level::warn;
  if (status.ok()) {
    spdlog::log(level, "rpc method={} volume_id={} code=OK duration_ms={:.1f}", method,
                volume_id.empty() ? "-" : volume_id, ms);
  } else {
    spdlog::log(level, "rpc method={} volume_id={} code={} duration_ms={:.1f} error=\"{}\"",
                method, volume_id.empty() ? "-" : volume_id, CodeName(status.code()), ms,
                status.message());
  }
  return ToGrpcStatus(status);
}

RpcTracker& RpcTracker::Instance() {
  static RpcTracker tracker;
  return tracker;
}

bool RpcTracker::WaitIdleUntil(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return idle_.wait_until(lock, deadline, [&] { return running_ == 0; });
}

void RpcTracker::Enter() {
  std::lock_guard lock(mu_);
  ++running_;
}

void RpcTracker::Exit() {
  std::lock_guard lock(mu_);
  if (--running_ == 0) idle_.notify_all();
}

}  // namespace certmount
