// The tables below are the compatibility contract for volume attributes:
// every accepted spelling and every rejection is listed here.
#include "issue/attributes.h"
#include "issue/volume_attributes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "issue/go_duration.h"
#include "issue/renewal_time.h"

namespace certmount {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using Attributes = std::map<std::string, std::string>;

constexpr char kPrefix[] = "csi.cert-manager.io/";

std::string Key(const std::string& name) { return kPrefix + name; }

// What kubelet sends for every pod, plus the two attributes every test needs.
Attributes Base() {
  return {
      {std::string(kPodName), "web-0"},
      {std::string(kPodNamespace), "shop"},
      {std::string(kPodUid), "0b0c1d2e-aaaa-bbbb-cccc-0123456789ab"},
      {std::string(kServiceAccountName), "web-sa"},
      {std::string(kEphemeral), "true"},
      {Key("issuer-name"), "ca-issuer"},
      {Key("dns-names"), "web.example.com"},
  };
}

// Base() with `changes` applied; an empty-named value "<erase>" removes a key.
constexpr char kErase[] = "<erase>";
Attributes With(std::map<std::string, std::string> changes) {
  Attributes attributes = Base();
  for (auto& [key, value] : changes) {
    std::string full = key.find('/') == std::string::npos ? Key(key) : key;
    if (value == kErase) {
      attributes.erase(full);
    } else {
      attributes[full] = value;
    }
  }
  return attributes;
}

// The spec Base() yields.
CertificateSpec BaseSpec() {
  CertificateSpec spec;
  spec.issuer.name = "ca-issuer";
  spec.dns_names = {"web.example.com"};
  return spec;
}

void ExpectSpecEq(const CertificateSpec& actual, const CertificateSpec& expected) {
  EXPECT_EQ(actual.issuer.name, expected.issuer.name);
  EXPECT_EQ(actual.issuer.kind, expected.issuer.kind);
  EXPECT_EQ(actual.issuer.group, expected.issuer.group);
  EXPECT_EQ(actual.subject.common_name, expected.subject.common_name);
  EXPECT_EQ(actual.subject.organizations, expected.subject.organizations);
  EXPECT_EQ(actual.subject.organizational_units, expected.subject.organizational_units);
  EXPECT_EQ(actual.subject.countries, expected.subject.countries);
  EXPECT_EQ(actual.subject.provinces, expected.subject.provinces);
  EXPECT_EQ(actual.subject.localities, expected.subject.localities);
  EXPECT_EQ(actual.subject.street_addresses, expected.subject.street_addresses);
  EXPECT_EQ(actual.subject.postal_codes, expected.subject.postal_codes);
  EXPECT_EQ(actual.subject.serial_number, expected.subject.serial_number);
  EXPECT_EQ(actual.literal_subject, expected.literal_subject);
  EXPECT_EQ(actual.dns_names, expected.dns_names);
  EXPECT_EQ(actual.ip_addresses, expected.ip_addresses);
  EXPECT_EQ(actual.uris, expected.uris);
  EXPECT_EQ(actual.email_addresses, expected.email_addresses);
  EXPECT_EQ(actual.duration, expected.duration);
  EXPECT_EQ(actual.renew_before, expected.renew_before);
  EXPECT_EQ(actual.is_ca, expected.is_ca);
  EXPECT_EQ(actual.usages, expected.usages);
  EXPECT_EQ(actual.key_algorithm, expected.key_algorithm);
  EXPECT_EQ(actual.key_size, expected.key_size);
  EXPECT_EQ(actual.key_encoding, expected.key_encoding);
  EXPECT_EQ(actual.reuse_private_key, expected.reuse_private_key);
  EXPECT_EQ(actual.certificate_file, expected.certificate_file);
  EXPECT_EQ(actual.private_key_file, expected.private_key_file);
  EXPECT_EQ(actual.ca_file, expected.ca_file);
  EXPECT_EQ(actual.fs_group, expected.fs_group);
  EXPECT_EQ(actual.pkcs12_enable, expected.pkcs12_enable);
  EXPECT_EQ(actual.pkcs12_filename, expected.pkcs12_filename);
  EXPECT_EQ(actual.pkcs12_password, expected.pkcs12_password);
  EXPECT_EQ(actual.pkcs12_profile, expected.pkcs12_profile);
  EXPECT_EQ(actual.jks_enable, expected.jks_enable);
  EXPECT_EQ(actual.jks_filename, expected.jks_filename);
  EXPECT_EQ(actual.jks_truststore_filename, expected.jks_truststore_filename);
  EXPECT_EQ(actual.jks_password, expected.jks_password);
  EXPECT_EQ(actual.wants_pod_ip, expected.wants_pod_ip);
  EXPECT_EQ(actual.wants_pod_ips, expected.wants_pod_ips);
  EXPECT_EQ(actual.pod_ip_dns_names, expected.pod_ip_dns_names);
  EXPECT_EQ(actual.pod_ip_readiness_gate, expected.pod_ip_readiness_gate);
  EXPECT_EQ(actual.annotations, expected.annotations);
  EXPECT_EQ(actual.credential_bundle_file, expected.credential_bundle_file);
}

struct GoodCase {
  std::string name;
  Attributes attributes;
  // Turns BaseSpec() into the expected spec.
  std::function<void(CertificateSpec&)> expect;
};

std::string CaseName(const ::testing::TestParamInfo<GoodCase>& info) { return info.param.name; }

class ParseAttributesGoodTest : public ::testing::TestWithParam<GoodCase> {};

TEST_P(ParseAttributesGoodTest, ReachesTheSpec) {
  Result<CertificateSpec> spec = ParseVolumeAttributes(GetParam().attributes, {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  CertificateSpec expected = BaseSpec();
  GetParam().expect(expected);
  ExpectSpecEq(*spec, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Attributes, ParseAttributesGoodTest,
    ::
        testing::
            Values(
                GoodCase{"Defaults", Base(), [](CertificateSpec&) {}},
                GoodCase{"EmptyValuesMeanUnset",
                         With({{"issuer-kind", ""},
                               {"duration", ""},
                               {"key-usages", ""},
                               {"certificate-file", ""},
                               {"common-name", ""}}),
                         [](CertificateSpec&) {}},
                GoodCase{"Issuer",
                         With({{"issuer-kind", "ClusterIssuer"},
                               {"issuer-group", "awspca.cert-manager.io"}}),
                         [](CertificateSpec& s) {
                           s.issuer.kind = "ClusterIssuer";
                           s.issuer.group = "awspca.cert-manager.io";
                         }},
                GoodCase{"FullSubject",
                         With({{"common-name", "web"},
                               {"organizations", "Acme, Acme Labs"},  // not trimmed
                               {"organizational-units", "Shop"},
                               {"countries", "DE,US"},
                               {"provinces", "Bavaria"},
                               {"localities", "Munich"},
                               {"street-addresses", "Main St 1"},
                               {"postal-codes", "80331"},
                               {"serial-number", "SN-42"}}),
                         [](CertificateSpec& s) {
                           s.subject.common_name = "web";
                           s.subject.organizations = {"Acme", " Acme Labs"};
                           s.subject.organizational_units = {"Shop"};
                           s.subject.countries = {"DE", "US"};
                           s.subject.provinces = {"Bavaria"};
                           s.subject.localities = {"Munich"};
                           s.subject.street_addresses = {"Main St 1"};
                           s.subject.postal_codes = {"80331"};
                           s.subject.serial_number = "SN-42";
                         }},
                GoodCase{"LiteralSubject",
                         With({{"literal-subject", "CN=web+UID=1,OU=a\\,b,O=Acme,C=DE"}}),
                         [](CertificateSpec& s) {
                           s.literal_subject = "CN=web+UID=1,OU=a\\,b,O=Acme,C=DE";
                         }},
                GoodCase{"LiteralSubjectAloneIsAnIdentity",
                         With({{"dns-names", kErase}, {"literal-subject", "CN=x"}}),
                         [](CertificateSpec& s) {
                           s.dns_names.clear();
                           s.literal_subject = "CN=x";
                         }},
                GoodCase{"CommonNameAloneIsAnIdentity",
                         With({{"dns-names", kErase}, {"common-name", "just-a-name"}}),
                         [](CertificateSpec& s) {
                           s.dns_names.clear();
                           s.subject.common_name = "just-a-name";
                         }},
                GoodCase{
                    "Sans",
                    With({{"dns-names", " a.example.com, ,*.b.example.com,C-1.Example.COM,"},
                          {"ip-sans", "192.0.2.1, 2001:DB8:0:0:0:0:0:1,::ffff:192.0.2.5"},
                          {"uri-sans", "spiffe://cluster.local/ns/shop/sa/web,urn:uuid:1"},
                          {"email-sans", "ops@example.com"}}),
                    [](CertificateSpec& s) {
                      // splitList: trimmed, empty items kept.
                      s.dns_names = {"a.example.com", "", "*.b.example.com", "C-1.Example.COM", ""};
                      // Go writes an IPv4-mapped address as IPv4.
                      s.ip_addresses = {"192.0.2.1", "2001:db8::1", "192.0.2.5"};
                      s.uris = {"spiffe://cluster.local/ns/shop/sa/web", "urn:uuid:1"};
                      s.email_addresses = {"ops@example.com"};
                    }},
                GoodCase{"PodIpsAwaitTheirAddresses",
                         With({{"ip-sans", "10.0.0.1, ${POD_IP},$POD_IPS"},
                               {"pod-ip-readiness-gate", "true"}}),
                         [](CertificateSpec& s) {
                           s.ip_addresses = {"10.0.0.1"};
                           s.wants_pod_ip = true;
                           s.wants_pod_ips = true;
                           s.pod_ip_readiness_gate = true;
                         }},
                GoodCase{"PodIpInDnsNamesAwaitsItsAddresses",
                         With({{"dns-names", "a.example,${POD_IP}.$POD_NAMESPACE.pod,$POD_IPS.x"},
                               {"pod-ip-readiness-gate", "true"}}),
                         [](CertificateSpec& s) {
                           s.dns_names = {"a.example"};
                           s.pod_ip_dns_names = {"${POD_IP}.shop.pod", "${POD_IPS}.x"};
                           s.pod_ip_readiness_gate = true;
                         }},
                GoodCase{"IpAloneIsAnIdentity",
                         With({{"dns-names", kErase}, {"ip-sans", "10.0.0.1"}}),
                         [](CertificateSpec& s) {
                           s.dns_names.clear();
                           s.ip_addresses = {"10.0.0.1"};
                         }},
                GoodCase{"UriAloneIsAnIdentity",
                         With({{"dns-names", kErase}, {"uri-sans", "spiffe://x/y"}}),
                         [](CertificateSpec& s) {
                           s.dns_names.clear();
                           s.uris = {"spiffe://x/y"};
                         }},
                GoodCase{"EmailAloneIsAnIdentity",
                         With({{"dns-names", kErase}, {"email-sans", "a@b"}}),
                         [](CertificateSpec& s) {
                           s.dns_names.clear();
                           s.email_addresses = {"a@b"};
                         }},
                GoodCase{"Templates",
                         With({{"common-name", "${SERVICE_ACCOUNT_NAME}.${POD_NAMESPACE}"},
                               {"dns-names",
                                "${POD_NAME}.${POD_NAMESPACE}.svc.cluster.local,${POD_NAME}"},
                               {"uri-sans",
                                "spiffe://cluster.local/ns/${POD_NAMESPACE}/pod/${POD_NAME}/"
                                "${POD_UID}"},
                               {"email-sans", "${POD_NAME}@${POD_NAMESPACE}.example.com"},
                               {"organizational-units", "${POD_NAMESPACE}"}}),
                         [](CertificateSpec& s) {
                           s.subject.common_name = "web-sa.shop";
                           s.dns_names = {"web-0.shop.svc.cluster.local", "web-0"};
                           s.uris = {
                               "spiffe://cluster.local/ns/shop/pod/web-0/"
                               "0b0c1d2e-aaaa-bbbb-cccc-0123456789ab"};
                           s.email_addresses = {"web-0@shop.example.com"};
                           s.subject.organizational_units = {"shop"};
                         }},
                GoodCase{"TemplateInLiteralSubject",
                         With({{"literal-subject", "CN=${POD_NAME},OU=${POD_NAMESPACE}"}}),
                         [](CertificateSpec& s) { s.literal_subject = "CN=web-0,OU=shop"; }},
                GoodCase{"BareVariablesAsGoOsExpand",
                         With({{"uri-sans", "spiffe://x/$POD_NAMESPACE/$POD_NAME/$/a$"},
                               {"dns-names", "$POD_NAME.$POD_NAMESPACE.svc,${web"},
                               {"common-name", "a${}b"}}),
                         [](CertificateSpec& s) {
                           s.uris = {"spiffe://x/shop/web-0/$/a$"};
                           // "${" without "}" and "${}" are dropped, as os.Expand does.
                           s.dns_names = {"web-0.shop.svc", "web"};
                           s.subject.common_name = "ab";
                         }},
                GoodCase{"CsiDriverSpellings",
                         With({{"organizationalunits", "Shop,Ops"},
                               {"streetaddresses", "Main St 1"},
                               {"postalcodes", "80331"},
                               {"serialnumber", "SN-42"}}),
                         [](CertificateSpec& s) {
                           s.subject.organizational_units = {"Shop", "Ops"};
                           s.subject.street_addresses = {"Main St 1"};
                           s.subject.postal_codes = {"80331"};
                           s.subject.serial_number = "SN-42";
                         }},
                GoodCase{"QuotedItemsKeepTheirCommas",
                         With({{"organizations", "\"Acme, Inc.\",Other,\"Say \"\"Hi\"\"\", \"x\""},
                               {"localities", "a\"b,c"}}),
                         [](CertificateSpec& s) {
                           // ` "x"` does not start with '"': split as csi-driver.
                           s.subject.organizations = {"Acme, Inc.", "Other", "Say \"Hi\"",
                                                      " \"x\""};
                           s.subject.localities = {"a\"b", "c"};
                         }},
                GoodCase{"UnknownCsiDriverKeysAndKeysWithoutDomainAreIgnored",
                         [] {
                           Attributes a = With({{"keystore-type", "PKCS12"}, {"dns-name", "x"}});
                           a["issuer-name"] = "x";
                           a["color"] = "blue";
                           return a;
                         }(),
                         [](CertificateSpec&) {}},
                GoodCase{"RenewBeforeLongerThanDurationIsKept",
                         With({{"duration", "24h"}, {"renew-before", "25h"}}),
                         [](CertificateSpec& s) {
                           s.duration = hours(24);
                           s.renew_before = hours(25);
                         }},
                GoodCase{"Lifetime", With({{"duration", "1h30m"}, {"renew-before", "30m"}}),
                         [](CertificateSpec& s) {
                           s.duration = minutes(90);
                           s.renew_before = minutes(30);
                         }},
                GoodCase{"ShortLifetimeForTests",
                         With({{"duration", "2s"}, {"renew-before", "1s"}}),
                         [](CertificateSpec& s) {
                           s.duration = seconds(2);
                           s.renew_before = seconds(1);
                         }},
                GoodCase{"FractionalDurationOfWholeSeconds", With({{"duration", "1.5h"}}),
                         [](CertificateSpec& s) { s.duration = minutes(90); }},
                GoodCase{"IsCa", With({{"is-ca", "true"}}),
                         [](CertificateSpec& s) { s.is_ca = true; }},
                GoodCase{"NoIdentityAtAll", With({{"dns-names", kErase}}),
                         [](CertificateSpec& s) { s.dns_names.clear(); }},
                GoodCase{"OnlyCommasAreEmptyDnsNames", With({{"dns-names", " , ,"}}),
                         [](CertificateSpec& s) {
                           s.dns_names = {"", "", ""};
                         }},
                GoodCase{"DnsNamesAsCsiDriverTakesThem",
                         With({{"dns-names", "bad_name!,a..b,-x, *,a b," + std::string(300, 'd')}}),
                         [](CertificateSpec& s) {
                           s.dns_names = {"bad_name!", "a..b", "-x",
                                          "*",         "a b",  std::string(300, 'd')};
                         }},
                GoodCase{"LongSubjectValuesAndAnyCountry",
                         With({{"common-name", std::string(100, 'c')},
                               {"organizations", std::string(200, 'o')},
                               {"countries", "DEU,12"},
                               {"serialnumber", "a@b*"}}),
                         [](CertificateSpec& s) {
                           s.subject.common_name = std::string(100, 'c');
                           s.subject.organizations = {std::string(200, 'o')};
                           s.subject.countries = {"DEU", "12"};
                           s.subject.serial_number = "a@b*";
                         }},
                GoodCase{"SubjectListsKeepSpacesAndEmptyItems",
                         With({{"organizations", "a, b,,c,"}, {"localities", " "}}),
                         [](CertificateSpec& s) {
                           s.subject.organizations = {"a", " b", "", "c", ""};
                           s.subject.localities = {" "};
                         }},
                GoodCase{"SerialNumberIsNotExpanded", With({{"serialnumber", "$POD_UID"}}),
                         [](CertificateSpec& s) { s.subject.serial_number = "$POD_UID"; }},
                GoodCase{"LiteralSubjectIgnoresTheSubjectFields",
                         With({{"literal-subject", "CN=a"},
                               {"common-name", "${NOT_A_VARIABLE}"},
                               {"organizations", "Acme"},
                               {"serial-number", "1"}}),
                         [](CertificateSpec& s) { s.literal_subject = "CN=a"; }},
                GoodCase{"KnownVariableWithoutKubeletEntryIsEmpty",
                         With({{std::string(kPodUid), kErase},
                               {std::string(kServiceAccountName), ""},
                               {"uri-sans", "spiffe://x/${POD_UID}"},
                               {"common-name", "a${SERVICE_ACCOUNT_NAME}b"}}),
                         [](CertificateSpec& s) {
                           s.uris = {"spiffe://x/"};
                           s.subject.common_name = "ab";
                         }},
                GoodCase{"UrisAsGoParseRequestUri",
                         With({{"uri-sans",
                                "/path,urn:x,spiffe:,SPIFFE://Host/a b,*,https://u@h:8443/"
                                "?q=1"}}),
                         [](CertificateSpec& s) {
                           s.uris = {"/path",   "urn:x",
                                     "spiffe:", "spiffe://Host/a%20b",
                                     "*",       "https://u@h:8443/?q=1"};
                         }},
                GoodCase{"FractionalAndSubSecondDurations",
                         With({{"duration", "1.5s"}, {"renew-before", "500ms"}}),
                         [](CertificateSpec& s) {
                           s.duration = std::chrono::milliseconds(1500);
                           s.renew_before = std::chrono::milliseconds(500);
                         }},
                GoodCase{"RenewBeforeZero", With({{"renew-before", "0s"}}),
                         [](CertificateSpec& s) { s.renew_before = seconds(0); }},
                GoodCase{"RenewBeforeNegative", With({{"renew-before", "-1h"}}),
                         [](CertificateSpec& s) { s.renew_before = -hours(1); }},
                GoodCase{"IsCaFalse", With({{"is-ca", "false"}}), [](CertificateSpec&) {}},
                GoodCase{"Usages",
                         With({{"key-usages", "server auth, client auth,server auth,s/mime"}}),
                         [](CertificateSpec& s) {
                           s.usages = {"server auth", "client auth", "s/mime"};
                         }},
                GoodCase{"EveryUsage",
                         With({{"key-usages",
                                "signing,digital signature,content commitment,key encipherment,key "
                                "agreement,data encipherment,cert sign,crl sign,encipher "
                                "only,decipher "
                                "only,any,server auth,client auth,code signing,email protection,s/"
                                "mime,ipsec end system,ipsec tunnel,ipsec user,timestamping,ocsp "
                                "signing,microsoft sgc,netscape sgc"}}),
                         [](CertificateSpec& s) {
                           s.usages = {"signing",
                                       "digital signature",
                                       "content commitment",
                                       "key encipherment",
                                       "key agreement",
                                       "data encipherment",
                                       "cert sign",
                                       "crl sign",
                                       "encipher only",
                                       "decipher only",
                                       "any",
                                       "server auth",
                                       "client auth",
                                       "code signing",
                                       "email protection",
                                       "s/mime",
                                       "ipsec end system",
                                       "ipsec tunnel",
                                       "ipsec user",
                                       "timestamping",
                                       "ocsp signing",
                                       "microsoft sgc",
                                       "netscape sgc"};
                         }},
                GoodCase{"RsaDefaultSize", With({{"key-algorithm", "RSA"}}),
                         [](CertificateSpec& s) {
                           s.key_algorithm = KeyAlgorithm::kRsa;
                           s.key_size = 2048;
                         }},
                GoodCase{"Rsa4096Pkcs8",
                         With({{"key-algorithm", "RSA"},
                               {"key-size", "4096"},
                               {"key-encoding", "PKCS8"}}),
                         [](CertificateSpec& s) {
                           s.key_algorithm = KeyAlgorithm::kRsa;
                           s.key_size = 4096;
                           s.key_encoding = KeyEncoding::kPkcs8;
                         }},
                GoodCase{"Rsa8192", With({{"key-algorithm", "RSA"}, {"key-size", "8192"}}),
                         [](CertificateSpec& s) {
                           s.key_algorithm = KeyAlgorithm::kRsa;
                           s.key_size = 8192;
                         }},
                GoodCase{"EcdsaDefaultsToP256Pkcs8", With({{"key-algorithm", "ECDSA"}}),
                         [](CertificateSpec& s) {
                           s.key_algorithm = KeyAlgorithm::kEcdsa;
                           s.key_size = 256;
                           s.key_encoding = KeyEncoding::kPkcs8;
                         }},
                GoodCase{"AlgorithmAndEncodingInAnyCase",
                         With({{"key-algorithm", "eCdSa"},
                               {"key-size", "+384"},
                               {"key-encoding", "pkcs8"}}),
                         [](CertificateSpec& s) {
                           s.key_algorithm = KeyAlgorithm::kEcdsa;
                           s.key_size = 384;
                           s.key_encoding = KeyEncoding::kPkcs8;
                         }},
                GoodCase{"RsaLowerCasePkcs1",
                         With({{"key-algorithm", "rsa"}, {"key-encoding", "Pkcs1"}}),
                         [](CertificateSpec&) {}},
                GoodCase{"Ed25519DefaultsToPkcs8", With({{"key-algorithm", "Ed25519"}}),
                         [](CertificateSpec& s) {
                           s.key_algorithm = KeyAlgorithm::kEd25519;
                           s.key_size = 0;
                           s.key_encoding = KeyEncoding::kPkcs8;
                         }},
                GoodCase{"ReuseKey", With({{"reuse-private-key", "true"}}),
                         [](CertificateSpec& s) { s.reuse_private_key = true; }},
                GoodCase{"Files",
                         With({{"certificate-file", "cert.pem"},
                               {"privatekey-file", "key.pem"},
                               {"ca-file", ".ca.pem"},
                               {"fs-group", "2000"}}),
                         [](CertificateSpec& s) {
                           s.certificate_file = "cert.pem";
                           s.private_key_file = "key.pem";
                           s.ca_file = ".ca.pem";
                           s.fs_group = 2000;
                         }},
                GoodCase{"FsGroupBounds", With({{"fs-group", "4294967294"}}),
                         [](CertificateSpec& s) { s.fs_group = 4294967294u; }},
                GoodCase{"FsGroupZero", With({{"fs-group", "0"}}),
                         [](CertificateSpec& s) { s.fs_group = 0; }},
                GoodCase{"Pkcs12", With({{"pkcs12-enable", "true"}, {"pkcs12-password", "s3cret"}}),
                         [](CertificateSpec& s) {
                           s.pkcs12_enable = true;
                           s.pkcs12_password = "s3cret";
                         }},
                GoodCase{"Pkcs12Filename",
                         With({{"pkcs12-enable", "true"},
                               {"pkcs12-filename", "tls.p12"},
                               {"pkcs12-password", "pw"}}),
                         [](CertificateSpec& s) {
                           s.pkcs12_enable = true;
                           s.pkcs12_filename = "tls.p12";
                           s.pkcs12_password = "pw";
                         }},
                GoodCase{"Pkcs12DisabledWithItsAttributes",
                         With({{"pkcs12-enable", "false"},
                               {"pkcs12-filename", "tls.p12"},
                               {"pkcs12-password", "pw"}}),
                         [](CertificateSpec& s) {
                           s.pkcs12_filename = "tls.p12";
                           s.pkcs12_password = "pw";
                         }},
                GoodCase{
                    "Jks",
                    With({{"keystore-jks-enable", "true"}, {"keystore-jks-password", "s3cret"}}),
                    [](CertificateSpec& s) {
                      s.jks_enable = true;
                      s.jks_password = "s3cret";
                    }},
                GoodCase{"JksFileNamesAndPkcs12Together",
                         With({{"keystore-jks-enable", "true"},
                               {"keystore-jks-password", "pässwörd"},
                               {"keystore-jks-filename", "app.jks"},
                               {"keystore-jks-truststore-filename", "trust.jks"},
                               {"pkcs12-enable", "true"},
                               {"pkcs12-password", "pw"}}),
                         [](CertificateSpec& s) {
                           s.jks_enable = true;
                           s.jks_password = "pässwörd";
                           s.jks_filename = "app.jks";
                           s.jks_truststore_filename = "trust.jks";
                           s.pkcs12_enable = true;
                           s.pkcs12_password = "pw";
                         }},
                GoodCase{"JksDisabledWithItsAttributes",
                         With({{"keystore-jks-enable", "false"}, {"keystore-jks-password", "pw"}}),
                         [](CertificateSpec& s) { s.jks_password = "pw"; }},
                GoodCase{"Pkcs12Profiles",
                         With({{"pkcs12-enable", "true"},
                               {"pkcs12-password", "pw"},
                               {"pkcs12-profile", "Modern2023"}}),
                         [](CertificateSpec& s) {
                           s.pkcs12_enable = true;
                           s.pkcs12_password = "pw";
                           s.pkcs12_profile = Pkcs12Profile::kModern2023;
                         }},
                GoodCase{"OtherDomainsBecomeAnnotations",
                         With({{"example.com/team", "payments"},
                               {"a.b-c.example/Some_Name.x", "v"},
                               {"csi.storage.k8s.io/some.future.key", "ignored"}}),
                         [](CertificateSpec& s) {
                           s.annotations = {{"example.com/team", "payments"},
                                            {"a.b-c.example/Some_Name.x", "v"}};
                         }},
                GoodCase{"CredentialBundleFile",
                         With({{std::string(kCredentialBundleFileAttribute), "credentials.pem"}}),
                         [](CertificateSpec& s) { s.credential_bundle_file = "credentials.pem"; }},
                GoodCase{"EmptyCredentialBundleFileIsNone",
                         With({{std::string(kCredentialBundleFileAttribute), ""}}),
                         [](CertificateSpec&) {}},
                GoodCase{"CredentialBundleMayTakeAFreedDefaultName",
                         With({{"certificate-file", "chain.pem"},
                               {std::string(kCredentialBundleFileAttribute), "tls.crt"}}),
                         [](CertificateSpec& s) {
                           s.certificate_file = "chain.pem";
                           s.credential_bundle_file = "tls.crt";
                         }},
                GoodCase{"CertmountKeysAreNotAnnotations",
                         With({{std::string(kCredentialBundleFileAttribute), "bundle.pem"},
                               {"example.com/team", "payments"}}),
                         [](CertificateSpec& s) {
                           s.credential_bundle_file = "bundle.pem";
                           s.annotations = {{"example.com/team", "payments"}};
                         }},
                GoodCase{"WithoutPodInfoWhenNoTemplates",
                         Attributes{{Key("issuer-name"), "ca"}, {Key("dns-names"), "a.example"}},
                         [](CertificateSpec& s) {
                           s.issuer.name = "ca";
                           s.dns_names = {"a.example"};
                         }}),
    CaseName);

struct BadCase {
  std::string name;
  Attributes attributes;
  // Must appear in the message: the attribute key, plus a word of the rule.
  std::string key;
  std::string rule;
};

std::string BadCaseName(const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; }

class ParseAttributesBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ParseAttributesBadTest, IsInvalidArgumentNamingTheKey) {
  Result<CertificateSpec> spec = ParseVolumeAttributes(GetParam().attributes, {});
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), Code::kInvalidArgument);
  const std::string& message = spec.status().message();
  EXPECT_NE(message.find(GetParam().key), std::string::npos) << message;
  EXPECT_NE(message.find(GetParam().rule), std::string::npos) << message;
}

const std::string kDnsNamesKey = Key("dns-names");

INSTANTIATE_TEST_SUITE_P(
    Attributes, ParseAttributesBadTest,
    ::testing::Values(
        BadCase{"MissingIssuerName", With({{"issuer-name", kErase}}), Key("issuer-name"),
                "required"},
        BadCase{"EmptyIssuerName", With({{"issuer-name", ""}}), Key("issuer-name"), "required"},
        BadCase{"NoDomain", With({{"/", ""}, {"issuer-name", "x"}}), "/", "annotation key"},
        BadCase{"UpperCaseDomain", With({{"Example.com/x", "1"}}), "Example.com/x",
                "annotation key"},
        BadCase{"AnnotationNameTooLong", With({{"example.com/" + std::string(64, 'a'), "1"}}),
                "example.com/aaaa", "annotation key"},
        BadCase{"AnnotationTwoSlashes", With({{"example.com/a/b", "1"}}), "example.com/a/b",
                "annotation key"},
        BadCase{
            "UnknownVariable", With({{"dns-names", "${NODE_IP}.example"}}), kDnsNamesKey,
            "undefined variable \"NODE_IP\"; known variables are POD_NAME, POD_NAMESPACE, POD_UID, "
            "SERVICE_ACCOUNT_NAME"},
        BadCase{"PodIpOnlyInIpSansAndDnsNames", With({{"uri-sans", "spiffe://x/${POD_IP}"}}),
                Key("uri-sans"),
                "uses variable \"POD_IP\", which only csi.cert-manager.io/ip-sans (as a whole "
                "item) and csi.cert-manager.io/dns-names accept"},
        BadCase{"PodIpsOnlyInIpSansAndDnsNames", With({{"common-name", "$POD_IPS"}}),
                Key("common-name"), "which only csi.cert-manager.io/ip-sans (as a whole item)"},
        BadCase{"PodIpOnlyAsAWholeItem", With({{"ip-sans", "${POD_IP}/32"}}), Key("ip-sans"),
                "is not an IPv4 or IPv6 address"},
        BadCase{"ReadinessGateWithoutPodIp", With({{"pod-ip-readiness-gate", "true"}}),
                Key("pod-ip-readiness-gate"), "needs ${POD_IP} or ${POD_IPS}"},
        BadCase{"ReadinessGateNotABool",
                With({{"ip-sans", "${POD_IP}"}, {"pod-ip-readiness-gate", "yes"}}),
                Key("pod-ip-readiness-gate"), "must be \"true\" or \"false\""},
        BadCase{"LowerCaseVariable", With({{"common-name", "${pod_name}"}}), Key("common-name"),
                "undefined variable \"pod_name\""},
        BadCase{"UnknownVariableInLiteralSubject", With({{"literal-subject", "CN=${NODE}"}}),
                Key("literal-subject"), "undefined variable"},
        BadCase{"UnknownVariableInSubjectField", With({{"localities", "${CITY}"}}),
                Key("localities"), "undefined variable"},
        BadCase{"IpNotAnAddress", With({{"ip-sans", "10.0.0.256"}}), Key("ip-sans"),
                "is not an IPv4 or IPv6 address"},
        BadCase{"IpLeadingZero", With({{"ip-sans", "010.0.0.1"}}), Key("ip-sans"), "IPv4"},
        BadCase{"IpWithZone", With({{"ip-sans", "fe80::1%eth0"}}), Key("ip-sans"), "IPv6"},
        BadCase{"IpCidr", With({{"ip-sans", "10.0.0.0/8"}}), Key("ip-sans"), "IPv4"},
        BadCase{"UriWithoutScheme", With({{"uri-sans", "cluster.local/ns/a"}}), Key("uri-sans"),
                "invalid URI for request"},
        BadCase{"UriRelative", With({{"uri-sans", "x"}}), Key("uri-sans"),
                "invalid URI for request"},
        BadCase{"UriEmptyItem", With({{"uri-sans", "spiffe://a/b,"}}), Key("uri-sans"),
                "empty url"},
        BadCase{"UriBadEscape", With({{"uri-sans", "spiffe://a/%zz"}}), Key("uri-sans"),
                "invalid URL escape"},
        BadCase{"UriBadPort", With({{"uri-sans", "https://a:b/"}}), Key("uri-sans"), "port"},
        BadCase{"UriNonAsciiOpaque", With({{"uri-sans", "urn:\xc3\xa9"}}), Key("uri-sans"),
                "not ASCII"},
        BadCase{"DnsNonAscii",
                With({{"dns-names",
                       "b\xc3\xbc"
                       "cher.example"}}),
                kDnsNamesKey, "is not ASCII"},
        BadCase{"IpEmptyItem", With({{"ip-sans", "10.0.0.1,,10.0.0.2"}}), Key("ip-sans"),
                "\"\" is not an IPv4 or IPv6 address"},
        BadCase{"UsageEmptyItem", With({{"key-usages", "server auth,,client auth"}}),
                Key("key-usages"), "\"\" is not a cert-manager key usage"},
        BadCase{"SubjectNotUtf8", With({{"organizations", "a\xff"}}), Key("organizations"),
                "not UTF-8"},
        BadCase{"IsCaEmptyIsFalseButSpaceIsNot", With({{"is-ca", " true"}}), Key("is-ca"),
                "\"true\" or \"false\""},
        BadCase{"UriEmptyScheme", With({{"uri-sans", "://x"}}), Key("uri-sans"), "scheme"},
        BadCase{"UriBadScheme", With({{"uri-sans", "1http://x"}}), Key("uri-sans"),
                "invalid URI for request"},
        BadCase{"UriWithSpaceInHost", With({{"uri-sans", "spiffe://a b"}}), Key("uri-sans"),
                "invalid character in host"},
        BadCase{"EmailWithoutAt", With({{"email-sans", "ops.example.com"}}), Key("email-sans"),
                "one '@'"},
        BadCase{"EmailTwoAts", With({{"email-sans", "a@b@c"}}), Key("email-sans"), "one '@'"},
        BadCase{"EmailEmptyLocal", With({{"email-sans", "@example.com"}}), Key("email-sans"),
                "one '@'"},
        BadCase{"EmailEmptyDomain", With({{"email-sans", "ops@"}}), Key("email-sans"), "one '@'"},
        BadCase{"LiteralSubjectSyntax", With({{"literal-subject", "CN=a,"}}),
                Key("literal-subject"), "RFC 4514"},
        BadCase{"LiteralSubjectUnknownType", With({{"literal-subject", "XYZ=a"}}),
                Key("literal-subject"), "XYZ"},
        BadCase{"DurationNotGo", With({{"duration", "5x"}}), Key("duration"),
                "\"5x\" is not a Go duration (e.g. \"2160h\", \"1h30m\")"},
        BadCase{"DurationDays", With({{"duration", "90d"}}), Key("duration"), "Go duration"},
        BadCase{"DurationWithoutUnit", With({{"duration", "3600"}}), Key("duration"),
                "missing unit"},
        BadCase{"DurationZero", With({{"duration", "0"}}), Key("duration"), "greater than 0"},
        BadCase{"DurationNegative", With({{"duration", "-1h"}}), Key("duration"), "greater than 0"},
        BadCase{"RenewBeforeNotGo", With({{"renew-before", "a while"}}), Key("renew-before"),
                "Go duration"},
        BadCase{"IsCaCapitalised", With({{"is-ca", "True"}}), Key("is-ca"),
                "must be \"true\" or \"false\""},
        BadCase{"IsCaYes", With({{"is-ca", "yes"}}), Key("is-ca"), "\"true\" or \"false\""},
        BadCase{"IsCaOne", With({{"is-ca", "1"}}), Key("is-ca"), "\"true\" or \"false\""},
        BadCase{"UnknownUsage", With({{"key-usages", "server auth,web auth"}}), Key("key-usages"),
                "\"web auth\" is not a cert-manager key usage"},
        BadCase{"UsageCase", With({{"key-usages", "Server Auth"}}), Key("key-usages"),
                "known usages are"},
        BadCase{"KeyAlgorithmEd448", With({{"key-algorithm", "Ed448"}}), Key("key-algorithm"),
                "not a key algorithm"},
        BadCase{"RsaTooSmall", With({{"key-algorithm", "RSA"}, {"key-size", "1024"}}),
                Key("key-size"), "between 2048 and 8192"},
        BadCase{"RsaTooLarge", With({{"key-algorithm", "RSA"}, {"key-size", "8200"}}),
                Key("key-size"), "between 2048 and 8192"},
        BadCase{"EcdsaOddSize", With({{"key-algorithm", "ECDSA"}, {"key-size", "2048"}}),
                Key("key-size"), "256, 384 or 521"},
        BadCase{"Ed25519WithSize", With({{"key-algorithm", "Ed25519"}, {"key-size", "256"}}),
                Key("key-size"), "must be empty for Ed25519"},
        BadCase{"Ed25519WithPkcs1", With({{"key-algorithm", "Ed25519"}, {"key-encoding", "PKCS1"}}),
                Key("key-encoding"), "only for RSA keys"},
        BadCase{"EcdsaWithPkcs1", With({{"key-algorithm", "ecdsa"}, {"key-encoding", "pkcs1"}}),
                Key("key-encoding"), "only for RSA keys"},
        BadCase{"Ed25519WithSizeZero", With({{"key-algorithm", "Ed25519"}, {"key-size", "0"}}),
                Key("key-size"), "must be empty for Ed25519"},
        BadCase{"SizeForDefaultRsa", With({{"key-size", "521"}}), Key("key-size"),
                "between 2048 and 8192"},
        BadCase{"KeyEncodingUnknown", With({{"key-encoding", "PKCS12"}}), Key("key-encoding"),
                "\"PKCS1\" or \"PKCS8\""},
        BadCase{"IpSansAreNotExpanded", With({{"ip-sans", "${HOST_IP}"}}), Key("ip-sans"),
                "not an IPv4 or IPv6 address"},
        BadCase{"BareUnknownVariable", With({{"dns-names", "$NODE_IP.example"}}), kDnsNamesKey,
                "undefined variable \"NODE_IP\""},
        BadCase{"DollarDollarIsASpecialVariable", With({{"common-name", "a$$b"}}),
                Key("common-name"), "undefined variable \"$\""},
        BadCase{"UnterminatedQuote", With({{"organizations", "\"Acme, Inc.,Other"}}),
                Key("organizations"), "no closing"},
        BadCase{"TextAfterQuote", With({{"organizations", "\"Acme\" Inc.,Other"}}),
                Key("organizations"), "text after its closing"},
        BadCase{"BothSpellingsOfAKey",
                With({{"organizationalunits", "a"}, {"organizational-units", "b"}}),
                Key("organizationalunits"), "csi.cert-manager.io/organizational-units"},
        BadCase{"Pkcs12DisabledStillNeedsAPassword", With({{"pkcs12-enable", "false"}}),
                Key("pkcs12-password"), "required"},
        BadCase{"Pkcs12DisabledFileNameMustDiffer",
                With({{"pkcs12-enable", "false"},
                      {"pkcs12-password", "pw"},
                      {"pkcs12-filename", "tls.crt"}}),
                Key("pkcs12-filename"), "the files must differ"},
        BadCase{"Pkcs12UnknownProfile",
                With({{"pkcs12-enable", "true"},
                      {"pkcs12-password", "pw"},
                      {"pkcs12-profile", "Modern"}}),
                Key("pkcs12-profile"), "Modern2023"},
        BadCase{"JksWithoutPassword", With({{"keystore-jks-enable", "true"}}),
                Key("keystore-jks-password"),
                "required when csi.cert-manager.io/keystore-jks-enable"},
        BadCase{"JksEmptyPassword",
                With({{"keystore-jks-enable", "true"}, {"keystore-jks-password", ""}}),
                Key("keystore-jks-password"), "required"},
        BadCase{"JksDisabledStillNeedsAPassword", With({{"keystore-jks-enable", "false"}}),
                Key("keystore-jks-password"), "required"},
        BadCase{"JksPasswordNotUtf8",
                With({{"keystore-jks-enable", "true"}, {"keystore-jks-password", "\xff"}}),
                Key("keystore-jks-password"), "UTF-8"},
        BadCase{"JksEnableNotBool", With({{"keystore-jks-enable", "True"}}),
                Key("keystore-jks-enable"), "\"true\" or \"false\""},
        BadCase{"JksEnableYes", With({{"keystore-jks-enable", "yes"}}), Key("keystore-jks-enable"),
                "\"true\" or \"false\""},
        BadCase{"JksPasswordWithoutEnable", With({{"keystore-jks-password", "pw"}}),
                Key("keystore-jks-password"), "requires csi.cert-manager.io/keystore-jks-enable"},
        BadCase{"JksTruststoreWithoutEnable", With({{"keystore-jks-truststore-filename", "t.jks"}}),
                Key("keystore-jks-truststore-filename"), "requires"},
        BadCase{"JksSameAsKey",
                With({{"keystore-jks-enable", "true"},
                      {"keystore-jks-password", "pw"},
                      {"keystore-jks-filename", "tls.key"}}),
                Key("keystore-jks-filename"), "csi.cert-manager.io/privatekey-file"},
        BadCase{"JksTruststoreSameAsKeystore",
                With({{"keystore-jks-enable", "true"},
                      {"keystore-jks-password", "pw"},
                      {"keystore-jks-truststore-filename", "keystore.jks"}}),
                Key("keystore-jks-truststore-filename"),
                "csi.cert-manager.io/keystore-jks-filename"},
        BadCase{"JksSameAsPkcs12",
                With({{"keystore-jks-enable", "true"},
                      {"keystore-jks-password", "pw"},
                      {"keystore-jks-filename", "keystore.p12"},
                      {"pkcs12-enable", "true"},
                      {"pkcs12-password", "pw"}}),
                Key("keystore-jks-filename"), "csi.cert-manager.io/pkcs12-filename"},
        BadCase{"JksDisabledFileNameMustDiffer",
                With({{"keystore-jks-enable", "false"},
                      {"keystore-jks-password", "pw"},
                      {"keystore-jks-truststore-filename", "ca.crt"}}),
                Key("keystore-jks-truststore-filename"), "the files must differ"},
        BadCase{"JksFilenameChecked",
                With({{"keystore-jks-enable", "true"},
                      {"keystore-jks-password", "pw"},
                      {"keystore-jks-filename", "../x.jks"}}),
                Key("keystore-jks-filename"), "'/'"},
        BadCase{"Pkcs12ProfileWithoutEnable", With({{"pkcs12-profile", "Modern2023"}}),
                Key("pkcs12-profile"), "requires csi.cert-manager.io/pkcs12-enable"},
        BadCase{"KeySizeNotANumber", With({{"key-size", "big"}}), Key("key-size"),
                "not a key size"},
        BadCase{"KeySizeNegative", With({{"key-size", "-256"}}), Key("key-size"), "not a key size"},
        BadCase{"KeySizeHuge", With({{"key-size", "99999999999999999999"}}), Key("key-size"),
                "not a key size"},
        BadCase{"ReuseKeyNotBool", With({{"reuse-private-key", "always"}}),
                Key("reuse-private-key"), "\"true\" or \"false\""},
        BadCase{"CertFileWithSlash", With({{"certificate-file", "certs/tls.crt"}}),
                Key("certificate-file"), "without '/'"},
        BadCase{"CertFileAbsolute", With({{"certificate-file", "/etc/passwd"}}),
                Key("certificate-file"), "without '/'"},
        BadCase{"KeyFileDotDot", With({{"privatekey-file", ".."}}), Key("privatekey-file"),
                "\"..\""},
        BadCase{"KeyFileDot", With({{"privatekey-file", "."}}), Key("privatekey-file"), "\".\""},
        BadCase{"CaFileStartsWithDotDot", With({{"ca-file", "..ca.crt"}}), Key("ca-file"),
                "start with \"..\""},
        BadCase{"CaFileTooLong", With({{"ca-file", std::string(256, 'c')}}), Key("ca-file"),
                "255 bytes"},
        BadCase{"CaFileLeadingSpace", With({{"ca-file", " ca.crt"}}), Key("ca-file"), "whitespace"},
        BadCase{"CertAndKeySameFile", With({{"privatekey-file", "tls.crt"}}),
                Key("privatekey-file"), "csi.cert-manager.io/certificate-file"},
        BadCase{"CaAndCertSameFile",
                With({{"ca-file", "both.pem"}, {"certificate-file", "both.pem"}}), Key("ca-file"),
                "the files must differ"},
        BadCase{"Pkcs12SameAsCa",
                With({{"pkcs12-enable", "true"},
                      {"pkcs12-password", "pw"},
                      {"pkcs12-filename", "ca.crt"}}),
                Key("pkcs12-filename"), "csi.cert-manager.io/ca-file"},
        BadCase{"Pkcs12FilenameChecked",
                With({{"pkcs12-enable", "true"},
                      {"pkcs12-password", "pw"},
                      {"pkcs12-filename", "../x.p12"}}),
                Key("pkcs12-filename"), "'/'"},
        BadCase{"FsGroupNegative", With({{"fs-group", "-1"}}), Key("fs-group"),
                "between 0 and 4294967294"},
        BadCase{"FsGroupTooLarge", With({{"fs-group", "4294967295"}}), Key("fs-group"),
                "between 0 and 4294967294"},
        BadCase{"FsGroupHuge", With({{"fs-group", "99999999999999999999"}}), Key("fs-group"),
                "group ID"},
        BadCase{"FsGroupName", With({{"fs-group", "wheel"}}), Key("fs-group"), "group ID"},
        BadCase{"Pkcs12EnableNotBool", With({{"pkcs12-enable", "yes"}}), Key("pkcs12-enable"),
                "\"true\" or \"false\""},
        BadCase{"Pkcs12WithoutPassword", With({{"pkcs12-enable", "true"}}), Key("pkcs12-password"),
                "required when csi.cert-manager.io/pkcs12-enable"},
        BadCase{"Pkcs12EmptyPassword", With({{"pkcs12-enable", "true"}, {"pkcs12-password", ""}}),
                Key("pkcs12-password"), "required"},
        BadCase{"Pkcs12PasswordWithoutEnable", With({{"pkcs12-password", "pw"}}),
                Key("pkcs12-password"), "requires csi.cert-manager.io/pkcs12-enable"},
        BadCase{"Pkcs12FilenameWithoutEnable", With({{"pkcs12-filename", "a.p12"}}),
                Key("pkcs12-filename"), "requires csi.cert-manager.io/pkcs12-enable"},
        BadCase{"CredentialBundleFileWithSlash",
                With({{std::string(kCredentialBundleFileAttribute), "../bundle.pem"}}),
                std::string(kCredentialBundleFileAttribute), "without '/'"},
        BadCase{"CredentialBundleFileDot",
                With({{std::string(kCredentialBundleFileAttribute), "."}}),
                std::string(kCredentialBundleFileAttribute), "\".\""},
        BadCase{"CredentialBundleFileTrailingSpace",
                With({{std::string(kCredentialBundleFileAttribute), "bundle.pem "}}),
                std::string(kCredentialBundleFileAttribute), "whitespace"},
        BadCase{"CredentialBundleSameAsCertificate",
                With({{std::string(kCredentialBundleFileAttribute), "tls.crt"}}),
                std::string(kCredentialBundleFileAttribute),
                "is also the file name of csi.cert-manager.io/certificate-file"},
        BadCase{"CredentialBundleSameAsRenamedKey",
                With({{"privatekey-file", "key.pem"},
                      {std::string(kCredentialBundleFileAttribute), "key.pem"}}),
                std::string(kCredentialBundleFileAttribute), "csi.cert-manager.io/privatekey-file"},
        BadCase{"CredentialBundleSameAsPkcs12",
                With({{"pkcs12-enable", "true"},
                      {"pkcs12-password", "pw"},
                      {std::string(kCredentialBundleFileAttribute), "keystore.p12"}}),
                std::string(kCredentialBundleFileAttribute), "csi.cert-manager.io/pkcs12-filename"},
        BadCase{"CredentialBundleSameAsJksTruststore",
                With({{"keystore-jks-enable", "true"},
                      {"keystore-jks-password", "pw"},
                      {std::string(kCredentialBundleFileAttribute), "truststore.jks"}}),
                std::string(kCredentialBundleFileAttribute),
                "csi.cert-manager.io/keystore-jks-truststore-filename"},
        BadCase{"UnknownCertmountKey", With({{"certmount.io/credential-bundle", "bundle.pem"}}),
                "certmount.io/credential-bundle",
                "unknown certmount attribute; the certmount.io/ keys are "
                "certmount.io/credential-bundle-file"},
        BadCase{"UnknownCertmountKeyEvenWhenEmpty", With({{"certmount.io/bundle-file", ""}}),
                "certmount.io/bundle-file", "unknown certmount attribute"}),
    BadCaseName);

// certmount's own keys are reported like csi-driver's: the message starts
// with the key at fault, also when another attribute's file name is taken.
TEST(ParseAttributesTest, CertmountKeyProblemsStartWithTheKey) {
  const std::string bundle_key(kCredentialBundleFileAttribute);
  for (const Attributes& attributes : {With({{bundle_key, "ca.crt"}}), With({{bundle_key, ".."}}),
                                       With({{"certmount.io/credential-bundle-fil", "x"}})}) {
    Result<CertificateSpec> spec = ParseVolumeAttributes(attributes, {});
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().code(), Code::kInvalidArgument);
    EXPECT_TRUE(spec.status().message().starts_with("certmount.io/credential-bundle-fil"))
        << spec.status().message();
  }
}

TEST(ParseAttributesTest, VariableValueCannotAddRdnsToALiteralSubject) {
  Result<CertificateSpec> spec = ParseVolumeAttributes(
      With({{std::string(kPodName), "x,O=Evil+UID=1"}, {"literal-subject", "CN=${POD_NAME}"}}), {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->literal_subject, "CN=x\\,O\\=Evil\\+UID\\=1");
}

// csi-driver's rule: renew-before counts only when not_before + renew-before
// is before not_after; otherwise two thirds into the lifetime.
TEST(ApplyPodIpsTest, PodIpIsTheFirstAddressAndPodIpsAllOfThemWithoutDuplicates) {
  Result<CertificateSpec> one =
      ParseVolumeAttributes(With({{"ip-sans", "10.0.0.1,${POD_IP}"}}), {});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_TRUE(UsesPodIps(*one));
  ASSERT_TRUE(ApplyPodIps(*one, {"10.244.1.7", "FD00:0:0::7"}).ok());
  EXPECT_EQ(one->ip_addresses, (std::vector<std::string>{"10.0.0.1", "10.244.1.7"}));

  Result<CertificateSpec> all =
      ParseVolumeAttributes(With({{"ip-sans", "${POD_IP},${POD_IPS}"}}), {});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_TRUE(ApplyPodIps(*all, {"10.244.1.7", "FD00:0:0::7"}).ok());
  EXPECT_EQ(all->ip_addresses, (std::vector<std::string>{"10.244.1.7", "fd00::7"}));
}

TEST(ApplyPodIpsTest, DnsNamesGetTheAddressesAsDashedLabels) {
  Result<CertificateSpec> spec = ParseVolumeAttributes(
      With({{"dns-names", "web.example, ${POD_IP}.shop.pod.cluster.local, ip-$POD_IPS.sslip.io"}}),
      {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(UsesPodIps(*spec));
  EXPECT_EQ(PodIpsAttributeKey(*spec), "csi.cert-manager.io/dns-names");
  ASSERT_TRUE(ApplyPodIps(*spec, {}).ok());
  EXPECT_EQ(spec->dns_names, std::vector<std::string>{"web.example"});
  ASSERT_TRUE(ApplyPodIps(*spec, {"10.244.1.7", "FD00:0:0::7"}).ok());
  EXPECT_EQ(spec->dns_names,
            (std::vector<std::string>{"web.example", "10-244-1-7.shop.pod.cluster.local",
                                      "ip-10-244-1-7.sslip.io", "ip-fd00--7.sslip.io"}));
  EXPECT_TRUE(spec->ip_addresses.empty());
  // Applied twice (a restart, a second event), nothing is added twice.
  ASSERT_TRUE(ApplyPodIps(*spec, {"10.244.1.7", "fd00::7"}).ok());
  EXPECT_EQ(spec->dns_names.size(), 4u);
}

TEST(ApplyPodIpsTest, EveryReferenceInOneNameIsFilledIn) {
  Result<CertificateSpec> spec = ParseVolumeAttributes(
      With({{"dns-names", "${POD_IP}.${POD_IP}.a,${POD_IPS}-${POD_IP}.b"}}), {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(ApplyPodIps(*spec, {"10.0.0.1", "10.0.0.2"}).ok());
  EXPECT_EQ(spec->dns_names, (std::vector<std::string>{"10-0-0-1.10-0-0-1.a", "10-0-0-1-10-0-0-1.b",
                                                       "10-0-0-2-10-0-0-1.b"}));
}

TEST(ApplyPodIpsTest, UnknownAddressesLeaveTheSpecAsParsedAndBadOnesAreRefused) {
  Result<CertificateSpec> spec = ParseVolumeAttributes(With({{"ip-sans", "${POD_IPS}"}}), {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(ApplyPodIps(*spec, {}).ok());
  EXPECT_TRUE(spec->ip_addresses.empty());
  Status bad = ApplyPodIps(*spec, {"10.0.0.300"});
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);

  Result<CertificateSpec> fixed = ParseVolumeAttributes(With({{"ip-sans", "10.0.0.1"}}), {});
  ASSERT_TRUE(fixed.ok());
  EXPECT_FALSE(UsesPodIps(*fixed));
  ASSERT_TRUE(ApplyPodIps(*fixed, {"10.244.1.7"}).ok());
  EXPECT_EQ(fixed->ip_addresses, (std::vector<std::string>{"10.0.0.1"}));
}

TEST(NextIssuanceAtTest, RenewBeforeThatDoesNotFitFallsBackToTwoThirds) {
  EXPECT_EQ(NextIssuanceAt(1000, 4600, seconds(1800)), 2800);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, std::nullopt), 3400);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, seconds(3600)), 3400);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, hours(25)), 3400);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, seconds(3599)), 1001);
}

// Zero renews at not_after, a negative value after it (csi-driver's
// calculateNextIssuanceTime passes both); fractions round to the earlier
// second.
TEST(NextIssuanceAtTest, ZeroNegativeAndFractionalRenewBefore) {
  EXPECT_EQ(NextIssuanceAt(1000, 4600, seconds(0)), 4600);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, seconds(-60)), 4660);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, std::chrono::milliseconds(1500)), 4598);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, std::chrono::milliseconds(-1500)), 4601);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, std::chrono::milliseconds(3599500)), 1000);
  EXPECT_EQ(NextIssuanceAt(1000, 4600, std::chrono::milliseconds(3600001)), 3400);
}

TEST(PodInfoFromContextTest, ReadsKubeletEntries) {
  PodInfo pod = PodInfoFromContext(Base());
  EXPECT_EQ(pod.name, "web-0");
  EXPECT_EQ(pod.namespace_, "shop");
  EXPECT_EQ(pod.uid, "0b0c1d2e-aaaa-bbbb-cccc-0123456789ab");
  EXPECT_EQ(pod.service_account, "web-sa");
}

TEST(PodInfoFromContextTest, MissingEntriesAreEmpty) {
  PodInfo pod = PodInfoFromContext({{Key("issuer-name"), "ca"}});
  EXPECT_EQ(pod.name, "");
  EXPECT_EQ(pod.namespace_, "");
  EXPECT_EQ(pod.uid, "");
  EXPECT_EQ(pod.service_account, "");
}

TEST(StorableAttributesTest, DropsSecretsAndSecretsMergeBackToTheSameSpec) {
  Attributes attributes = With({{std::string(kServiceAccountTokens),
                                 R"({"":{"token":"eyJ...","expirationTimestamp":"2030-01-01"}})"},
                                {"pkcs12-enable", "true"},
                                {"pkcs12-password", "pw"},
                                {"keystore-jks-enable", "true"},
                                {"keystore-jks-password", "jks-pw"},
                                {"example.com/team", "payments"}});
  Attributes storable = StorableAttributes(attributes);
  Attributes expected = attributes;
  expected.erase(std::string(kServiceAccountTokens));
  expected.erase("csi.cert-manager.io/pkcs12-password");
  expected.erase("csi.cert-manager.io/keystore-jks-password");
  EXPECT_EQ(storable, expected);

  Attributes secrets = SecretAttributes(attributes);
  EXPECT_EQ(secrets, (Attributes{{"csi.cert-manager.io/pkcs12-password", "pw"},
                                 {"csi.cert-manager.io/keystore-jks-password", "jks-pw"}}));

  // The stored copy plus the secrets parses to the same spec as the original.
  Attributes restored = storable;
  restored.insert(secrets.begin(), secrets.end());
  Result<CertificateSpec> from_original = ParseVolumeAttributes(attributes, {});
  Result<CertificateSpec> from_stored = ParseVolumeAttributes(restored, {});
  ASSERT_TRUE(from_original.ok()) << from_original.status().ToString();
  ASSERT_TRUE(from_stored.ok()) << from_stored.status().ToString();
  ExpectSpecEq(*from_stored, *from_original);
}

// --- Go durations ---------------------------------------------------------

struct DurationCase {
  std::string text;
  nanoseconds expected;
};

class ParseGoDurationGoodTest : public ::testing::TestWithParam<DurationCase> {};

TEST_P(ParseGoDurationGoodTest, MatchesGo) {
  Result<nanoseconds> parsed = ParseGoDuration(GetParam().text);
  ASSERT_TRUE(parsed.ok()) << GetParam().text << ": " << parsed.status().ToString();
  EXPECT_EQ(parsed->count(), GetParam().expected.count()) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Durations, ParseGoDurationGoodTest,
    ::testing::Values(
        DurationCase{"0", nanoseconds(0)}, DurationCase{"+0", nanoseconds(0)},
        DurationCase{"-0", nanoseconds(0)}, DurationCase{"0s", nanoseconds(0)},
        DurationCase{"0h0m", nanoseconds(0)}, DurationCase{"5s", seconds(5)},
        DurationCase{"+5s", seconds(5)}, DurationCase{"-5s", seconds(-5)},
        DurationCase{"2160h", hours(2160)}, DurationCase{"1h30m", minutes(90)},
        DurationCase{"1h30m0s", minutes(90)}, DurationCase{"90m", minutes(90)},
        DurationCase{"1.5h", minutes(90)}, DurationCase{".5s", nanoseconds(500'000'000)},
        DurationCase{"1.s", seconds(1)}, DurationCase{"1.0000000001s", nanoseconds(1'000'000'000)},
        DurationCase{"0.000000001s", nanoseconds(1)},
        DurationCase{"300ms", nanoseconds(300'000'000)}, DurationCase{"10us", nanoseconds(10'000)},
        DurationCase{"10\xC2\xB5s", nanoseconds(10'000)},
        DurationCase{"10\xCE\xBCs", nanoseconds(10'000)}, DurationCase{"7ns", nanoseconds(7)},
        DurationCase{"1h1m1s1ms1us1ns", nanoseconds(3'661'001'001'001)},
        DurationCase{"30s1h", seconds(3630)},  // any order, as in Go
        DurationCase{"-1.5h", minutes(-90)},
        DurationCase{"9223372036854775807ns", nanoseconds(INT64_MAX)},
        DurationCase{"2562047h47m16.854775807s", nanoseconds(INT64_MAX)},
        DurationCase{"-9223372036854775808ns", nanoseconds(INT64_MIN)},
        DurationCase{"-2562047h47m16.854775808s", nanoseconds(INT64_MIN)}));

class ParseGoDurationBadTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParseGoDurationBadTest, IsInvalidArgument) {
  Result<nanoseconds> parsed = ParseGoDuration(GetParam());
  ASSERT_FALSE(parsed.ok()) << "parsed \"" << GetParam() << "\"";
  EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Durations, ParseGoDurationBadTest,
                         ::testing::Values("", "+", "-", "5", "1h5", "5x", "90d", "1w", ".", ".s",
                                           "h", "s5", " 1h", "1h ", "1 h", "1h-30m", "--1h", "1,5h",
                                           "1H", "1Ms", "0x10s", "1e3s", "9223372036854775808ns",
                                           "2562048h", "-9223372036854775809ns",
                                           "99999999999999999999h", "2562047h47m16.854775808s"));

TEST(ParseGoDurationTest, NamesTheUnknownUnit) {
  Result<nanoseconds> parsed = ParseGoDuration("3fortnights");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("fortnights"), std::string::npos);
}

TEST(FormatGoDurationTest, MatchesGoDurationString) {
  EXPECT_EQ(FormatGoDuration(seconds(0)), "0s");
  EXPECT_EQ(FormatGoDuration(seconds(45)), "45s");
  EXPECT_EQ(FormatGoDuration(seconds(60)), "1m0s");
  EXPECT_EQ(FormatGoDuration(seconds(90)), "1m30s");
  EXPECT_EQ(FormatGoDuration(seconds(3600)), "1h0m0s");
  EXPECT_EQ(FormatGoDuration(minutes(90)), "1h30m0s");
  EXPECT_EQ(FormatGoDuration(seconds(3601)), "1h0m1s");
  EXPECT_EQ(FormatGoDuration(hours(2160)), "2160h0m0s");
  EXPECT_EQ(FormatGoDuration(hours(720)), "720h0m0s");
  EXPECT_EQ(FormatGoDuration(seconds(-5)), "-5s");
  EXPECT_EQ(FormatGoDuration(seconds(-3661)), "-1h1m1s");
  EXPECT_EQ(FormatGoDuration(nanoseconds(INT64_MIN)), "-2562047h47m16.854775808s");
  EXPECT_EQ(FormatGoDuration(nanoseconds(INT64_MAX)), "2562047h47m16.854775807s");
  // Fractions and sub-second values, as Go prints them.
  EXPECT_EQ(FormatGoDuration(std::chrono::milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatGoDuration(std::chrono::milliseconds(500)), "500ms");
  EXPECT_EQ(FormatGoDuration(std::chrono::microseconds(1500)), "1.5ms");
  EXPECT_EQ(FormatGoDuration(nanoseconds(1500)), "1.5\u00b5s");
  EXPECT_EQ(FormatGoDuration(nanoseconds(1)), "1ns");
  EXPECT_EQ(FormatGoDuration(nanoseconds(-999)), "-999ns");
  EXPECT_EQ(FormatGoDuration(minutes(90) + std::chrono::milliseconds(250)), "1h30m0.25s");
}

TEST(FormatGoDurationTest, RoundTripsThroughParse) {
  for (int64_t value :
       {int64_t{0}, int64_t{1}, int64_t{59}, int64_t{60}, int64_t{61}, int64_t{3599}, int64_t{3600},
        int64_t{86399}, int64_t{7776000}, int64_t{-1}, int64_t{-7776000}, int64_t{9223372036}}) {
    std::string text = FormatGoDuration(seconds(value));
    Result<nanoseconds> parsed = ParseGoDuration(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().ToString();
    EXPECT_EQ(*parsed, seconds(value)) << text;
  }
}

}  // namespace
TEST(ServiceAccountTokenTest, PicksTheDefaultAudienceAndNeverEchoesTheToken) {
  const std::string key(kServiceAccountTokens);
  EXPECT_EQ(*ServiceAccountToken(
                {{key, R"({"":{"token":"t0","expirationTimestamp":"x"},"vault":{"token":"t1"}})"}}),
            "t0");
  EXPECT_EQ(*ServiceAccountToken({{key, R"({"vault":{"token":"t1"}})"}}), "t1");
  EXPECT_EQ(ServiceAccountToken({}).status().code(), Code::kNotFound);
  for (const char* bad : {"secret-not-json", R"({"a":{"token":"s1"},"b":{"token":"s2"}})",
                          R"({"":{"nope":"secret3"}})", "[]"}) {
    Result<std::string> parsed = ServiceAccountToken({{key, bad}});
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(parsed.status().message().find("secret"), std::string::npos) << bad;
  }
}

}  // namespace certmount
