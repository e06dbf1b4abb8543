// When a certificate is due for reissuance.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace certmount {

// At not_after - renew_before when renew_before is set and shorter than the
// lifetime; otherwise two thirds into the lifetime, cert-manager's default.
int64_t NextIssuanceAt(int64_t not_before, int64_t not_after,
                       std::optional<std::chrono::seconds> renew_before);

}  // namespace certmount
