// The one interface every signer implements: the embedded local CA now, the
// cert-manager CertificateRequest issuer later.
#pragma once

#include <chrono>
#include <stop_token>
#include <string>

#include "common/status.h"
#include "issue/request.h"

namespace certmount {

struct IssueInput {
  std::string volume_id;
  std::string csr_pem;
  const CertificateSpec* spec = nullptr;
  PodInfo pod;
};

struct IssuedCertificate {
  // The leaf first, then any intermediates, PEM.
  std::string certificate_chain_pem;
  // The CA bundle that verifies the chain, PEM; what goes into ca.crt.
  std::string ca_pem;
};

class Issuer {
 public:
  virtual ~Issuer() = default;

  // Short name for logs, metrics and the history table, e.g. "local-ca".
  virtual std::string Name() const = 0;

  // Signs `input.csr_pem` per `*input.spec`. Returns within `deadline` or
  // with DEADLINE_EXCEEDED; returns CANCELLED soon after `stop` is requested.
  // A signer that cannot be reached is UNAVAILABLE; a request it refuses is
  // FAILED_PRECONDITION or PERMISSION_DENIED with the signer's message.
  virtual Result<IssuedCertificate> Issue(const IssueInput& input,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::stop_token stop) = 0;
};

}  // namespace certmount
