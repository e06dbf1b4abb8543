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
//   No identity is required; dns-names, ip-sans, uri-sans and key-usages are
//       split by splitList (split at ',', TrimSpace, empty items kept), the
//       subject lists by a plain strings.Split (nothing trimmed); uri-sans go
//       through url.ParseRequestURI and are written as URL.String(); durations
//       are time.ParseDuration; a non-empty literal-subject makes the subject
//       fields unread; a known variable whose kubelet entry is missing
//       expands to ""; an unknown one is refused; is-ca is exactly
//       "true"/"false" (validation.go boolValue).
//   pkg/filestore/writer.go         calculateNextIssuanceTime: NotAfter -
//       renew-before when NotBefore + renew-before is before NotAfter (zero:
//       at NotAfter, negative: after it), else two thirds
//   pkg/keystore/pkcs12/pkcs12.go   keystore.p12 = key, chain[0], chain[1:]
//       (the intermediates of tls.crt; ca.crt is not added)
// Every case runs through the real certmountd with its local CA; the
// cert-manager cases also through the fake API server.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>
#include <openssl/x509v3.h>

#include <cstdio>
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
  bool pkcs12_legacy = true;  // LegacyRC2 (OpenSSL 3 reads it with -legacy)
  // The CertificateRequest, where the case also runs through cert-manager.
  bool through_cert_manager = false;
  json usages = json({"digital signature", "key encipherment"});
  std::string duration = "2160h0m0s";
  json issuer_ref = json({{"name", "ca"}, {"kind", "Issuer"}, {"group", "cert-manager.io"}});
  json annotations = nullptr;  // absent
  // The signer puts its CA at the end of tls.crt instead of in status.ca,
  // as an issuer with an intermediate does: chain[1:] is then not empty.
  bool chain_with_ca = false;
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
     // serialNumber), the values of one field in one RDN, DER-sorted (shorter
     // first); printed last RDN and last value first.
     .subject = "serialNumber=0042,CN=web-0,OU=ops,O=default-org+O=Acme,postalCode=10115,"
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
    {.name = "no_identity_at_all", .attributes = {}, .through_cert_manager = true},
    {.name = "dns_names_without_rfc1123_checks_empty_items_kept",
     .attributes = {{"dns-names", " bad_name!,a..b,,-x," + std::string(260, 'd')}},
     .dns_names = {"bad_name!", "a..b", "", "-x", std::string(260, 'd')},
     .through_cert_manager = true},
    {.name = "common_name_longer_than_64",
     .attributes = {{"common-name", std::string(100, 'c')}},
     .subject = "CN=" + std::string(100, 'c'),
     .through_cert_manager = true},
    {.name = "subject_lists_split_without_trimming",
     .attributes = {{"common-name", "web"},
                    {"organizations", "a, b"},
                    {"countries", "USA"},
                    {"localities", "x,,y"}},
     // " b" keeps its space (RFC 2253 prints it escaped); "" stays an item.
     .subject = "CN=web,O=\\ b+O=a,L=y+L=x+L=,C=USA"},
    {.name = "literal_subject_leaves_the_fields_unread",
     .attributes = {{"literal-subject", "CN=lit"}, {"common-name", "${NOT_KNOWN}"}},
     .subject = "CN=lit"},
    {.name = "known_variable_without_kubelet_entry_is_empty",
     .attributes = {{"common-name", "uid-${POD_UID}-"}},
     .foreign_attributes = {{"csi.storage.k8s.io/pod.uid", ""}},
     .subject = "CN=uid--"},
    {.name = "uri_sans_as_parse_request_uri",
     .attributes = {{"uri-sans", "/path, urn:x,SPIFFE://Host/a b"}},
     .uris = {"/path", "urn:x", "spiffe://Host/a%20b"},
     .through_cert_manager = true},
    {.name = "fractional_duration",
     .attributes = {{"common-name", "web"}, {"duration", "1.5h"}},
     .subject = "CN=web",
     .lifetime = 90 * 60,
     .renews_after = 60 * 60,
     .through_cert_manager = true,
     .duration = "1h30m0s"},
    {.name = "sub_second_duration",
     .attributes = {{"common-name", "web"}, {"duration", "1500ms"}},
     .subject = "CN=web",
     .lifetime = 2,  // X.509 has whole seconds; the local CA rounds up
     .renews_after = 1,
     .through_cert_manager = true,
     .duration = "1.5s"},
    {.name = "renew_before_zero_renews_at_not_after",
     .attributes = {{"common-name", "web"}, {"duration", "3h"}, {"renew-before", "0s"}},
     .subject = "CN=web",
     .lifetime = 3 * kHour,
     .renews_after = 3 * kHour},
    {.name = "renew_before_negative_renews_after_expiry",
     .attributes = {{"common-name", "web"}, {"duration", "3h"}, {"renew-before", "-30m"}},
     .subject = "CN=web",
     .lifetime = 3 * kHour,
     .renews_after = 3 * kHour + 30 * 60},
    {.name = "pkcs12_modern_profile",
     .attributes = {{"common-name", "web"},
                    {"pkcs12-enable", "true"},
                    {"pkcs12-password", "pw"},
                    {"pkcs12-profile", "Modern2023"}},
     .subject = "CN=web",
     .pkcs12 = std::pair<std::string, std::string>{"keystore.p12", "pw"},
     .pkcs12_legacy = false,
     .through_cert_manager = true},
    {.name = "pkcs12_holds_the_chain_not_ca_crt",
     .attributes = {{"common-name", "web"}, {"pkcs12-enable", "true"}, {"pkcs12-password", "pw"}},
     .subject = "CN=web",
     .pkcs12 = std::pair<std::string, std::string>{"keystore.p12", "pw"},
     .through_cert_manager = true,
     .chain_with_ca = true},
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The certificates `openssl pkcs12` reads back from the keystore, as PEM.
std::string KeystoreCertificates(const std::string& path, const std::string& password,
                                 bool legacy) {
  std::string command = "openssl pkcs12 ";
  command.append(legacy ? "-legacy " : "")
      .append("-in ")
      .append(path)
      .append(" -passin pass:")
      .append(password)
      .append(" -nokeys 2>/dev/null");
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
    pclose(pipe);
  }
  return output;
}

// keystore.p12 as csi-driver writes it: tls.crt's certificates (leaf and
// intermediates), and no certificate of ca.crt that is not in tls.crt.
void ExpectKeystore(const Case& c, const std::string& target) {
  const std::string certificates =
      KeystoreCertificates(target + "/" + c.pkcs12->first, c.pkcs12->second, c.pkcs12_legacy);
  EXPECT_EQ(CountPemCertificates(certificates),
            CountPemCertificates(Slurp(target + "/" + c.certificate_file)))
      << certificates;
}

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
  // As of the certificate's start: a 1.5 s certificate may be gone by now.
  EXPECT_EQ(VerifyChainAt(cert_path, target + "/" + c.ca_file,
                          InspectCertificateFile(cert_path).not_before),
            "");
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
    ExpectKeystore(c, target);
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
  api.PutPod("default", "web-0", kKubeletPodUid);
  const std::string kubeconfig =
      WriteKubeconfig(dir.Sub("kubeconfig"), api.url(), api.server_ca_pem());
  api.SetOmitCa(c.chain_with_ca);
  Daemon daemon(dir.Sub("node"));
  ASSERT_TRUE(daemon.Start({"--issuer=cert-manager", "--kubeconfig=" + kubeconfig}))
      << daemon.log();
  const std::string target = daemon.PodTarget("pod-" + c.name);
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-cm-" + c.name, target, PodAttributes(c));
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon.node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon.log();

  std::vector<json> posts = api.PostedBodies();
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
  if (!c.chain_with_ca) {
    const std::string cert_path = target + "/" + c.certificate_file;
    EXPECT_EQ(VerifyChainAt(cert_path, target + "/" + c.ca_file,
                            InspectCertificateFile(cert_path).not_before),
              "");
  }
  EXPECT_TRUE(KeyMatchesCertificate(target + "/" + c.key_file, target + "/" + c.certificate_file));
  // The signer copies the request's subject and SANs: what the CSR asked for.
  InspectedCertificate cert = InspectCertificateFile(target + "/" + c.certificate_file);
  ASSERT_TRUE(cert.parsed);
  EXPECT_EQ(cert.subject, c.subject);
  EXPECT_EQ(cert.dns_names, c.dns_names);
  EXPECT_EQ(cert.ip_addresses, c.ip_addresses);
  EXPECT_EQ(cert.uris, c.uris);
  EXPECT_EQ(cert.key_usage_bits, c.key_usage_bits);
  if (c.pkcs12) {
    ExpectKeystore(c, target);
    if (c.chain_with_ca) {
      EXPECT_EQ(CountPemCertificates(Slurp(target + "/" + c.certificate_file)), 2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CsiDriver, CertManagerConformance, ::testing::ValuesIn(CertManagerCases()),
                         CaseName);

// Pod specs csi-driver refuses (its RequestForMetadata returns an error and
// nothing is published), each with a word of certmount's message.
struct Refused {
  std::string name;
  std::map<std::string, std::string> attributes;  // keys without csi.cert-manager.io/
  std::string message;
};
void PrintTo(const Refused& r, std::ostream* out) { *out << r.name; }

const std::vector<Refused> kRefused = {
    // expand: an unknown variable, named with the known ones.
    {"unknown_variable", {{"common-name", "${POD_IP}"}}, "variable \"POD_IP\""},
    {"unknown_bare_variable", {{"dns-names", "$NODE.example"}}, "undefined variable \"NODE\""},
    {"dollar_dollar_is_a_special_variable", {{"common-name", "a$$b"}}, "undefined variable \"$\""},
    {"digit_is_a_special_variable", {{"uri-sans", "spiffe://x/$1"}}, "undefined variable \"1\""},
    // validation.go boolValue.
    {"is_ca_capitalised", {{"is-ca", "True"}}, "\"true\" or \"false\""},
    {"is_ca_one", {{"is-ca", "1"}}, "\"true\" or \"false\""},
    // Go's x509 requires IA5 (ASCII) dNSNames.
    {"dns_name_not_ascii",
     {{"dns-names",
       "b\xc3\xbc"
       "cher.example"}},
     "not ASCII"},
    // url.ParseRequestURI.
    {"uri_relative", {{"uri-sans", "x"}}, "invalid URI for request"},
    {"uri_empty_item", {{"uri-sans", "urn:a,"}}, "empty url"},
    // net.ParseIP("") and cert-manager's usage names.
    {"ip_empty_item", {{"ip-sans", "10.0.0.1,"}}, "not an IPv4 or IPv6 address"},
    {"usage_empty_item", {{"key-usages", "server auth,"}}, "not a cert-manager key usage"},
    // time.ParseDuration has no day unit.
    {"duration_in_days", {{"duration", "90d"}}, "not a Go duration"},
    // Documented difference (docs/attributes.md): csi-driver requests it and
    // gets a certificate that is expired when issued, reissued in a loop.
    {"duration_zero_is_a_documented_difference", {{"duration", "0s"}}, "greater than 0"},
};

class RefusedConformance : public ::testing::TestWithParam<Refused> {};

TEST_P(RefusedConformance, RefusesWhatCsiDriverRefuses) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  ASSERT_TRUE(daemon.Start()) << daemon.log();
  const Refused& r = GetParam();
  std::map<std::string, std::string> attributes = {{"csi.cert-manager.io/issuer-name", "ca"}};
  for (const auto& [key, value] : r.attributes) attributes["csi.cert-manager.io/" + key] = value;
  const std::string target = daemon.PodTarget("pod-" + r.name);
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-" + r.name, target, attributes);
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon.node().NodePublishVolume(CallContext().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message() << "\n"
      << daemon.log();
  EXPECT_NE(status.error_message().find(r.message), std::string::npos) << status.error_message();
  EXPECT_FALSE(fs::exists(target + "/tls.crt"));
  SQLite::Database db(daemon.data_root() + "/state.db", SQLite::OPEN_READONLY);
  SQLite::Statement rows(db, "SELECT COUNT(*) FROM volumes");
  ASSERT_TRUE(rows.executeStep());
  EXPECT_EQ(rows.getColumn(0).getInt(), 0);
}

INSTANTIATE_TEST_SUITE_P(CsiDriver, RefusedConformance, ::testing::ValuesIn(kRefused),
                         [](const ::testing::TestParamInfo<Refused>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace certmount::testing
