// Keys, CSRs, certificate parsing and PKCS#12, checked by parsing the output
// back with OpenSSL.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "issue/certificate_info.h"
#include "issue/csr.h"
#include "issue/local_ca.h"
#include "issue/openssl_ptr.h"
#include "issue/pkcs12.h"
#include "issue/private_key.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

using ::certmount::testing::FakeClock;
using ::certmount::testing::TempDir;

X509ReqPtr ParseRequest(const std::string& pem) {
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  return X509ReqPtr(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
}

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// What `command` prints on stdout (and stderr), or "" when it cannot run.
std::string CommandOutput(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  pclose(pipe);
  return output;
}

// `openssl x509 -noout -serial` of the first certificate in `pem`, e.g.
// "serial=0A1B", without the newline.
std::string OpensslSerial(const std::string& pem) {
  TempDir dir;
  std::string path = dir.Sub("cert.pem");
  std::ofstream(path) << pem;
  return FirstLine(CommandOutput("openssl x509 -noout -serial -in " + path));
}

// (short name, value) pairs of a name, in ASN.1 order.
std::vector<std::pair<std::string, std::string>> NameEntries(const X509_NAME* name) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* entry = X509_NAME_get_entry(name, i);
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(entry);
    entries.emplace_back(OBJ_nid2sn(OBJ_obj2nid(X509_NAME_ENTRY_get_object(entry))),
                         std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                                     ASN1_STRING_length(data)));
  }
  return entries;
}

// The subjectAltName of a request as "DNS:x", "IP:<n bytes>", "URI:x", "email:x".
std::vector<std::string> RequestSans(X509_REQ* request, bool* critical) {
  std::vector<std::string> out;
  X509ExtensionStackPtr extensions(X509_REQ_get_extensions(request));
  for (int i = 0; extensions && i < sk_X509_EXTENSION_num(extensions.get()); ++i) {
    X509_EXTENSION* extension = sk_X509_EXTENSION_value(extensions.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(extension)) != NID_subject_alt_name) continue;
    *critical = X509_EXTENSION_get_critical(extension) != 0;
    GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(X509V3_EXT_d2i(extension)));
    for (int j = 0; j < sk_GENERAL_NAME_num(names.get()); ++j) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), j);
      auto text = [](const ASN1_STRING* s) {
        return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                           ASN1_STRING_length(s));
      };
      switch (name->type) {
        case GEN_DNS:
          out.push_back("DNS:" + text(name->d.dNSName));
          break;
        case GEN_IPADD:
          out.push_back("IP:" + std::to_string(ASN1_STRING_length(name->d.iPAddress)) + "B");
          break;
        case GEN_URI:
          out.push_back("URI:" + text(name->d.uniformResourceIdentifier));
          break;
        case GEN_EMAIL:
          out.push_back("email:" + text(name->d.rfc822Name));
          break;
      }
    }
  }
  return out;
}

// ---- keys ------------------------------------------------------------------------

struct KeyCase {
  KeyAlgorithm algorithm;
  int size;
  int expected_bits;
  const char* pkcs1_header;
};

class KeyGenerationTest : public ::testing::TestWithParam<KeyCase> {};

TEST_P(KeyGenerationTest, GeneratesEncodesAndRoundTrips) {
  const KeyCase& c = GetParam();
  Result<PrivateKey> key = PrivateKey::Generate(c.algorithm, c.size);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->algorithm(), c.algorithm);
  EXPECT_EQ(key->key_size(), c.expected_bits);
  EXPECT_EQ(EVP_PKEY_get_bits(key->get()), c.expected_bits);

  Result<std::string> pkcs1 = key->ToPem(KeyEncoding::kPkcs1);
  Result<std::string> pkcs8 = key->ToPem(KeyEncoding::kPkcs8);
  ASSERT_TRUE(pkcs1.ok() && pkcs8.ok());
  EXPECT_EQ(FirstLine(*pkcs1), c.pkcs1_header);
  EXPECT_EQ(FirstLine(*pkcs8), "-----BEGIN PRIVATE KEY-----");

  for (const std::string* pem : {&*pkcs1, &*pkcs8}) {
    Result<PrivateKey> parsed = PrivateKey::FromPem(*pem);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(parsed->algorithm(), c.algorithm);
    EXPECT_EQ(parsed->key_size(), c.expected_bits);
    EXPECT_EQ(EVP_PKEY_eq(parsed->get(), key->get()), 1);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgorithms, KeyGenerationTest,
    ::testing::Values(KeyCase{KeyAlgorithm::kRsa, 2048, 2048, "-----BEGIN RSA PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kRsa, 3072, 3072, "-----BEGIN RSA PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kRsa, 4096, 4096, "-----BEGIN RSA PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kRsa, 8192, 8192, "-----BEGIN RSA PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kRsa, 0, 2048, "-----BEGIN RSA PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kEcdsa, 256, 256, "-----BEGIN EC PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kEcdsa, 384, 384, "-----BEGIN EC PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kEcdsa, 521, 521, "-----BEGIN EC PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kEd25519, 0, 256, "-----BEGIN PRIVATE KEY-----"},
                      KeyCase{KeyAlgorithm::kEd25519, 4096, 256, "-----BEGIN PRIVATE KEY-----"}));

TEST(KeyGenerationTest, RejectsUnsupportedSizes) {
  for (int size : {-1, 1024, 2047, 8193, 16384}) {
    Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kRsa, size);
    ASSERT_FALSE(key.ok()) << size;
    EXPECT_EQ(key.status().code(), Code::kInvalidArgument);
    EXPECT_NE(key.status().message().find("2048 and 8192"), std::string::npos);
  }
  for (int size : {-1, 128, 224, 255, 512, 2048}) {
    Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, size);
    ASSERT_FALSE(key.ok()) << size;
    EXPECT_EQ(key.status().code(), Code::kInvalidArgument);
    EXPECT_NE(key.status().message().find("256, 384 or 521"), std::string::npos);
  }
}

TEST(KeyGenerationTest, PooledContextsGiveDistinctKeys) {
  KeyGenerator generator;
  Result<PrivateKey> first = generator.Generate(KeyAlgorithm::kEcdsa, 256);
  Result<PrivateKey> second = generator.Generate(KeyAlgorithm::kEcdsa, 256);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(EVP_PKEY_eq(first->get(), second->get()), 1);
  EXPECT_NE(*first->ToPem(KeyEncoding::kPkcs8), *second->ToPem(KeyEncoding::kPkcs8));
}

TEST(KeyGenerationTest, FromPemRejectsGarbageAndUnsupportedKeys) {
  for (const char* input :
       {"", "hello", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}) {
    Result<PrivateKey> key = PrivateKey::FromPem(input);
    ASSERT_FALSE(key.ok());
    EXPECT_EQ(key.status().code(), Code::kInvalidArgument);
  }
  // An X25519 key is valid PEM but not something certificates are issued for.
  EVP_PKEY* x25519 = EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519");
  ASSERT_NE(x25519, nullptr);
  BioPtr bio(BIO_new(BIO_s_mem()));
  ASSERT_EQ(PEM_write_bio_PrivateKey(bio.get(), x25519, nullptr, nullptr, 0, nullptr, nullptr), 1);
  EVP_PKEY_free(x25519);
  Result<PrivateKey> key = PrivateKey::FromPem(BioContents(bio.get()));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), Code::kInvalidArgument);
}

TEST(KeyGenerationTest, SigningDigestFollowsKeyStrength) {
  EXPECT_EQ(PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256)->SigningDigest(), Sha256Digest());
  EXPECT_EQ(PrivateKey::Generate(KeyAlgorithm::kEcdsa, 384)->SigningDigest(), Sha384Digest());
  EXPECT_EQ(PrivateKey::Generate(KeyAlgorithm::kEcdsa, 521)->SigningDigest(), Sha512Digest());
  EXPECT_EQ(PrivateKey::Generate(KeyAlgorithm::kRsa, 2048)->SigningDigest(), Sha256Digest());
  EXPECT_EQ(PrivateKey::Generate(KeyAlgorithm::kEd25519, 0)->SigningDigest(), nullptr);
}

// ---- CSRs ------------------------------------------------------------------------

CertificateSpec SpecWithSans() {
  CertificateSpec spec;
  spec.subject.common_name = "web";
  spec.subject.organizations = {"Example Inc"};
  spec.subject.organizational_units = {"Platform"};
  spec.subject.countries = {"DE"};
  spec.subject.localities = {"Berlin"};
  spec.subject.serial_number = "1234";
  spec.dns_names = {"web.example.com", "*.web.example.com"};
  spec.ip_addresses = {"10.1.2.3", "2001:db8::1"};
  spec.uris = {"spiffe://cluster.local/ns/default/sa/web"};
  spec.email_addresses = {"ops@example.com"};
  return spec;
}

TEST(CsrTest, CarriesSubjectAndSansAndVerifies) {
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  ASSERT_TRUE(key.ok());
  Result<std::string> pem = BuildCsrPem(*key, SpecWithSans());
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  EXPECT_EQ(FirstLine(*pem), "-----BEGIN CERTIFICATE REQUEST-----");

  X509ReqPtr request = ParseRequest(*pem);
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(X509_REQ_verify(request.get(), X509_REQ_get0_pubkey(request.get())), 1);
  EXPECT_EQ(EVP_PKEY_eq(X509_REQ_get0_pubkey(request.get()), key->get()), 1);
  EXPECT_EQ(X509_REQ_get_signature_nid(request.get()), NID_ecdsa_with_SHA256);

  using Entries = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(NameEntries(X509_REQ_get_subject_name(request.get())),
            (Entries{{"C", "DE"},
                     {"L", "Berlin"},
                     {"O", "Example Inc"},
                     {"OU", "Platform"},
                     {"CN", "web"},
                     {"serialNumber", "1234"}}));

  bool critical = true;
  EXPECT_EQ(RequestSans(request.get(), &critical),
            (std::vector<std::string>{"DNS:web.example.com", "DNS:*.web.example.com", "IP:4B",
                                      "IP:16B", "URI:spiffe://cluster.local/ns/default/sa/web",
                                      "email:ops@example.com"}));
  EXPECT_FALSE(critical);
}

TEST(CsrTest, DigestMatchesKey) {
  struct Case {
    KeyAlgorithm algorithm;
    int size;
    int signature_nid;
  };
  for (const Case& c : {Case{KeyAlgorithm::kEcdsa, 384, NID_ecdsa_with_SHA384},
                        Case{KeyAlgorithm::kEcdsa, 521, NID_ecdsa_with_SHA512},
                        Case{KeyAlgorithm::kRsa, 2048, NID_sha256WithRSAEncryption},
                        Case{KeyAlgorithm::kEd25519, 0, NID_ED25519}}) {
    Result<PrivateKey> key = PrivateKey::Generate(c.algorithm, c.size);
    ASSERT_TRUE(key.ok());
    Result<std::string> pem = BuildCsrPem(*key, SpecWithSans());
    ASSERT_TRUE(pem.ok()) << pem.status().ToString();
    X509ReqPtr request = ParseRequest(*pem);
    ASSERT_NE(request, nullptr);
    EXPECT_EQ(X509_REQ_get_signature_nid(request.get()), c.signature_nid);
    EXPECT_EQ(X509_REQ_verify(request.get(), X509_REQ_get0_pubkey(request.get())), 1);
  }
}

TEST(CsrTest, LiteralSubjectIsReversedIntoAsn1Order) {
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  ASSERT_TRUE(key.ok());
  CertificateSpec spec;
  spec.subject.common_name = "ignored when literal is set";
  spec.literal_subject = "CN=app+UID=42,OU=team\\, inner,O=Example,DC=example,DC=com,C=US";
  Result<std::string> pem = BuildCsrPem(*key, spec);
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  X509ReqPtr request = ParseRequest(*pem);
  ASSERT_NE(request, nullptr);
  X509_NAME* name = X509_REQ_get_subject_name(request.get());
  using Entries = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(NameEntries(name), (Entries{{"C", "US"},
                                        {"DC", "com"},
                                        {"DC", "example"},
                                        {"O", "Example"},
                                        {"OU", "team, inner"},
                                        {"CN", "app"},
                                        {"UID", "42"}}));
  // CN and UID share the last RDN; everything else is its own.
  ASSERT_EQ(X509_NAME_entry_count(name), 7);
  EXPECT_EQ(X509_NAME_ENTRY_set(X509_NAME_get_entry(name, 5)),
            X509_NAME_ENTRY_set(X509_NAME_get_entry(name, 6)));
  EXPECT_NE(X509_NAME_ENTRY_set(X509_NAME_get_entry(name, 4)),
            X509_NAME_ENTRY_set(X509_NAME_get_entry(name, 5)));

  bool critical = true;
  EXPECT_TRUE(RequestSans(request.get(), &critical).empty());
}

TEST(CsrTest, LiteralSubjectAcceptsDottedOids) {
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  CertificateSpec spec;
  spec.literal_subject = "2.5.4.3=by-oid,O=Example";
  Result<std::string> pem = BuildCsrPem(*key, spec);
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  X509ReqPtr request = ParseRequest(*pem);
  using Entries = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(NameEntries(X509_REQ_get_subject_name(request.get())),
            (Entries{{"O", "Example"}, {"CN", "by-oid"}}));
}

TEST(CsrTest, EmptySubjectMakesSanCritical) {
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  CertificateSpec spec;
  spec.dns_names = {"only.example.com"};
  Result<std::string> pem = BuildCsrPem(*key, spec);
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  X509ReqPtr request = ParseRequest(*pem);
  EXPECT_EQ(X509_NAME_entry_count(X509_REQ_get_subject_name(request.get())), 0);
  bool critical = false;
  EXPECT_EQ(RequestSans(request.get(), &critical),
            std::vector<std::string>{"DNS:only.example.com"});
  EXPECT_TRUE(critical);
}

// What csi-driver (Go's x509) writes, certmount writes: a request naming
// nothing, values past X.520's upper bounds, any country, empty items; each
// string PrintableString when it can be, else UTF8String.
TEST(CsrTest, WritesNamesAsGoDoes) {
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  ASSERT_TRUE(key.ok());
  Result<std::string> nothing = BuildCsrPem(*key, CertificateSpec{});
  ASSERT_TRUE(nothing.ok()) << nothing.status().ToString();
  X509ReqPtr empty = ParseRequest(*nothing);
  EXPECT_EQ(X509_NAME_entry_count(X509_REQ_get_subject_name(empty.get())), 0);
  bool critical = false;
  EXPECT_TRUE(RequestSans(empty.get(), &critical).empty());

  CertificateSpec spec;
  spec.subject.common_name = std::string(100, 'c');
  spec.subject.countries = {"USA"};
  spec.subject.organizations = {"a*b", ""};
  Result<std::string> pem = BuildCsrPem(*key, spec);
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  X509ReqPtr request = ParseRequest(*pem);
  X509_NAME* name = X509_REQ_get_subject_name(request.get());
  using Entries = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(NameEntries(name),
            (Entries{{"C", "USA"}, {"O", ""}, {"O", "a*b"}, {"CN", std::string(100, 'c')}}));
  auto type_of = [&](int index) {
    return ASN1_STRING_type(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index)));
  };
  // The two O values form one RDN, DER-sorted (the shorter encoding first).
  EXPECT_EQ(X509_NAME_ENTRY_set(X509_NAME_get_entry(name, 1)),
            X509_NAME_ENTRY_set(X509_NAME_get_entry(name, 2)));
  EXPECT_EQ(type_of(0), V_ASN1_PRINTABLESTRING);
  EXPECT_EQ(type_of(1), V_ASN1_PRINTABLESTRING);
  EXPECT_EQ(type_of(2), V_ASN1_UTF8STRING);  // '*' is not printable for Go
  EXPECT_EQ(type_of(3), V_ASN1_PRINTABLESTRING);
}

TEST(CsrTest, RejectsBadInput) {
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  ASSERT_TRUE(key.ok());
  auto expect_invalid = [&](const CertificateSpec& spec, const std::string& why) {
    Result<std::string> pem = BuildCsrPem(*key, spec);
    ASSERT_FALSE(pem.ok()) << why;
    EXPECT_EQ(pem.status().code(), Code::kInvalidArgument) << why;
  };
  CertificateSpec not_utf8;
  not_utf8.subject.common_name = "a\xff";
  expect_invalid(not_utf8, "common name not UTF-8");
  CertificateSpec bad_ip;
  bad_ip.ip_addresses = {"10.0.0.300"};
  expect_invalid(bad_ip, "bad IP");
  CertificateSpec bad_literal;
  bad_literal.literal_subject = "CN=a,,O=b";
  expect_invalid(bad_literal, "unparsable literal subject");
}

// ---- certificate info ------------------------------------------------------------

TEST(CertificateInfoTest, ParsesLeafOfChain) {
  FakeClock clock;
  Result<CaMaterial> ca_material = GenerateSelfSignedCa("info CA", std::chrono::hours(24), clock);
  ASSERT_TRUE(ca_material.ok());
  Result<std::unique_ptr<LocalCa>> ca =
      LocalCa::FromPem(ca_material->certificate_pem, ca_material->private_key_pem, clock);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  CertificateSpec spec = SpecWithSans();
  spec.duration = std::chrono::hours(1);
  IssueInput input{"vol", *BuildCsrPem(*key, spec), &spec, {}, {}, {}};
  Result<IssuedCertificate> issued =
      (*ca)->Issue(input, clock.SteadyNow() + std::chrono::seconds(10), {});
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();

  // The leaf first, then the CA: the leaf's facts come back.
  Result<CertificateInfo> info =
      ParseLeafCertificate(issued->certificate_chain_pem + issued->ca_pem);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->not_before, clock.NowUnix());
  EXPECT_EQ(info->not_after, clock.NowUnix() + 3600);
  EXPECT_EQ(info->subject, "serialNumber=1234,CN=web,OU=Platform,O=Example Inc,L=Berlin,C=DE");
  EXPECT_EQ(info->dns_names, (std::vector<std::string>{"web.example.com", "*.web.example.com"}));
  EXPECT_EQ("serial=" + info->serial_hex, OpensslSerial(issued->certificate_chain_pem));

  // A serial whose first byte is below 0x10 keeps its leading zero, and
  // zero is printed as one byte, both as `openssl x509 -serial` prints them.
  X509Ptr leaf = ParseCert(issued->certificate_chain_pem);
  for (const char* serial_text : {"0A1B", "00", "7F", "01FF00"}) {
    BIGNUM* number = nullptr;
    ASSERT_GT(BN_hex2bn(&number, serial_text), 0);
    BignumPtr owned(number);
    ASN1_INTEGER* integer = BN_to_ASN1_INTEGER(number, nullptr);
    ASSERT_NE(integer, nullptr);
    ASSERT_EQ(X509_set_serialNumber(leaf.get(), integer), 1);
    ASN1_INTEGER_free(integer);
    // Re-signing re-encodes the certificate (any key: only parsing follows).
    ASSERT_GT(X509_sign(leaf.get(), key->get(), Sha256Digest()), 0);
    BioPtr bio(BIO_new(BIO_s_mem()));
    ASSERT_EQ(PEM_write_bio_X509(bio.get(), leaf.get()), 1);
    std::string pem = BioContents(bio.get());
    Result<CertificateInfo> changed = ParseLeafCertificate(pem);
    ASSERT_TRUE(changed.ok()) << changed.status().ToString();
    EXPECT_EQ(changed->serial_hex, serial_text);
    EXPECT_EQ("serial=" + changed->serial_hex, OpensslSerial(pem));
  }
}

TEST(CertificateInfoTest, RejectsGarbageWithoutCrashing) {
  std::string truncated = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIQ\n";
  std::string bad_base64 = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
  std::string valid_base64_bad_der =
      "-----BEGIN CERTIFICATE-----\nMIIBAAAAAAAAAAAA\n-----END CERTIFICATE-----\n";
  for (const std::string& input : {std::string(), std::string("not pem"), truncated, bad_base64,
                                   valid_base64_bad_der, std::string("\0\0\0", 3)}) {
    Result<CertificateInfo> info = ParseLeafCertificate(input);
    ASSERT_FALSE(info.ok());
    EXPECT_EQ(info.status().code(), Code::kInvalidArgument);
  }
}

// ---- PKCS#12 -----------------------------------------------------------------------

class Pkcs12Test : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<CaMaterial> material = GenerateSelfSignedCa("p12 CA", std::chrono::hours(24), clock_);
    ASSERT_TRUE(material.ok());
    Result<std::unique_ptr<LocalCa>> ca =
        LocalCa::FromPem(material->certificate_pem, material->private_key_pem, clock_);
    ASSERT_TRUE(ca.ok());
    Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
    ASSERT_TRUE(key.ok());
    key_.emplace(std::move(*key));
    CertificateSpec spec = SpecWithSans();
    IssueInput input{"vol", *BuildCsrPem(*key_, spec), &spec, {}, {}, {}};
    Result<IssuedCertificate> issued =
        (*ca)->Issue(input, clock_.SteadyNow() + std::chrono::seconds(10), {});
    ASSERT_TRUE(issued.ok());
    issued_ = *issued;
  }

  FakeClock clock_;
  std::optional<PrivateKey> key_;
  IssuedCertificate issued_;
};

struct ProfileCase {
  const char* name;
  Pkcs12Profile profile;
  int mac_nid;
  // Must appear in `openssl pkcs12 -info` (with -legacy where needed).
  std::vector<std::string> info;
  bool needs_legacy_flag;
};

class Pkcs12ProfileTest : public Pkcs12Test, public ::testing::WithParamInterface<ProfileCase> {};

TEST_P(Pkcs12ProfileTest, OpensWithPasswordOnly) {
  Result<std::string> der =
      BuildPkcs12(*key_, issued_.certificate_chain_pem, "s3cret", GetParam().profile);
  ASSERT_TRUE(der.ok()) << der.status().ToString();

  const unsigned char* cursor = reinterpret_cast<const unsigned char*>(der->data());
  Pkcs12Ptr p12(d2i_PKCS12(nullptr, &cursor, static_cast<long>(der->size())));
  ASSERT_NE(p12, nullptr);
  EXPECT_EQ(PKCS12_verify_mac(p12.get(), "wrong", -1), 0);
  EXPECT_EQ(PKCS12_verify_mac(p12.get(), "s3cret", -1), 1);

  const X509_ALGOR* mac_algorithm = nullptr;
  PKCS12_get0_mac(nullptr, &mac_algorithm, nullptr, nullptr, p12.get());
  const ASN1_OBJECT* mac_object = nullptr;
  X509_ALGOR_get0(&mac_object, nullptr, nullptr, mac_algorithm);
  EXPECT_EQ(OBJ_obj2nid(mac_object), GetParam().mac_nid);
  DrainOpensslErrors();
}

TEST_P(Pkcs12ProfileTest, OpensslCliReadsItWithTheKeyAndChain) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl CLI";
  // As csi-driver: the leaf and the rest of tls.crt's chain (here the CA
  // certificate standing in for an intermediate), never ca.crt on its own.
  Result<std::string> der =
      BuildPkcs12(*key_, issued_.certificate_chain_pem + issued_.ca_pem, "pw", GetParam().profile);
  ASSERT_TRUE(der.ok()) << der.status().ToString();
  Result<std::string> leaf_only =
      BuildPkcs12(*key_, issued_.certificate_chain_pem, "pw", GetParam().profile);
  ASSERT_TRUE(leaf_only.ok()) << leaf_only.status().ToString();
  TempDir dir;
  std::ofstream(dir.Sub("leaf.p12"), std::ios::binary) << *leaf_only;
  std::string path = dir.Sub("keystore.p12");
  std::ofstream(path, std::ios::binary) << *der;
  const std::string plain_read = "openssl pkcs12 -in " + path;
  const std::string read =
      GetParam().needs_legacy_flag ? "openssl pkcs12 -legacy -in " + path : plain_read;
  if (GetParam().needs_legacy_flag) {
    // OpenSSL 3 refuses RC2 without its legacy provider: the old-reader
    // format is really what was written.
    EXPECT_NE(std::system((plain_read + " -passin pass:pw -noout >/dev/null 2>&1").c_str()), 0);
  }
  EXPECT_NE(std::system((read + " -passin pass:nope -noout >/dev/null 2>&1").c_str()), 0);
  std::string info = CommandOutput(read + " -passin pass:pw -noout -info");
  for (const std::string& expected : GetParam().info) {
    EXPECT_NE(info.find(expected), std::string::npos) << expected << " in\n" << info;
  }
  // Key and both certificates come out, the key matching the leaf.
  std::string pem = CommandOutput(read + " -passin pass:pw -nodes");
  EXPECT_NE(pem.find("PRIVATE KEY-----"), std::string::npos) << pem;
  size_t certificates = 0;
  for (size_t at = pem.find("BEGIN CERTIFICATE"); at != std::string::npos;
       at = pem.find("BEGIN CERTIFICATE", at + 1)) {
    ++certificates;
  }
  EXPECT_EQ(certificates, 2u) << pem;
  // Without intermediates only the leaf: the CA bundle is not added.
  const std::string leaf_read =
      (GetParam().needs_legacy_flag ? "openssl pkcs12 -legacy -in " : "openssl pkcs12 -in ") +
      dir.Sub("leaf.p12") + " -passin pass:pw -nodes -nokeys";
  std::string leaf_pem = CommandOutput(leaf_read);
  EXPECT_EQ(leaf_pem.find("BEGIN CERTIFICATE"), leaf_pem.rfind("BEGIN CERTIFICATE")) << leaf_pem;
  EXPECT_NE(leaf_pem.find("BEGIN CERTIFICATE"), std::string::npos) << leaf_pem;
}

INSTANTIATE_TEST_SUITE_P(
    Profiles, Pkcs12ProfileTest,
    ::testing::Values(
        // csi-driver's format (go-pkcs12's legacy encoder), the default.
        ProfileCase{"LegacyRC2",
                    Pkcs12Profile::kLegacyRc2,
                    NID_sha1,
                    {"MAC: sha1", "pbeWithSHA1And40BitRC2-CBC", "pbeWithSHA1And3-KeyTripleDES-CBC"},
                    true},
        ProfileCase{"LegacyDES",
                    Pkcs12Profile::kLegacyDes,
                    NID_sha1,
                    {"MAC: sha1", "pbeWithSHA1And3-KeyTripleDES-CBC"},
                    false},
        ProfileCase{"Modern2023",
                    Pkcs12Profile::kModern2023,
                    NID_sha256,
                    {"MAC: sha256", "AES-256-CBC", "hmacWithSHA256"},
                    false}),
    [](const ::testing::TestParamInfo<ProfileCase>& info) { return std::string(info.param.name); });

TEST_F(Pkcs12Test, DefaultProfileIsCsiDriversLegacyRc2) {
  Result<std::string> by_default = BuildPkcs12(*key_, issued_.certificate_chain_pem, "pw");
  ASSERT_TRUE(by_default.ok()) << by_default.status().ToString();
  const unsigned char* cursor = reinterpret_cast<const unsigned char*>(by_default->data());
  Pkcs12Ptr p12(d2i_PKCS12(nullptr, &cursor, static_cast<long>(by_default->size())));
  ASSERT_NE(p12, nullptr);
  const X509_ALGOR* mac_algorithm = nullptr;
  PKCS12_get0_mac(nullptr, &mac_algorithm, nullptr, nullptr, p12.get());
  const ASN1_OBJECT* mac_object = nullptr;
  X509_ALGOR_get0(&mac_object, nullptr, nullptr, mac_algorithm);
  EXPECT_EQ(OBJ_obj2nid(mac_object), NID_sha1);
  EXPECT_EQ(CertificateSpec().pkcs12_profile, Pkcs12Profile::kLegacyRc2);
}

TEST_F(Pkcs12Test, RejectsMismatchedKeyAndEmptyChain) {
  Result<PrivateKey> other = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  Result<std::string> der = BuildPkcs12(*other, issued_.certificate_chain_pem, "pw");
  ASSERT_FALSE(der.ok());
  EXPECT_EQ(der.status().code(), Code::kInvalidArgument);
  der = BuildPkcs12(*key_, "", "pw");
  ASSERT_FALSE(der.ok());
  EXPECT_EQ(der.status().code(), Code::kInvalidArgument);
  der = BuildPkcs12(*key_, "garbage", "pw");
  ASSERT_FALSE(der.ok());
  EXPECT_EQ(der.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace certmount
