#include "common/clock.h"

namespace certmount {

int64_t SystemClock::NowUnix() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::chrono::steady_clock::time_point SystemClock::SteadyNow() const {
  return std::chrono::steady_clock::now();
}

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace certmount
