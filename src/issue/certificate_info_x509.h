// CertificateInfo of a certificate already in memory, for code inside
// src/issue/ that holds an X509 (the local CA right after signing), so it
// need not be serialised and parsed again: OpenSSL 3 decodes the public key
// on every parse, which cost about 0.3 ms per publish.
#pragma once

#include <openssl/x509.h>

#include "common/status.h"
#include "issue/certificate_info.h"

namespace certmount {

// The same facts ParseLeafCertificate reads, from `cert`.
Result<CertificateInfo> DescribeCertificate(X509* cert);

}  // namespace certmount
