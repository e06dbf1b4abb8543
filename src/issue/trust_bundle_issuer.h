// An Issuer that hands out a driver-wide trust bundle (TrustBundleSource)
// as every volume's CA file instead of the one its signer returns. All else
// is the wrapped signer's: its name, its certificates, its bookkeeping.
//
// Because TrustBundlePem answers with the source's bundle, the renewal
// machinery's CA file refresh (Renewer::RefreshTrustBundle) writes a new
// bundle into every volume without asking the signer anything.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>

#include "common/status.h"
#include "issue/issuer.h"
#include "issue/trust_bundle_source.h"

namespace certmount {

class TrustBundleIssuer final : public Issuer {
 public:
  // Wraps `inner` (not null). `source` must outlive the issuer and should
  // have loaded (TrustBundleSource::Load) before the first issuance.
  TrustBundleIssuer(std::unique_ptr<Issuer> inner, const TrustBundleSource* source);

  // The wrapped signer.
  Issuer* inner() const { return inner_.get(); }

  std::string Name() const override;
  bool Resumable() const override;
  std::string RequestName(std::string_view volume_id, uint64_t issuance) const override;

  // The source's bundle (TrustBundleSource::Pem).
  std::string TrustBundlePem() const override;

  // The wrapped signer's issuance with ca_pem replaced by the source's
  // bundle as it is when the signer answers. FAILED_PRECONDITION, without
  // asking the signer, while the source has no bundle: a pod never gets an
  // empty CA file.
  Result<IssuedCertificate> Issue(const IssueInput& input,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::stop_token stop) override;

  void Retire(const std::string& namespace_, const std::string& volume_id,
              std::optional<uint64_t> current_issuance) override;
  bool KnowsPodRunning(const PodInfo& pod) const override;
  void RetireAllExcept(const std::set<std::string>& live_volume_ids) override;

 private:
  const std::unique_ptr<Issuer> inner_;
  const TrustBundleSource* const source_;
};

}  // namespace certmount
