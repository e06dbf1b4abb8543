// Standard base64 (RFC 4648, with padding), the encoding Kubernetes uses for
// []byte fields: kubeconfig *-data values, CertificateRequest spec.request
// and status.certificate.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace certmount::kube {

// Encodes `bytes` with padding and no line breaks.
std::string Base64Encode(std::string_view bytes);

// Decodes `text`; whitespace is ignored. INVALID_ARGUMENT for anything that
// is not base64.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace certmount::kube
