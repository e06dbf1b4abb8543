// Reading PEM certificate lists into OpenSSL stacks, for the keystore
// writers (PKCS#12, JKS). Internal to src/issue/.
#pragma once

#include <openssl/x509.h>

#include <string_view>

#include "common/status.h"

namespace certmount {

// Appends every PEM certificate in `pem` to `stack`, in order.
// INVALID_ARGUMENT (naming `what`) when `pem` holds no certificate.
Status AppendPemCertificates(std::string_view pem, STACK_OF(X509) * stack, const char* what);

}  // namespace certmount
