// Time as a seam: production code asks a Clock, tests inject a FakeClock and
// move it by hand instead of sleeping.
#pragma once

#include <chrono>
#include <cstdint>

namespace certmount {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time in whole unix seconds; what the database stores.
  virtual int64_t NowUnix() const = 0;
  // Monotonic time, for durations and timers.
  virtual std::chrono::steady_clock::time_point SteadyNow() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowUnix() const override;
  std::chrono::steady_clock::time_point SteadyNow() const override;
  // A process-wide instance; never destroyed.
  static SystemClock& Instance();
};

}  // namespace certmount
