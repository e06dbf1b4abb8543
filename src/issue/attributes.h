// The names and helpers of a pod's inline CSI volume attributes (the
// NodePublishVolume volume context). The attribute names follow cert-manager's
// csi-driver so pod specs written for it work unchanged; see attributes.cc
// for the full list and for where this driver is stricter. Parsing has one
// entry point: ParseVolumeAttributes (volume_attributes.h).
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
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

// Prefix of csi-driver's attributes, which this driver reads as csi-driver
// does.
inline constexpr std::string_view kAttributePrefix = "csi.cert-manager.io/";

// Prefix of certmount's own attributes. Every key under it is the driver's:
// one it does not know is INVALID_ARGUMENT naming the key, so a misspelt key
// is caught at publish, and none is copied onto a CertificateRequest as an
// annotation.
inline constexpr std::string_view kCertmountAttributePrefix = "certmount.io/";

// The name of the volume's credential bundle file: the private key (PKCS#8)
// followed by the certificate chain, in one file
// (CertificateSpec::credential_bundle_file). Empty or absent: no such file.
inline constexpr std::string_view kCredentialBundleFileAttribute =
    "certmount.io/credential-bundle-file";
static_assert(kCredentialBundleFileAttribute.starts_with(kCertmountAttributePrefix));

// The variables a templated attribute may use, as csi-driver names them, and
// the kubelet entry each stands for.
inline constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kExpansionVariables =
    {{
        {"POD_NAME", kPodName},
        {"POD_NAMESPACE", kPodNamespace},
        {"POD_UID", kPodUid},
        {"SERVICE_ACCOUNT_NAME", kServiceAccountName},
    }};
// certmount's variables for the pod's addresses, known only after publish
// (ip-sans and dns-names), and the most text one address takes in a value:
// an IPv6 address written out in full, 39 characters.
inline constexpr std::string_view kPodIpVariable = "POD_IP";
inline constexpr std::string_view kPodIpsVariable = "POD_IPS";
inline constexpr std::size_t kMaxPodAddressText = 39;

// The pod's identity from kubelet's entries; missing entries stay empty.
PodInfo PodInfoFromContext(const std::map<std::string, std::string>& volume_context);

// How CertificateSpec::pod_ip_dns_names writes a reference to the pod's
// first address and to each of its addresses.
inline constexpr std::string_view kPodIpMarker = "${POD_IP}";
inline constexpr std::string_view kPodIpsMarker = "${POD_IPS}";

// Whether the spec names the pod's addresses, which kubelet does not know at
// publish time: ${POD_IP} or ${POD_IPS} as a whole ip-sans item, or inside a
// dns-names item.
bool UsesPodIps(const CertificateSpec& spec);

// The attribute key to name in a message about the pod's addresses: ip-sans
// when it uses them, else dns-names.
std::string PodIpsAttributeKey(const CertificateSpec& spec);

// Adds what the pod's addresses make, without duplicates, once they are
// known. To spec.ip_addresses (canonical): ${POD_IP} the first of `pod_ips`
// (status.podIP), ${POD_IPS} all of them (status.podIPs). To spec.dns_names:
// each pod_ip_dns_names item with ${POD_IP} written as the first address's
// DNS label, and, for an item with ${POD_IPS}, one name per address. The
// label is the canonical address with '.' and ':' as '-' ("10-244-1-7",
// "fd00--7"), the form of Kubernetes' pod DNS records. With `pod_ips` empty
// nothing is added: the certificate is issued without them.
// INVALID_ARGUMENT when an address does not parse.
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

// The attributes StorableAttributes leaves out that parsing needs
// again on renewal (the pkcs12 and keystore-jks passwords), to be kept on
// the tmpfs.
std::map<std::string, std::string> SecretAttributes(
    const std::map<std::string, std::string>& volume_context);

}  // namespace certmount
