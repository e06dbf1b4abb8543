// One issuance into a volume: a key (new, or the volume's current one when
// the pod asked to reuse it), a CSR, the issuer, and an atomic swap of the
// file set in the volume's data directory. Publish and renewal both go
// through here, so a renewed volume looks exactly like a fresh one.
#pragma once

#include <chrono>
#include <functional>
#include <stop_token>
#include <string>

#include "common/env.h"
#include "common/status.h"
#include "issue/issuer.h"
#include "issue/request.h"
#include "state/volume_record.h"
#include "volume/atomic_writer.h"
#include "volume/volume_layout.h"

namespace certmount {

enum class IssuanceStep { kKeyGenerated, kIssued, kFilesWritten };

struct IssuanceRequest {
  std::string volume_id;
  const CertificateSpec* spec = nullptr;
  PodInfo pod;
  VolumeLayout layout;
  FileOwnership ownership;
  // Renewals of a reuse-private-key volume sign the key already in the
  // volume; publishes always make a new one.
  bool reuse_existing_key = false;
  // The signer-side name of this issuance (IssueInput::request_name).
  std::string request_name;
  // The pod's token to act as (IssueInput::bearer_token_override).
  std::string bearer_token_override;
  // Resumable issuance (the cert-manager issuer): the key and CSR are kept
  // as private/pending.key and private/pending.csr (mode 0600) before the
  // issuer is asked, and reused when already there, so a retry after a
  // timeout or restart sends the byte-identical CSR under the same
  // request_name and resumes the request. They are deleted on success (the
  // key goes into the file set) and on a final failure (INVALID_ARGUMENT,
  // FAILED_PRECONDITION, PERMISSION_DENIED), and kept otherwise.
  bool resumable = false;
  // Wall-clock time of this issuance (Clock::NowUnix): the date of the
  // JKS keystores' entries.
  int64_t now_unix = 0;
  // Called after each step; may be empty.
  std::function<void(IssuanceStep)> on_step;
  // IssueInput::purpose.
  IssuePurpose purpose = IssuePurpose::kRenewal;
};

// True when a resumable issuance of the volume left its pending key and CSR
// behind: the next attempt must resume it under the same request name.
bool HasPendingIssuance(const VolumeLayout& layout, Env* env);

// True for issuer failures that retrying the same request cannot fix.
bool IsFinalIssuanceFailure(Code code);

// Issues and writes the files the spec names (certificate chain, key, CA,
// and the credential bundle and keystores when asked for) as one generation
// (WriteFileSet). On success returns the certificate's fields with its next
// issuance time. On failure the previous file set (if any) is untouched.
// Issuer errors keep their code, prefixed with the issuer's name.
Result<IssuedCertificateFields> IssueIntoVolume(const IssuanceRequest& request, Issuer* issuer,
                                                Env* env,
                                                std::chrono::steady_clock::time_point deadline,
                                                std::stop_token stop);

// Puts `bundle_pem` into the volume's CA file (`spec.ca_file`) without a
// new certificate: every other file of the current generation is kept byte
// for byte with its mode, except the JKS keystore and truststore
// (spec.jks_enable), which hold the CA certificates too and are rebuilt from
// the current key and chain, dated `now_unix`. The whole set is swapped in
// by WriteFileSet, so the pod sees the old or the new set, never a mix. OK
// without writing when the CA file already holds `bundle_pem`.
// FAILED_PRECONDITION when the volume has no current generation. Callers
// serialise per volume, as for IssueIntoVolume.
Status RewriteTrustBundle(const VolumeLayout& layout, const CertificateSpec& spec,
                          const std::string& bundle_pem, const FileOwnership& ownership,
                          int64_t now_unix, Env* env);

}  // namespace certmount
