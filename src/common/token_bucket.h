// A token bucket on an injected clock. The one rate-limit arithmetic of the
// driver: the renewal scheduler's limit on requests toward the issuer (so
// renewals never flood it however many fall due at once) and the Kubernetes
// client's qps/burst both use it.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/clock.h"

namespace certmount {

// Not thread-safe: its users call it under their own lock. The bucket never
// goes into debt: tokens are taken only when they are there.
class TokenBucket {
 public:
  // Refills `rate` tokens a second (must be > 0) up to `burst` (at least 1,
  // smaller values count as 1); starts full. `clock` must outlive the bucket.
  TokenBucket(double rate, int burst, const Clock* clock);

  // Takes `count` tokens (1 to burst()) together if they are all there;
  // false, taking nothing, otherwise.
  bool TryTake(int count = 1);

  // When `count` tokens will have come in, by the clock's SteadyNow(), if
  // nothing is taken meanwhile: now when they are there. `count` may exceed
  // the burst: the answer is then when takes adding up to `count`, each of
  // at most burst() tokens and each made as soon as its tokens are there,
  // can all have been made (the bucket never fills up meanwhile, so the cap
  // does not bite). That is when the last of a line of waiters gets its
  // turn.
  std::chrono::steady_clock::time_point AvailableAt(double count);

  // AvailableAt(1): when the next token is available.
  std::chrono::steady_clock::time_point NextTokenAt() { return AvailableAt(1); }

  // Puts back `count` tokens that were taken and never used, up to the
  // burst. Not counted as a take for the wait counters.
  void GiveBack(int count);

  int burst() const { return static_cast<int>(burst_); }

  // Rate-limit waits, for metrics: a wait begins at a TryTake that finds too
  // few tokens and ends at the next TryTake that succeeds. How many began,
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
