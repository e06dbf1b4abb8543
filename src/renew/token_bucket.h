// A token bucket on an injected clock: the global limit on requests toward
// the issuer, so that renewals never flood it however many fall due at once.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/clock.h"

namespace certmount {

// Not thread-safe: the scheduler calls it under its own lock.
class TokenBucket {
 public:
  // Refills `rate` tokens a second (must be > 0) up to `burst` (at least 1,
  // smaller values count as 1); starts full. `clock` must outlive the bucket.
  TokenBucket(double rate, int burst, const Clock* clock);

  // Takes one token if one is available; false (taking nothing) otherwise.
  bool TryTake();

  // When the next token is available by the clock's SteadyNow(): now, or in
  // the future when the bucket is empty.
  std::chrono::steady_clock::time_point NextTokenAt();

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
