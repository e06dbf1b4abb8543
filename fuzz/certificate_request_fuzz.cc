// JSON from the Kubernetes API server: a CertificateRequest object as the
// cert-manager issuer reads it after a create, a get or a watch event (status
// conditions, base64 certificate and CA, PEM splitting).
#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "issue/certificate_request_outcome.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json object =
      nlohmann::json::parse(certmount::fuzz::AsText(data, size), nullptr, false);
  std::string pending_state;
  (void)certmount::CertificateRequestOutcome(object, "ns/certmount-0", &pending_state);
  (void)certmount::CertificateRequestOutcome(object, "ns/certmount-0", nullptr);
  return 0;
}
