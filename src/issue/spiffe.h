// The SPIFFE identity mode (certmountd --spiffe-trust-domain): every
// volume's certificate is an X.509-SVID whose one URI SAN,
// spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>, the driver
// builds from kubelet's pod information. A pod cannot choose or widen it:
// the attributes that would change the certificate's names, CA flag, usages
// or key are refused. The decisions and their sources are in
// docs/attributes.md ("SPIFFE identities").
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"
#include "issue/request.h"

namespace certmount {

// The CertificateRequest annotation that carries the identity, as
// cert-manager's csi-driver-spiffe sets it.
inline constexpr std::string_view kSpiffeIdentityAnnotation = "spiffe.csi.cert-manager.io/identity";

// The SPIFFE ID spec's trust domain name: 1 to 255 characters, each a
// lower-case ASCII letter, a digit, '.', '-' or '_' (so no scheme, port,
// userinfo, path or upper case). INVALID_ARGUMENT stating the rule otherwise.
Status ValidateSpiffeTrustDomain(std::string_view trust_domain);

// spiffe://<trust_domain>/ns/<namespace>/sa/<service account> from kubelet's
// pod information. FAILED_PRECONDITION naming the missing kubelet entry when
// the namespace or service account is absent (the CSIDriver lacks
// podInfoOnMount); INVALID_ARGUMENT when either is not a SPIFFE path segment.
// `trust_domain` must have passed ValidateSpiffeTrustDomain.
Result<std::string> SpiffeIdForPod(std::string_view trust_domain, const PodInfo& pod);

// The driver's settings for SPIFFE mode, as cert-manager's csi-driver-spiffe
// takes them as flags (docs/attributes.md, "SPIFFE identities"). A pod may
// narrow or rename what these give, never widen or redirect it.
struct SpiffeSettings {
  // Empty: SPIFFE mode is off and nothing below applies.
  std::string trust_domain;
  // The issuer of every SPIFFE volume. With a name, a pod's issuer-name,
  // -kind and -group must be absent or equal to it. Without one, they come
  // from the pod as csi-driver reads them.
  IssuerRef issuer{"", "ClusterIssuer", "cert-manager.io"};
  // Whether a volume needs an issuer name at all: true for cert-manager;
  // the local CA signs every request itself.
  bool issuer_required = true;
  // The lifetime asked for; a pod's duration may be shorter, not longer.
  std::chrono::nanoseconds duration{std::chrono::hours(1)};
  // File names used when the pod's certificate-file, privatekey-file and
  // ca-file do not name others.
  std::string certificate_file = "tls.crt";
  std::string private_key_file = "tls.key";
  std::string ca_file = "ca.crt";
  // Adds "key encipherment" to the usages: the set csi-driver-spiffe asks
  // for and its approver requires exactly. X.509-SVID allows it; RFC 5480
  // does not list it for EC keys, so it is only asked for where an approver
  // requires it (cert-manager mode).
  bool key_encipherment = false;

  bool enabled() const { return !trust_domain.empty(); }
};

// csi-driver-spiffe's one pod attribute: the group the volume's files
// belong to.
inline constexpr std::string_view kSpiffeFsGroupAttribute = "spiffe.csi.cert-manager.io/fs-group";

// The first step of ParseVolumeAttributes (volume_attributes.h) in SPIFFE
// mode: checks what the pod may set and returns the volume context the
// csi-driver parser then reads, with the driver's settings filled in. Any
// csi.cert-manager.io/ attribute outside the SPIFFE allow list, a key
// attribute other than ECDSA P-256 in PKCS#8, an issuer other than the
// configured one, a duration longer than the configured one, a malformed
// spiffe.csi.cert-manager.io/fs-group or any other spiffe.csi.cert-manager.io/
// key is INVALID_ARGUMENT naming the key.
Result<std::map<std::string, std::string>> SpiffeAttributeContext(
    const std::map<std::string, std::string>& volume_context, const SpiffeSettings& settings);

// The second step: makes `spec` (parsed from SpiffeAttributeContext's
// result) the pod's X.509-SVID: the one URI SAN is the pod's SPIFFE ID from
// kubelet's entries in `volume_context`; the subject is empty; usages are
// digital signature, server auth and client auth (and key encipherment per
// the settings); not a CA; ECDSA P-256 in PKCS#8, a new key each time; the
// identity annotation is added.
Status MakeSvid(const std::map<std::string, std::string>& volume_context,
                const SpiffeSettings& settings, CertificateSpec& spec);

}  // namespace certmount
