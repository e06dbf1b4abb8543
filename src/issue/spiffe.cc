#include "issue/spiffe.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <optional>

#include "common/logging.h"
#include "issue/attributes.h"

namespace certmount {
namespace {

using namespace std::string_view_literals;

constexpr std::string_view kSpiffePrefix = "spiffe.csi.cert-manager.io/";
constexpr size_t kMaxTrustDomainLength = 255;  // SPIFFE ID spec, section 2.1
constexpr size_t kMaxSpiffeIdLength = 2048;    // SPIFFE ID spec, section 2.3
constexpr std::chrono::hours kDefaultDuration{1};

// csi.cert-manager.io/ attributes that choose the signer, the lifetime, file
// names, the group and extra keystores: none of them changes what the
// certificate asserts.
constexpr std::array kAllowed = {"issuer-name"sv,
                                 "issuer-kind"sv,
                                 "issuer-group"sv,
                                 "duration"sv,
                                 "renew-before"sv,
                                 "certificate-file"sv,
                                 "privatekey-file"sv,
                                 "ca-file"sv,
                                 "fs-group"sv,
                                 "pkcs12-enable"sv,
                                 "pkcs12-filename"sv,
                                 "pkcs12-password"sv,
                                 "pkcs12-profile"sv,
                                 "keystore-jks-enable"sv,
                                 "keystore-jks-filename"sv,
                                 "keystore-jks-password"sv};

// Attributes allowed only with the value an X.509-SVID has anyway.
struct FixedValue {
  std::string_view name;
  std::string_view value;
  bool ignore_case;  // as ParseAttributes reads the key
};
constexpr std::array kFixed = {
    FixedValue{"key-algorithm", "ECDSA", true}, FixedValue{"key-size", "256", false},
    FixedValue{"key-encoding", "PKCS8", true}, FixedValue{"is-ca", "false", false}};

constexpr std::array kSubjectKeys = {
    "common-name"sv,  "literal-subject"sv, "organizations"sv,        "organizationalunits"sv,
    "countries"sv,    "provinces"sv,       "localities"sv,           "streetaddresses"sv,
    "postalcodes"sv,  "serialnumber"sv,    "organizational-units"sv, "street-addresses"sv,
    "postal-codes"sv, "serial-number"sv};
constexpr std::array kSanKeys = {"dns-names"sv, "ip-sans"sv, "uri-sans"sv, "email-sans"sv};

template <size_t N>
bool Contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Why csi.cert-manager.io/<name> with `value` is refused in SPIFFE mode;
// nullopt when it is allowed.
std::optional<std::string> RefusalReason(std::string_view name, std::string_view value) {
  if (Contains(kAllowed, name)) return std::nullopt;
  for (const FixedValue& fixed : kFixed) {
    if (fixed.name != name) continue;
    const bool same =
        fixed.ignore_case ? EqualsIgnoringCase(value, fixed.value) : value == fixed.value;
    if (same) return std::nullopt;
    return "an X.509-SVID here has " + std::string(name) + " \"" + std::string(fixed.value) +
           "\" (ECDSA P-256 keys in PKCS#8, never a CA)";
  }
  if (Contains(kSubjectKeys, name)) {
    return std::string("the subject of an X.509-SVID stays empty; the identity is its URI SAN");
  }
  if (Contains(kSanKeys, name)) {
    return std::string(
        "the certificate's only name is the pod's SPIFFE ID, which the driver builds from the "
        "pod's namespace and service account");
  }
  if (name == "key-usages") {
    return std::string("usages are fixed: digital signature, server auth, client auth");
  }
  if (name == "reuse-private-key") {
    return std::string("every SVID gets a new key");
  }
  return std::string("not an attribute SPIFFE mode accepts");
}

// A pod's key in a message: as it is when it holds only the characters of
// attribute names, quoted (escaped, bounded) otherwise.
std::string KeyInMessage(std::string_view key) {
  const bool plain = std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '/';
  });
  return plain ? std::string(key) : QuoteUserValue(key);
}

// Refuses what a pod may not set in SPIFFE mode; empty values mean "not set",
// as in ParseAttributes.
Status CheckSpiffeAttributes(const std::map<std::string, std::string>& volume_context) {
  for (const auto& [key, value] : volume_context) {
    if (value.empty()) continue;
    std::string_view k = key;
    if (k.starts_with(kSpiffePrefix)) {
      return Status::InvalidArgument(
          KeyInMessage(key) +
          ": spiffe.csi.cert-manager.io/ keys are the driver's (the identity annotation); use "
          "csi.cert-manager.io/fs-group for the files' group");
    }
    if (!k.starts_with(kAttributePrefix)) continue;
    if (std::optional<std::string> reason =
            RefusalReason(k.substr(kAttributePrefix.size()), value)) {
      return Status::InvalidArgument(KeyInMessage(key) +
                                     ": not allowed with --spiffe-trust-domain: " + *reason);
    }
  }
  return Status::Ok();
}

// The SPIFFE ID spec's path segment: [A-Za-z0-9._-]+, but not "." or "..".
bool IsPathSegment(std::string_view segment) {
  if (segment.empty() || segment == "." || segment == "..") return false;
  return std::all_of(segment.begin(), segment.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

}  // namespace

Status ValidateSpiffeTrustDomain(std::string_view trust_domain) {
  if (trust_domain.empty() || trust_domain.size() > kMaxTrustDomainLength) {
    return Status::InvalidArgument("SPIFFE trust domain must be 1 to " +
                                   std::to_string(kMaxTrustDomainLength) + " characters long");
  }
  const bool valid = std::all_of(trust_domain.begin(), trust_domain.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
  });
  if (!valid) {
    return Status::InvalidArgument(
        "SPIFFE trust domain " + QuoteUserValue(trust_domain) +
        " may hold only lower-case letters, digits, '.', '-' and '_' (a name such as "
        "\"example.org\", without scheme, port or path)");
  }
  return Status::Ok();
}

Result<std::string> SpiffeIdForPod(std::string_view trust_domain, const PodInfo& pod) {
  const std::pair<std::string_view, const std::string*> parts[] = {
      {kPodNamespace, &pod.namespace_}, {kServiceAccountName, &pod.service_account}};
  for (const auto& [entry, value] : parts) {
    if (value->empty()) {
      return Status::FailedPrecondition(
          std::string(entry) +
          " is missing: SPIFFE mode builds the identity from kubelet's pod information, which "
          "needs podInfoOnMount: true in the CSIDriver");
    }
    if (!IsPathSegment(*value)) {
      return Status::InvalidArgument(std::string(entry) + ": " + QuoteUserValue(*value) +
                                     " is not a SPIFFE ID path segment");
    }
  }
  std::string id = "spiffe://" + std::string(trust_domain) + "/ns/" + pod.namespace_ + "/sa/" +
                   pod.service_account;
  if (id.size() > kMaxSpiffeIdLength) {
    return Status::InvalidArgument("the pod's SPIFFE ID would be longer than " +
                                   std::to_string(kMaxSpiffeIdLength) + " bytes");
  }
  return id;
}

Result<CertificateSpec> ParseVolumeAttributes(
    const std::map<std::string, std::string>& volume_context,
    std::string_view spiffe_trust_domain) {
  if (spiffe_trust_domain.empty()) return ParseAttributes(volume_context);
  // The key is ECDSA here, so key-size is read as an ECDSA size even when
  // the pod does not name the algorithm (csi-driver's default is RSA).
  std::map<std::string, std::string> context = volume_context;
  std::string& algorithm = context[std::string(kAttributePrefix) + "key-algorithm"];
  if (algorithm.empty()) algorithm = "ECDSA";
  CERTMOUNT_ASSIGN_OR_RETURN(CertificateSpec spec, ParseAttributes(context));
  CERTMOUNT_RETURN_IF_ERROR(CheckSpiffeAttributes(volume_context));
  CERTMOUNT_ASSIGN_OR_RETURN(
      std::string id, SpiffeIdForPod(spiffe_trust_domain, PodInfoFromContext(volume_context)));
  // The attribute checks leave these at their defaults or at the SVID's
  // values already; set all of them anyway, so the SVID never depends on
  // ParseAttributes' defaults.
  spec.subject = Subject{};
  spec.literal_subject.clear();
  spec.dns_names.clear();
  spec.ip_addresses.clear();
  spec.wants_pod_ip = spec.wants_pod_ips = false;
  spec.pod_ip_dns_names.clear();
  spec.pod_ip_readiness_gate = false;
  spec.email_addresses.clear();
  spec.uris = {id};
  spec.is_ca = false;
  spec.usages = {"digital signature", "server auth", "client auth"};
  spec.key_algorithm = KeyAlgorithm::kEcdsa;
  spec.key_size = 256;
  spec.key_encoding = KeyEncoding::kPkcs8;
  spec.reuse_private_key = false;
  auto duration = volume_context.find(std::string(kAttributePrefix) + "duration");
  if (duration == volume_context.end() || duration->second.empty()) {
    spec.duration = kDefaultDuration;
  }
  spec.annotations[std::string(kSpiffeIdentityAnnotation)] = id;
  return spec;
}

}  // namespace certmount
