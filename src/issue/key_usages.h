// cert-manager's 23 key usage names (its KeyUsage type: key usages and
// extended key usages, as csi-driver's key-usages attribute takes them) and
// what each puts into a certificate. The one table: the attribute parser
// checks names against it and the local CA maps names through it.
#pragma once

#include <span>
#include <string_view>

namespace certmount {

enum class KeyUsageKind {
  kKeyUsage,          // a bit of the keyUsage extension
  kExtendedKeyUsage,  // an OID of the extendedKeyUsage extension
};

struct KeyUsageName {
  std::string_view name;  // cert-manager's spelling, e.g. "digital signature"
  KeyUsageKind kind;
  int value;  // keyUsage bit number (RFC 5280 4.2.1.3), or extendedKeyUsage NID
};

// All 23, in cert-manager's order.
std::span<const KeyUsageName> KnownKeyUsages();

enum class NameMatch { kExact, kIgnoreAsciiCase };

// The entry named `name`, or nullptr for a name cert-manager does not know.
const KeyUsageName* FindKeyUsage(std::string_view name, NameMatch match);

}  // namespace certmount
