// JSON from the Kubernetes API server: the Status object of a failed call.
// (The CertificateRequest decoding in cert_manager_issuer.cc has no public
// seam yet; see docs/verification.md.)
#include "fuzz_input.h"
#include "kube/http_status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(certmount::fuzz::AsText(data, size));
  for (long code : {400L, 403L, 404L, 409L, 410L, 422L, 429L, 500L, 503L}) {
    (void)certmount::kube::StatusFromHttp(code, body);
  }
  return 0;
}
