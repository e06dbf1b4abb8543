#include "support/bad_ca_bundles.h"

#include <chrono>

#include "common/clock.h"
#include "issue/csr.h"
#include "issue/private_key.h"

namespace certmount::testing {

using namespace std::chrono_literals;

std::string LeafSignedBy(const CaMaterial& ca) {
  const Clock& clock = SystemClock::Instance();
  std::unique_ptr<LocalCa> signer =
      LocalCa::FromPem(ca.certificate_pem, ca.private_key_pem, clock).value();
  CertificateSpec spec;
  spec.subject.common_name = "leaf";
  spec.duration = 1h;
  const std::string csr = *BuildCsrPem(*PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256), spec);
  return signer->Issue(IssueInput{"leaf", csr, &spec, {}, {}, {}}, clock.SteadyNow() + 30s, {})
      ->certificate_chain_pem;
}

std::vector<BadCaBundle> BadCaBundles(const CaMaterial& ca) {
  std::string too_many;
  for (int i = 0; i <= kMaxTrustBundleCertificates; ++i) {
    too_many += GenerateSelfSignedCa("CA " + std::to_string(i), 24h, SystemClock::Instance())
                    ->certificate_pem;
  }
  const std::string& good = ca.certificate_pem;
  return {
      {"", "no PEM certificate in the CA bundle"},
      {"text without any PEM block\n", "no PEM certificate in the CA bundle"},
      {good + LeafSignedBy(ca), "block 2 is not a CA certificate"},
      {good + ca.private_key_pem, "block 2 is a \"PRIVATE KEY\", not a CERTIFICATE"},
      {good + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
       "block 2 is not a valid certificate"},
      {good + too_many, "more than 32 certificates"},
      {good + std::string(kMaxTrustBundleBytes, '\n'), "larger than 262144 bytes"},
  };
}

}  // namespace certmount::testing
