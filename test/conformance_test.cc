// Conformance with cert-manager csi-driver: pod-spec volume attributes as a
// csi-driver user writes them, each with the certificate (and, through
// cert-manager, the CertificateRequest) csi-driver's rules give for it.
// The expectations are written from csi-driver's source, not from certmount:
//   pkg/apis/v1alpha1/types.go      the keys
//   pkg/apis/defaults/defaults.go   issuer-kind Issuer, issuer-group
//       cert-manager.io, is-ca false, duration 2160h (cert-manager's default),
//       files ca.crt/tls.crt/tls.key, usages "digital signature,key encipherment"
//   pkg/requestgen/generator.go     ${VAR} and $VAR expansion (os.Expand) of
//       common-name, subject lists, dns-names and uri-sans, not of ip-sans or
//       serialnumber; isCA is is-ca lower-cased == "true"; every key with a
//       domain other than csi.cert-manager.io and csi.storage.k8s.io becomes
//       an annotation of the CertificateRequest
//   key defaults (docs/attributes.md): RSA 2048 PKCS#1; ECDSA 256 and Ed25519
//       PKCS#8; renewal at two thirds of the lifetime unless renew-before fits.
// Every case runs through the real certmountd with its local CA; the
// cert-manager cases also through the fake API server.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>
#include <openssl/x509v3.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "support/daemon.h"
#include "support/fake_kube_api.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr long long kHour = 3600;
constexpr unsigned kDefaultKeyUsage = KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT;

// What csi-driver gives for one pod spec.
struct Case {
  std::string name;
  std::map<std::string, std::string> attributes;               // keys without csi.cert-manager.io/
  std::map<std::string, std::string> foreign_attributes = {};  // full keys
  // The certificate.
  std::string subject = "";
  std::vector<std::string> dns_names = {};
  std::vector<std::string> ip_addresses = {};
  std::vector<std::string> uris = {};
  unsigned key_usage_bits = kDefaultKeyUsage;
  std::vector<std::string> extended_key_usages = {};
  bool is_ca = false;
  std::string key_type = "RSA";
  int key_bits = 2048;
  std::string key_pem_label = "RSA PRIVATE KEY";  // PKCS#1
  long long lifetime = 2160 * kHour;
  long long renews_after = 1440 * kHour;  // from not_before: two thirds
  std::string certificate_file = "tls.crt";
  std::string key_file = "tls.key";
  std::string ca_file = "ca.crt";
  std::optional<std::pair<std::string, std::string>> pkcs12 = std::nullopt;  // file, password
  // The CertificateRequest, where the case also runs through cert-manager.
  bool through_cert_manager = false;
  json usages = json({"digital signature", "key encipherment"});
  std::string duration = "2160h0m0s";
  json issuer_ref = json({{"name", "ca"}, {"kind", "Issuer"}, {"group", "cert-manager.io"}});
  json annotations = nullptr;  // absent
};
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

// KubeletPublishRequest's pod: web-0 in default, service account web.
const std::vector<Case> kCases = {
    {.name = "defaults",
     .attributes = {{"common-name", "web"}},
     .subject = "CN=web",
     .through_cert_manager = true},
    {.name = "subject_fields",
     .attributes = {{"common-name", "$POD_NAME"},
                    {"organizations", "${POD_NAMESPACE}-org,Acme"},
                    {"organizationalunits", "ops"},
                    {"countries", "DE"},
                    {"provinces", "Berlin"},
                    {"localities", "Berlin"},
                    {"streetaddresses", "Main 1"},
                    {"postalcodes", "10115"},
                    {"serialnumber", "0042"}},
     // Go's pkix.Name order (C, ST, L, street, postalCode, O, OU, CN,
     // serialNumber), printed last RDN first.
     .subject = "serialNumber=0042,CN=web-0,OU=ops,O=Acme,O=default-org,postalCode=10115,"
                "street=Main 1,L=Berlin,ST=Berlin,C=DE"},
    {.name = "literal_subject",
     .attributes = {{"literal-subject", "CN=${POD_NAME},O=${POD_NAMESPACE}"}},
     .subject = "CN=web-0,O=default"},
    {.name = "sans",
     .attributes = {{"dns-names", "${POD_NAME}.${POD_NAMESPACE}.svc, $POD_NAME"},
                    {"ip-sans", "10.0.0.7,2001:db8::1"},
                    {"uri-sans",
                     "spiffe://cluster.local/ns/${POD_NAMESPACE}/sa/$SERVICE_ACCOUNT_NAME"}},
     .dns_names = {"web-0.default.svc", "web-0"},
     .ip_addresses = {"10.0.0.7", "2001:DB8:0:0:0:0:0:1"},
     .uris = {"spiffe://cluster.local/ns/default/sa/web"}},
    {.name = "usages",
     .attributes = {{"dns-names", "a.example"},
                    {"key-usages", "digital signature,key encipherment,server auth,client auth"}},
     .dns_names = {"a.example"},
     .extended_key_usages = {"serverAuth", "clientAuth"},
     .through_cert_manager = true,
     .usages = json({"digital signature", "key encipherment", "server auth", "client auth"})},
    {.name = "ecdsa_defaults_to_p256_pkcs8",
     .attributes = {{"common-name", "web"}, {"key-algorithm", "ecdsa"}},
     .subject = "CN=web",
     .key_type = "EC",
     .key_bits = 256,
     .key_pem_label = "PRIVATE KEY"},
    {.name = "ecdsa_384",
     .attributes = {{"common-name", "web"}, {"key-algorithm", "ECDSA"}, {"key-size", "384"}},
     .subject = "CN=web",
     .key_type = "EC",
     .key_bits = 384,
     .key_pem_label = "PRIVATE KEY"},
    {.name = "ed25519_pkcs8",
     .attributes = {{"common-name", "web"}, {"key-algorithm", "Ed25519"}},
     .subject = "CN=web",
     .key_type = "ED25519",
     .key_bits = 256,
     .key_pem_label = "PRIVATE KEY"},
    {.name = "rsa_4096_pkcs8",
     .attributes = {{"common-name", "web"},
                    {"key-algorithm", "RSA"},
                    {"key-size", "4096"},
                    {"key-encoding", "pkcs8"}},
     .subject = "CN=web",
     .key_bits = 4096,
     .key_pem_label = "PRIVATE KEY"},
    {.name = "duration_and_renew_before",
     .attributes = {{"common-name", "web"}, {"duration", "48h"}, {"renew-before", "12h"}},
     .subject = "CN=web",
     .lifetime = 48 * kHour,
     .renews_after = 36 * kHour,
     .through_cert_manager = true,
     .duration = "48h0m0s"},
    {.name = "renew_before_longer_than_lifetime_renews_at_two_thirds",
     .attributes = {{"common-name", "web"}, {"duration", "3h"}, {"renew-before", "5h"}},
     .subject = "CN=web",
     .lifetime = 3 * kHour,
     .renews_after = 2 * kHour},
    {.name = "is_ca",
     .attributes = {{"common-name", "sub-ca"},
                    {"is-ca", "true"},
                    {"key-usages", "cert sign,digital signature"},
                    {"issuer-name", "root"},
                    {"issuer-kind", "ClusterIssuer"},
                    {"issuer-group", "example.org"}},
     .subject = "CN=sub-ca",
     .key_usage_bits = KU_KEY_CERT_SIGN | KU_DIGITAL_SIGNATURE,
     .is_ca = true,
     .through_cert_manager = true,
     .usages = json({"cert sign", "digital signature"}),
     .issuer_ref = json({{"name", "root"}, {"kind", "ClusterIssuer"}, {"group", "example.org"}})},
    {.name = "file_names",
     .attributes = {{"common-name", "web"},
                    {"certificate-file", "cert.pem"},
                    {"privatekey-file", "key.pem"},
                    {"ca-file", "root.pem"}},
     .subject = "CN=web",
     .certificate_file = "cert.pem",
     .key_file = "key.pem",
     .ca_file = "root.pem"},
    {.name = "pkcs12",
     .attributes = {{"common-name", "web"},
                    {"pkcs12-enable", "true"},
                    {"pkcs12-password", "changeit"}},
     .subject = "CN=web",
     .pkcs12 = std::pair<std::string, std::string>{"keystore.p12", "changeit"}},
    {.name = "annotations_from_foreign_keys",
     .attributes = {{"common-name", "web"}},
     .foreign_attributes = {{"example.com/team", "payments"}, {"no-domain", "ignored"}},
     .subject = "CN=web",
     .through_cert_manager = true,
     .annotations = json({{"example.com/team", "payments"}})},
};

std::map<std::string, std::string> PodAttributes(const Case& c) {
  std::map<std::string, std::string> attributes = c.foreign_attributes;
  attributes["csi.cert-manager.io/issuer-name"] = "ca";
  for (const auto& [key, value] : c.attributes) attributes["csi.cert-manager.io/" + key] = value;
  return attributes;
}

// The certificate and files a case's volume must hold.
void ExpectCertificate(const Case& c, const std::string& target, Daemon& daemon,
                       const std::string& volume_id) {
  const std::string cert_path = target + "/" + c.certificate_file;
  const std::string key_path = target + "/" + c.key_file;
  EXPECT_EQ(VerifyChain(cert_path, target + "/" + c.ca_file), "");
  EXPECT_TRUE(KeyMatchesCertificate(key_path, cert_path));
  EXPECT_EQ(PemLabel(key_path), c.key_pem_label);
  InspectedCertificate cert = InspectCertificateFile(cert_path);
  ASSERT_TRUE(cert.parsed);
  EXPECT_EQ(cert.subject, c.subject);
  EXPECT_EQ(cert.dns_names, c.dns_names);
  EXPECT_EQ(cert.ip_addresses, c.ip_addresses);
  EXPECT_EQ(cert.uris, c.uris);
  EXPECT_EQ(cert.key_usage_bits, c.key_usage_bits);
  EXPECT_EQ(cert.extended_key_usages, c.extended_key_usages);
  EXPECT_EQ(cert.is_ca, c.is_ca);
  EXPECT_EQ(cert.public_key_type, c.key_type);
  EXPECT_EQ(cert.public_key_bits, c.key_bits);
  EXPECT_EQ(cert.not_after - cert.not_before, c.lifetime);
  if (c.pkcs12) {
    EXPECT_TRUE(OpensPkcs12(target + "/" + c.pkcs12->first, c.pkcs12->second));
  } else {
    EXPECT_FALSE(fs::exists(target + "/keystore.p12"));
  }
  SQLite::Database db(daemon.data_root() + "/state.db", SQLite::OPEN_READONLY);
  SQLite::Statement row(db,
                        "SELECT next_issuance_at - not_before FROM volumes WHERE volume_id = ?");
  row.bind(1, volume_id);
  ASSERT_TRUE(row.executeStep());
  EXPECT_EQ(row.getColumn(0).getInt64(), c.renews_after);
}

class LocalCaConformance : public ::testing::TestWithParam<Case> {};

TEST_P(LocalCaConformance, IssuesWhatCsiDriverWould) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  ASSERT_TRUE(daemon.Start()) << daemon.log();
  const Case& c = GetParam();
  const std::string target = daemon.PodTarget("pod-" + c.name);
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-" + c.name, target, PodAttributes(c));
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon.node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon.log();
  ExpectCertificate(c, target, daemon, "csi-" + c.name);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(CsiDriver, LocalCaConformance, ::testing::ValuesIn(kCases), CaseName);

std::vector<Case> CertManagerCases() {
  std::vector<Case> cases;
  for (const Case& c : kCases) {
    if (c.through_cert_manager) cases.push_back(c);
  }
  return cases;
}

class CertManagerConformance : public ::testing::TestWithParam<Case> {};

TEST_P(CertManagerConformance, RequestsWhatCsiDriverWould) {
  CERTMOUNT_REQUIRE_ROOT();
  const Case& c = GetParam();
  TempDir dir;
  FakeKubeApi api;
  api.PutPod("default", "web-0", "0b5c1c8e-8f5e-4c4e-9d3a-2f9a4f0e6b11");
  const std::string kubeconfig =
      WriteKubeconfig(dir.Sub("kubeconfig"), api.url(), api.server_ca_pem());
  Daemon daemon(dir.Sub("node"));
  ASSERT_TRUE(daemon.Start({"--issuer=cert-manager", "--kubeconfig=" + kubeconfig}))
      << daemon.log();
  const std::string target = daemon.PodTarget("pod-" + c.name);
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-cm-" + c.name, target, PodAttributes(c));
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon.node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon.log();

  std::vector<json> posts;
  for (const RecordedRequest& recorded : api.Requests()) {
    if (recorded.method == "POST") posts.push_back(json::parse(recorded.body));
  }
  ASSERT_EQ(posts.size(), 1u);
  const json& spec = posts[0]["spec"];
  EXPECT_EQ(spec["usages"], c.usages);
  EXPECT_EQ(spec.value("isCA", false), c.is_ca);
  EXPECT_EQ(spec["duration"], c.duration);
  EXPECT_EQ(spec["issuerRef"], c.issuer_ref);
  const json& metadata = posts[0]["metadata"];
  if (c.annotations.is_null()) {
    EXPECT_FALSE(metadata.contains("annotations")) << metadata.dump();
  } else {
    EXPECT_EQ(metadata["annotations"], c.annotations);
  }
  EXPECT_EQ(VerifyChain(target + "/" + c.certificate_file, target + "/" + c.ca_file), "");
  EXPECT_TRUE(KeyMatchesCertificate(target + "/" + c.key_file, target + "/" + c.certificate_file));
}

INSTANTIATE_TEST_SUITE_P(CsiDriver, CertManagerConformance, ::testing::ValuesIn(CertManagerCases()),
                         CaseName);

}  // namespace
}  // namespace certmount::testing
