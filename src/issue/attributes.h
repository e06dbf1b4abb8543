// Turns a pod's inline CSI volume attributes (the NodePublishVolume volume
// context) into a validated CertificateSpec. The attribute names follow
// cert-manager's csi-driver so pod specs written for it work unchanged; see
// attributes.cc for the full list and for where this driver is stricter.
#pragma once

#include <map>
#include <string>
#include <string_view>

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

// The volume context minus values that must never be written to disk: only
// csi.storage.k8s.io/serviceAccount.tokens, which holds live bearer tokens
// (kubelet sends fresh ones on every republish). Everything ParseAttributes
// needs is kept, so the stored copy re-parses to the same spec on renewal.
// pkcs12-password is kept on purpose: renewal rewrites the keystore without
// kubelet, so the password must be available then, and it is already plain
// text in the pod spec, so the root-only database adds no new exposure.
std::map<std::string, std::string> StorableAttributes(
    const std::map<std::string, std::string>& volume_context);

}  // namespace certmount
