// A Clock that only moves when a test moves it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/clock.h"

namespace certmount::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_unix = 1'700'000'000) : now_unix_(now_unix) {}

  int64_t NowUnix() const override { return now_unix_.load(); }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::time_point(std::chrono::seconds(steady_seconds_.load()));
  }

  // Moves both clocks forward by `delta`.
  void Advance(std::chrono::seconds delta) {
    now_unix_ += delta.count();
    steady_seconds_ += delta.count();
  }
  void SetNowUnix(int64_t now_unix) { now_unix_ = now_unix; }

 private:
  std::atomic<int64_t> now_unix_;
  // Starts well after the epoch so tests can make deadlines in the past.
  std::atomic<int64_t> steady_seconds_{1'000'000};
};

}  // namespace certmount::testing
