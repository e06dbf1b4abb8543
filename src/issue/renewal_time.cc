#include "issue/renewal_time.h"

namespace certmount {

int64_t NextIssuanceAt(int64_t not_before, int64_t not_after,
                       std::optional<std::chrono::seconds> renew_before) {
  const int64_t lifetime = not_after - not_before;
  if (lifetime <= 0) return not_before;
  if (renew_before.has_value() && renew_before->count() > 0 && renew_before->count() < lifetime) {
    return not_after - renew_before->count();
  }
  return not_before + lifetime * 2 / 3;
}

}  // namespace certmount
