#include "kube/rate_limiter.h"

#include <algorithm>

namespace certmount::kube {

RateLimiter::RateLimiter(double qps, int burst, const Clock* clock, Sleeper* sleeper)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(clock),
      sleeper_(sleeper),
      tokens_(burst_),
      refilled_at_(clock->SteadyNow()) {}

Status RateLimiter::Acquire(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  if (qps_ <= 0) return Status::Ok();
  std::chrono::steady_clock::time_point ready_at;
  {
    std::lock_guard lock(mutex_);
    auto now = clock_->SteadyNow();
    if (now > refilled_at_) {
      double elapsed = std::chrono::duration<double>(now - refilled_at_).count();
      tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
      refilled_at_ = now;
    }
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return Status::Ok();
    }
    auto wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>((1 - tokens_) / qps_));
    ready_at = now + wait;
    if (ready_at > deadline) {
      return Status::DeadlineExceeded("the client-side API rate limit would pass the deadline");
    }
    // Reserve the token now so that later callers queue behind this one.
    tokens_ -= 1;
  }
  if (!sleeper_->SleepUntil(ready_at, stop)) {
    std::lock_guard lock(mutex_);
    tokens_ += 1;
    return Status::Cancelled("cancelled while waiting for the API rate limit");
  }
  return Status::Ok();
}

}  // namespace certmount::kube
