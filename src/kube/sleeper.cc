#include "kube/sleeper.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace certmount::kube {

bool ClockSleeper::SleepUntil(std::chrono::steady_clock::time_point until, std::stop_token stop) {
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock lock(mutex);
  while (!stop.stop_requested()) {
    auto remaining = until - clock_->SteadyNow();
    if (remaining <= std::chrono::steady_clock::duration::zero()) return true;
    auto slice =
        std::min<std::chrono::steady_clock::duration>(remaining, std::chrono::milliseconds(50));
    wake.wait_for(lock, stop, slice, [] { return false; });
  }
  return false;
}

}  // namespace certmount::kube
