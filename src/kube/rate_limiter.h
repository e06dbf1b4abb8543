// The client-side limit on requests to the API server (qps and burst, as
// client-go has them), so that a node full of renewals cannot flood it.
#pragma once

#include <chrono>
#include <mutex>
#include <stop_token>

#include "common/clock.h"
#include "common/status.h"
#include "common/token_bucket.h"
#include "kube/sleeper.h"

namespace certmount::kube {

class RateLimiter {
 public:
  // Refills `qps` tokens a second up to `burst` (at least 1); starts full. A
  // `qps` <= 0 disables the limit. `clock` and `sleeper` must outlive it.
  RateLimiter(double qps, int burst, const Clock* clock, Sleeper* sleeper);

  // Takes one token, waiting for it if need be. DEADLINE_EXCEEDED (taking
  // nothing, without waiting) when the token would come after `deadline`;
  // CANCELLED when `stop` is requested while waiting. Thread-safe; waiters
  // are served in the order they reserve.
  Status Acquire(std::chrono::steady_clock::time_point deadline, std::stop_token stop);

 private:
  const bool limited_;
  Sleeper* sleeper_;
  std::mutex mutex_;
  // Each waiter reserves its token before sleeping, so the bucket may owe.
  TokenBucket bucket_;
};

}  // namespace certmount::kube
