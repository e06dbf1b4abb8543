// A token bucket on an injected clock. The one rate-limit arithmetic of the
// driver: the renewal scheduler's limit on requests toward the issuer (so
// renewals never flood it however many fall due at once) and the Kubernetes
// client's qps/burst both use it.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/clock.h"

namespace certmount {

// Not thread-safe: its users call it under their own lock.
class TokenBucket {
 public:
  // Refills `rate` tokens a second (must be > 0) up to `burst` (at least 1,
  // smaller values count as 1); starts full. `clock` must outlive the bucket.
  TokenBucket(double rate, int burst, const Clock* clock);

  // Takes one token if one is available; false (taking nothing) otherwise.
  bool TryTake();

  // When the next token is available by the clock's SteadyNow(): now, or in
  // the future when the bucket is empty (or owes reserved tokens).
  std::chrono::steady_clock::time_point NextTokenAt();

  // Takes one token even if none is there yet, so the bucket may owe tokens,
  // and returns when the taken token is due (NextTokenAt() as it was before
  // the call). Callers that reserve queue in the order they reserve. Not
  // counted as a wait.
  std::chrono::steady_clock::time_point Reserve();

  // Gives back a token taken by Reserve and not used (its waiter gave up).
  void Unreserve();

  // Rate-limit waits, for metrics: a wait begins at a TryTake that finds the
  // bucket empty and ends at the next TryTake that succeeds. How many began,
  // and how long they lasted in total (the current one up to now).
  int64_t waits() const { return waits_; }
  std::chrono::duration<double> waited() const;

 private:
  void Refill(std::chrono::steady_clock::time_point now);

  const double rate_;
  const double burst_;
  const Clock* clock_;
  double tokens_;
  std::chrono::steady_clock::time_point refilled_at_;
  int64_t waits_ = 0;
  bool waiting_ = false;
  std::chrono::steady_clock::time_point waiting_since_;
  std::chrono::duration<double> waited_{0};
};

}  // namespace certmount
