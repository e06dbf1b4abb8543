// Turns a pod's inline CSI volume attributes (the NodePublishVolume volume
// context) into a validated CertificateSpec. The attribute names follow
// cert-manager's csi-driver so pod specs written for it work unchanged; see
// attributes.cc for the full list and for where this driver is stricter.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "issue/request.h"

namespace certmount {

// Keys kubelet adds to the volume context when the CSIDriver object sets
// podInfoOnMount (and, for the tokens, tokenRequests).
inline constexpr std::string_view kPodName = "csi.storage.k8s.io/pod.name";
inline constexpr std::string_view kPodNamespace = "csi.storage.k8s.io/pod.namespace";
inline constexpr std::string_view kPodUid = "csi.storage.k8s.io/pod.uid";
inline constexpr std::string_view kServiceAccountName = "csi.storage.k8s.io/serviceAccount.name";
inline constexpr std::string_view kEphemeral = "csi.storage.k8s.io/ephemeral";
inline constexpr std::string_view kServiceAccountTokens =
    "csi.storage.k8s.io/serviceAccount.tokens";

// Prefix of every attribute this driver interprets.
inline constexpr std::string_view kAttributePrefix = "csi.cert-manager.io/";

// The pod's identity from kubelet's entries; missing entries stay empty.
PodInfo PodInfoFromContext(const std::map<std::string, std::string>& volume_context);

// Validates every csi.cert-manager.io/ attribute, applies csi-driver's
// defaults, expands ${POD_NAME}-style variables from kubelet's entries and
// copies attributes of other domains into `annotations`. Any problem is
// INVALID_ARGUMENT whose message starts with the offending attribute key.
Result<CertificateSpec> ParseAttributes(const std::map<std::string, std::string>& volume_context);

// Whether ip-sans names the pod's addresses (${POD_IP} or ${POD_IPS}, each
// only as a whole item), which kubelet does not know at publish time.
bool UsesPodIps(const CertificateSpec& spec);

// Adds the pod's addresses the spec asks for to spec.ip_addresses (canonical,
// without duplicates): ${POD_IP} the first of `pod_ips` (status.podIP),
// ${POD_IPS} all of them (status.podIPs). With `pod_ips` empty nothing is
// added: the certificate is issued without them. INVALID_ARGUMENT when an
// address does not parse.
Status ApplyPodIps(CertificateSpec& spec, const std::vector<std::string>& pod_ips);

// The volume context minus the values that must not be written to the
// database: csi.storage.k8s.io/serviceAccount.tokens (live bearer tokens;
// kubelet sends fresh ones on every republish) and
// the keystore passwords csi.cert-manager.io/pkcs12-password and
// keystore-jks-password. A password is plain text in the pod
// spec, but admins copy rows of state.db into tickets, so the driver keeps it
// on the volume's tmpfs instead (see SecretAttributes) and merges it back for
// renewal.
std::map<std::string, std::string> StorableAttributes(
    const std::map<std::string, std::string>& volume_context);

// The pod's service account token from kubelet's
// csi.storage.k8s.io/serviceAccount.tokens (a JSON object of audience to
// {token, expirationTimestamp}; the CSIDriver's tokenRequests): the token for
// audience "" if there is one, else the only entry. NOT_FOUND when kubelet
// sent none; INVALID_ARGUMENT when it is malformed. Messages never contain
// the token.
Result<std::string> ServiceAccountToken(const std::map<std::string, std::string>& volume_context);

// The attributes StorableAttributes leaves out that ParseAttributes needs
// again on renewal (the pkcs12 and keystore-jks passwords), to be kept on
// the tmpfs.
std::map<std::string, std::string> SecretAttributes(
    const std::map<std::string, std::string>& volume_context);

}  // namespace certmount
