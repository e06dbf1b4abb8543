// Certificate signing requests built from a CertificateSpec.
#pragma once

#include <string>

#include "common/status.h"
#include "issue/private_key.h"
#include "issue/request.h"

namespace certmount {

// A PEM "CERTIFICATE REQUEST" for `key`'s public half, signed by `key`
// (SHA-256 for RSA and P-256, SHA-384 for P-384, SHA-512 for P-521, pure
// Ed25519). The subject is spec.literal_subject (RFC 4514) when set, else
// spec.subject's fields; DNS names, IP addresses (v4 or v6 text), URIs and
// email addresses go into a subjectAltName extension request, marked
// critical when the subject is empty (RFC 5280 4.2.1.6); a request may have
// neither. Name strings are typed as Go's asn1 types them (PrintableString
// when possible, else UTF8String) with no X.520 length bounds, as csi-driver
// writes them. INVALID_ARGUMENT for an unparsable literal subject, a value
// that is not UTF-8 or an invalid IP address.
Result<std::string> BuildCsrPem(const PrivateKey& key, const CertificateSpec& spec);

}  // namespace certmount
