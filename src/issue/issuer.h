// The one interface every signer implements: the embedded local CA
// (local_ca.h) and the cert-manager CertificateRequest issuer
// (cert_manager_issuer.h). Callers (the publisher, the renewer) name only
// this interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>

#include "common/status.h"
#include "issue/certificate_info.h"
#include "issue/request.h"

namespace certmount {

// Why an issuance is asked for. A signer with a shared budget of calls
// (the cert-manager issuer's client-side rate limit) serves publishes
// first: a pod waits for its publish, a renewal has time to spare.
enum class IssuePurpose { kPublish, kRenewal };

struct IssueInput {
  std::string volume_id;
  std::string csr_pem;
  const CertificateSpec* spec = nullptr;
  PodInfo pod;
  // The signer-side name of this issuance, stable across retries of the same
  // issuance (Issuer::RequestName), so a retry resumes the request instead
  // of creating a second one. Empty: the issuer picks a fresh name. A signer
  // that is not Resumable() ignores it.
  std::string request_name;
  // A bearer token to act as instead of the driver's own identity (the
  // pod's service account token from csi.storage.k8s.io/serviceAccount.tokens).
  // Empty: the driver's own. Never logged or stored.
  std::string bearer_token_override;
  IssuePurpose purpose = IssuePurpose::kRenewal;
};

struct IssuedCertificate {
  // The leaf first, then any intermediates, PEM.
  std::string certificate_chain_pem;
  // The CA bundle that verifies the chain, PEM; what goes into ca.crt.
  std::string ca_pem;
  // The leaf's serial and validity when the signer knows them already (the
  // local CA); otherwise callers parse certificate_chain_pem.
  std::optional<CertificateInfo> leaf;
};

class Issuer {
 public:
  virtual ~Issuer() = default;

  // Short name for logs, metrics and the history table, e.g. "local-ca".
  virtual std::string Name() const = 0;

  // Whether an issuance outlives one attempt: the signer keeps each request
  // as an object under a name the caller chooses (RequestName), so an
  // attempt cut off by a deadline or a restart is resumed, not duplicated.
  // Callers of a resumable signer number each issuance of a volume (0 is the
  // publish), store its name before asking, and keep the pending key and CSR
  // until it completes (volume/issuance.h). The default: not resumable, every
  // attempt starts afresh.
  virtual bool Resumable() const { return false; }

  // The name of the `issuance`-th issuance of `volume_id`, passed as
  // IssueInput::request_name; the same for every retry of that issuance.
  // Only meaningful when Resumable(); the default is empty (the signer picks).
  virtual std::string RequestName(std::string_view /*volume_id*/, uint64_t /*issuance*/) const {
    return {};
  }

  // The CA bundle that new issuances return as ca_pem, when the signer
  // knows it without issuing (the local CA); empty otherwise. Lets the
  // driver refresh ca.crt in every volume when the bundle changes.
  virtual std::string TrustBundlePem() const { return {}; }

  // Signs `input.csr_pem` per `*input.spec`. Returns within `deadline` or
  // with DEADLINE_EXCEEDED; returns CANCELLED soon after `stop` is requested.
  // A signer that cannot be reached is UNAVAILABLE; a request it refuses is
  // FAILED_PRECONDITION or PERMISSION_DENIED with the signer's message.
  virtual Result<IssuedCertificate> Issue(const IssueInput& input,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::stop_token stop) = 0;

  // Tells the signer that `volume_id` (of a pod in `namespace_`, empty when
  // unknown) now uses the certificate of issuance `current_issuance`, or,
  // with nullopt, that the volume is gone (unpublished, rolled back, removed
  // at startup). A signer that keeps an object per issuance (cert-manager's
  // CertificateRequests) drops the ones no longer needed, retrying until the
  // signer confirms. Never waits for the signer: an unreachable one delays
  // nothing. The default does nothing.
  virtual void Retire(const std::string& /*namespace_*/, const std::string& /*volume_id*/,
                      std::optional<uint64_t> /*current_issuance*/) {}

  // Whether the signer knows, without a call, that `pod` is running now (same
  // UID, not terminating, not finished). kubelet unpublishes a volume whose
  // publish failed with a non-final error and retries the publish while the
  // pod runs; a pending issuance of such a pod outlives that unpublish, so
  // the retry takes the request the signer may have signed meanwhile
  // instead of making another. Never true for a pod that may be gone. The
  // default: false (every unpublish cleans up at once).
  virtual bool KnowsPodRunning(const PodInfo& /*pod*/) const { return false; }

  // Called once at startup, after the cleanup: `live_volume_ids` are all the
  // volumes this node still has. A signer that marks its objects with the
  // node drops those of every other volume (left by a crash, by a deletion
  // lost with the process, or by a publish whose pod went away). Never
  // waits. The default does nothing.
  virtual void RetireAllExcept(const std::set<std::string>& /*live_volume_ids*/) {}
};

}  // namespace certmount
