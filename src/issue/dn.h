// RFC 4514 distinguished names, as pods write them in the literal-subject
// attribute. Parsing only: turning the attributes into an X509_NAME is the
// OpenSSL code's job, so this file stays free of OpenSSL.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace certmount {

// One attributeTypeAndValue of a DN.
struct RdnAttribute {
  // The canonical spelling of a known name ("CN", "O", "OU", "C", "ST", "L",
  // "STREET", "postalCode", "serialNumber", "DC", "UID"; names match
  // case-insensitively, so "cn" yields "CN"), or a dotted OID as written.
  std::string type;
  // The decoded value (escapes resolved), UTF-8.
  std::string value;
  // True when this attribute was joined to the previous one with '+', i.e.
  // both belong to one multi-valued RDN. Always false for the first attribute.
  bool continues_rdn = false;

  bool operator==(const RdnAttribute&) const = default;
};

// Parses `dn` and returns its attributes in string order (RFC 4514 writes the
// most significant RDN last, so callers building an ASN.1 Name reverse the
// RDNs). Each attribute of a multi-valued RDN ("CN=a+UID=b") is its own
// element, marked with continues_rdn. Escapes (\, \" \+ \; \< \> \= \\ \#
// \space and \XX hex) are decoded; unescaped spaces around types, values and
// separators are ignored, escaped ones are kept. INVALID_ARGUMENT for an
// empty string, syntax errors, unknown type names, '#hex' (BER) values and
// values that are not UTF-8.
Result<std::vector<RdnAttribute>> ParseRfc4514(std::string_view dn);

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF), the form Go's asn1 requires of a name's strings.
bool IsValidUtf8(std::string_view s);

}  // namespace certmount
