// Waiting as a seam, like Clock: the rate limiter, retry backoff and watch
// reconnects wait through a Sleeper, so tests can move a FakeClock instead of
// sleeping.
#pragma once

#include <chrono>
#include <stop_token>

#include "common/clock.h"

namespace certmount::kube {

class Sleeper {
 public:
  virtual ~Sleeper() = default;
  // Returns once the clock's SteadyNow() has reached `until` (true) or as
  // soon as `stop` is requested (false). Thread-safe.
  virtual bool SleepUntil(std::chrono::steady_clock::time_point until, std::stop_token stop) = 0;
};

// Sleeps in real time, re-reading `clock` at least every 50 ms so that a
// clock which is moved by hand also ends the wait.
class ClockSleeper final : public Sleeper {
 public:
  // `clock` must outlive the sleeper.
  explicit ClockSleeper(const Clock* clock) : clock_(clock) {}
  bool SleepUntil(std::chrono::steady_clock::time_point until, std::stop_token stop) override;

 private:
  const Clock* clock_;
};

}  // namespace certmount::kube
