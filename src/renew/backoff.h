// How long to wait before retrying a renewal that failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace certmount {

struct BackoffPolicy {
  std::chrono::seconds initial{30};
  std::chrono::seconds max{300};
  // Up to this fraction of the delay is taken off at random, so that
  // volumes failing together (the issuer went down) retry spread apart.
  double jitter = 0.2;
};

// The delay after `attempts` (>= 1) consecutive failures: initial doubled
// for each failure after the first, capped at max, minus a random part of
// up to `jitter` of it drawn from `random`. Never above max, never below 1s.
std::chrono::seconds RetryDelay(const BackoffPolicy& policy, int64_t attempts,
                                std::mt19937_64& random);

}  // namespace certmount
