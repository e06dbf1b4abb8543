// CA bundles for tests of ValidateCaBundle and its users (the local CA's
// trust bundle, the driver-wide bundle file): one bundle per rule it breaks.
#pragma once

#include <string>
#include <vector>

#include "issue/local_ca.h"

namespace certmount::testing {

// A leaf certificate (not a CA) signed by `ca`, PEM.
std::string LeafSignedBy(const CaMaterial& ca);

struct BadCaBundle {
  std::string pem;
  std::string reason;  // a piece of the INVALID_ARGUMENT message that names the rule
};

// Bundles that each break one rule of ValidateCaBundle: none at all, a leaf,
// a block of another type, a block that does not parse, too many
// certificates, too many bytes. The broken block follows `ca`'s certificate
// (so the reasons name block 2) wherever there is a good one to follow.
std::vector<BadCaBundle> BadCaBundles(const CaMaterial& ca);

}  // namespace certmount::testing
