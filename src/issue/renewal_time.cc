#include "issue/renewal_time.h"

namespace certmount {

int64_t NextIssuanceAt(int64_t not_before, int64_t not_after,
                       std::optional<std::chrono::nanoseconds> renew_before) {
  const int64_t lifetime = not_after - not_before;
  if (lifetime <= 0) return not_before;
  constexpr __int128 kNanosPerSecond = 1'000'000'000;
  if (renew_before.has_value() && renew_before->count() < lifetime * kNanosPerSecond) {
    const __int128 at = not_after * kNanosPerSecond - renew_before->count();
    __int128 seconds = at / kNanosPerSecond;
    if (at % kNanosPerSecond != 0 && at < 0) --seconds;  // round towards the past
    return static_cast<int64_t>(seconds);
  }
  return not_before + lifetime * 2 / 3;
}

}  // namespace certmount
