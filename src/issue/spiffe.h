// The SPIFFE identity mode (certmountd --spiffe-trust-domain): every
// volume's certificate is an X.509-SVID whose one URI SAN,
// spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>, the driver
// builds from kubelet's pod information. A pod cannot choose or widen it:
// the attributes that would change the certificate's names, CA flag, usages
// or key are refused. The decisions and their sources are in
// docs/attributes.md ("SPIFFE identities").
#pragma once

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

// The pod's attributes parsed by ParseAttributes, then, when
// `spiffe_trust_domain` is not empty, made into the pod's X.509-SVID request:
// any csi.cert-manager.io/ attribute outside the SPIFFE allow list, or a
// key attribute other than ECDSA P-256 in PKCS#8, is INVALID_ARGUMENT naming
// the key, as is any spiffe.csi.cert-manager.io/ key; the one URI SAN is the
// pod's SPIFFE ID; the subject is empty; usages are digital signature,
// server auth and client auth; not a CA; the lifetime defaults to 1h; the
// identity annotation is added. Publish and renewal both build a volume's
// spec here, so a renewal rebuilds the identity from the stored pod info.
Result<CertificateSpec> ParseVolumeAttributes(
    const std::map<std::string, std::string>& volume_context, std::string_view spiffe_trust_domain);

}  // namespace certmount
