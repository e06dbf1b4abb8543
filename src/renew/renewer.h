// One renewal of one mounted volume: the certificate is issued again, from
// the same attributes, into the volume's existing data directory, so the pod
// sees the new files through the bind mount it already has.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stop_token>
#include <string>

#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "issue/issuer.h"
#include "issue/request.h"
#include "issue/volume_attributes.h"
#include "state/store.h"
#include "state/volume_record.h"
#include "volume/pod_ips.h"
#include "volume/service_account_tokens.h"
#include "volume/volume_layout.h"

namespace certmount {

struct RenewerOptions {
  std::string data_root;
  // Bound on one issuance; certmountd passes --publish-timeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // Where a resumable issuer's (Issuer::Resumable) issuance number and
  // request name are stored before it is asked: see Renew. Needed only for
  // such an issuer; must outlive the Renewer.
  Store* store = nullptr;
  // With --use-token-request: renewals sign with the pod's latest token from
  // here; without one (after a restart, before kubelet republishes) they
  // fail UNAVAILABLE and back off. Null: the driver's own credentials.
  const ServiceAccountTokens* tokens = nullptr;
  // The node's attribute rules (ParseVolumeAttributes). In SPIFFE mode the
  // identity is rebuilt from the stored pod info, never from attributes.
  AttributeRules attribute_rules;
  // The pods' addresses for ${POD_IP} and ${POD_IPS} (see PublisherOptions).
  const PodIps* pod_ips = nullptr;
  // Called with the volume's id after each successful renewal.
  std::function<void(const std::string& volume_id)> on_renewed = nullptr;
};

// How one Renew call is bounded and ranked. The default is a scheduled
// renewal: a deadline of now + RenewerOptions::timeout, served after
// publishes. A publish that re-issues a mounted volume's lost files passes
// its own deadline and purpose, so the re-issue counts against the publish.
struct RenewCall {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  IssuePurpose purpose = IssuePurpose::kRenewal;
};

class Renewer {
 public:
  // `issuer`, `env` and `clock` must outlive the Renewer.
  Renewer(RenewerOptions options, Issuer* issuer, Env* env, const Clock* clock);

  // The volume's CertificateSpec from `volume.attributes` plus the secret
  // attributes kept in its private directory, with the pod's addresses as
  // far as they are known (ApplyKnownPodIps).
  Result<CertificateSpec> SpecOf(const VolumeRecord& volume) const;

  // Rebuilds the CertificateSpec from `volume.attributes` plus the secret
  // attributes kept in the volume's private directory, and issues into the
  // volume (IssueIntoVolume) with the pod's key reused when the spec asks
  // for it, the files owned by `volume.file_group`, and a deadline of now +
  // timeout (or `call`'s). On failure the volume's previous files stay as
  // they were.
  // FAILED_PRECONDITION, without writing, when the volume's data directory
  // is gone: a new one would not be the directory the pod has mounted.
  // With a resumable issuer: when the volume has a pending issuance (its key
  // and CSR kept after a timeout or restart) it is resumed under the row's
  // issuance number; otherwise the number is bumped and stored (with its
  // request name, Issuer::RequestName) BEFORE the issuer is asked, so a
  // restart resumes the same request.
  // Thread-safe for different volumes; calls for one volume must not overlap.
  Result<IssuedCertificateFields> Renew(const VolumeRecord& volume, std::stop_token stop,
                                        const RenewCall& call = {});

  // Rewrites the volume's CA file with the issuer's current trust bundle
  // (Issuer::TrustBundlePem, RewriteTrustBundle), keeping its certificate
  // and key. OK without writing when the issuer has no bundle to give or
  // the file already holds it. FAILED_PRECONDITION when the data directory
  // is gone, as for Renew. Calls for one volume must not overlap with each
  // other or with Renew.
  Status RefreshTrustBundle(const VolumeRecord& volume);

  // The certificate file (leaf first) the volume's pod sees now.
  Result<std::string> CurrentCertificate(const VolumeRecord& volume) const;

  // The issuer's name, for the history table.
  std::string issuer_name() const { return issuer_->Name(); }

 private:
  // The volume's layout after checking its data directory is there.
  Result<VolumeLayout> ExistingLayout(const VolumeRecord& volume) const;
  // The volume's spec from its attributes plus its secret ones, which are
  // returned in `attributes`.
  Result<CertificateSpec> LoadSpec(const VolumeRecord& volume, const VolumeLayout& layout,
                                   std::map<std::string, std::string>& attributes) const;

  RenewerOptions options_;
  Issuer* issuer_;
  Env* env_;
  const Clock* clock_;
};

}  // namespace certmount
