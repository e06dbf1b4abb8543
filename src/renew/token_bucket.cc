#include "renew/token_bucket.h"

#include <algorithm>

namespace certmount {

TokenBucket::TokenBucket(double rate, int burst, const Clock* clock)
    : rate_(rate),
      burst_(std::max(1, burst)),
      clock_(clock),
      tokens_(burst_),
      refilled_at_(clock->SteadyNow()) {}

void TokenBucket::Refill() {
  const auto now = clock_->SteadyNow();
  if (now <= refilled_at_) return;
  const double seconds = std::chrono::duration<double>(now - refilled_at_).count();
  tokens_ = std::min(burst_, tokens_ + seconds * rate_);
  refilled_at_ = now;
}

bool TokenBucket::TryTake() {
  Refill();
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

std::chrono::steady_clock::time_point TokenBucket::NextTokenAt() {
  Refill();
  if (tokens_ >= 1.0) return refilled_at_;
  const double missing_seconds = (1.0 - tokens_) / rate_;
  return refilled_at_ + std::chrono::ceil<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(missing_seconds));
}

}  // namespace certmount
