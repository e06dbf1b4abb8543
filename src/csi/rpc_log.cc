#include "csi/rpc_log.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>

#include "common/logging.h"
#include "common/metrics.h"
#include "csi/grpc_status.h"

namespace certmount {

namespace {

metrics::CounterFamily& RequestsTotal() {
  static metrics::CounterFamily& family = metrics::DefaultRegistry().AddCounter(
      "certmount_grpc_requests_total", "CSI calls handled, by method and status code.",
      {"method", "code"});
  return family;
}

metrics::HistogramFamily& RequestSeconds() {
  static metrics::HistogramFamily& family = metrics::DefaultRegistry().AddHistogram(
      "certmount_grpc_request_duration_seconds", "Time CSI calls took, by method.", {"method"},
      metrics::DurationBuckets());
  return family;
}

// Registered while the program starts, so both render before the first call.
[[maybe_unused]] const bool registered_at_startup = (RequestsTotal(), RequestSeconds(), true);

// Volume ids are at most 128 bytes when valid; longer ones are cut.
constexpr size_t kMaxLoggedIdBytes = 160;

}  // namespace

grpc::Status RunRpc(std::string_view method, std::string_view volume_id,
                    const std::function<Status()>& body) {
  const auto started = std::chrono::steady_clock::now();
  Status status;
  if (RpcTracker::Instance().Enter()) {
    try {
      status = body();
    } catch (const std::exception& e) {
      status = Status::Internal(std::string("unexpected exception: ") + e.what());
    } catch (...) {
      status = Status::Internal("unexpected non-standard exception");
    }
    RpcTracker::Instance().Exit();
  } else {
    status = Status::Unavailable("certmountd is shutting down; retry against its successor");
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  const std::string method_label(method);
  RequestsTotal().WithLabels({method_label, CodeName(status.code())}).Increment();
  RequestSeconds().WithLabels({method_label}).Observe(ms / 1000.0);
  // The id is kubelet's and unvalidated here: bounded and escaped like any
  // other user value (the log formatter escapes the whole line as well).
  const std::string logged_id =
      volume_id.empty() ? "-" : EscapeControlCharacters(BoundMessage(volume_id, kMaxLoggedIdBytes));
  grpc::Status sent = ToGrpcStatus(status);
  if (status.ok()) {
    spdlog::info("rpc method={} volume_id={} code=OK duration_ms={:.1f}", method, logged_id, ms);
  } else {
    spdlog::warn("rpc method={} volume_id={} code={} duration_ms={:.1f} error={}", method,
                 logged_id, CodeName(status.code()), ms,
                 QuoteUserValue(sent.error_message(), kMaxStatusMessageBytes));
  }
  return sent;
}

RpcTracker& RpcTracker::Instance() {
  static RpcTracker tracker;
  return tracker;
}

bool RpcTracker::WaitIdleUntil(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return idle_.wait_until(lock, deadline, [&] { return running_ == 0; });
}

bool RpcTracker::Enter() {
  std::lock_guard lock(mu_);
  if (shutting_down_) return false;
  ++running_;
  return true;
}

void RpcTracker::BeginShutdown() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
}

void RpcTracker::Exit() {
  std::lock_guard lock(mu_);
  if (--running_ == 0) idle_.notify_all();
}

}  // namespace certmount
