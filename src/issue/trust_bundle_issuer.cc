#include "issue/trust_bundle_issuer.h"

#include <utility>

namespace certmount {

TrustBundleIssuer::TrustBundleIssuer(std::unique_ptr<Issuer> inner, const TrustBundleSource* source)
    : inner_(std::move(inner)), source_(source) {}

std::string TrustBundleIssuer::Name() const { return inner_->Name(); }

bool TrustBundleIssuer::Resumable() const { return inner_->Resumable(); }

std::string TrustBundleIssuer::RequestName(std::string_view volume_id, uint64_t issuance) const {
  return inner_->RequestName(volume_id, issuance);
}

std::string TrustBundleIssuer::TrustBundlePem() const { return source_->Pem(); }

Result<IssuedCertificate> TrustBundleIssuer::Issue(const IssueInput& input,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::stop_token stop) {
  if (source_->Pem().empty()) {
    return Status::FailedPrecondition("no trust bundle loaded from " + source_->path());
  }
  CERTMOUNT_ASSIGN_OR_RETURN(IssuedCertificate issued,
                             inner_->Issue(input, deadline, std::move(stop)));
  issued.ca_pem = source_->Pem();
  return issued;
}

void TrustBundleIssuer::Retire(const std::string& namespace_, const std::string& volume_id,
                               std::optional<uint64_t> current_issuance) {
  inner_->Retire(namespace_, volume_id, current_issuance);
}

bool TrustBundleIssuer::KnowsPodRunning(const PodInfo& pod) const {
  return inner_->KnowsPodRunning(pod);
}

void TrustBundleIssuer::RetireAllExcept(const std::set<std::string>& live_volume_ids) {
  inner_->RetireAllExcept(live_volume_ids);
}

}  // namespace certmount
