#include "issue/trust_bundle_source.h"

#include <utility>

#include "issue/local_ca.h"

namespace certmount {

TrustBundleSource::TrustBundleSource(std::string path, Env* env)
    : path_(std::move(path)), env_(env) {}

Status TrustBundleSource::Load() {
  std::lock_guard lock(load_mu_);
  // Before the read: a change racing with it shows at the next Poll.
  last_ = FileFingerprint::Take({path_}, env_);
  return Read().status();
}

Result<bool> TrustBundleSource::Poll(bool force) {
  std::lock_guard lock(load_mu_);
  FileFingerprint now = FileFingerprint::Take({path_}, env_);
  if (!force && now == last_) return false;
  last_ = std::move(now);
  return Read();
}

std::string TrustBundleSource::Pem() const {
  std::shared_ptr<const std::string> pem;
  {
    std::lock_guard lock(pem_mu_);
    pem = pem_;
  }
  return pem != nullptr ? *pem : std::string();
}

Result<bool> TrustBundleSource::Read() {
  // Bounded before reading: the path is an admin's, and may name anything.
  Result<FileStat> stat = env_->Stat(path_);
  if (stat.ok() && stat->size > static_cast<int64_t>(kMaxTrustBundleBytes)) {
    return Status::InvalidArgument(path_ + ": CA bundle is larger than " +
                                   std::to_string(kMaxTrustBundleBytes) + " bytes");
  }
  Result<std::string> contents = env_->ReadFile(path_);
  if (!contents.ok()) {
    return Status::FailedPrecondition("cannot read CA bundle: " + contents.status().message());
  }
  CERTMOUNT_ASSIGN_OR_RETURN(std::string bundle, ValidateCaBundle(*contents, path_));
  auto loaded = std::make_shared<const std::string>(std::move(bundle));
  std::lock_guard lock(pem_mu_);
  const bool changed = pem_ == nullptr || *pem_ != *loaded;
  pem_ = std::move(loaded);
  return changed;
}

}  // namespace certmount
