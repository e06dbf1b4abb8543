// The test suite's re-implementation of csi-driver-spiffe's approver
// (support/spiffe_approver.h): one hand-built request per rule that breaks
// exactly that rule, the requests it approves, those it leaves alone, and
// what certmount's own SPIFFE request gets from it. The CSRs are real ones,
// built and signed here with OpenSSL.
#include "support/spiffe_approver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "issue/csr.h"
#include "issue/go_duration.h"
#include "issue/openssl_ptr.h"
#include "issue/private_key.h"
#include "issue/volume_attributes.h"
#include "kube/base64.h"

namespace certmount::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kPodUsername[] = "system:serviceaccount:sandbox:sleep";
constexpr char kPodId[] = "spiffe://cluster.local/ns/sandbox/sa/sleep";
constexpr char kDriverUsername[] = "system:serviceaccount:certmount:certmount";

// ---- building requests -------------------------------------------------------------

EvpPkeyPtr GenerateKey(const char* type = "EC", const char* curve_or_bits = "P-256") {
  if (std::string(type) == "RSA") return EvpPkeyPtr(EVP_RSA_gen(std::stoi(curve_or_bits)));
  return EvpPkeyPtr(EVP_EC_gen(curve_or_bits));
}

// What goes into a CSR; names and extensions in OpenSSL's configuration
// syntax ("URI:spiffe://...", "critical,CA:FALSE"). Set with the With...
// calls: CsrParts().WithCommonName("x").
struct CsrParts {
  std::string common_name;
  std::string organization;
  std::string subject_alt_names = std::string("URI:") + kPodId;  // "" for none
  std::vector<std::pair<int, std::string>> extensions;           // added after the SAN
  EVP_PKEY* key = nullptr;                                       // a fresh P-256 key if null
  bool signed_by_another_key = false;
  std::string pem_label = "CERTIFICATE REQUEST";

  CsrParts& WithCommonName(std::string name) { return Set(common_name, std::move(name)); }
  CsrParts& WithOrganization(std::string name) { return Set(organization, std::move(name)); }
  CsrParts& WithSans(std::string names) { return Set(subject_alt_names, std::move(names)); }
  CsrParts& WithExtension(int nid, std::string value) {
    extensions.emplace_back(nid, std::move(value));
    return *this;
  }
  CsrParts& WithKey(EVP_PKEY* other) { return Set(key, other); }
  CsrParts& SignedByAnotherKey() { return Set(signed_by_another_key, true); }
  CsrParts& WithPemLabel(std::string label) { return Set(pem_label, std::move(label)); }

 private:
  template <typename T, typename V>
  CsrParts& Set(T& field, V&& value) {
    field = std::forward<V>(value);
    return *this;
  }
};

void AddName(X509_REQ* request, int nid, const std::string& value) {
  if (value.empty()) return;
  X509_NAME_add_entry_by_NID(X509_REQ_get_subject_name(request), nid, MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
}

bool AddExtensions(X509_REQ* request, const CsrParts& parts) {
  std::vector<std::pair<int, std::string>> all = parts.extensions;
  if (!parts.subject_alt_names.empty()) {
    all.insert(all.begin(), {NID_subject_alt_name, parts.subject_alt_names});
  }
  if (all.empty()) return true;
  X509ExtensionStackPtr extensions(sk_X509_EXTENSION_new_null());
  for (const auto& [nid, value] : all) {
    X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, nullptr, nid, value.c_str());
    if (extension == nullptr) return false;
    sk_X509_EXTENSION_push(extensions.get(), extension);
  }
  return X509_REQ_add_extensions(request, extensions.get()) == 1;
}

std::string PemOf(const X509_REQ* request, const std::string& label) {
  unsigned char* der = nullptr;
  const int length = i2d_X509_REQ(request, &der);
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio(bio.get(), label.c_str(), "", der, length);
  OPENSSL_free(der);
  return BioContents(bio.get());
}

// A PEM CSR; "" (and a test failure) when OpenSSL refuses the parts.
std::string CsrPem(const CsrParts& parts) {
  EvpPkeyPtr fresh = parts.key == nullptr ? GenerateKey() : nullptr;
  EVP_PKEY* key = parts.key != nullptr ? parts.key : fresh.get();
  X509ReqPtr request(X509_REQ_new());
  X509_REQ_set_version(request.get(), 0);
  X509_REQ_set_pubkey(request.get(), key);
  AddName(request.get(), NID_organizationName, parts.organization);
  AddName(request.get(), NID_commonName, parts.common_name);
  EXPECT_TRUE(AddExtensions(request.get(), parts)) << OpensslFailure("extensions");
  EvpPkeyPtr other = parts.signed_by_another_key ? GenerateKey() : nullptr;
  EVP_PKEY* signer = other != nullptr ? other.get() : key;
  if (X509_REQ_sign(request.get(), signer, EVP_sha256()) <= 0) {
    ADD_FAILURE() << OpensslFailure("signing the CSR");
    return "";
  }
  return PemOf(request.get(), parts.pem_label);
}

// A request that keeps every rule for the default configuration and the
// pod's own service account, except where the test changes it.
json CertificateRequest(const std::string& csr_pem, const std::string& username = kPodUsername) {
  return {{"apiVersion", "cert-manager.io/v1"},
          {"kind", "CertificateRequest"},
          {"metadata",
           {{"name", "csi-sleep-0"},
            {"namespace", "sandbox"},
            {"annotations", {{"spiffe.csi.cert-manager.io/identity", kPodId}}}}},
          {"spec",
           {{"request", kube::Base64Encode(csr_pem)},
            {"duration", "1h0m0s"},
            {"isCA", false},
            {"usages", {"key encipherment", "digital signature", "client auth", "server auth"}},
            {"issuerRef",
             {{"name", "my-spiffe-ca"}, {"kind", "ClusterIssuer"}, {"group", "cert-manager.io"}}},
            {"username", username}}}};
}

json RequestWith(const CsrParts& parts) { return CertificateRequest(CsrPem(parts)); }

json ValidRequest() { return RequestWith(CsrParts()); }

SpiffeApproverConfig OwnServiceAccountMode() {
  SpiffeApproverConfig config;
  config.use_own_service_account = true;
  config.driver_service_account = kDriverUsername;
  return config;
}

void ExpectApproved(const json& request, const SpiffeApproverConfig& config = {}) {
  SpiffeApproverOutcome outcome = Evaluate(request, config);
  EXPECT_EQ(outcome.decision, SpiffeApproverDecision::kApproved)
      << "rule " << outcome.rule << ": " << outcome.reason;
  EXPECT_EQ(outcome.rule, 0);
  EXPECT_EQ(outcome.reason, "");
}

void ExpectDenied(const json& request, int rule, const std::string& words,
                  const SpiffeApproverConfig& config = {}) {
  SpiffeApproverOutcome outcome = Evaluate(request, config);
  EXPECT_EQ(outcome.decision, SpiffeApproverDecision::kDenied) << outcome.reason;
  EXPECT_EQ(outcome.rule, rule) << outcome.reason;
  EXPECT_THAT(outcome.reason, HasSubstr(words));
}

void ExpectNotForThisApprover(const json& request, const std::string& words) {
  SpiffeApproverOutcome outcome = Evaluate(request, {});
  EXPECT_EQ(outcome.decision, SpiffeApproverDecision::kNotForThisApprover)
      << "rule " << outcome.rule << ": " << outcome.reason;
  EXPECT_EQ(outcome.rule, 0);
  EXPECT_THAT(outcome.reason, HasSubstr(words));
}

json WithCondition(json request, const std::string& type, const std::string& status) {
  request["status"]["conditions"] =
      json::array({{{"type", type}, {"status", status}, {"reason", "r"}, {"message", "m"}}});
  return request;
}

// ---- approved ------------------------------------------------------------------------

TEST(SpiffeApproverTest, ApprovesThePodsOwnSvidRequest) { ExpectApproved(ValidRequest()); }

TEST(SpiffeApproverTest, ApprovesUsagesInAnyOrderAndDurationsOfTheSameLength) {
  json request = ValidRequest();
  request["spec"]["usages"] = {"server auth", "client auth", "digital signature",
                               "key encipherment"};
  for (const char* duration : {"1h", "60m", "3600s", "1h0m0s"}) {
    SCOPED_TRACE(duration);
    request["spec"]["duration"] = duration;
    ExpectApproved(request);
  }
}

TEST(SpiffeApproverTest, ApprovesKeyUsagesAndExtendedKeyUsagesWithinTheAllowedSets) {
  for (const char* key_usage :
       {"digitalSignature", "keyEncipherment", "critical,digitalSignature,keyEncipherment"}) {
    SCOPED_TRACE(key_usage);
    ExpectApproved(RequestWith(CsrParts().WithExtension(NID_key_usage, key_usage)));
  }
  for (const char* extended : {"serverAuth", "clientAuth", "serverAuth,clientAuth"}) {
    SCOPED_TRACE(extended);
    ExpectApproved(RequestWith(CsrParts().WithExtension(NID_ext_key_usage, extended)));
  }
}

// Rule 4 looks only at the common name, and (rule 5) no key type or size
// is required.
TEST(SpiffeApproverTest, OtherSubjectAttributesAndTheKeyAreNotChecked) {
  ExpectApproved(RequestWith(CsrParts().WithOrganization("acme")));
  for (const auto& [type, size] : std::vector<std::pair<const char*, const char*>>{
           {"RSA", "2048"}, {"EC", "P-384"}, {"EC", "P-521"}}) {
    SCOPED_TRACE(std::string(type) + " " + size);
    EvpPkeyPtr key = GenerateKey(type, size);
    ExpectApproved(RequestWith(CsrParts().WithKey(key.get())));
  }
}

// cert-manager decodes spec.request with pem.Decode and never looks at the
// block's label.
TEST(SpiffeApproverTest, ThePemLabelIsNotChecked) {
  ExpectApproved(RequestWith(CsrParts().WithPemLabel("NEW CERTIFICATE REQUEST")));
  ExpectApproved(RequestWith(CsrParts().WithPemLabel("ANYTHING")));
}

TEST(SpiffeApproverTest, TheNamespaceAndTheAnnotationValueAreNotChecked) {
  json request = ValidRequest();
  request["metadata"]["namespace"] = "kube-system";
  request["metadata"]["annotations"]["spiffe.csi.cert-manager.io/identity"] =
      "spiffe://cluster.local/ns/kube-system/sa/admin";
  ExpectApproved(request);
}

TEST(SpiffeApproverTest, ConfiguredTrustDomainDurationAndIssuerAreTheOnesRequired) {
  SpiffeApproverConfig config;
  config.trust_domain = "example.org";
  config.certificate_request_duration = std::chrono::hours(2);
  config.issuer_ref = {"svid", "Issuer", "example.io"};
  json request = RequestWith(CsrParts().WithSans("URI:spiffe://example.org/ns/sandbox/sa/sleep"));
  request["spec"]["duration"] = "2h0m0s";
  request["spec"]["issuerRef"] = {{"name", "svid"}, {"kind", "Issuer"}, {"group", "example.io"}};
  ExpectApproved(request, config);
}

// ---- not for this approver ----------------------------------------------------------------

TEST(SpiffeApproverTest, ARequestToAnotherIssuerIsNotForThisApprover) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"name", "other-ca"}, {"kind", "Issuer"}, {"group", "example.io"}, {"kind", nullptr}}) {
    SCOPED_TRACE(field + "=" + value.dump());
    json request = ValidRequest();
    if (value.is_null()) {
      request["spec"]["issuerRef"].erase(field);  // absent is "", not a default
    } else {
      request["spec"]["issuerRef"][field] = value;
    }
    ExpectNotForThisApprover(request, "spec.issuerRef is");
  }
}

TEST(SpiffeApproverTest, ARequestWithoutTheIdentityAnnotationIsNotForThisApprover) {
  json request = ValidRequest();
  request["metadata"]["annotations"] = {{"spiffe.csi.cert-manager.io/other", kPodId}};
  ExpectNotForThisApprover(request, "spiffe.csi.cert-manager.io/identity");
  request["metadata"].erase("annotations");
  ExpectNotForThisApprover(request, "spiffe.csi.cert-manager.io/identity");
}

TEST(SpiffeApproverTest, AnApprovedOrDeniedRequestIsSkipped) {
  ExpectNotForThisApprover(WithCondition(ValidRequest(), "Approved", "True"), "already approved");
  ExpectNotForThisApprover(WithCondition(ValidRequest(), "Denied", "True"), "already denied");
  // Skipped even when the rules would now deny it.
  json request = WithCondition(ValidRequest(), "Approved", "True");
  request["spec"]["isCA"] = true;
  ExpectNotForThisApprover(request, "already approved");
  // A condition that is not True decides nothing.
  ExpectApproved(WithCondition(ValidRequest(), "Denied", "False"));
  ExpectApproved(WithCondition(ValidRequest(), "Ready", "True"));
}

// ---- one rule broken at a time --------------------------------------------------------------

TEST(SpiffeApproverTest, Rule1ARequestThatDoesNotParseIsDenied) {
  const std::string kWords = "spec.request is not a certificate request";
  json request = ValidRequest();
  request["spec"]["request"] = "not base64!";
  ExpectDenied(request, 1, kWords);
  request["spec"]["request"] = kube::Base64Encode("no PEM here");
  ExpectDenied(request, 1, kWords);
  request["spec"]["request"] = kube::Base64Encode(
      "-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n");
  ExpectDenied(request, 1, kWords);
  request["spec"].erase("request");
  ExpectDenied(request, 1, kWords);
}

TEST(SpiffeApproverTest, Rule1AnExtensionRequestedTwiceDoesNotParse) {
  const std::string uri = std::string("URI:") + kPodId;
  ExpectDenied(RequestWith(CsrParts().WithExtension(NID_subject_alt_name, uri)), 1,
               "appears twice");
}

TEST(SpiffeApproverTest, Rule2TheDurationMustBeExactlyTheConfiguredOne) {
  json request = ValidRequest();
  for (const char* duration : {"2h", "30m", "1h0m1s", "2160h"}) {
    SCOPED_TRACE(duration);
    request["spec"]["duration"] = duration;
    ExpectDenied(request, 2, "it must be exactly 1h0m0s");
  }
  request["spec"]["duration"] = "an hour";
  ExpectDenied(request, 2, "is not a duration");
  request["spec"].erase("duration");
  ExpectDenied(request, 2, "spec.duration is missing");
}

TEST(SpiffeApproverTest, Rule3TheSignatureMustVerify) {
  ExpectDenied(RequestWith(CsrParts().SignedByAnotherKey()), 3, "signature does not verify");
}

TEST(SpiffeApproverTest, Rule4TheCsrMayNameNothingButItsUri) {
  const std::string uri = std::string("URI:") + kPodId;
  for (const std::string& names : {uri + ",DNS:sleep.sandbox.svc", uri + ",IP:10.0.0.7",
                                   uri + ",IP:fd00::7", uri + ",email:sleep@example.org"}) {
    SCOPED_TRACE(names);
    ExpectDenied(RequestWith(CsrParts().WithSans(names)), 4, "may name nothing but its URI");
  }
  ExpectDenied(RequestWith(CsrParts().WithCommonName("sleep")), 4, "common name \"sleep\"");
}

TEST(SpiffeApproverTest, Rule6OnlyUriSansAndTheAllowedUsagesMayBeRequested) {
  const std::string uri = std::string("URI:") + kPodId;
  const std::vector<std::pair<CsrParts, std::string>> cases = {
      {CsrParts().WithExtension(NID_basic_constraints, "critical,CA:FALSE"),
       "forbidden extension 2.5.29.19"},
      {CsrParts().WithExtension(NID_key_usage, "digitalSignature,keyCertSign"), "key usage"},
      {CsrParts().WithExtension(NID_key_usage, "nonRepudiation"), "key usage"},
      // Two bytes of bits: no longer the 4-byte encoding.
      {CsrParts().WithExtension(NID_key_usage, "digitalSignature,decipherOnly"), "key usage"},
      {CsrParts().WithExtension(NID_ext_key_usage, "serverAuth,codeSigning"),
       "extended key usage other than server and client auth: 1.3.6.1.5.5.7.3.3"},
      {CsrParts().WithSans(uri + ",RID:1.2.3.4"), "not a URI: registeredID"},
  };
  for (const auto& [parts, words] : cases) {
    SCOPED_TRACE(words);
    ExpectDenied(RequestWith(parts), 6, words);
  }
}

TEST(SpiffeApproverTest, Rule7TheRequestMustNotBeForACa) {
  json request = ValidRequest();
  request["spec"]["isCA"] = true;
  ExpectDenied(request, 7, "spec.isCA is true");
  request["spec"].erase("isCA");
  ExpectApproved(request);
}

TEST(SpiffeApproverTest, Rule8TheUsagesMustBeExactlyTheFour) {
  json request = ValidRequest();
  for (const json& usages : {
           json{"digital signature", "server auth", "client auth"},
           json{"key encipherment", "digital signature", "client auth", "server auth", "cert sign"},
           json{"digital signature", "digital signature", "client auth", "server auth"},
           json{"key encipherment", "key encipherment", "digital signature", "client auth",
                "server auth"},
           json::array(),
       }) {
    SCOPED_TRACE(usages.dump());
    request["spec"]["usages"] = usages;
    ExpectDenied(request, 8, "spec.usages is");
  }
  request["spec"].erase("usages");
  ExpectDenied(request, 8, "spec.usages is null");
}

TEST(SpiffeApproverTest, Rule9TheRequesterMustBeAServiceAccount) {
  for (const json& username : {json("kubernetes-admin"), json("system:serviceaccount:sandbox"),
                               json("system:serviceaccount:sandbox:sleep:extra"),
                               json("system:node:sandbox:sleep"), json("")}) {
    SCOPED_TRACE(username.dump());
    json request = ValidRequest();
    request["spec"]["username"] = username;
    ExpectDenied(request, 9, "is not a service account's");
  }
  json request = ValidRequest();
  request["spec"].erase("username");
  ExpectDenied(request, 9, "is not a service account's");
}

TEST(SpiffeApproverTest, Rule9TheUriMustBeTheRequestersSpiffeId) {
  for (const char* uri : {"URI:spiffe://cluster.local/ns/sandbox/sa/admin",
                          "URI:spiffe://cluster.local/ns/kube-system/sa/sleep",
                          "URI:spiffe://example.org/ns/sandbox/sa/sleep",
                          "URI:spiffe://cluster.local/ns/sandbox/sa/sleep/extra"}) {
    SCOPED_TRACE(uri);
    ExpectDenied(
        RequestWith(CsrParts().WithSans(uri)), 9,
        "\"system:serviceaccount:sandbox:sleep\" may only have \"" + std::string(kPodId) + "\"");
  }
  ExpectDenied(RequestWith(CsrParts().WithSans("URI:https://cluster.local/ns/sandbox/sa/sleep")), 9,
               "is not a spiffe: URI");
}

TEST(SpiffeApproverTest, Rule9TheCsrMustHoldExactlyOneUri) {
  ExpectDenied(RequestWith(CsrParts().WithSans("")), 9, "the CSR has 0 URIs");
  const std::string twice = std::string("URI:") + kPodId + ",URI:" + kPodId;
  ExpectDenied(RequestWith(CsrParts().WithSans(twice)), 9, "the CSR has 2 URIs");
}

// Go's url.Parse lowers the scheme, and the comparison is with the URL's
// String().
TEST(SpiffeApproverTest, Rule9TheSchemeIsReadAsGoReadsIt) {
  ExpectApproved(
      RequestWith(CsrParts().WithSans("URI:SPIFFE://cluster.local/ns/sandbox/sa/sleep")));
}

TEST(SpiffeApproverTest, Rule9InOwnServiceAccountModeOnlyTheDriverMayRequestAnyIdInTheDomain) {
  const SpiffeApproverConfig config = OwnServiceAccountMode();
  for (const char* uri : {"URI:spiffe://cluster.local/ns/kube-system/sa/admin",
                          "URI:spiffe://cluster.local/anything/at/all"}) {
    SCOPED_TRACE(uri);
    ExpectApproved(CertificateRequest(CsrPem(CsrParts().WithSans(uri)), kDriverUsername), config);
  }
  ExpectDenied(ValidRequest(), 9, "is not the driver's service account", config);
  ExpectDenied(CertificateRequest(
                   CsrPem(CsrParts().WithSans("URI:spiffe://example.org/ns/sandbox/sa/sleep")),
                   kDriverUsername),
               9, "in trust domain \"example.org\"", config);
  ExpectDenied(CertificateRequest(CsrPem(CsrParts().WithSans("")), kDriverUsername), 9,
               "the CSR has 0 URIs", config);
  ExpectDenied(CertificateRequest(CsrPem(CsrParts().WithSans("URI:https://cluster.local/x")),
                                  kDriverUsername),
               9, "is not a spiffe: URI", config);
}

// ---- order and robustness -------------------------------------------------------------------

TEST(SpiffeApproverTest, TheFirstBrokenRuleDecides) {
  json request = RequestWith(CsrParts().WithCommonName("sleep").SignedByAnotherKey());
  request["spec"]["duration"] = "2h";
  request["spec"]["usages"] = json::array();
  ExpectDenied(request, 2, "spec.duration");
  request["spec"]["duration"] = "1h";
  ExpectDenied(request, 3, "signature");
}

TEST(SpiffeApproverTest, JsonOfTheWrongShapeIsDecidedWithoutThrowing) {
  EXPECT_EQ(Evaluate(json::array(), {}).decision, SpiffeApproverDecision::kNotForThisApprover);
  EXPECT_EQ(Evaluate(json("x"), {}).decision, SpiffeApproverDecision::kNotForThisApprover);
  json request = ValidRequest();
  request["status"] = "odd";
  request["metadata"]["annotations"]["spiffe.csi.cert-manager.io/identity"] = 7;
  request["spec"]["username"] = 7;
  request["spec"]["usages"] = "server auth";
  request["spec"]["isCA"] = "no";
  request["spec"]["duration"] = 3600;
  ExpectDenied(request, 2, "spec.duration is missing");
  request["spec"]["duration"] = "1h";
  ExpectDenied(request, 7, "spec.isCA is \"no\"");
  request["spec"]["isCA"] = false;
  ExpectDenied(request, 8, "spec.usages is \"server auth\"");
}

// ---- certmount's own request ------------------------------------------------------------------

// The request certmount's SPIFFE mode makes for pod sandbox/sleep-0 toward
// cert-manager is approved in both of the approver's modes; with the local
// CA's usages (no key encipherment) it would be denied for its usages
// alone, which is why cert-manager mode asks for all four.
TEST(SpiffeApproverTest, CertmountsCertManagerSvidRequestIsApproved) {
  const std::map<std::string, std::string> context = {
      {"csi.storage.k8s.io/pod.name", "sleep-0"},
      {"csi.storage.k8s.io/pod.namespace", "sandbox"},
      {"csi.storage.k8s.io/pod.uid", "0b6fbd3e-6f0c-4d5c-9c7e-0d1f7c0e2a11"},
      {"csi.storage.k8s.io/serviceAccount.name", "sleep"}};
  AttributeRules rules;
  rules.spiffe.trust_domain = "cluster.local";
  rules.spiffe.issuer = {"my-spiffe-ca", "ClusterIssuer", "cert-manager.io"};
  rules.spiffe.key_encipherment = true;
  Result<CertificateSpec> spec = ParseVolumeAttributes(context, rules);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Result<PrivateKey> key = PrivateKey::Generate(spec->key_algorithm, spec->key_size);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  Result<std::string> csr = BuildCsrPem(*key, *spec);
  ASSERT_TRUE(csr.ok()) << csr.status().ToString();

  json request = CertificateRequest(*csr);
  request["metadata"]["annotations"] = spec->annotations;
  request["spec"]["duration"] = FormatGoDuration(spec->duration);
  request["spec"]["isCA"] = spec->is_ca;
  request["spec"]["usages"] = spec->usages;
  request["spec"]["issuerRef"] = {
      {"name", spec->issuer.name}, {"kind", spec->issuer.kind}, {"group", spec->issuer.group}};
  ExpectApproved(request);

  request["spec"]["usages"] = {"digital signature", "server auth", "client auth"};
  ExpectDenied(request, 8, "spec.usages is");
  request["spec"]["usages"] = spec->usages;
  request["spec"]["username"] = kDriverUsername;
  ExpectApproved(request, OwnServiceAccountMode());
}

}  // namespace
}  // namespace certmount::testing
