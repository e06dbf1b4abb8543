// When a certificate is due for reissuance.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace certmount {

// csi-driver's calculateNextIssuanceTime, in whole seconds: not_after -
// renew_before when renew_before is set and not_before + renew_before is
// before not_after (so zero means at not_after and a negative value after
// it); otherwise two thirds into the lifetime, cert-manager's default. A
// fractional result is rounded down (earlier).
int64_t NextIssuanceAt(int64_t not_before, int64_t not_after,
                       std::optional<std::chrono::nanoseconds> renew_before);

}  // namespace certmount
