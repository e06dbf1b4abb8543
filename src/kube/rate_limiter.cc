#include "kube/rate_limiter.h"

namespace certmount::kube {

RateLimiter::RateLimiter(double qps, int burst, const Clock* clock, Sleeper* sleeper)
    : limited_(qps > 0), sleeper_(sleeper), bucket_(limited_ ? qps : 1.0, burst, clock) {}

Status RateLimiter::Acquire(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
  if (!limited_) return Status::Ok();
  std::chrono::steady_clock::time_point ready_at;
  {
    std::lock_guard lock(mutex_);
    if (bucket_.TryTake()) return Status::Ok();
    if (bucket_.NextTokenAt() > deadline) {
      return Status::DeadlineExceeded("the client-side API rate limit would pass the deadline");
    }
    // Reserve the token now so that later callers queue behind this one.
    ready_at = bucket_.Reserve();
  }
  if (!sleeper_->SleepUntil(ready_at, stop)) {
    std::lock_guard lock(mutex_);
    bucket_.Unreserve();
    return Status::Cancelled("cancelled while waiting for the API rate limit");
  }
  return Status::Ok();
}

}  // namespace certmount::kube
