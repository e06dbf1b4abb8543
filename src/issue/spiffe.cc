#include "issue/spiffe.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <optional>

#include "common/logging.h"
#include "issue/attributes.h"
#include "issue/go_duration.h"

namespace certmount {
namespace {

using namespace std::string_view_literals;

constexpr std::string_view kSpiffePrefix = "spiffe.csi.cert-manager.io/";
constexpr size_t kMaxTrustDomainLength = 255;  // SPIFFE ID spec, section 2.1
constexpr size_t kMaxSpiffeIdLength = 2048;    // SPIFFE ID spec, section 2.3

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
// as in the csi-driver parser. csi-driver-spiffe's fs-group is read by
// SpiffeFsGroup.
Status CheckSpiffeAttributes(const std::map<std::string, std::string>& volume_context) {
  for (const auto& [key, value] : volume_context) {
    std::string_view k = key;
    if (k.starts_with(kSpiffePrefix) && k != kSpiffeFsGroupAttribute) {
      return Status::InvalidArgument(
          KeyInMessage(key) +
          ": the only spiffe.csi.cert-manager.io/ attribute is fs-group; the others are the "
          "driver's (the identity annotation)");
    }
    if (value.empty() || !k.starts_with(kAttributePrefix)) continue;
    if (std::optional<std::string> reason =
            RefusalReason(k.substr(kAttributePrefix.size()), value)) {
      return Status::InvalidArgument(KeyInMessage(key) +
                                     ": not allowed with --spiffe-trust-domain: " + *reason);
    }
  }
  return Status::Ok();
}

// spiffe.csi.cert-manager.io/fs-group read as csi-driver-spiffe reads it: a
// base-10 integer with an optional sign (leading zeros allowed, as Go's
// strconv.ParseInt), present means set (an empty value is refused), and
// greater than 0. csi-driver-spiffe also takes 4294967295, which chown reads
// as "leave the group": refused here, since the pod would silently get no
// group.
Result<uint32_t> SpiffeFsGroup(std::string_view text) {
  auto invalid = [&](std::string_view why) {
    return Status::InvalidArgument(std::string(kSpiffeFsGroupAttribute) + ": " +
                                   QuoteUserValue(text) + " " + std::string(why));
  };
  std::string_view digits = text;
  const bool negative = !digits.empty() && digits.front() == '-';
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return invalid("must be a valid integer");
  }
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  uint64_t value = 0;
  if (digits.size() <= 10) {
    for (char c : digits) value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (negative || value == 0) return invalid("must be greater than 0");
  if (digits.size() > 10 || value >= 4294967295u) {
    return invalid("must be a group ID below 4294967295");
  }
  return static_cast<uint32_t>(value);
}

// The pod's value of csi.cert-manager.io/<name>; empty when not set.
std::string PodValue(const std::map<std::string, std::string>& context, std::string_view name) {
  auto it = context.find(std::string(kAttributePrefix) + std::string(name));
  return it == context.end() ? std::string() : it->second;
}

// Fills the issuer into `context`: the driver's when it names one (a pod's
// issuer-* must then be absent or equal), else the pod's own.
Status FillIssuer(const SpiffeSettings& settings, std::map<std::string, std::string>& context) {
  const std::pair<std::string_view, const std::string*> fields[] = {
      {"issuer-name", &settings.issuer.name},
      {"issuer-kind", &settings.issuer.kind},
      {"issuer-group", &settings.issuer.group}};
  if (settings.issuer.name.empty()) {
    if (!PodValue(context, "issuer-name").empty()) return Status::Ok();
    if (settings.issuer_required) {
      return Status::InvalidArgument(
          "csi.cert-manager.io/issuer-name: required attribute is missing: name the issuer on "
          "the driver (--spiffe-issuer-name) or in the pod");
    }
    // The local CA signs every request itself; the name is never used.
    context[std::string(kAttributePrefix) + "issuer-name"] = "local-ca";
    return Status::Ok();
  }
  for (const auto& [name, value] : fields) {
    const std::string pod = PodValue(context, name);
    if (!pod.empty() && pod != *value) {
      return Status::InvalidArgument(
          std::string(kAttributePrefix) + std::string(name) + ": " + QuoteUserValue(pod) +
          " differs from the driver's SPIFFE issuer, " + settings.issuer.kind + " \"" +
          settings.issuer.name + "\" of " + settings.issuer.group +
          " (--spiffe-issuer-name, -kind, -group), which every SPIFFE volume uses");
    }
    context[std::string(kAttributePrefix) + std::string(name)] = *value;
  }
  return Status::Ok();
}

// Fills the lifetime: the pod's, when it is not longer than the driver's,
// else the driver's. A pod value that does not parse is left for the
// csi-driver parser to refuse with its own message.
Status FillDuration(const SpiffeSettings& settings, std::map<std::string, std::string>& context) {
  const std::string pod = PodValue(context, "duration");
  if (pod.empty()) {
    context[std::string(kAttributePrefix) + "duration"] = FormatGoDuration(settings.duration);
    return Status::Ok();
  }
  Result<std::chrono::nanoseconds> asked = ParseGoDuration(pod);
  if (asked.ok() && *asked > settings.duration) {
    return Status::InvalidArgument(
        std::string(kAttributePrefix) + "duration: " + QuoteUserValue(pod) +
        " is longer than the driver's " + FormatGoDuration(settings.duration) +
        " (--spiffe-certificate-duration)");
  }
  return Status::Ok();
}

// Moves spiffe.csi.cert-manager.io/fs-group to csi.cert-manager.io/fs-group,
// which must then be absent or the same group.
Status FillFsGroup(std::map<std::string, std::string>& context) {
  auto spiffe = context.find(std::string(kSpiffeFsGroupAttribute));
  if (spiffe == context.end()) return Status::Ok();
  CERTMOUNT_ASSIGN_OR_RETURN(uint32_t group, SpiffeFsGroup(spiffe->second));
  context.erase(spiffe);
  std::string& csi = context[std::string(kAttributePrefix) + "fs-group"];
  if (!csi.empty() && csi != std::to_string(group)) {
    return Status::InvalidArgument(
        std::string(kAttributePrefix) + "fs-group: " + QuoteUserValue(csi) +
        " names another group than " + std::string(kSpiffeFsGroupAttribute) + "; set only one");
  }
  csi = std::to_string(group);
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

Result<std::map<std::string, std::string>> SpiffeAttributeContext(
    const std::map<std::string, std::string>& volume_context, const SpiffeSettings& settings) {
  CERTMOUNT_RETURN_IF_ERROR(CheckSpiffeAttributes(volume_context));
  std::map<std::string, std::string> context = volume_context;
  // The key is ECDSA here, so key-size is read as an ECDSA size even when
  // the pod does not name the algorithm (csi-driver's default is RSA).
  std::string& algorithm = context[std::string(kAttributePrefix) + "key-algorithm"];
  if (algorithm.empty()) algorithm = "ECDSA";
  CERTMOUNT_RETURN_IF_ERROR(FillIssuer(settings, context));
  CERTMOUNT_RETURN_IF_ERROR(FillDuration(settings, context));
  CERTMOUNT_RETURN_IF_ERROR(FillFsGroup(context));
  const std::pair<std::string_view, const std::string*> files[] = {
      {"certificate-file", &settings.certificate_file},
      {"privatekey-file", &settings.private_key_file},
      {"ca-file", &settings.ca_file}};
  for (const auto& [name, value] : files) {
    std::string& file = context[std::string(kAttributePrefix) + std::string(name)];
    if (file.empty()) file = *value;
  }
  return context;
}

Status MakeSvid(const std::map<std::string, std::string>& volume_context,
                const SpiffeSettings& settings, CertificateSpec& spec) {
  CERTMOUNT_ASSIGN_OR_RETURN(
      std::string id, SpiffeIdForPod(settings.trust_domain, PodInfoFromContext(volume_context)));
  // The attribute checks leave these at their defaults or at the SVID's
  // values already; set all of them anyway, so the SVID never depends on
  // the csi-driver parser's defaults.
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
  if (settings.key_encipherment) spec.usages.insert(spec.usages.begin() + 1, "key encipherment");
  spec.key_algorithm = KeyAlgorithm::kEcdsa;
  spec.key_size = 256;
  spec.key_encoding = KeyEncoding::kPkcs8;
  spec.reuse_private_key = false;
  spec.annotations[std::string(kSpiffeIdentityAnnotation)] = id;
  return Status::Ok();
}

}  // namespace certmount
