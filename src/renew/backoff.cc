#include "renew/backoff.h"

#include <algorithm>

namespace certmount {

std::chrono::seconds RetryDelay(const BackoffPolicy& policy, int64_t attempts,
                                std::mt19937_64& random) {
  const int64_t cap = std::max<int64_t>(1, policy.max.count());
  int64_t delay = std::clamp<int64_t>(policy.initial.count(), 1, cap);
  // Doubling stops at the cap, so a long outage cannot overflow the delay.
  for (int64_t i = 1; i < attempts && delay < cap; ++i) delay = std::min(cap, delay * 2);
  const double jitter = std::clamp(policy.jitter, 0.0, 1.0);
  if (jitter > 0) {
    std::uniform_real_distribution<double> fraction(0.0, jitter);
    delay -= static_cast<int64_t>(static_cast<double>(delay) * fraction(random));
  }
  return std::chrono::seconds(std::max<int64_t>(1, delay));
}

}  // namespace certmount
