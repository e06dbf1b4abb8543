#include "support/spiffe_approver.h"

#include <arpa/inet.h>
#include <openssl/objects.h>
#include <openssl/pem.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "issue/go_duration.h"
#include "issue/go_url.h"
#include "issue/openssl_ptr.h"
#include "kube/base64.h"

namespace certmount::testing {
namespace {

using nlohmann::json;

// ---- JSON read without exceptions ------------------------------------------------

// `object[key]`, or null when `object` is not an object or lacks it.
const json& Member(const json& object, const char* key) {
  static const json kAbsent;
  if (!object.is_object()) return kAbsent;
  auto it = object.find(key);
  return it == object.end() ? kAbsent : *it;
}

// `object[key]` when it is a string, else "" (as Go decodes an absent one).
std::string StringMember(const json& object, const char* key) {
  const json& value = Member(object, key);
  return value.is_string() ? value.get<std::string>() : std::string();
}

bool HasTrueCondition(const json& request, const char* type) {
  const json& conditions = Member(Member(request, "status"), "conditions");
  if (!conditions.is_array()) return false;
  return std::any_of(conditions.begin(), conditions.end(), [&](const json& condition) {
    return StringMember(condition, "type") == type && StringMember(condition, "status") == "True";
  });
}

std::string Quoted(const std::string& text) { return "\"" + text + "\""; }

std::string Joined(const std::vector<std::string>& items, const char* separator) {
  std::string joined;
  for (const std::string& item : items) {
    if (!joined.empty()) joined += separator;
    joined += item;
  }
  return joined;
}

// ---- which requests are decided ---------------------------------------------------

std::string IssuerText(const std::string& name, const std::string& kind, const std::string& group) {
  return name + " (kind " + Quoted(kind) + ", group " + Quoted(group) + ")";
}

// Why the approver leaves `request` alone, or nullopt when it decides it.
std::optional<std::string> WhyNotForThisApprover(const json& request,
                                                 const SpiffeApproverConfig& config) {
  if (HasTrueCondition(request, "Approved")) return "already approved";
  if (HasTrueCondition(request, "Denied")) return "already denied";
  const json& issuer = Member(Member(request, "spec"), "issuerRef");
  const std::string name = StringMember(issuer, "name");
  const std::string kind = StringMember(issuer, "kind");
  const std::string group = StringMember(issuer, "group");
  const IssuerRef& wanted = config.issuer_ref;
  if (name != wanted.name || kind != wanted.kind || group != wanted.group) {
    return "spec.issuerRef is " + IssuerText(name, kind, group) + ", not " +
           IssuerText(wanted.name, wanted.kind, wanted.group);
  }
  if (Member(Member(Member(request, "metadata"), "annotations"), kSpiffeApproverIdentityAnnotation)
          .is_null()) {
    return std::string("no ") + kSpiffeApproverIdentityAnnotation + " annotation";
  }
  return std::nullopt;
}

// ---- rule 1: the CSR as Go's crypto/x509 parses it --------------------------------

struct ParsedCsr {
  X509ReqPtr request;
  X509ExtensionStackPtr extensions;  // those of the extension request
  std::vector<std::string> dns_names;
  std::vector<std::string> email_addresses;
  std::vector<std::string> ip_addresses;  // as text
  std::vector<std::string> uris;
  std::string common_name;  // the last CN, as Go's pkix.Name keeps it
};

Status Unparsable(const std::string& what) {
  return Status::InvalidArgument("spec.request is not a certificate request Go can parse: " + what);
}

std::string Asn1Text(const ASN1_STRING* text) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                     static_cast<size_t>(ASN1_STRING_length(text)));
}

std::string ObjectText(const ASN1_OBJECT* object) {
  char buffer[128];
  OBJ_obj2txt(buffer, sizeof(buffer), object, 1);
  return buffer;
}

// The DER of the first PEM block in `text`, whatever its label (cert-manager
// decodes the request with pem.Decode and does not look at the label).
Result<std::string> FirstPemBlock(const std::string& text) {
  BioPtr bio = MemoryBio(text.data(), text.size());
  char* label = nullptr;
  char* header = nullptr;
  unsigned char* data = nullptr;
  long length = 0;
  if (PEM_read_bio(bio.get(), &label, &header, &data, &length) != 1) {
    DrainOpensslErrors();
    return Unparsable("no PEM block");
  }
  std::string der(reinterpret_cast<const char*>(data), static_cast<size_t>(length));
  OPENSSL_free(label);
  OPENSSL_free(header);
  OPENSSL_free(data);
  return der;
}

Result<X509ReqPtr> DecodeRequest(const std::string& der) {
  const auto* begin = reinterpret_cast<const unsigned char*>(der.data());
  const unsigned char* end = begin;
  X509ReqPtr request(d2i_X509_REQ(nullptr, &end, static_cast<long>(der.size())));
  if (request == nullptr) return Unparsable(OpensslFailure("not PKCS#10"));
  if (end != begin + der.size()) return Unparsable("trailing data after the PKCS#10 structure");
  return request;
}

// Moves every extension of `from` to the end of `to`.
void AppendExtensions(STACK_OF(X509_EXTENSION) * to, X509ExtensionStackPtr from) {
  while (sk_X509_EXTENSION_num(from.get()) > 0) {
    sk_X509_EXTENSION_push(to, sk_X509_EXTENSION_shift(from.get()));
  }
}

// The extensions of every extensionRequest attribute (its first value), as
// Go collects them; unlike OpenSSL's X509_REQ_get_extensions, Microsoft's
// attribute is not read.
Result<X509ExtensionStackPtr> RequestedExtensions(const X509_REQ* request) {
  X509ExtensionStackPtr all(sk_X509_EXTENSION_new_null());
  for (int i = 0; i < X509_REQ_get_attr_count(request); ++i) {
    X509_ATTRIBUTE* attribute = X509_REQ_get_attr(request, i);
    if (OBJ_obj2nid(X509_ATTRIBUTE_get0_object(attribute)) != NID_ext_req) continue;
    if (X509_ATTRIBUTE_count(attribute) == 0) continue;
    const ASN1_TYPE* value = X509_ATTRIBUTE_get0_type(attribute, 0);
    if (value == nullptr || value->type != V_ASN1_SEQUENCE) {
      return Unparsable("the extension request is not a sequence of extensions");
    }
    const unsigned char* der = ASN1_STRING_get0_data(value->value.sequence);
    X509ExtensionStackPtr decoded(
        d2i_X509_EXTENSIONS(nullptr, &der, ASN1_STRING_length(value->value.sequence)));
    if (decoded == nullptr) return Unparsable(OpensslFailure("the extension request"));
    AppendExtensions(all.get(), std::move(decoded));
  }
  return all;
}

Status RefuseRepeatedExtensions(const STACK_OF(X509_EXTENSION) * extensions) {
  std::set<std::string> seen;
  for (int i = 0; i < sk_X509_EXTENSION_num(extensions); ++i) {
    const std::string oid =
        ObjectText(X509_EXTENSION_get_object(sk_X509_EXTENSION_value(extensions, i)));
    if (!seen.insert(oid).second) return Unparsable("extension " + oid + " appears twice");
  }
  return Status::Ok();
}

Result<GeneralNamesPtr> DecodeGeneralNames(X509_EXTENSION* extension) {
  const ASN1_OCTET_STRING* value = X509_EXTENSION_get_data(extension);
  const unsigned char* der = ASN1_STRING_get0_data(value);
  GeneralNamesPtr names(d2i_GENERAL_NAMES(nullptr, &der, ASN1_STRING_length(value)));
  if (names == nullptr) return Unparsable(OpensslFailure("the subjectAltName extension"));
  return names;
}

bool IsAscii(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

Result<std::string> IpAddressText(const ASN1_OCTET_STRING* address) {
  const std::string bytes = Asn1Text(address);
  const int family = bytes.size() == 4 ? AF_INET : bytes.size() == 16 ? AF_INET6 : -1;
  if (family < 0)
    return Unparsable("an IP address SAN of " + std::to_string(bytes.size()) + " bytes");
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, bytes.data(), text, sizeof(text));
  return std::string(text);
}

// The list a GeneralName of `type` goes to, as Go's SAN parser sorts them;
// nullptr for the kinds it skips (rule 6 refuses them).
std::vector<std::string>* TextNamesOfType(int type, ParsedCsr& csr) {
  switch (type) {
    case GEN_DNS:
      return &csr.dns_names;
    case GEN_EMAIL:
      return &csr.email_addresses;
    case GEN_URI:
      return &csr.uris;
    default:
      return nullptr;
  }
}

Status AddName(const GENERAL_NAME* name, ParsedCsr& csr) {
  if (name->type == GEN_IPADD) {
    CERTMOUNT_ASSIGN_OR_RETURN(std::string address, IpAddressText(name->d.iPAddress));
    csr.ip_addresses.push_back(address);
    return Status::Ok();
  }
  std::vector<std::string>* names = TextNamesOfType(name->type, csr);
  if (names == nullptr) return Status::Ok();
  // dNSName, rfc822Name and uniformResourceIdentifier are all IA5Strings.
  const std::string value = Asn1Text(name->d.ia5);
  if (!IsAscii(value)) return Unparsable("a SAN that is not ASCII: " + Quoted(value));
  names->push_back(value);
  return Status::Ok();
}

Status AddSubjectAltNames(ParsedCsr& csr) {
  for (int i = 0; i < sk_X509_EXTENSION_num(csr.extensions.get()); ++i) {
    X509_EXTENSION* extension = sk_X509_EXTENSION_value(csr.extensions.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(extension)) != NID_subject_alt_name) continue;
    CERTMOUNT_ASSIGN_OR_RETURN(GeneralNamesPtr names, DecodeGeneralNames(extension));
    for (int j = 0; j < sk_GENERAL_NAME_num(names.get()); ++j) {
      CERTMOUNT_RETURN_IF_ERROR(AddName(sk_GENERAL_NAME_value(names.get(), j), csr));
    }
  }
  return Status::Ok();
}

std::string LastCommonName(const X509_NAME* subject) {
  std::string last;
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) {
    last = Asn1Text(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i)));
  }
  return last;
}

Result<ParsedCsr> ParseRequest(const json& spec) {
  Result<std::string> pem = kube::Base64Decode(StringMember(spec, "request"));
  if (!pem.ok()) return Unparsable("not base64");
  CERTMOUNT_ASSIGN_OR_RETURN(std::string der, FirstPemBlock(*pem));
  ParsedCsr csr;
  CERTMOUNT_ASSIGN_OR_RETURN(csr.request, DecodeRequest(der));
  CERTMOUNT_ASSIGN_OR_RETURN(csr.extensions, RequestedExtensions(csr.request.get()));
  CERTMOUNT_RETURN_IF_ERROR(RefuseRepeatedExtensions(csr.extensions.get()));
  CERTMOUNT_RETURN_IF_ERROR(AddSubjectAltNames(csr));
  csr.common_name = LastCommonName(X509_REQ_get_subject_name(csr.request.get()));
  return csr;
}

// ---- rules 2 to 4 ----------------------------------------------------------------------

Status CheckDuration(const json& spec, const SpiffeApproverConfig& config) {
  const std::string required = FormatGoDuration(config.certificate_request_duration);
  const json& duration = Member(spec, "duration");
  if (!duration.is_string()) {
    return Status::InvalidArgument("spec.duration is missing or not a string; it must be " +
                                   required);
  }
  Result<std::chrono::nanoseconds> parsed = ParseGoDuration(duration.get<std::string>());
  if (!parsed.ok()) {
    return Status::InvalidArgument("spec.duration " + Quoted(duration.get<std::string>()) +
                                   " is not a duration: " + parsed.status().message());
  }
  if (*parsed != config.certificate_request_duration) {
    return Status::InvalidArgument("spec.duration is " + FormatGoDuration(*parsed) +
                                   "; it must be exactly " + required);
  }
  return Status::Ok();
}

Status CheckSignature(const ParsedCsr& csr) {
  EVP_PKEY* key = X509_REQ_get0_pubkey(csr.request.get());
  if (key == nullptr || X509_REQ_verify(csr.request.get(), key) != 1) {
    return Status::InvalidArgument(
        OpensslFailure("the CSR's signature does not verify with its public key"));
  }
  return Status::Ok();
}

Status CheckNoOtherNames(const ParsedCsr& csr) {
  if (csr.dns_names.empty() && csr.ip_addresses.empty() && csr.email_addresses.empty() &&
      csr.common_name.empty()) {
    return Status::Ok();
  }
  return Status::InvalidArgument(
      "the CSR may name nothing but its URI: DNS names [" + Joined(csr.dns_names, ", ") +
      "], IP addresses [" + Joined(csr.ip_addresses, ", ") + "], email addresses [" +
      Joined(csr.email_addresses, ", ") + "], common name " + Quoted(csr.common_name));
}

// ---- rule 6: extensions -----------------------------------------------------------------

// GeneralName's choice by its OpenSSL type (GEN_*), for messages.
std::string GeneralNameKind(int type) {
  static const char* const kKinds[] = {"otherName",   "email address", "DNS name",
                                       "x400Address", "directoryName", "ediPartyName",
                                       "URI",         "IP address",    "registeredID"};
  if (type >= 0 && type < static_cast<int>(std::size(kKinds))) return kKinds[type];
  return "GeneralName type " + std::to_string(type);
}

std::optional<std::string> SubjectAltNameProblem(X509_EXTENSION* extension) {
  Result<GeneralNamesPtr> names = DecodeGeneralNames(extension);
  if (!names.ok()) return names.status().message();
  for (int i = 0; i < sk_GENERAL_NAME_num(names->get()); ++i) {
    const int type = sk_GENERAL_NAME_value(names->get(), i)->type;
    if (type != GEN_URI)
      return "a subject alternative name that is not a URI: " + GeneralNameKind(type);
  }
  return std::nullopt;
}

// The value's bytes may set only bits that digitalSignature's (03 02 07 80)
// or keyEncipherment's (03 02 05 20) encoding sets, byte by byte.
std::optional<std::string> KeyUsageProblem(X509_EXTENSION* extension) {
  static constexpr std::array<unsigned char, 4> kDigitalSignature = {0x03, 0x02, 0x07, 0x80};
  static constexpr std::array<unsigned char, 4> kKeyEncipherment = {0x03, 0x02, 0x05, 0x20};
  const std::string value = Asn1Text(X509_EXTENSION_get_data(extension));
  bool allowed = value.size() == kDigitalSignature.size();
  for (size_t i = 0; allowed && i < value.size(); ++i) {
    const unsigned mask = kDigitalSignature[i] | kKeyEncipherment[i];
    allowed = (static_cast<unsigned char>(value[i]) & ~mask) == 0;
  }
  if (allowed) return std::nullopt;
  return "a key usage other than digital signature and key encipherment";
}

std::optional<std::string> ExtendedKeyUsageProblem(X509_EXTENSION* extension) {
  const ASN1_OCTET_STRING* value = X509_EXTENSION_get_data(extension);
  const unsigned char* der = ASN1_STRING_get0_data(value);
  ExtendedKeyUsagePtr usages(d2i_EXTENDED_KEY_USAGE(nullptr, &der, ASN1_STRING_length(value)));
  if (usages == nullptr) return OpensslFailure("an extended key usage that does not decode");
  for (int i = 0; i < sk_ASN1_OBJECT_num(usages.get()); ++i) {
    const ASN1_OBJECT* usage = sk_ASN1_OBJECT_value(usages.get(), i);
    const int nid = OBJ_obj2nid(usage);
    if (nid != NID_server_auth && nid != NID_client_auth) {
      return "an extended key usage other than server and client auth: " + ObjectText(usage);
    }
  }
  return std::nullopt;
}

std::optional<std::string> ExtensionProblem(X509_EXTENSION* extension) {
  const ASN1_OBJECT* object = X509_EXTENSION_get_object(extension);
  switch (OBJ_obj2nid(object)) {
    case NID_subject_alt_name:
      return SubjectAltNameProblem(extension);
    case NID_key_usage:
      return KeyUsageProblem(extension);
    case NID_ext_key_usage:
      return ExtendedKeyUsageProblem(extension);
    default:
      return "forbidden extension " + ObjectText(object);
  }
}

// Every problem, as the approver reports them all at once.
Status CheckExtensions(const ParsedCsr& csr) {
  std::vector<std::string> problems;
  for (int i = 0; i < sk_X509_EXTENSION_num(csr.extensions.get()); ++i) {
    if (std::optional<std::string> problem =
            ExtensionProblem(sk_X509_EXTENSION_value(csr.extensions.get(), i))) {
      problems.push_back(*problem);
    }
  }
  if (problems.empty()) return Status::Ok();
  return Status::InvalidArgument("the CSR's extensions: " + Joined(problems, "; "));
}

// ---- rules 7 and 8 ------------------------------------------------------------------------

Status CheckNotCa(const json& spec) {
  const json& is_ca = Member(spec, "isCA");
  if (is_ca.is_null() || (is_ca.is_boolean() && !is_ca.get<bool>())) return Status::Ok();
  return Status::InvalidArgument("spec.isCA is " + is_ca.dump() + "; it must be false");
}

// The usages as strings; nullopt when spec.usages is not a list of strings.
std::optional<std::vector<std::string>> UsageStrings(const json& usages) {
  std::vector<std::string> strings;
  if (usages.is_null()) return strings;
  if (!usages.is_array()) return std::nullopt;
  for (const json& usage : usages) {
    if (!usage.is_string()) return std::nullopt;
    strings.push_back(usage.get<std::string>());
  }
  return strings;
}

Status CheckUsages(const json& spec) {
  static const std::vector<std::string> kRequired = {"client auth", "digital signature",
                                                     "key encipherment", "server auth"};
  const json& usages = Member(spec, "usages");
  std::optional<std::vector<std::string>> sorted = UsageStrings(usages);
  if (sorted) std::sort(sorted->begin(), sorted->end());
  if (sorted == kRequired) return Status::Ok();
  return Status::InvalidArgument("spec.usages is " + usages.dump() + "; it must be exactly " +
                                 Joined(kRequired, ", ") + " (in any order)");
}

// ---- rule 9: identity ---------------------------------------------------------------------

// The parts of a URI the approver reads, as Go's url.Parse splits it.
struct UriParts {
  std::string scheme;  // lower case
  std::string host;    // with the port, if any
  std::string text;    // the URL's String()
};

bool IsSchemeCharacter(char c, bool first) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return !first && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.');
}

// Go's getScheme: letters first, then letters, digits, '+', '-', '.' up to
// the ':'; anything else before a ':' means no scheme.
std::string SchemeOf(const std::string& uri) {
  for (size_t i = 0; i < uri.size(); ++i) {
    if (uri[i] == ':') return uri.substr(0, i);
    if (!IsSchemeCharacter(uri[i], i == 0)) return "";
  }
  return "";
}

UriParts SplitUri(const std::string& uri) {
  UriParts parts;
  std::string scheme = SchemeOf(uri);
  std::string rest = uri.substr(scheme.empty() ? 0 : scheme.size() + 1);
  rest = rest.substr(0, rest.find('#'));
  rest = rest.substr(0, rest.find('?'));
  if (rest.rfind("//", 0) == 0) {
    const std::string authority = rest.substr(2, rest.find('/', 2) - 2);
    const size_t at = authority.rfind('@');
    parts.host = at == std::string::npos ? authority : authority.substr(at + 1);
  }
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  parts.scheme = scheme;
  Result<std::string> text = GoRequestUri(uri);
  parts.text = text.ok() ? *text : uri;
  return parts;
}

Result<UriParts> TheOneSpiffeUri(const ParsedCsr& csr) {
  if (csr.uris.size() != 1) {
    return Status::InvalidArgument("the CSR has " + std::to_string(csr.uris.size()) +
                                   " URIs; it must have exactly one SPIFFE ID");
  }
  UriParts uri = SplitUri(csr.uris.front());
  if (uri.scheme != "spiffe") {
    return Status::InvalidArgument("the CSR's URI " + Quoted(csr.uris.front()) +
                                   " is not a spiffe: URI");
  }
  return uri;
}

std::vector<std::string> SplitOnColons(const std::string& text) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == ':') {
      parts.emplace_back();
    } else {
      parts.back().push_back(c);
    }
  }
  return parts;
}

// Default mode: the URI is the SPIFFE ID of the service account that made
// the request.
Status CheckRequesterIdentity(const ParsedCsr& csr, const std::string& username,
                              const SpiffeApproverConfig& config) {
  const std::vector<std::string> parts = SplitOnColons(username);
  if (parts.size() != 4 || parts[0] != "system" || parts[1] != "serviceaccount") {
    return Status::InvalidArgument("spec.username " + Quoted(username) +
                                   " is not a service account's");
  }
  CERTMOUNT_ASSIGN_OR_RETURN(UriParts uri, TheOneSpiffeUri(csr));
  const std::string expected =
      "spiffe://" + config.trust_domain + "/ns/" + parts[2] + "/sa/" + parts[3];
  if (uri.text != expected) {
    return Status::InvalidArgument("the CSR asks for " + Quoted(uri.text) + "; " +
                                   Quoted(username) + " may only have " + Quoted(expected));
  }
  return Status::Ok();
}

// use_own_service_account: any SPIFFE ID of the trust domain, but only when
// the driver's service account made the request.
Status CheckDriverIdentity(const ParsedCsr& csr, const std::string& username,
                           const SpiffeApproverConfig& config) {
  CERTMOUNT_ASSIGN_OR_RETURN(UriParts uri, TheOneSpiffeUri(csr));
  if (uri.host != config.trust_domain) {
    return Status::InvalidArgument("the CSR's SPIFFE ID is in trust domain " + Quoted(uri.host) +
                                   ", not " + Quoted(config.trust_domain));
  }
  if (username != config.driver_service_account) {
    return Status::InvalidArgument("spec.username " + Quoted(username) +
                                   " is not the driver's service account " +
                                   Quoted(config.driver_service_account));
  }
  return Status::Ok();
}

Status CheckIdentity(const ParsedCsr& csr, const json& spec, const SpiffeApproverConfig& config) {
  const std::string username = StringMember(spec, "username");
  return config.use_own_service_account ? CheckDriverIdentity(csr, username, config)
                                        : CheckRequesterIdentity(csr, username, config);
}

SpiffeApproverOutcome Denied(int rule, const Status& status) {
  return {SpiffeApproverDecision::kDenied, rule, status.message()};
}

}  // namespace

SpiffeApproverOutcome Evaluate(const nlohmann::json& certificate_request,
                               const SpiffeApproverConfig& config) {
  if (std::optional<std::string> why = WhyNotForThisApprover(certificate_request, config)) {
    return {SpiffeApproverDecision::kNotForThisApprover, 0, *why};
  }
  const json& spec = Member(certificate_request, "spec");
  Result<ParsedCsr> csr = ParseRequest(spec);
  if (!csr.ok()) return Denied(1, csr.status());
  const std::pair<int, std::function<Status()>> rules[] = {
      {2, [&] { return CheckDuration(spec, config); }},
      {3, [&] { return CheckSignature(*csr); }},
      {4, [&] { return CheckNoOtherNames(*csr); }},
      {6, [&] { return CheckExtensions(*csr); }},
      {7, [&] { return CheckNotCa(spec); }},
      {8, [&] { return CheckUsages(spec); }},
      {9, [&] { return CheckIdentity(*csr, spec, config); }},
  };
  for (const auto& [rule, check] : rules) {
    Status status = check();
    if (!status.ok()) return Denied(rule, status);
  }
  return {SpiffeApproverDecision::kApproved, 0, ""};
}

}  // namespace certmount::testing
