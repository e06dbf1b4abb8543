// Attribute parsing with cert-manager csi-driver's key names, defaults and
// rules (its pkg/apis/v1alpha1/types.go, defaults, validation and
// requestgen). docs/attributes.md is the reference: one table of every key,
// what certmount does, and each remaining difference with its reason.
// certmount's own additions: email-sans, pkcs12-profile, and the hyphenated
// spellings organizational-units, street-addresses, postal-codes and
// serial-number of csi-driver's keys; in certmount's own domain
// (kCertmountAttributePrefix), credential-bundle-file.
#include "issue/attributes.h"
#include "issue/csi_driver_parser.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "issue/dn.h"
#include "issue/go_duration.h"
#include "issue/go_expand.h"
#include "issue/go_url.h"
#include "issue/key_usages.h"

namespace certmount {
namespace {

using VolumeContext = std::map<std::string, std::string>;

constexpr std::string_view kStoragePrefix = "csi.storage.k8s.io/";

// Attribute names, without kAttributePrefix. certmount's own keys carry
// their domain (kCertmountAttributePrefix) instead; FullKey keeps them as
// they are.
constexpr std::string_view kIssuerName = "issuer-name";
constexpr std::string_view kIssuerKind = "issuer-kind";
constexpr std::string_view kIssuerGroup = "issuer-group";
constexpr std::string_view kCommonName = "common-name";
constexpr std::string_view kLiteralSubject = "literal-subject";
constexpr std::string_view kOrganizations = "organizations";
constexpr std::string_view kOrganizationalUnits = "organizationalunits";
constexpr std::string_view kCountries = "countries";
constexpr std::string_view kProvinces = "provinces";
constexpr std::string_view kLocalities = "localities";
constexpr std::string_view kStreetAddresses = "streetaddresses";
constexpr std::string_view kPostalCodes = "postalcodes";
constexpr std::string_view kSerialNumber = "serialnumber";
constexpr std::string_view kDnsNames = "dns-names";
constexpr std::string_view kIpSans = "ip-sans";
constexpr std::string_view kUriSans = "uri-sans";
constexpr std::string_view kEmailSans = "email-sans";
constexpr std::string_view kDuration = "duration";
constexpr std::string_view kRenewBefore = "renew-before";
constexpr std::string_view kIsCa = "is-ca";
constexpr std::string_view kKeyUsages = "key-usages";
constexpr std::string_view kKeyAlgorithm = "key-algorithm";
constexpr std::string_view kKeySize = "key-size";
constexpr std::string_view kKeyEncoding = "key-encoding";
constexpr std::string_view kReusePrivateKey = "reuse-private-key";
constexpr std::string_view kCertificateFile = "certificate-file";
constexpr std::string_view kPrivateKeyFile = "privatekey-file";
constexpr std::string_view kCaFile = "ca-file";
constexpr std::string_view kFsGroup = "fs-group";
constexpr std::string_view kPkcs12Enable = "pkcs12-enable";
constexpr std::string_view kPkcs12Filename = "pkcs12-filename";
constexpr std::string_view kPkcs12Password = "pkcs12-password";
constexpr std::string_view kPkcs12Profile = "pkcs12-profile";
// certmount's own: csi-driver has no JKS keys (docs/attributes.md).
constexpr std::string_view kJksEnable = "keystore-jks-enable";
constexpr std::string_view kJksFilename = "keystore-jks-filename";
constexpr std::string_view kJksPassword = "keystore-jks-password";
constexpr std::string_view kJksTruststore = "keystore-jks-truststore-filename";
constexpr std::string_view kPodIpReadinessGate = "pod-ip-readiness-gate";

// Every key under kCertmountAttributePrefix that certmount knows.
constexpr std::array<std::string_view, 1> kCertmountAttributes = {kCredentialBundleFileAttribute};

// certmount's earlier hyphenated spellings of csi-driver's keys, still read.
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kAliases = {{
    {kOrganizationalUnits, "organizational-units"},
    {kStreetAddresses, "street-addresses"},
    {kPostalCodes, "postal-codes"},
    {kSerialNumber, "serial-number"},
}};

// Kept on the volume's tmpfs, never in state.db (StorableAttributes).
constexpr std::array<std::string_view, 2> kSecretAttributes = {kPkcs12Password, kJksPassword};

constexpr int64_t kMaxFsGroup = 4294967294;  // 2^32 - 2: (uint32_t)-1 means "no group"
constexpr size_t kMaxFileNameBytes = 255;
constexpr size_t kMaxDnsNameLength = 253;
constexpr size_t kMaxDnsLabelLength = 63;
constexpr std::string_view kNotUtf8 =
    "is not UTF-8 (Go's certificate request builder refuses it too)";

std::string FullKey(std::string_view name) {
  if (name.starts_with(kCertmountAttributePrefix)) return std::string(name);
  return std::string(kAttributePrefix) + std::string(name);
}

// A pod's value in a message: quoted, control characters escaped, bounded.
std::string Quote(std::string_view value) { return QuoteUserValue(value); }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// "<FullKey(name)>: <rule>"
Status Invalid(std::string_view name, std::string_view rule) {
  return Status::InvalidArgument(FullKey(name) + ": " + std::string(rule));
}

// "<FullKey(name)>: "<value>" <rule>"
Status InvalidValue(std::string_view name, std::string_view value, std::string_view rule) {
  return Invalid(name, Quote(value) + " " + std::string(rule));
}

// Every cert-manager key usage name, quoted, in the table's order. (A plain
// loop: clang 14, which builds the fuzzers, cannot compile libstdc++ 12's
// views::transform.)
std::string QuotedKeyUsageNames() {
  std::string joined;
  for (const KeyUsageName& usage : KnownKeyUsages()) {
    joined += joined.empty() ? "" : ", ";
    joined += Quote(usage.name);
  }
  return joined;
}

bool IsAsciiAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// The length of the Unicode white space (Go's unicode.IsSpace) that `s`
// starts with (`from_end` false) or ends with (true), as UTF-8.
size_t SpaceAt(std::string_view s, bool from_end) {
  if (s.empty()) return 0;
  const char ascii = from_end ? s.back() : s.front();
  if (std::string_view(" \t\n\v\f\r").find(ascii) != std::string_view::npos) return 1;
  // U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F,
  // U+3000 in UTF-8.
  static constexpr std::string_view kSpaces[] = {
      "\xC2\x85",     "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81",
      "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86",
      "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xA8",
      "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
  for (std::string_view space : kSpaces) {
    if (from_end ? s.ends_with(space) : s.starts_with(space)) return space.size();
  }
  return 0;
}

// Go's strings.TrimSpace, which csi-driver applies to SAN list items.
std::string_view Trim(std::string_view s) {
  while (size_t n = SpaceAt(s, false)) s.remove_prefix(n);
  while (size_t n = SpaceAt(s, true)) s.remove_suffix(n);
  return s;
}

// csi-driver's splitList for dns-names, ip-sans, uri-sans and key-usages:
// split at every comma, each item trimmed, empty items kept.
std::vector<std::string> SplitTrimmedList(std::string_view list) {
  std::vector<std::string> items;
  size_t pos = 0;
  while (true) {
    const size_t comma = list.find(',', pos);
    items.emplace_back(
        Trim(list.substr(pos, comma == std::string_view::npos ? comma : comma - pos)));
    if (comma == std::string_view::npos) return items;
    pos = comma + 1;
  }
}

// csi-driver's split of the subject lists (organizations and the like): at
// every comma, nothing trimmed, empty items kept, so "a, b" is "a" and " b".
// Extended by CSV quoting: an item whose first character is '"' runs to the
// matching '"' ("" inside is one '"') and must end there, so
// `"Acme, Inc.",Other` is two items. Only such items differ from csi-driver's
// split; every value without an item starting with '"' splits exactly as
// csi-driver splits it. An unterminated quote, or text after a closing
// quote, is an error naming the item.
Result<std::vector<std::string>> SplitSubjectList(std::string_view list) {
  std::vector<std::string> items;
  size_t pos = 0;
  while (true) {
    std::string item;
    size_t end;
    if (pos < list.size() && list[pos] == '"') {
      const size_t start = pos++;
      while (true) {
        if (pos >= list.size()) {
          return Status::InvalidArgument(Quote(list.substr(start)) + " has no closing '\"'");
        }
        if (list[pos] == '"' && pos + 1 < list.size() && list[pos + 1] == '"') {
          item.push_back('"');
          pos += 2;
        } else if (list[pos++] == '"') {
          break;
        } else {
          item.push_back(list[pos - 1]);
        }
      }
      end = std::min(list.find(',', pos), list.size());
      if (end != pos) {
        return Status::InvalidArgument(Quote(list.substr(start, end - start)) +
                                       " has text after its closing '\"'");
      }
    } else {
      end = std::min(list.find(',', pos), list.size());
      item = list.substr(pos, end - pos);
    }
    items.push_back(std::move(item));
    if (end == list.size()) return items;
    pos = end + 1;
  }
}

// Dot-separated RFC 1123 labels whose characters `allowed` accepts (besides
// '-', which may not start or end a label).
bool AreDnsLabels(std::string_view name, bool (*allowed)(char)) {
  if (name.empty() || name.size() > kMaxDnsNameLength) return false;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    std::string_view label =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > kMaxDnsLabelLength) return false;
    for (char c : label) {
      if (!allowed(c) && c != '-') return false;
    }
    if (label.front() == '-' || label.back() == '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// RFC 1123 subdomain, lower case: the prefix of a Kubernetes annotation key.
bool IsDnsSubdomain(std::string_view name) { return AreDnsLabels(name, IsLowerAlnum); }

// The name part of a Kubernetes qualified name.
bool IsQualifiedNamePart(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  if (!IsAsciiAlnum(name.front()) || !IsAsciiAlnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAsciiAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::optional<std::string> CanonicalIp(const std::string& text) {
  unsigned char address[16];
  char canonical[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, text.c_str(), address) == 1) {
    if (inet_ntop(AF_INET, address, canonical, sizeof(canonical)) == nullptr) return std::nullopt;
    return std::string(canonical);
  }
  if (inet_pton(AF_INET6, text.c_str(), address) == 1) {
    // Go's x509 writes an IPv4-mapped address (::ffff:a.b.c.d) as 4 bytes.
    constexpr unsigned char kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(kMappedPrefix, kMappedPrefix + 12, address)) {
      if (inet_ntop(AF_INET, address + 12, canonical, sizeof(canonical)) == nullptr) {
        return std::nullopt;
      }
      return std::string(canonical);
    }
    if (inet_ntop(AF_INET6, address, canonical, sizeof(canonical)) == nullptr) return std::nullopt;
    return std::string(canonical);
  }
  return std::nullopt;
}

bool IsEmailAddress(std::string_view email) {
  size_t at = email.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 == email.size()) return false;
  if (email.find('@', at + 1) != std::string_view::npos) return false;
  return std::none_of(email.begin(), email.end(),
                      [](char c) { return static_cast<unsigned char>(c) <= ' ' || c == 0x7f; });
}

// Escapes an expanded variable for use inside an RFC 4514 value, so a value
// can never add RDNs to a literal subject.
std::string EscapeRfc4514(std::string_view value) {
  std::string escaped;
  for (size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    bool edge_space = c == ' ' && (i == 0 || i + 1 == value.size());
    if (std::string_view(",+\"\\<>;=#").find(c) != std::string_view::npos || edge_space) {
      escaped.push_back('\\');
    }
    escaped.push_back(c);
  }
  return escaped;
}

// The ${...} variables and kubelet's entries behind them.
class Variables {
 public:
  explicit Variables(const VolumeContext& context) {
    for (const auto& [variable, key] : kExpansionVariables) {
      auto it = context.find(std::string(key));
      if (it != context.end() && !it->second.empty()) values_[std::string(variable)] = it->second;
    }
  }

  // Replaces variables the way Go's os.Expand does, which csi-driver uses
  // (SplitForExpansion); special variables ($$, $1, ...) are unknown.
  // `escape` is applied to the substituted text.
  Result<std::string> Expand(std::string_view name, std::string_view value,
                             const std::function<std::string(std::string_view)>& escape) const {
    std::string expanded;
    for (const ExpandPiece& piece : SplitForExpansion(value)) {
      if (!piece.is_variable) {
        expanded.append(piece.text);
        continue;
      }
      CERTMOUNT_ASSIGN_OR_RETURN(std::string substituted, Lookup(name, std::string(piece.text)));
      expanded.append(escape ? escape(substituted) : substituted);
    }
    return expanded;
  }

 private:
  // A known variable's value ("" when kubelet did not send it, as in
  // csi-driver); an unknown one is an error naming the known ones.
  Result<std::string> Lookup(std::string_view name, const std::string& variable) const {
    const bool known = std::any_of(kExpansionVariables.begin(), kExpansionVariables.end(),
                                   [&](const auto& entry) { return entry.first == variable; });
    if (variable == kPodIpVariable || variable == kPodIpsVariable) {
      // Left as a marker in dns-names, for ApplyPodIps to fill in later.
      if (name == kDnsNames) {
        return std::string(variable == kPodIpVariable ? kPodIpMarker : kPodIpsMarker);
      }
      std::string rule = "uses variable ";
      rule.append(QuoteUserValue(variable))
          .append(", which only ")
          .append(FullKey(kIpSans))
          .append(" (as a whole item) and ")
          .append(FullKey(kDnsNames))
          .append(" accept (the pod has no IP yet when its volume is published); ")
          .append(KnownList());
      return Invalid(name, rule);
    }
    if (!known) {
      std::string rule = "uses undefined variable ";
      rule.append(QuoteUserValue(variable)).append("; ").append(KnownList());
      return Invalid(name, rule);
    }
    auto it = values_.find(variable);
    return it == values_.end() ? std::string() : it->second;
  }

  static std::string KnownList() {
    std::string list = "known variables are ";
    for (size_t i = 0; i < kExpansionVariables.size(); ++i) {
      list.append(i == 0 ? "" : ", ").append(kExpansionVariables[i].first);
    }
    return list;
  }

  std::map<std::string, std::string> values_;
};

// Reads the csi.cert-manager.io/ and certmount.io/ attributes of one volume
// context.
class AttributeParser {
 public:
  explicit AttributeParser(const VolumeContext& context) : context_(context), variables_(context) {}

  Result<CertificateSpec> Parse() {
    CertificateSpec spec;
    CERTMOUNT_RETURN_IF_ERROR(CheckKeys(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParseIssuer(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParseSubject(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParseSans(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParseLifetime(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParseUsages(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParseKey(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParseFiles(spec));
    return spec;
  }

 private:
  // The value of FullKey(name), or nullopt when absent or empty.
  // For a key with a hyphenated alias, the alias's value when the key is unset.
  std::optional<std::string> Get(std::string_view name) const {
    auto it = context_.find(FullKey(name));
    if (it != context_.end() && !it->second.empty()) return it->second;
    for (const auto& [key, alias] : kAliases) {
      if (key != name) continue;
      it = context_.find(FullKey(alias));
      if (it != context_.end() && !it->second.empty()) return it->second;
    }
    return std::nullopt;
  }

  // As csi-driver: csi.cert-manager.io/ keys it does not know and keys
  // without a domain are ignored, csi.storage.k8s.io/ keys are kubelet's, and
  // every other key becomes an annotation (which the Kubernetes API requires
  // to be a valid annotation key, so that is checked here). certmount.io/
  // keys are the driver's own: never annotations, and each must be known.
  Status CheckKeys(CertificateSpec& spec) const {
    for (const auto& [key, alias] : kAliases) {
      auto primary = context_.find(FullKey(key));
      auto spelt = context_.find(FullKey(alias));
      if (primary != context_.end() && spelt != context_.end() && !primary->second.empty() &&
          !spelt->second.empty()) {
        return Invalid(key, "is also set as " + FullKey(alias) + "; set only one of them");
      }
    }
    for (const auto& [key, value] : context_) {
      std::string_view k = key;
      if (k.starts_with(kAttributePrefix) || k.starts_with(kStoragePrefix)) continue;
      if (k.starts_with(kCertmountAttributePrefix)) {
        CERTMOUNT_RETURN_IF_ERROR(CheckCertmountKey(key));
        continue;
      }
      size_t slash = k.find('/');
      if (slash == std::string_view::npos) continue;
      if (!IsDnsSubdomain(k.substr(0, slash)) || !IsQualifiedNamePart(k.substr(slash + 1))) {
        return Status::InvalidArgument(
            key +
            ": not a valid Kubernetes annotation key (lower-case DNS prefix, '/', and a name "
            "of at most 63 characters [A-Za-z0-9-_.] beginning and ending alphanumeric)");
      }
      spec.annotations[key] = value;
    }
    return Status::Ok();
  }

  // A key under kCertmountAttributePrefix, whatever its value, must be one
  // certmount knows, so that a misspelt one is reported rather than ignored.
  static Status CheckCertmountKey(const std::string& key) {
    if (std::find(kCertmountAttributes.begin(), kCertmountAttributes.end(), key) !=
        kCertmountAttributes.end()) {
      return Status::Ok();
    }
    std::string known;
    for (std::string_view name : kCertmountAttributes) {
      known.append(known.empty() ? "" : ", ").append(name);
    }
    return Status::InvalidArgument(key + ": unknown certmount attribute; the " +
                                   std::string(kCertmountAttributePrefix) + " keys are " + known);
  }

  Status ParseIssuer(CertificateSpec& spec) const {
    std::optional<std::string> name = Get(kIssuerName);
    if (!name) return Invalid(kIssuerName, "required attribute is missing");
    spec.issuer.name = *name;
    if (auto kind = Get(kIssuerKind)) spec.issuer.kind = *kind;
    if (auto group = Get(kIssuerGroup)) spec.issuer.group = *group;
    return Status::Ok();
  }

  // The attribute's value with variables expanded, as csi-driver's expand.
  Result<std::optional<std::string>> GetExpanded(std::string_view name) const {
    std::optional<std::string> value = Get(name);
    if (!value) return std::optional<std::string>();
    CERTMOUNT_ASSIGN_OR_RETURN(std::string expanded, variables_.Expand(name, *value, nullptr));
    return std::optional<std::string>(std::move(expanded));
  }

  // A SAN list or key-usages: split as csi-driver's splitList
  // (SplitTrimmedList), after expansion unless `expand` is false.
  Result<std::vector<std::string>> GetList(std::string_view name, bool expand = true) const {
    std::optional<std::string> text = Get(name);
    if (text && expand) {
      CERTMOUNT_ASSIGN_OR_RETURN(text, GetExpanded(name));
    }
    if (!text) return std::vector<std::string>();
    return SplitTrimmedList(*text);
  }

  // A subject list: expanded, then split as csi-driver splits it (see
  // SplitSubjectList); every item must be UTF-8, which Go's name encoder
  // requires.
  Result<std::vector<std::string>> GetSubjectList(std::string_view name) const {
    CERTMOUNT_ASSIGN_OR_RETURN(std::optional<std::string> text, GetExpanded(name));
    if (!text) return std::vector<std::string>();
    Result<std::vector<std::string>> items = SplitSubjectList(*text);
    if (!items.ok()) return Invalid(name, items.status().message());
    for (const std::string& item : *items) {
      if (!IsValidUtf8(item)) return InvalidValue(name, item, kNotUtf8);
    }
    return items;
  }

  // As csi-driver: a non-empty literal-subject replaces every subject field,
  // which are then not even read; otherwise the fields are taken without
  // length or format checks (csi-driver has none, and Go writes any UTF-8).
  Status ParseSubject(CertificateSpec& spec) const {
    if (Get(kLiteralSubject)) return ParseLiteralSubject(spec);
    Subject& subject = spec.subject;
    CERTMOUNT_ASSIGN_OR_RETURN(std::optional<std::string> common_name, GetExpanded(kCommonName));
    subject.common_name = common_name.value_or("");
    if (!IsValidUtf8(subject.common_name)) {
      return InvalidValue(kCommonName, subject.common_name, kNotUtf8);
    }
    CERTMOUNT_ASSIGN_OR_RETURN(subject.organizations, GetSubjectList(kOrganizations));
    CERTMOUNT_ASSIGN_OR_RETURN(subject.organizational_units, GetSubjectList(kOrganizationalUnits));
    CERTMOUNT_ASSIGN_OR_RETURN(subject.countries, GetSubjectList(kCountries));
    CERTMOUNT_ASSIGN_OR_RETURN(subject.provinces, GetSubjectList(kProvinces));
    CERTMOUNT_ASSIGN_OR_RETURN(subject.localities, GetSubjectList(kLocalities));
    CERTMOUNT_ASSIGN_OR_RETURN(subject.street_addresses, GetSubjectList(kStreetAddresses));
    CERTMOUNT_ASSIGN_OR_RETURN(subject.postal_codes, GetSubjectList(kPostalCodes));
    subject.serial_number = Get(kSerialNumber).value_or("");  // csi-driver does not expand it
    if (!IsValidUtf8(subject.serial_number)) {
      return InvalidValue(kSerialNumber, subject.serial_number, kNotUtf8);
    }
    return Status::Ok();
  }

  Status ParseLiteralSubject(CertificateSpec& spec) const {
    CERTMOUNT_ASSIGN_OR_RETURN(
        spec.literal_subject,
        variables_.Expand(kLiteralSubject, *Get(kLiteralSubject), EscapeRfc4514));
    Result<std::vector<RdnAttribute>> parsed = ParseRfc4514(spec.literal_subject);
    if (!parsed.ok()) {
      return InvalidValue(kLiteralSubject, spec.literal_subject,
                          "is not an RFC 4514 distinguished name: " + parsed.status().message());
    }
    return Status::Ok();
  }

  // No identity is required (csi-driver requires none). DNS names are taken
  // as csi-driver takes them, without RFC 1123 or length checks, but must be
  // ASCII: Go's x509 refuses any other dNSName, so csi-driver fails too.
  Status ParseSans(CertificateSpec& spec) const {
    CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> dns_names, GetList(kDnsNames));
    for (std::string& name : dns_names) {
      if (std::any_of(name.begin(), name.end(),
                      [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
        return InvalidValue(kDnsNames, name,
                            "is not ASCII; a dNSName is an IA5String (csi-driver refuses it too)");
      }
      // Expansion alone writes a marker: '$' followed by '{' always starts a
      // reference, so no other text or kubelet value can spell one.
      const bool templated = name.find(kPodIpMarker) != std::string::npos ||
                             name.find(kPodIpsMarker) != std::string::npos;
      (templated ? spec.pod_ip_dns_names : spec.dns_names).push_back(std::move(name));
    }
    CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> ips, GetList(kIpSans, /*expand=*/false));
    for (const std::string& ip : ips) {
      if (ip == "${POD_IP}" || ip == "$POD_IP") {
        spec.wants_pod_ip = true;
        continue;
      }
      if (ip == "${POD_IPS}" || ip == "$POD_IPS") {
        spec.wants_pod_ips = true;
        continue;
      }
      std::optional<std::string> canonical = CanonicalIp(ip);
      if (!canonical) return InvalidValue(kIpSans, ip, "is not an IPv4 or IPv6 address");
      spec.ip_addresses.push_back(*canonical);
    }
    CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> uris, GetList(kUriSans));
    for (const std::string& uri : uris) {
      Result<std::string> written = GoRequestUri(uri);
      if (!written.ok()) {
        std::string rule =
            "is not a URI Go's url.ParseRequestURI accepts (e.g. "
            "\"spiffe://cluster.local/ns/a\" or \"/path\"): ";
        rule.append(written.status().message());
        return InvalidValue(kUriSans, uri, rule);
      }
      spec.uris.push_back(*written);
    }
    CERTMOUNT_ASSIGN_OR_RETURN(spec.pod_ip_readiness_gate, GetBool(kPodIpReadinessGate, false));
    if (spec.pod_ip_readiness_gate && !UsesPodIps(spec)) {
      return Invalid(kPodIpReadinessGate, "needs ${POD_IP} or ${POD_IPS} in " + FullKey(kIpSans) +
                                              " or " + FullKey(kDnsNames) +
                                              "; without them there is nothing to wait for");
    }
    CERTMOUNT_ASSIGN_OR_RETURN(spec.email_addresses, GetList(kEmailSans));
    for (const std::string& email : spec.email_addresses) {
      if (!IsEmailAddress(email)) {
        return InvalidValue(kEmailSans, email,
                            "is not an email address (one '@' with text on both sides)");
      }
    }
    return Status::Ok();
  }

  Result<std::chrono::nanoseconds> GetDuration(std::string_view name,
                                               std::string_view value) const {
    Result<std::chrono::nanoseconds> parsed = ParseGoDuration(value);
    if (!parsed.ok()) {
      return InvalidValue(
          name, value,
          "is not a Go duration (e.g. \"2160h\", \"1h30m\"): " + parsed.status().message());
    }
    return parsed;
  }

  // Go durations, fractions included. renew-before takes any value, as in
  // csi-driver (see NextIssuanceAt); a duration must be positive.
  Status ParseLifetime(CertificateSpec& spec) const {
    if (auto duration = Get(kDuration)) {
      CERTMOUNT_ASSIGN_OR_RETURN(spec.duration, GetDuration(kDuration, *duration));
      if (spec.duration <= std::chrono::nanoseconds(0)) {
        // csi-driver requests it, and the issuer returns a certificate that
        // has already expired, which is then reissued without pause.
        return InvalidValue(kDuration, *duration,
                            "must be greater than 0 (a certificate that is expired when "
                            "issued would be reissued in a loop)");
      }
    }
    if (auto renew_before = Get(kRenewBefore)) {
      CERTMOUNT_ASSIGN_OR_RETURN(spec.renew_before, GetDuration(kRenewBefore, *renew_before));
    }
    return Status::Ok();
  }

  Result<bool> GetBool(std::string_view name, bool fallback) const {
    std::optional<std::string> value = Get(name);
    if (!value) return fallback;
    if (*value == "true") return true;
    if (*value == "false") return false;
    return InvalidValue(name, *value, "must be \"true\" or \"false\"");
  }

  Status ParseUsages(CertificateSpec& spec) const {
    CERTMOUNT_ASSIGN_OR_RETURN(spec.is_ca, GetBool(kIsCa, false));
    if (!Get(kKeyUsages)) return Status::Ok();
    spec.usages.clear();
    CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> listed,
                               GetList(kKeyUsages, /*expand=*/false));
    for (const std::string& usage : listed) {
      if (FindKeyUsage(usage, NameMatch::kExact) == nullptr) {
        return InvalidValue(
            kKeyUsages, usage,
            "is not a cert-manager key usage; known usages are " + QuotedKeyUsageNames());
      }
      if (std::find(spec.usages.begin(), spec.usages.end(), usage) == spec.usages.end()) {
        spec.usages.push_back(usage);
      }
    }
    return Status::Ok();
  }

  // csi-driver's key defaults: RSA 2048 PKCS#1 without key attributes;
  // ECDSA P-256 and Ed25519 in PKCS#8, which is their only form here as
  // there. Algorithm and encoding names match in any case.
  Status ParseKey(CertificateSpec& spec) const {
    spec.key_algorithm = KeyAlgorithm::kRsa;
    if (auto algorithm = Get(kKeyAlgorithm)) {
      if (EqualsIgnoringCase(*algorithm, "RSA")) {
        spec.key_algorithm = KeyAlgorithm::kRsa;
      } else if (EqualsIgnoringCase(*algorithm, "ECDSA")) {
        spec.key_algorithm = KeyAlgorithm::kEcdsa;
      } else if (EqualsIgnoringCase(*algorithm, "Ed25519")) {
        spec.key_algorithm = KeyAlgorithm::kEd25519;
      } else {
        return InvalidValue(kKeyAlgorithm, *algorithm,
                            "is not a key algorithm; use \"RSA\", \"ECDSA\" or \"Ed25519\"");
      }
    }
    const bool rsa = spec.key_algorithm == KeyAlgorithm::kRsa;
    spec.key_encoding = rsa ? KeyEncoding::kPkcs1 : KeyEncoding::kPkcs8;
    if (auto encoding = Get(kKeyEncoding)) {
      if (EqualsIgnoringCase(*encoding, "PKCS1")) {
        if (!rsa) {
          return InvalidValue(kKeyEncoding, *encoding,
                              "is only for RSA keys; ECDSA and Ed25519 keys use \"PKCS8\"");
        }
        spec.key_encoding = KeyEncoding::kPkcs1;
      } else if (EqualsIgnoringCase(*encoding, "PKCS8")) {
        spec.key_encoding = KeyEncoding::kPkcs8;
      } else {
        return InvalidValue(kKeyEncoding, *encoding, "must be \"PKCS1\" or \"PKCS8\"");
      }
    }
    CERTMOUNT_RETURN_IF_ERROR(ParseKeySize(spec));
    CERTMOUNT_ASSIGN_OR_RETURN(spec.reuse_private_key, GetBool(kReusePrivateKey, false));
    return Status::Ok();
  }

  Status ParseKeySize(CertificateSpec& spec) const {
    std::optional<std::string> text = Get(kKeySize);
    if (spec.key_algorithm == KeyAlgorithm::kEd25519) {
      if (text) {
        return InvalidValue(kKeySize, *text,
                            "must be empty for Ed25519 keys, which have a fixed size");
      }
      spec.key_size = 0;
      return Status::Ok();
    }
    const bool rsa = spec.key_algorithm == KeyAlgorithm::kRsa;
    spec.key_size = rsa ? 2048 : 256;
    if (text) {
      // Go's strconv.Atoi: an optional sign, then decimal digits.
      std::string_view digits = *text;
      if (digits.starts_with('+')) digits.remove_prefix(1);
      if (digits.empty() || digits.size() > 6 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return InvalidValue(kKeySize, *text, "is not a key size in bits");
      }
      spec.key_size = std::stoi(std::string(digits));
    }
    if (rsa && (spec.key_size < 2048 || spec.key_size > 8192)) {
      return InvalidValue(kKeySize, std::to_string(spec.key_size),
                          "must be between 2048 and 8192 for RSA keys");
    }
    if (!rsa && spec.key_size != 256 && spec.key_size != 384 && spec.key_size != 521) {
      return InvalidValue(kKeySize, std::to_string(spec.key_size),
                          "must be 256, 384 or 521 for ECDSA keys");
    }
    return Status::Ok();
  }

  // A file name inside the volume, or `fallback` when the attribute is unset.
  Result<std::string> GetFileName(std::string_view name, const std::string& fallback) const {
    std::optional<std::string> value = Get(name);
    if (!value) return fallback;
    const std::string& file = *value;
    if (file.find('/') != std::string::npos) {
      return InvalidValue(name, file, "must be a plain file name without '/'");
    }
    if (file == "." || file.starts_with("..")) {
      return InvalidValue(name, file, "must not be \".\" or start with \"..\"");
    }
    if (file.size() > kMaxFileNameBytes) {
      return InvalidValue(name, file, "must be at most 255 bytes long");
    }
    if (file != Trim(file)) {
      return InvalidValue(name, file, "must not begin or end with whitespace");
    }
    if (file.find('\0') != std::string::npos) {
      return InvalidValue(name, file, "must not contain NUL characters");
    }
    return file;
  }

  Status ParseFiles(CertificateSpec& spec) const {
    CERTMOUNT_ASSIGN_OR_RETURN(spec.certificate_file,
                               GetFileName(kCertificateFile, spec.certificate_file));
    CERTMOUNT_ASSIGN_OR_RETURN(spec.private_key_file,
                               GetFileName(kPrivateKeyFile, spec.private_key_file));
    CERTMOUNT_ASSIGN_OR_RETURN(spec.ca_file, GetFileName(kCaFile, spec.ca_file));
    CERTMOUNT_ASSIGN_OR_RETURN(
        spec.credential_bundle_file,
        GetFileName(kCredentialBundleFileAttribute, spec.credential_bundle_file));
    CERTMOUNT_RETURN_IF_ERROR(ParseFsGroup(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParsePkcs12(spec));
    CERTMOUNT_RETURN_IF_ERROR(ParseJks(spec));
    return CheckFileNamesDiffer(spec);
  }

  Status ParseFsGroup(CertificateSpec& spec) const {
    auto fs_group = Get(kFsGroup);
    if (!fs_group) return Status::Ok();
    bool digits =
        fs_group->size() <= 10 && std::all_of(fs_group->begin(), fs_group->end(),
                                              [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoll(*fs_group) > kMaxFsGroup) {
      return InvalidValue(kFsGroup, *fs_group, "must be a group ID between 0 and 4294967294");
    }
    spec.fs_group = static_cast<uint32_t>(std::stoll(*fs_group));
    return Status::Ok();
  }

  // As csi-driver's pkcs12-*: once `enable` is set, "true" or "false", a
  // password is required; without it the keystore's other attributes
  // (`password`, `filename` and `others`) are errors. Returns whether
  // `enable` is set.
  Result<bool> ParseKeystore(std::string_view enable, std::string_view filename,
                             std::string_view password,
                             std::initializer_list<std::string_view> others, bool& enabled,
                             std::string& file, std::string& secret) const {
    if (!Get(enable)) {
      std::vector<std::string_view> dependents = {filename, password};
      dependents.insert(dependents.end(), others);
      for (std::string_view name : dependents) {
        if (Get(name)) return Invalid(name, "requires " + FullKey(enable) + " to be set");
      }
      return false;
    }
    CERTMOUNT_ASSIGN_OR_RETURN(enabled, GetBool(enable, false));
    CERTMOUNT_ASSIGN_OR_RETURN(file, GetFileName(filename, file));
    if (auto value = Get(password)) secret = *value;
    if (secret.empty()) return Invalid(password, "required when " + FullKey(enable) + " is set");
    return true;
  }

  // csi-driver's PKCS#12 keys, plus certmount's pkcs12-profile.
  Status ParsePkcs12(CertificateSpec& spec) const {
    CERTMOUNT_ASSIGN_OR_RETURN(
        bool set, ParseKeystore(kPkcs12Enable, kPkcs12Filename, kPkcs12Password, {kPkcs12Profile},
                                spec.pkcs12_enable, spec.pkcs12_filename, spec.pkcs12_password));
    auto profile = Get(kPkcs12Profile);
    if (!set || !profile) return Status::Ok();
    if (*profile == "LegacyRC2") {
      spec.pkcs12_profile = Pkcs12Profile::kLegacyRc2;
    } else if (*profile == "LegacyDES") {
      spec.pkcs12_profile = Pkcs12Profile::kLegacyDes;
    } else if (*profile == "Modern2023") {
      spec.pkcs12_profile = Pkcs12Profile::kModern2023;
    } else {
      return InvalidValue(kPkcs12Profile, *profile,
                          "is not a PKCS#12 profile; use \"LegacyRC2\", \"LegacyDES\" or "
                          "\"Modern2023\" (cert-manager's names)");
    }
    return Status::Ok();
  }

  // certmount's JKS keys, parsed as the PKCS#12 ones; the truststore comes
  // with the keystore.
  Status ParseJks(CertificateSpec& spec) const {
    CERTMOUNT_ASSIGN_OR_RETURN(
        bool set, ParseKeystore(kJksEnable, kJksFilename, kJksPassword, {kJksTruststore},
                                spec.jks_enable, spec.jks_filename, spec.jks_password));
    if (!set) return Status::Ok();
    CERTMOUNT_ASSIGN_OR_RETURN(spec.jks_truststore_filename,
                               GetFileName(kJksTruststore, spec.jks_truststore_filename));
    if (!IsValidUtf8(spec.jks_password)) return Invalid(kJksPassword, "must be UTF-8");
    return Status::Ok();
  }

  Status CheckFileNamesDiffer(const CertificateSpec& spec) const {
    std::vector<std::pair<std::string_view, const std::string*>> files = {
        {kCertificateFile, &spec.certificate_file},
        {kPrivateKeyFile, &spec.private_key_file},
        {kCaFile, &spec.ca_file}};
    if (Get(kPkcs12Enable)) files.emplace_back(kPkcs12Filename, &spec.pkcs12_filename);
    if (Get(kJksEnable)) {
      files.emplace_back(kJksFilename, &spec.jks_filename);
      files.emplace_back(kJksTruststore, &spec.jks_truststore_filename);
    }
    if (!spec.credential_bundle_file.empty()) {
      files.emplace_back(kCredentialBundleFileAttribute, &spec.credential_bundle_file);
    }
    for (size_t i = 0; i < files.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (*files[i].second == *files[j].second) {
          return InvalidValue(
              files[i].first, *files[i].second,
              "is also the file name of " + FullKey(files[j].first) + "; the files must differ");
        }
      }
    }
    return Status::Ok();
  }

  const VolumeContext& context_;
  Variables variables_;
};

}  // namespace

PodInfo PodInfoFromContext(const std::map<std::string, std::string>& volume_context) {
  auto lookup = [&](std::string_view key) {
    auto it = volume_context.find(std::string(key));
    return it == volume_context.end() ? std::string() : it->second;
  };
  PodInfo pod;
  pod.name = lookup(kPodName);
  pod.namespace_ = lookup(kPodNamespace);
  pod.uid = lookup(kPodUid);
  pod.service_account = lookup(kServiceAccountName);
  return pod;
}

Result<CertificateSpec> ParseAttributes(const std::map<std::string, std::string>& volume_context) {
  return AttributeParser(volume_context).Parse();
}

bool UsesPodIps(const CertificateSpec& spec) {
  return spec.wants_pod_ip || spec.wants_pod_ips || !spec.pod_ip_dns_names.empty();
}

std::string PodIpsAttributeKey(const CertificateSpec& spec) {
  return FullKey(spec.wants_pod_ip || spec.wants_pod_ips ? kIpSans : kDnsNames);
}

namespace {

void AddOnce(std::vector<std::string>& list, std::string item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(std::move(item));
}

// `text` with every `marker` replaced by `value`.
std::string ReplaceAll(std::string text, std::string_view marker, std::string_view value) {
  for (size_t at = text.find(marker); at != std::string::npos;
       at = text.find(marker, at + value.size())) {
    text.replace(at, marker.size(), value);
  }
  return text;
}

// An address as one DNS label: "10.244.1.7" is "10-244-1-7".
std::string DnsLabel(std::string address) {
  std::replace_if(
      address.begin(), address.end(), [](char c) { return c == '.' || c == ':'; }, '-');
  return address;
}

}  // namespace

Status ApplyPodIps(CertificateSpec& spec, const std::vector<std::string>& pod_ips) {
  std::vector<std::string> canonical_ips;
  for (const std::string& ip : pod_ips) {
    std::optional<std::string> canonical = CanonicalIp(ip);
    if (!canonical) {
      return Status::InvalidArgument("the pod's IP " + QuoteUserValue(ip) +
                                     " is not an IPv4 or IPv6 address");
    }
    canonical_ips.push_back(std::move(*canonical));
  }
  if (canonical_ips.empty()) return Status::Ok();
  if (spec.wants_pod_ips) {
    for (const std::string& ip : canonical_ips) AddOnce(spec.ip_addresses, ip);
  } else if (spec.wants_pod_ip) {
    AddOnce(spec.ip_addresses, canonical_ips.front());
  }
  const std::string first_label = DnsLabel(canonical_ips.front());
  for (const std::string& item : spec.pod_ip_dns_names) {
    const bool per_address = item.find(kPodIpsMarker) != std::string::npos;
    for (size_t i = 0; i < (per_address ? canonical_ips.size() : 1); ++i) {
      const std::string name = ReplaceAll(
          ReplaceAll(item, kPodIpsMarker, DnsLabel(canonical_ips[i])), kPodIpMarker, first_label);
      AddOnce(spec.dns_names, name);
    }
  }
  return Status::Ok();
}

std::map<std::string, std::string> StorableAttributes(
    const std::map<std::string, std::string>& volume_context) {
  std::map<std::string, std::string> storable = volume_context;
  storable.erase(std::string(kServiceAccountTokens));
  for (std::string_view secret : kSecretAttributes) storable.erase(FullKey(secret));
  return storable;
}

std::map<std::string, std::string> SecretAttributes(
    const std::map<std::string, std::string>& volume_context) {
  std::map<std::string, std::string> secrets;
  for (std::string_view secret : kSecretAttributes) {
    auto it = volume_context.find(FullKey(secret));
    if (it != volume_context.end()) secrets.insert(*it);
  }
  return secrets;
}

Result<std::string> ServiceAccountToken(const std::map<std::string, std::string>& volume_context) {
  auto it = volume_context.find(std::string(kServiceAccountTokens));
  if (it == volume_context.end() || it->second.empty()) {
    return Status::NotFound(std::string(kServiceAccountTokens) +
                            " is missing: the CSIDriver needs tokenRequests for "
                            "--use-token-request");
  }
  nlohmann::json tokens = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!tokens.is_object() || tokens.empty()) {
    return Status::InvalidArgument(std::string(kServiceAccountTokens) +
                                   " is not a JSON object of audience to token");
  }
  const nlohmann::json* entry = nullptr;
  if (tokens.contains("")) {
    entry = &tokens[""];
  } else if (tokens.size() == 1) {
    entry = &tokens.begin().value();
  } else {
    return Status::InvalidArgument(std::string(kServiceAccountTokens) +
                                   " has several audiences and none is \"\"");
  }
  if (!entry->is_object() || !entry->contains("token") || !(*entry)["token"].is_string() ||
      (*entry)["token"].get<std::string>().empty()) {
    return Status::InvalidArgument(std::string(kServiceAccountTokens) + " holds no token");
  }
  return (*entry)["token"].get<std::string>();
}

}  // namespace certmount
