// The issuance metrics shared by publishes (volume/publisher.cc) and
// renewals (renew/scheduler.cc): certmount_issuances_total{issuer,kind,result}
// and certmount_issuance_duration_seconds{issuer,kind}. Both families are
// registered while the program starts, so they render (at zero) before the
// first issuance.
#pragma once

#include <string>

#include "state/volume_record.h"

namespace certmount {

// Counts one issuance that ran to an outcome. Thread-safe; cheap.
void RecordIssuanceMetrics(const std::string& issuer, IssuanceKind kind, bool ok, double seconds);

}  // namespace certmount
