// SPIFFE mode (--spiffe-trust-domain): the trust domain and identity rules
// in process, then the real certmountd over its socket with the local CA
// (the issued X.509-SVID read back with OpenSSL, hostile attributes, missing
// pod info, a renewal) and with cert-manager played by the fake API server
// (the CertificateRequest's CSR and annotations).
#include "issue/spiffe.h"
#include "issue/volume_attributes.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "issue/attributes.h"
#include "issue/local_ca.h"
#include "kube/base64.h"
#include "support/daemon.h"
#include "support/fake_kube_api.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/spiffe_approver.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr char kTrustDomain[] = "example.org";
// KubeletPublishRequest's pod: namespace default, service account web.
constexpr char kWebIdentity[] = "spiffe://example.org/ns/default/sa/web";
constexpr unsigned kDigitalSignatureBit = 0x80;  // X509_get_key_usage's KU_DIGITAL_SIGNATURE
constexpr unsigned kKeyEnciphermentBit = 0x20;   // KU_KEY_ENCIPHERMENT

std::map<std::string, std::string> PodContext(std::map<std::string, std::string> attributes = {}) {
  std::map<std::string, std::string> context = {{"csi.storage.k8s.io/pod.name", "web-0"},
                                                {"csi.storage.k8s.io/pod.namespace", "default"},
                                                {"csi.storage.k8s.io/pod.uid", kKubeletPodUid},
                                                {"csi.storage.k8s.io/serviceAccount.name", "web"},
                                                {"csi.cert-manager.io/issuer-name", "local"}};
  for (auto& [key, value] : attributes) context[key] = value;
  return context;
}

// SPIFFE mode's rules with the local CA's settings (no issuer needed, no
// key encipherment).
AttributeRules Spiffe(std::string trust_domain = kTrustDomain) {
  AttributeRules rules;
  rules.spiffe.trust_domain = std::move(trust_domain);
  rules.spiffe.issuer_required = false;
  return rules;
}

// ---- trust domain and identity ---------------------------------------------------

TEST(SpiffeTrustDomain, AcceptsTheSpecsCharacterSetUpTo255) {
  for (const std::string& domain : std::vector<std::string>{"example.org", "td", "cluster.local",
                                                            "a-b_c.0-9", std::string(255, 'x')}) {
    EXPECT_TRUE(ValidateSpiffeTrustDomain(domain).ok()) << domain;
  }
}

TEST(SpiffeTrustDomain, RefusesSchemePortUserinfoPathUpperCaseAndLength) {
  for (const std::string& domain :
       std::vector<std::string>{"", "spiffe://example.org", "example.org:443", "user@example.org",
                                "example.org/ns", "Example.org", "exa mple.org", "example.org.\n",
                                "xn--bcher-kva.\xC3\xA9", std::string(256, 'x')}) {
    Status status = ValidateSpiffeTrustDomain(domain);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << domain;
    EXPECT_THAT(status.message(), HasSubstr("trust domain")) << domain;
  }
}

TEST(SpiffeTrustDomain, CertmountdRefusesABadOneAtStartExitTwoNamingTheFlag) {
  TempDir dir;
  ProcessResult r = RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--data-root=" + dir.Sub("data"),
                                "--spiffe-trust-domain=spiffe://Example.org"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--spiffe-trust-domain"));
  EXPECT_FALSE(fs::exists(dir.Sub("data") + "/state.db"));
}

TEST(SpiffeId, IsBuiltFromNamespaceAndServiceAccount) {
  PodInfo pod{"web-0", "default", "uid", "web"};
  Result<std::string> id = SpiffeIdForPod(kTrustDomain, pod);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, kWebIdentity);
}

TEST(SpiffeId, MissingPodInfoIsFailedPreconditionNamingPodInfoOnMount) {
  PodInfo no_namespace{"web-0", "", "uid", "web"};
  PodInfo no_account{"web-0", "default", "uid", ""};
  for (const PodInfo& pod : {no_namespace, no_account}) {
    Result<std::string> id = SpiffeIdForPod(kTrustDomain, pod);
    EXPECT_EQ(id.status().code(), Code::kFailedPrecondition);
    EXPECT_THAT(id.status().message(), HasSubstr("podInfoOnMount"));
  }
}

TEST(SpiffeId, ValuesThatAreNotPathSegmentsAreRefused) {
  for (const std::string account : {"..", ".", "a/b", "a b", "a%2Fb"}) {
    PodInfo pod{"web-0", "default", "uid", account};
    EXPECT_EQ(SpiffeIdForPod(kTrustDomain, pod).status().code(), Code::kInvalidArgument) << account;
  }
}

// ---- the spec --------------------------------------------------------------------

TEST(SpiffeSpec, WithoutATrustDomainItIsParseAttributes) {
  Result<CertificateSpec> spec = ParseVolumeAttributes(PodContext(), {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->key_algorithm, KeyAlgorithm::kRsa);
  EXPECT_TRUE(spec->uris.empty());
  EXPECT_TRUE(spec->annotations.empty());
}

TEST(SpiffeSpec, IsTheX509SvidOfThePodsServiceAccount) {
  Result<CertificateSpec> spec = ParseVolumeAttributes(PodContext(), Spiffe());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_THAT(spec->uris, ElementsAre(kWebIdentity));
  EXPECT_TRUE(spec->dns_names.empty());
  EXPECT_TRUE(spec->ip_addresses.empty());
  EXPECT_TRUE(spec->email_addresses.empty());
  EXPECT_TRUE(spec->subject.common_name.empty());
  EXPECT_TRUE(spec->literal_subject.empty());
  EXPECT_FALSE(spec->is_ca);
  EXPECT_THAT(spec->usages, ElementsAre("digital signature", "server auth", "client auth"));
  EXPECT_EQ(spec->key_algorithm, KeyAlgorithm::kEcdsa);
  EXPECT_EQ(spec->key_size, 256);
  EXPECT_EQ(spec->key_encoding, KeyEncoding::kPkcs8);
  EXPECT_EQ(spec->duration, std::chrono::hours(1));
  EXPECT_FALSE(spec->renew_before.has_value());  // two thirds, as csi-driver-spiffe
  EXPECT_EQ(spec->annotations.at("spiffe.csi.cert-manager.io/identity"), kWebIdentity);
}

TEST(SpiffeSpec, AttributesThatChangeNothingTheSvidAssertsAreAllowed) {
  Result<CertificateSpec> spec =
      ParseVolumeAttributes(PodContext({{"csi.cert-manager.io/duration", "30m"},
                                        {"csi.cert-manager.io/renew-before", "30m"},
                                        {"csi.cert-manager.io/key-algorithm", "ecdsa"},
                                        {"csi.cert-manager.io/key-size", "256"},
                                        {"csi.cert-manager.io/key-encoding", "pkcs8"},
                                        {"csi.cert-manager.io/is-ca", "false"},
                                        {"csi.cert-manager.io/fs-group", "2000"},
                                        {"csi.cert-manager.io/certificate-file", "svid.pem"},
                                        {"csi.cert-manager.io/common-name", ""},  // empty: not set
                                        {"team.example.com/owner", "payments"}}),
                            Spiffe());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->duration, std::chrono::minutes(30));
  EXPECT_EQ(spec->certificate_file, "svid.pem");
  EXPECT_EQ(spec->fs_group, 2000u);
  EXPECT_EQ(spec->annotations.at("team.example.com/owner"), "payments");
  EXPECT_THAT(spec->uris, ElementsAre(kWebIdentity));
}

TEST(SpiffeSpec, AttributesThatWouldChangeTheIdentityOrTheSvidAreRefusedNamingTheKey) {
  const std::map<std::string, std::string> hostile = {
      {"csi.cert-manager.io/uri-sans", "spiffe://example.org/ns/default/sa/admin"},
      {"csi.cert-manager.io/dns-names", "web.default.svc"},
      {"csi.cert-manager.io/ip-sans", "10.0.0.1"},
      {"csi.cert-manager.io/email-sans", "a@example.org"},
      {"csi.cert-manager.io/common-name", "admin"},
      {"csi.cert-manager.io/literal-subject", "CN=admin"},
      {"csi.cert-manager.io/organizations", "Acme"},
      {"csi.cert-manager.io/serial-number", "1"},
      {"csi.cert-manager.io/is-ca", "true"},
      {"csi.cert-manager.io/key-usages", "digital signature,cert sign"},
      {"csi.cert-manager.io/key-algorithm", "RSA"},
      {"csi.cert-manager.io/key-size", "384"},
      {"csi.cert-manager.io/key-encoding", "PKCS1"},
      {"csi.cert-manager.io/reuse-private-key", "true"},
      {"csi.cert-manager.io/some-future-attribute", "x"},
      {"spiffe.csi.cert-manager.io/identity", "spiffe://example.org/ns/kube-system/sa/admin"},
      {"spiffe.csi.cert-manager.io/fs-group", "0"},
      {"spiffe.csi.cert-manager.io/file-name-ca", "x.pem"},
      {"csi.cert-manager.io/duration", "2h"},  // longer than the driver's 1h
  };
  for (const auto& [key, value] : hostile) {
    Result<CertificateSpec> spec = ParseVolumeAttributes(PodContext({{key, value}}), Spiffe());
    EXPECT_EQ(spec.status().code(), Code::kInvalidArgument) << key;
    EXPECT_THAT(spec.status().message(), StartsWith(key)) << key;
  }
  // The pod's addresses, which would arrive after publish, are refused too.
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"csi.cert-manager.io/dns-names", "${POD_IP}.default.pod.cluster.local"},
           {"csi.cert-manager.io/ip-sans", "${POD_IPS}"}}) {
    Result<CertificateSpec> spec = ParseVolumeAttributes(PodContext({{key, value}}), Spiffe());
    EXPECT_EQ(spec.status().code(), Code::kInvalidArgument) << key;
    EXPECT_THAT(spec.status().message(), StartsWith(key)) << key;
  }
  // Several refused keys: the message names the first in key order.
  Result<CertificateSpec> rsa =
      ParseVolumeAttributes(PodContext({{"csi.cert-manager.io/key-encoding", "PKCS1"},
                                        {"csi.cert-manager.io/key-algorithm", "RSA"}}),
                            Spiffe());
  EXPECT_EQ(rsa.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(rsa.status().message(), StartsWith("csi.cert-manager.io/key-algorithm"));
}

TEST(SpiffeSpec, KeySizeIsReadAsAnEcdsaSizeWithoutKeyAlgorithm) {
  Result<CertificateSpec> spec =
      ParseVolumeAttributes(PodContext({{"csi.cert-manager.io/key-size", "256"}}), Spiffe());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->key_algorithm, KeyAlgorithm::kEcdsa);
  Result<CertificateSpec> p384 =
      ParseVolumeAttributes(PodContext({{"csi.cert-manager.io/key-size", "384"}}), Spiffe());
  EXPECT_EQ(p384.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(p384.status().message(), StartsWith("csi.cert-manager.io/key-size"));
}

TEST(SpiffeSpec, TheIdentityComesFromKubeletsEntriesNotFromVariables) {
  // ${SERVICE_ACCOUNT_NAME} cannot reach the certificate: every SAN key is refused,
  // and the pod info decides alone.
  auto context = PodContext();
  context["csi.storage.k8s.io/serviceAccount.name"] = "payments";
  context["csi.storage.k8s.io/pod.namespace"] = "billing";
  Result<CertificateSpec> spec = ParseVolumeAttributes(context, Spiffe("prod.example.org"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_THAT(spec->uris, ElementsAre("spiffe://prod.example.org/ns/billing/sa/payments"));
}

TEST(SpiffeSpec, APodSpecWithNoAttributesIsTheSvidWithTheDriversSettings) {
  std::map<std::string, std::string> context = PodContext();
  context.erase("csi.cert-manager.io/issuer-name");
  AttributeRules rules = Spiffe();
  rules.spiffe.issuer = {"spiffe-ca", "ClusterIssuer", "cert-manager.io"};
  rules.spiffe.issuer_required = true;
  rules.spiffe.duration = std::chrono::minutes(45);
  rules.spiffe.certificate_file = "svid.pem";
  rules.spiffe.private_key_file = "svid_key.pem";
  rules.spiffe.ca_file = "bundle.pem";
  Result<CertificateSpec> spec = ParseVolumeAttributes(context, rules);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->issuer.name, "spiffe-ca");
  EXPECT_EQ(spec->issuer.kind, "ClusterIssuer");
  EXPECT_EQ(spec->issuer.group, "cert-manager.io");
  EXPECT_EQ(spec->duration, std::chrono::minutes(45));
  EXPECT_EQ(spec->certificate_file, "svid.pem");
  EXPECT_EQ(spec->private_key_file, "svid_key.pem");
  EXPECT_EQ(spec->ca_file, "bundle.pem");
  EXPECT_FALSE(spec->fs_group.has_value());
  EXPECT_THAT(spec->uris, ElementsAre(kWebIdentity));
  EXPECT_EQ(
      spec->annotations,
      (std::map<std::string, std::string>{{"spiffe.csi.cert-manager.io/identity", kWebIdentity}}));
}

TEST(SpiffeSpec, ThePodMayRepeatTheDriversIssuerButNotNameAnother) {
  AttributeRules rules = Spiffe();
  rules.spiffe.issuer = {"spiffe-ca", "ClusterIssuer", "cert-manager.io"};
  rules.spiffe.issuer_required = true;
  Result<CertificateSpec> same =
      ParseVolumeAttributes(PodContext({{"csi.cert-manager.io/issuer-name", "spiffe-ca"},
                                        {"csi.cert-manager.io/issuer-kind", "ClusterIssuer"}}),
                            rules);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  for (const auto& [key, value] :
       std::map<std::string, std::string>{{"csi.cert-manager.io/issuer-name", "other-ca"},
                                          {"csi.cert-manager.io/issuer-kind", "Issuer"},
                                          {"csi.cert-manager.io/issuer-group", "example.org"}}) {
    std::map<std::string, std::string> context = PodContext({{key, value}});
    if (key != "csi.cert-manager.io/issuer-name") context.erase("csi.cert-manager.io/issuer-name");
    Result<CertificateSpec> spec = ParseVolumeAttributes(context, rules);
    EXPECT_EQ(spec.status().code(), Code::kInvalidArgument) << key;
    EXPECT_THAT(spec.status().message(), StartsWith(key)) << key;
    EXPECT_THAT(spec.status().message(), HasSubstr("spiffe-ca")) << key;
  }
}

TEST(SpiffeSpec, CertManagerWithoutAnIssuerAnywhereIsRefusedNamingTheFlag) {
  std::map<std::string, std::string> context = PodContext();
  context.erase("csi.cert-manager.io/issuer-name");
  AttributeRules rules = Spiffe();
  rules.spiffe.issuer_required = true;
  Result<CertificateSpec> spec = ParseVolumeAttributes(context, rules);
  EXPECT_EQ(spec.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), StartsWith("csi.cert-manager.io/issuer-name"));
  EXPECT_THAT(spec.status().message(), HasSubstr("--spiffe-issuer-name"));
  // Without a driver issuer the pod's own is used, as before.
  context["csi.cert-manager.io/issuer-name"] = "team-ca";
  context["csi.cert-manager.io/issuer-kind"] = "Issuer";
  Result<CertificateSpec> own = ParseVolumeAttributes(context, rules);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->issuer.name, "team-ca");
  EXPECT_EQ(own->issuer.kind, "Issuer");
}

TEST(SpiffeSpec, AShorterDurationIsAllowedALongerOneIsNot) {
  AttributeRules rules = Spiffe();
  rules.spiffe.duration = std::chrono::hours(2);
  Result<CertificateSpec> equal =
      ParseVolumeAttributes(PodContext({{"csi.cert-manager.io/duration", "120m"}}), rules);
  ASSERT_TRUE(equal.ok()) << equal.status().ToString();
  EXPECT_EQ(equal->duration, std::chrono::hours(2));
  Result<CertificateSpec> longer =
      ParseVolumeAttributes(PodContext({{"csi.cert-manager.io/duration", "2h0m1s"}}), rules);
  EXPECT_EQ(longer.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(longer.status().message(), StartsWith("csi.cert-manager.io/duration"));
  EXPECT_THAT(longer.status().message(), HasSubstr("--spiffe-certificate-duration"));
  Result<CertificateSpec> garbage =
      ParseVolumeAttributes(PodContext({{"csi.cert-manager.io/duration", "soon"}}), rules);
  EXPECT_EQ(garbage.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(garbage.status().message(), StartsWith("csi.cert-manager.io/duration"));
}

TEST(SpiffeSpec, FsGroupIsReadAsCsiDriverSpiffeReadsIt) {
  for (const auto& [text, group] :
       std::vector<std::pair<std::string, uint32_t>>{{"2000", 2000},
                                                     {"+2000", 2000},
                                                     {"0002000", 2000},
                                                     {"1", 1},
                                                     {"4294967294", 4294967294u}}) {
    Result<CertificateSpec> spec = ParseVolumeAttributes(
        PodContext({{"spiffe.csi.cert-manager.io/fs-group", text}}), Spiffe());
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status().ToString();
    EXPECT_EQ(spec->fs_group, group) << text;
    EXPECT_EQ(spec->annotations.count("spiffe.csi.cert-manager.io/fs-group"), 0u) << text;
  }
  for (const std::string text : {"", "0", "-0", "-5", "abc", "1.5", " 5", "5 ", "0x10", "1_000",
                                 "4294967295", "4294967296", "99999999999999999999999"}) {
    Result<CertificateSpec> spec = ParseVolumeAttributes(
        PodContext({{"spiffe.csi.cert-manager.io/fs-group", text}}), Spiffe());
    EXPECT_EQ(spec.status().code(), Code::kInvalidArgument) << "\"" << text << "\"";
    EXPECT_THAT(spec.status().message(), StartsWith("spiffe.csi.cert-manager.io/fs-group")) << text;
  }
  Result<CertificateSpec> both_same =
      ParseVolumeAttributes(PodContext({{"spiffe.csi.cert-manager.io/fs-group", "2000"},
                                        {"csi.cert-manager.io/fs-group", "2000"}}),
                            Spiffe());
  ASSERT_TRUE(both_same.ok()) << both_same.status().ToString();
  Result<CertificateSpec> both_differ =
      ParseVolumeAttributes(PodContext({{"spiffe.csi.cert-manager.io/fs-group", "2000"},
                                        {"csi.cert-manager.io/fs-group", "3000"}}),
                            Spiffe());
  EXPECT_EQ(both_differ.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(both_differ.status().message(), StartsWith("csi.cert-manager.io/fs-group"));
}

TEST(SpiffeSpec, CertManagerModeAsksForCsiDriverSpiffesFourUsages) {
  AttributeRules rules = Spiffe();
  rules.spiffe.key_encipherment = true;
  Result<CertificateSpec> spec = ParseVolumeAttributes(PodContext(), rules);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_THAT(spec->usages,
              ElementsAre("digital signature", "key encipherment", "server auth", "client auth"));
}

TEST(SpiffeSettingsCheck, SettingsThatCannotMakeAVolumeAreRefusedNamingTheAttribute) {
  SpiffeSettings settings;
  settings.trust_domain = kTrustDomain;
  EXPECT_TRUE(CheckSpiffeSettings(settings).ok());
  SpiffeSettings same_names = settings;
  same_names.ca_file = "tls.crt";
  EXPECT_EQ(CheckSpiffeSettings(same_names).code(), Code::kInvalidArgument);
  SpiffeSettings bad_name = settings;
  bad_name.private_key_file = "../key.pem";
  Status bad = CheckSpiffeSettings(bad_name);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_THAT(bad.message(), StartsWith("csi.cert-manager.io/privatekey-file"));
}

TEST(SpiffeSettingsCheck, CertmountdRefusesBadSpiffeFlagsAtStartExitTwo) {
  for (const std::string flag : {"--spiffe-file-name-ca=tls.crt", "--spiffe-file-name-key=a/b",
                                 "--spiffe-certificate-duration=soon"}) {
    TempDir dir;
    ProcessResult r = RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--data-root=" + dir.Sub("data"),
                                  std::string("--spiffe-trust-domain=") + kTrustDomain, flag});
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("--spiffe-")) << flag;
    EXPECT_FALSE(fs::exists(dir.Sub("data") + "/state.db")) << flag;
  }
}

// ---- the real certmountd with the local CA -----------------------------------------

// The CSR a CertificateRequest carries, read with OpenSSL.
struct InspectedRequest {
  bool parsed = false;
  int subject_entries = -1;
  std::vector<std::string> uris;
  int other_names = 0;
  bool san_critical = false;
  std::string key_type;
  int key_bits = 0;
};

InspectedRequest InspectRequestPem(const std::string& pem) {
  InspectedRequest out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509_REQ* request = PEM_read_bio_X509_REQ(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (request == nullptr) return out;
  out.parsed = true;
  out.subject_entries = X509_NAME_entry_count(X509_REQ_get_subject_name(request));
  STACK_OF(X509_EXTENSION)* extensions = X509_REQ_get_extensions(request);
  for (int i = 0; i < sk_X509_EXTENSION_num(extensions); ++i) {
    X509_EXTENSION* extension = sk_X509_EXTENSION_value(extensions, i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(extension)) != NID_subject_alt_name) continue;
    out.san_critical = X509_EXTENSION_get_critical(extension) == 1;
    auto* names = static_cast<GENERAL_NAMES*>(X509V3_EXT_d2i(extension));
    for (int j = 0; j < sk_GENERAL_NAME_num(names); ++j) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, j);
      if (name->type != GEN_URI) {
        ++out.other_names;
        continue;
      }
      const ASN1_IA5STRING* uri = name->d.uniformResourceIdentifier;
      out.uris.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                            ASN1_STRING_length(uri));
    }
    GENERAL_NAMES_free(names);
  }
  sk_X509_EXTENSION_pop_free(extensions, X509_EXTENSION_free);
  EVP_PKEY* key = X509_REQ_get0_pubkey(request);
  out.key_type = key != nullptr && EVP_PKEY_get_base_id(key) == EVP_PKEY_EC ? "EC" : "other";
  out.key_bits = key != nullptr ? EVP_PKEY_get_bits(key) : 0;
  X509_REQ_free(request);
  return out;
}

// Whether the first certificate in a PEM file has extension `nid` marked
// critical (false when it lacks it).
bool ExtensionIsCritical(const std::string& path, int nid) {
  FILE* file = fopen(path.c_str(), "r");
  if (file == nullptr) return false;
  X509* cert = PEM_read_X509(file, nullptr, nullptr, nullptr);
  fclose(file);
  if (cert == nullptr) return false;
  const int index = X509_get_ext_by_NID(cert, nid, -1);
  const bool critical = index >= 0 && X509_EXTENSION_get_critical(X509_get_ext(cert, index)) == 1;
  X509_free(cert);
  return critical;
}

// What every SVID this driver issues to KubeletPublishRequest's pod must be.
// With `key_encipherment` (cert-manager mode) the key usage has that bit
// too, as csi-driver-spiffe's requests ask.
void ExpectWebSvid(const std::string& dir, bool key_encipherment = false) {
  InspectedCertificate cert = InspectCertificateFile(dir + "/tls.crt");
  ASSERT_TRUE(cert.parsed) << dir;
  EXPECT_THAT(cert.uris, ElementsAre(kWebIdentity));
  EXPECT_TRUE(cert.dns_names.empty());
  EXPECT_TRUE(cert.ip_addresses.empty());
  EXPECT_TRUE(cert.emails.empty());
  EXPECT_EQ(cert.subject, "");
  EXPECT_FALSE(cert.is_ca);
  EXPECT_EQ(cert.public_key_type, "EC");
  EXPECT_EQ(cert.public_key_bits, 256);
  EXPECT_EQ(cert.key_usage_bits & kDigitalSignatureBit, kDigitalSignatureBit);
  EXPECT_EQ(cert.key_usage_bits & kKeyEnciphermentBit, key_encipherment ? kKeyEnciphermentBit : 0u);
  EXPECT_THAT(cert.extended_key_usages, UnorderedElementsAre("serverAuth", "clientAuth"));
  // X.509-SVID 3.1 and 4.3: with no subject the SAN is critical; key usage always is.
  EXPECT_TRUE(ExtensionIsCritical(dir + "/tls.crt", NID_subject_alt_name));
  EXPECT_TRUE(ExtensionIsCritical(dir + "/tls.crt", NID_key_usage));
  EXPECT_EQ(VerifyChainAt(dir + "/tls.crt", dir + "/ca.crt", cert.not_before), "");
  EXPECT_TRUE(KeyMatchesCertificate(dir + "/tls.key", dir + "/tls.crt"));
  EXPECT_EQ(PemLabel(dir + "/tls.key"), "PRIVATE KEY");  // PKCS#8
}

class SpiffeDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start({std::string("--spiffe-trust-domain=") + kTrustDomain}))
        << daemon_->log();
  }

  grpc::Status Publish(const std::string& volume_id, const std::string& target,
                       const std::map<std::string, std::string>& attributes,
                       const std::vector<std::string>& drop = {}) {
    csi::v1::NodePublishVolumeRequest request =
        KubeletPublishRequest(volume_id, target, attributes);
    for (const std::string& key : drop) request.mutable_volume_context()->erase(key);
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  }

  int Rows() {
    SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
    return db.execAndGet("SELECT count(*) FROM volumes").getInt();
  }

  void ExpectNothingWritten(const std::string& volume_id, const std::string& target) {
    EXPECT_FALSE(IsMountPoint(target));
    EXPECT_EQ(Rows(), 0);
    EXPECT_FALSE(fs::exists(daemon_->data_root() + "/volumes/" + volume_id));
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(SpiffeDaemonTest, PublishMountsTheSvidOfThePodsServiceAccount) {
  const std::string target = daemon_->PodTarget("pod-a");
  grpc::Status status = Publish("csi-svid", target, {{"csi.cert-manager.io/issuer-name", "local"}});
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon_->log();
  ASSERT_TRUE(IsMountPoint(target));
  ExpectWebSvid(target);
  InspectedCertificate cert = InspectCertificateFile(target + "/tls.crt");
  EXPECT_EQ(cert.not_after - cert.not_before, 3600);  // 1h
}

TEST_F(SpiffeDaemonTest, HostileAttributesAreInvalidArgumentAndWriteNothing) {
  const std::map<std::string, std::string> hostile = {
      {"csi.cert-manager.io/uri-sans", "spiffe://example.org/ns/kube-system/sa/admin"},
      {"csi.cert-manager.io/common-name", "admin"},
      {"csi.cert-manager.io/is-ca", "true"},
      {"csi.cert-manager.io/key-algorithm", "RSA"},
  };
  int n = 0;
  for (const auto& [key, value] : hostile) {
    const std::string volume_id = "csi-hostile-" + std::to_string(n);
    const std::string target = daemon_->PodTarget("pod-h" + std::to_string(n++));
    grpc::Status status =
        Publish(volume_id, target, {{"csi.cert-manager.io/issuer-name", "local"}, {key, value}});
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << key;
    EXPECT_THAT(status.error_message(), StartsWith(key));
    ExpectNothingWritten(volume_id, target);
  }
}

TEST_F(SpiffeDaemonTest, MissingPodInfoIsRefusedAndWritesNothing) {
  for (const std::string entry :
       {"csi.storage.k8s.io/serviceAccount.name", "csi.storage.k8s.io/pod.namespace"}) {
    const std::string target = daemon_->PodTarget("pod-nopodinfo");
    grpc::Status status =
        Publish("csi-nopodinfo", target, {{"csi.cert-manager.io/issuer-name", "local"}}, {entry});
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << entry;
    EXPECT_THAT(status.error_message(), HasSubstr(entry));
    EXPECT_THAT(status.error_message(), HasSubstr("podInfoOnMount"));
    ExpectNothingWritten("csi-nopodinfo", target);
  }
}

TEST_F(SpiffeDaemonTest, RenewalKeepsTheIdentity) {
  const std::string target = daemon_->PodTarget("pod-r");
  grpc::Status status = Publish(
      "csi-svid-renew", target,
      {{"csi.cert-manager.io/issuer-name", "local"}, {"csi.cert-manager.io/duration", "3s"}});
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon_->log();
  const std::string first = InspectCertificateFile(target + "/tls.crt").serial_hex;
  ASSERT_FALSE(first.empty());

  // Renewal is due two seconds in; wait (bounded) for the pod's view to change.
  auto current_dir = [&] {
    std::error_code error;
    return (fs::path(target) / fs::read_symlink(fs::path(target) / "..data", error)).string();
  };
  std::string renewed_dir = current_dir();
  for (int i = 0; i < 200; ++i) {
    renewed_dir = current_dir();
    if (InspectCertificateFile(renewed_dir + "/tls.crt").serial_hex != first) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(InspectCertificateFile(renewed_dir + "/tls.crt").serial_hex, first) << daemon_->log();
  ExpectWebSvid(renewed_dir);
}

// csi-driver-spiffe's README pod spec: driver spiffe.csi.cert-manager.io,
// readOnly, no volumeAttributes; and its fs-group example.
class SpiffeDropInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start({"--driver-name=spiffe.csi.cert-manager.io",
                                std::string("--spiffe-trust-domain=") + kTrustDomain}))
        << daemon_->log();
  }

  grpc::Status Publish(const std::string& volume_id, const std::string& target,
                       const std::map<std::string, std::string>& attributes) {
    csi::v1::NodePublishVolumeRequest request =
        KubeletPublishRequest(volume_id, target, attributes);
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  }

  csi::v1::VolumeCondition Condition(const std::string& volume_id, const std::string& target) {
    csi::v1::NodeGetVolumeStatsRequest stats;
    stats.set_volume_id(volume_id);
    stats.set_volume_path(target);
    csi::v1::NodeGetVolumeStatsResponse response;
    grpc::Status got = daemon_->node().NodeGetVolumeStats(CallContext().get(), stats, &response);
    EXPECT_TRUE(got.ok()) << got.error_message();
    return response.volume_condition();
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(SpiffeDropInTest, TheReadmePodSpecPublishesWithNoAttributes) {
  csi::v1::GetPluginInfoResponse info;
  ASSERT_TRUE(daemon_->identity().GetPluginInfo(CallContext().get(), {}, &info).ok());
  EXPECT_EQ(info.name(), "spiffe.csi.cert-manager.io");
  const std::string target = daemon_->PodTarget("pod-readme");
  grpc::Status status = Publish("csi-readme", target, {});
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon_->log();
  ExpectWebSvid(target);
  struct stat key {};
  ASSERT_EQ(stat((target + "/tls.key").c_str(), &key), 0);
  EXPECT_EQ(key.st_mode & 07777, 0600u);
  EXPECT_FALSE(Condition("csi-readme", target).abnormal());
}

TEST_F(SpiffeDropInTest, FsGroupAttributeGivesTheFilesThatGroup) {
  const std::string target = daemon_->PodTarget("pod-fsgroup");
  grpc::Status status =
      Publish("csi-fsgroup", target, {{"spiffe.csi.cert-manager.io/fs-group", "456"}});
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon_->log();
  ExpectWebSvid(target);
  for (const char* file : {"tls.key", "tls.crt", "ca.crt"}) {
    struct stat st {};
    ASSERT_EQ(stat((target + "/" + file).c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_gid, 456u) << file;
  }
  struct stat key {};
  ASSERT_EQ(stat((target + "/tls.key").c_str(), &key), 0);
  EXPECT_EQ(key.st_mode & 07777, 0640u);
  grpc::Status zero = Publish("csi-fsgroup-0", daemon_->PodTarget("pod-fsgroup-0"),
                              {{"spiffe.csi.cert-manager.io/fs-group", "0"}});
  EXPECT_EQ(zero.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(zero.error_message(), StartsWith("spiffe.csi.cert-manager.io/fs-group"));
}

TEST_F(SpiffeDropInTest, VolumeStatsParseWithTheSpiffeRules) {
  // key-size 256 is an ECDSA size only under the SPIFFE rules; the
  // csi-driver rules read it as an RSA size and refuse it.
  const std::string target = daemon_->PodTarget("pod-stats");
  grpc::Status status = Publish("csi-stats", target, {{"csi.cert-manager.io/key-size", "256"}});
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon_->log();
  csi::v1::VolumeCondition condition = Condition("csi-stats", target);
  EXPECT_FALSE(condition.abnormal()) << condition.message();
}

// --spiffe-source-ca-bundle: a ConfigMap-style file (..data swapped) whose
// certificates every volume's CA file holds instead of the signer's CA.
TEST(SpiffeSourceBundle, EveryVolumeCarriesTheFileAndFollowsItsChanges) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  const std::string configmap = dir.Sub("bundle");
  fs::create_directories(configmap);
  auto publish_generation = [&](const std::string& name, const std::string& pem) {
    fs::create_directories(configmap + "/" + name);
    std::ofstream(configmap + "/" + name + "/ca.crt") << pem;
    fs::remove(configmap + "/..data_tmp");
    fs::create_directory_symlink(name, configmap + "/..data_tmp");
    fs::rename(configmap + "/..data_tmp", configmap + "/..data");
  };
  Result<CaMaterial> first =
      GenerateSelfSignedCa("trust one", std::chrono::hours(24), SystemClock::Instance());
  Result<CaMaterial> second =
      GenerateSelfSignedCa("trust two", std::chrono::hours(24), SystemClock::Instance());
  ASSERT_TRUE(first.ok() && second.ok());
  publish_generation("g1", first->certificate_pem);
  fs::create_symlink("..data/ca.crt", configmap + "/ca.crt");

  Daemon daemon(dir.Sub("node"));
  ASSERT_TRUE(daemon.Start({std::string("--spiffe-trust-domain=") + kTrustDomain,
                            "--spiffe-source-ca-bundle=" + configmap + "/ca.crt",
                            "--ca-reload-interval=100ms"}))
      << daemon.log();
  const std::string target = daemon.PodTarget("pod-bundle");
  csi::v1::NodePublishVolumeRequest request = KubeletPublishRequest("csi-bundle", target, {});
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon.node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon.log();
  auto ca_file = [&] {
    std::ifstream in(target + "/ca.crt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(ca_file(), first->certificate_pem);

  publish_generation("g2", second->certificate_pem);
  // The poller reads the file every 100 ms; wait (bounded) for the rewrite.
  for (int i = 0; i < 100 && ca_file() != second->certificate_pem; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(ca_file(), second->certificate_pem) << daemon.log();
}

TEST(SpiffeSourceBundle, AFileThatIsNotACaBundleStopsTheStartNamingTheFlag) {
  TempDir dir;
  std::ofstream(dir.Sub("bundle.pem")) << "not a certificate\n";
  fs::create_directories(dir.Sub("pods"));
  ProcessResult r =
      RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--data-root=" + dir.Sub("data"),
                  "--target-root=" + dir.Sub("pods"), "--endpoint=unix://" + dir.Sub("csi.sock"),
                  std::string("--spiffe-trust-domain=") + kTrustDomain,
                  "--spiffe-source-ca-bundle=" + dir.Sub("bundle.pem"), "--mount-tmpfs=false"});
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--spiffe-source-ca-bundle"));
  ProcessResult without =
      RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--data-root=" + dir.Sub("data2"),
                  "--spiffe-source-ca-bundle=" + dir.Sub("bundle.pem")});
  EXPECT_EQ(without.exit_code, 2) << without.err;
  EXPECT_THAT(without.err, HasSubstr("needs --spiffe-trust-domain"));
}

// ---- cert-manager ------------------------------------------------------------------

TEST(SpiffeCertManager, RequestCarriesTheIdentityInItsCsrAndAnnotation) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  FakeKubeApi api;
  api.PutPod("default", "web-0", kKubeletPodUid);
  const std::string kubeconfig =
      WriteKubeconfig(dir.Sub("kubeconfig"), api.url(), api.server_ca_pem());
  Daemon daemon(dir.Sub("node"));
  ASSERT_TRUE(daemon.Start({"--issuer=cert-manager", "--kubeconfig=" + kubeconfig,
                            std::string("--spiffe-trust-domain=") + kTrustDomain}))
      << daemon.log();
  const std::string target = daemon.PodTarget("pod-cm");
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-svid-cm", target,
                            {{"csi.cert-manager.io/issuer-name", "spiffe-ca"},
                             {"csi.cert-manager.io/issuer-kind", "ClusterIssuer"}});
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon.node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon.log();

  std::vector<json> posts = api.PostedBodies();
  ASSERT_EQ(posts.size(), 1u);
  const json& body = posts[0];
  EXPECT_EQ(body["metadata"]["namespace"], "default");
  EXPECT_EQ(body["metadata"]["annotations"],
            json({{"spiffe.csi.cert-manager.io/identity", kWebIdentity}}));
  EXPECT_EQ(body["spec"]["duration"], "1h0m0s");
  EXPECT_EQ(body["spec"]["isCA"], false);
  EXPECT_EQ(body["spec"]["usages"],
            json({"digital signature", "key encipherment", "server auth", "client auth"}));
  EXPECT_EQ(body["spec"]["issuerRef"],
            json({{"name", "spiffe-ca"}, {"kind", "ClusterIssuer"}, {"group", "cert-manager.io"}}));

  Result<std::string> csr = kube::Base64Decode(body["spec"]["request"].get<std::string>());
  ASSERT_TRUE(csr.ok());
  InspectedRequest inspected = InspectRequestPem(*csr);
  ASSERT_TRUE(inspected.parsed);
  EXPECT_THAT(inspected.uris, ElementsAre(kWebIdentity));
  EXPECT_EQ(inspected.other_names, 0);
  EXPECT_EQ(inspected.subject_entries, 0);
  EXPECT_TRUE(inspected.san_critical);  // RFC 5280: an empty subject makes the SAN critical
  EXPECT_EQ(inspected.key_type, "EC");
  EXPECT_EQ(inspected.key_bits, 256);

  ASSERT_TRUE(IsMountPoint(target));
  ExpectWebSvid(target, /*key_encipherment=*/true);
}

// csi-driver-spiffe's approver in front of the fake cert-manager: the pod
// spec from its README (no attributes) through the real daemon set up as
// deploy/examples/spiffe-csi-cert-manager-io sets it up.
class SpiffeBehindItsApproverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    api_.PutPod("default", "web-0", kKubeletPodUid);
    api_.BindToken(kPodToken, "default", "web-0", "web");
    SpiffeApproverConfig config;
    config.trust_domain = kTrustDomain;
    api_.SetApprover([config, this](const json& request) -> std::optional<std::string> {
      SpiffeApproverOutcome outcome = Evaluate(request, config);
      std::lock_guard lock(mu_);
      outcomes_.push_back(outcome);
      if (outcome.decision == SpiffeApproverDecision::kDenied) return outcome.reason;
      return std::nullopt;
    });
    kubeconfig_ = WriteKubeconfig(dir_.Sub("kubeconfig"), api_.url(), api_.server_ca_pem());
  }

  bool Start(std::vector<std::string> extra) {
    daemon_ = std::make_unique<Daemon>(dir_.Sub("node"));
    std::vector<std::string> args = {"--issuer=cert-manager", "--kubeconfig=" + kubeconfig_,
                                     "--driver-name=spiffe.csi.cert-manager.io",
                                     std::string("--spiffe-trust-domain=") + kTrustDomain,
                                     "--spiffe-issuer-name=my-spiffe-ca"};
    args.insert(args.end(), extra.begin(), extra.end());
    return daemon_->Start(args);
  }

  grpc::Status Publish(const std::string& volume_id, const std::string& target) {
    csi::v1::NodePublishVolumeRequest request = KubeletPublishRequest(volume_id, target, {});
    (*request.mutable_volume_context())["csi.storage.k8s.io/serviceAccount.tokens"] =
        R"({"":{"token":")" + std::string(kPodToken) +
        R"(","expirationTimestamp":"2030-01-01T00:00:00Z"}})";
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  }

  std::vector<SpiffeApproverOutcome> Outcomes() {
    std::lock_guard lock(mu_);
    return outcomes_;
  }

  static constexpr char kPodToken[] = "pod-token-spiffe-web";
  TempDir dir_;
  FakeKubeApi api_;
  std::string kubeconfig_;
  std::unique_ptr<Daemon> daemon_;
  std::mutex mu_;
  std::vector<SpiffeApproverOutcome> outcomes_;
};

TEST_F(SpiffeBehindItsApproverTest, ThePodsOwnTokenGetsTheRequestApproved) {
  ASSERT_TRUE(Start({"--use-token-request"})) << daemon_->log();
  const std::string target = daemon_->PodTarget("pod-approved");
  grpc::Status status = Publish("csi-approved", target);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon_->log();
  std::vector<SpiffeApproverOutcome> outcomes = Outcomes();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].decision, SpiffeApproverDecision::kApproved) << outcomes[0].reason;
  ExpectWebSvid(target, /*key_encipherment=*/true);
}

TEST_F(SpiffeBehindItsApproverTest, TheDriversOwnIdentityIsDeniedAndThePublishSaysWhy) {
  // Without --use-token-request the request is made as certmount's service
  // account, which only the approver's own-service-account mode accepts.
  ASSERT_TRUE(Start({})) << daemon_->log();
  const std::string target = daemon_->PodTarget("pod-denied");
  grpc::Status status = Publish("csi-denied", target);
  EXPECT_FALSE(status.ok());
  std::vector<SpiffeApproverOutcome> outcomes = Outcomes();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].decision, SpiffeApproverDecision::kDenied);
  EXPECT_EQ(outcomes[0].rule, 9) << outcomes[0].reason;
  EXPECT_FALSE(IsMountPoint(target));
}

TEST_F(SpiffeBehindItsApproverTest, APodAskingForAShorterLifetimeIsDeniedForItsDuration) {
  ASSERT_TRUE(Start({"--use-token-request"})) << daemon_->log();
  const std::string target = daemon_->PodTarget("pod-short");
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-short", target, {{"csi.cert-manager.io/duration", "30m"}});
  (*request.mutable_volume_context())["csi.storage.k8s.io/serviceAccount.tokens"] =
      R"({"":{"token":")" + std::string(kPodToken) +
      R"(","expirationTimestamp":"2030-01-01T00:00:00Z"}})";
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  EXPECT_FALSE(status.ok());
  std::vector<SpiffeApproverOutcome> outcomes = Outcomes();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].rule, 2) << outcomes[0].reason;
}

}  // namespace
}  // namespace certmount::testing
