#include "renew/renewer.h"

#include "issue/attributes.h"
#include "issue/volume_attributes.h"
#include "volume/issuance.h"
#include "volume/volume_layout.h"

namespace certmount {

Renewer::Renewer(RenewerOptions options, Issuer* issuer, Env* env, const Clock* clock)
    : options_(std::move(options)), issuer_(issuer), env_(env), clock_(clock) {}

Result<VolumeLayout> Renewer::ExistingLayout(const VolumeRecord& volume) const {
  VolumeLayout layout = VolumeLayout::For(options_.data_root, volume.volume_id);
  // WriteFileSet would create a missing directory; after an unpublish (or an
  // admin's rm) that would only leave files no pod can see.
  Result<FileStat> data = env_->LStat(layout.data);
  if (!data.ok() || data->type != FileStat::Type::kDirectory) {
    return Status::FailedPrecondition("volume " + volume.volume_id + ": data directory " +
                                      layout.data + " is missing");
  }
  return layout;
}

Result<CertificateSpec> Renewer::LoadSpec(const VolumeRecord& volume, const VolumeLayout& layout,
                                          std::map<std::string, std::string>& attributes) const {
  attributes = volume.attributes;
  CERTMOUNT_ASSIGN_OR_RETURN(auto secrets, LoadSecretAttributes(layout, env_));
  for (auto& [key, value] : secrets) attributes[key] = std::move(value);
  const std::string what = "volume " + volume.volume_id + " attributes";
  Result<CertificateSpec> spec = ParseVolumeAttributes(attributes, options_.attribute_rules);
  if (!spec.ok()) return spec.status().WithContext(what);
  Status applied = ApplyKnownPodIps(*spec, PodInfoFromContext(attributes).uid, options_.pod_ips);
  if (!applied.ok()) return applied.WithContext(what);
  return spec;
}

Result<CertificateSpec> Renewer::SpecOf(const VolumeRecord& volume) const {
  std::map<std::string, std::string> attributes;
  return LoadSpec(volume, VolumeLayout::For(options_.data_root, volume.volume_id), attributes);
}

Status Renewer::RefreshTrustBundle(const VolumeRecord& volume) {
  const std::string bundle = issuer_->TrustBundlePem();
  if (bundle.empty()) return Status::Ok();
  CERTMOUNT_ASSIGN_OR_RETURN(VolumeLayout layout, ExistingLayout(volume));
  std::map<std::string, std::string> attributes;
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateSpec spec, LoadSpec(volume, layout, attributes));
  FileOwnership ownership;
  if (volume.file_group.has_value()) ownership.gid = static_cast<gid_t>(*volume.file_group);
  return RewriteTrustBundle(layout, spec, bundle, ownership, clock_->NowUnix(), env_);
}

Result<std::string> Renewer::CurrentCertificate(const VolumeRecord& volume) const {
  CERTMOUNT_ASSIGN_OR_RETURN(VolumeLayout layout, ExistingLayout(volume));
  std::map<std::string, std::string> attributes;
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateSpec spec, LoadSpec(volume, layout, attributes));
  return env_->ReadFile(layout.data + "/" + spec.certificate_file);
}

Result<IssuedCertificateFields> Renewer::Renew(const VolumeRecord& volume, std::stop_token stop,
                                               const RenewCall& call) {
  const auto deadline = call.deadline.value_or(clock_->SteadyNow() + options_.timeout);
  CERTMOUNT_ASSIGN_OR_RETURN(VolumeLayout layout, ExistingLayout(volume));
  std::map<std::string, std::string> attributes;
  Result<CertificateSpec> spec = LoadSpec(volume, layout, attributes);
  if (!spec.ok()) return spec.status();

  IssuanceRequest request;
  request.volume_id = volume.volume_id;
  request.purpose = call.purpose;
  request.spec = &*spec;
  request.pod = PodInfoFromContext(volume.attributes);
  request.layout = layout;
  if (volume.file_group.has_value()) request.ownership.gid = static_cast<gid_t>(*volume.file_group);
  request.reuse_existing_key = spec->reuse_private_key;
  request.now_unix = clock_->NowUnix();
  if (options_.tokens != nullptr) {
    std::optional<std::string> token = options_.tokens->Get(volume.volume_id);
    if (!token.has_value()) {
      return Status::Unavailable("volume " + volume.volume_id +
                                 ": waiting for kubelet to republish it with a service account "
                                 "token (--use-token-request)");
    }
    request.bearer_token_override = std::move(*token);
  }
  int64_t number = volume.issuance_number;
  if (issuer_->Resumable()) {
    if (!HasPendingIssuance(layout, env_)) {
      // A new issuance: its number is stored before any request exists.
      ++number;
      const std::string name =
          issuer_->RequestName(volume.volume_id, static_cast<uint64_t>(number));
      if (options_.store == nullptr) {
        return Status::Internal("resumable issuance without a store");
      }
      CERTMOUNT_RETURN_IF_ERROR(options_.store->BeginIssuance(volume.volume_id, number, name));
    }
    request.request_name = issuer_->RequestName(volume.volume_id, static_cast<uint64_t>(number));
    request.resumable = true;
  }
  Result<IssuedCertificateFields> issued =
      IssueIntoVolume(request, issuer_, env_, deadline, std::move(stop));
  if (issued.ok() && issuer_->Resumable()) {
    issuer_->Retire(request.pod.namespace_, volume.volume_id, static_cast<uint64_t>(number));
  }
  if (issued.ok() && options_.on_renewed) options_.on_renewed(volume.volume_id);
  return issued;
}

}  // namespace certmount
