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
// critical when the subject is empty (RFC 5280 4.2.1.6). INVALID_ARGUMENT for
// a request with neither subject nor SANs, an unparsable literal subject, an
// invalid IP address or a value OpenSSL rejects (e.g. a 3-letter country).
Result<std::string> BuildCsrPem(const PrivateKey& key, const CertificateSpec& spec);

}  // namespace certmount
