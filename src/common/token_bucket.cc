#include "common/token_bucket.h"

#include <algorithm>

namespace certmount {
namespace {

// Refills are computed in floating point, so at the very instant
// AvailableAt() named the bucket may hold a hair less than a whole token;
// without this slack a waiter woken then would go back to sleep for a tick.
constexpr double kRoundingSlack = 1e-9;

}  // namespace

TokenBucket::TokenBucket(double rate, int burst, const Clock* clock)
    : rate_(rate),
      burst_(std::max(1, burst)),
      clock_(clock),
      tokens_(burst_),
      refilled_at_(clock->SteadyNow()) {}

void TokenBucket::Refill(std::chrono::steady_clock::time_point now) {
  if (now <= refilled_at_) return;
  const double seconds = std::chrono::duration<double>(now - refilled_at_).count();
  tokens_ = std::min(burst_, tokens_ + seconds * rate_);
  refilled_at_ = now;
}

bool TokenBucket::TryTake(int count) {
  const auto now = clock_->SteadyNow();
  Refill(now);
  if (tokens_ + kRoundingSlack < count) {
    if (!waiting_) {
      waiting_ = true;
      waiting_since_ = now;
      ++waits_;
    }
    return false;
  }
  if (waiting_) {
    waited_ += now - waiting_since_;
    waiting_ = false;
  }
  tokens_ = std::max(0.0, tokens_ - count);
  return true;
}

std::chrono::duration<double> TokenBucket::waited() const {
  if (!waiting_) return waited_;
  return waited_ + (clock_->SteadyNow() - waiting_since_);
}

std::chrono::steady_clock::time_point TokenBucket::AvailableAt(double count) {
  Refill(clock_->SteadyNow());
  if (tokens_ + kRoundingSlack >= count) return refilled_at_;
  const double missing_seconds = (count - tokens_) / rate_;
  return refilled_at_ + std::chrono::ceil<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(missing_seconds));
}

void TokenBucket::GiveBack(int count) { tokens_ = std::min(burst_, tokens_ + count); }

}  // namespace certmount
