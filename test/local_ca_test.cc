// The embedded CA, checked with OpenSSL's own chain verification.
#include "issue/local_ca.h"

#include "issue/certificate_info.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "issue/csr.h"
#include "issue/openssl_ptr.h"
#include "issue/private_key.h"
#include "support/fake_clock.h"
#include "support/fault_env.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

using ::certmount::testing::FakeClock;
using ::certmount::testing::FaultInjectionEnv;
using ::certmount::testing::TempDir;
using namespace std::chrono_literals;

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

X509ReqPtr ParseRequest(const std::string& pem) {
  BioPtr bio = MemoryBio(pem.data(), pem.size());
  return X509ReqPtr(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

mode_t Mode(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

int64_t UnixTime(const ASN1_TIME* time) {
  struct tm broken_down = {};
  EXPECT_EQ(ASN1_TIME_to_tm(time, &broken_down), 1);
  return timegm(&broken_down);
}

// X509_verify_cert of `leaf_pem` against the single trust anchor `ca_pem`,
// at unix time `at`. Returns the verify error (X509_V_OK on success).
int VerifyChain(const std::string& leaf_pem, const std::string& ca_pem, int64_t at) {
  X509Ptr leaf = ParseCert(leaf_pem);
  X509Ptr ca = ParseCert(ca_pem);
  EXPECT_TRUE(leaf && ca);
  X509StorePtr store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca.get());
  X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr);
  X509_STORE_CTX_set_time(ctx.get(), 0, static_cast<time_t>(at));
  int ok = X509_verify_cert(ctx.get());
  int error = X509_STORE_CTX_get_error(ctx.get());
  DrainOpensslErrors();
  return ok == 1 ? X509_V_OK : (error == X509_V_OK ? -1 : error);
}

std::vector<std::string> CertSans(X509* cert) {
  std::vector<std::string> out;
  GeneralNamesPtr names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type == GEN_DNS) {
      out.push_back("DNS:" + std::string(reinterpret_cast<const char*>(
                                             ASN1_STRING_get0_data(name->d.dNSName)),
                                         ASN1_STRING_length(name->d.dNSName)));
    } else if (name->type == GEN_IPADD) {
      out.push_back("IP:" + std::to_string(ASN1_STRING_length(name->d.iPAddress)) + "B");
    } else if (name->type == GEN_URI) {
      out.push_back("URI");
    } else if (name->type == GEN_EMAIL) {
      out.push_back("email");
    }
  }
  return out;
}

// Makes CSRs and issues them against one CA with a fake clock.
class LocalCaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<LocalCa>> ca =
        LocalCa::LoadOrCreate(dir_.Sub("ca"), clock_, Env::Default());
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_ = std::move(*ca);
    spec_.subject.common_name = "web";
    spec_.dns_names = {"web.example.com", "web.default.svc"};
    spec_.ip_addresses = {"10.0.0.7", "fd00::7"};
    spec_.uris = {"spiffe://cluster.local/ns/default/sa/web"};
    spec_.email_addresses = {"web@example.com"};
    spec_.duration = 24h;
    spec_.usages = {"digital signature", "key encipherment", "server auth", "client auth"};
  }

  std::string Csr(KeyAlgorithm algorithm = KeyAlgorithm::kEcdsa, int size = 256) {
    Result<PrivateKey> key = PrivateKey::Generate(algorithm, size);
    EXPECT_TRUE(key.ok());
    Result<std::string> csr = BuildCsrPem(*key, spec_);
    EXPECT_TRUE(csr.ok()) << csr.status().ToString();
    return csr.ok() ? *csr : "";
  }

  Result<IssuedCertificate> Issue(LocalCa& ca, const std::string& csr, std::stop_token stop = {}) {
    IssueInput input{"vol-1", csr, &spec_, {}, {}, {}};
    return ca.Issue(input, clock_.SteadyNow() + 30s, stop);
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<LocalCa> ca_;
  CertificateSpec spec_;
};

TEST_F(LocalCaTest, LoadOrCreateWritesPrivateFilesAndReusesThem) {
  const std::string dir = dir_.Sub("ca");
  EXPECT_EQ(Mode(dir), 0700u);
  EXPECT_EQ(Mode(dir + "/ca.key"), 0600u);
  EXPECT_EQ(Mode(dir + "/ca.crt"), 0644u);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_TRUE(entry.path().filename() == "ca.key" || entry.path().filename() == "ca.crt")
        << "leftover " << entry.path();
  }
  EXPECT_EQ(ReadAll(dir + "/ca.crt"), ca_->certificate_pem());

  X509Ptr ca_cert = ParseCert(ca_->certificate_pem());
  ASSERT_NE(ca_cert, nullptr);
  char cn[64] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(ca_cert.get()), NID_commonName, cn, sizeof(cn));
  EXPECT_STREQ(cn, "certmount local CA");
  EXPECT_EQ(X509_check_ca(ca_cert.get()), 1);
  EXPECT_EQ(X509_get_key_usage(ca_cert.get()), uint32_t{KU_KEY_CERT_SIGN | KU_CRL_SIGN});
  EXPECT_NE(X509_get0_subject_key_id(ca_cert.get()), nullptr);
  EXPECT_EQ(UnixTime(X509_get0_notBefore(ca_cert.get())), clock_.NowUnix());
  EXPECT_EQ(UnixTime(X509_get0_notAfter(ca_cert.get())), clock_.NowUnix() + 3650 * 86400);
  EXPECT_EQ(X509_get_ext_by_critical(ca_cert.get(), 1, -1) >= 0, true);
  EVP_PKEY* ca_public = X509_get0_pubkey(ca_cert.get());
  EXPECT_TRUE(EVP_PKEY_is_a(ca_public, "EC"));
  EXPECT_EQ(EVP_PKEY_get_bits(ca_public), 256);

  // A restart (later, with a different clock) loads the same CA.
  clock_.Advance(48h);
  Result<std::unique_ptr<LocalCa>> again = LocalCa::LoadOrCreate(dir, clock_, Env::Default());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->certificate_pem(), ca_->certificate_pem());
  Result<IssuedCertificate> issued = Issue(**again, Csr());
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(VerifyChain(issued->certificate_chain_pem, ca_->certificate_pem(), clock_.NowUnix()),
            X509_V_OK);
}

TEST_F(LocalCaTest, LoadOrCreateRefusesCertificateWithoutKey) {
  const std::string dir = dir_.Sub("ca");
  std::filesystem::remove(dir + "/ca.key");
  Result<std::unique_ptr<LocalCa>> ca = LocalCa::LoadOrCreate(dir, clock_, Env::Default());
  ASSERT_FALSE(ca.ok());
  EXPECT_EQ(ca.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(ca.status().message().find("ca.key"), std::string::npos);
}

TEST_F(LocalCaTest, LoadOrCreateReplacesOrphanKey) {
  const std::string dir = dir_.Sub("ca");
  std::filesystem::remove(dir + "/ca.crt");
  Result<std::unique_ptr<LocalCa>> ca = LocalCa::LoadOrCreate(dir, clock_, Env::Default());
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  EXPECT_NE((*ca)->certificate_pem(), ca_->certificate_pem());
  EXPECT_TRUE(std::filesystem::exists(dir + "/ca.crt"));
}

// The disk fills up at each file-system step of creating the CA in turn: the
// error says so (RESOURCE_EXHAUSTED, not INTERNAL), no temp file is left, any
// ca.crt left is a whole CA with its key, and the next start succeeds.
TEST_F(LocalCaTest, CreationFailingAtEachStepLeavesNoHalfCa) {
  struct Step {
    const char* operation;
    int nth;  // for the files: 1 is ca.key, 2 is ca.crt; 0: the CA directory
  };
  const Step steps[] = {{"CreateDir", 0},    {"WriteNewFile", 1}, {"Rename", 1}, {"SyncDir", 1},
                        {"WriteNewFile", 2}, {"Rename", 2},       {"SyncDir", 2}};
  int n = 0;
  for (const Step& step : steps) {
    const std::string dir = dir_.Sub("failing-ca-" + std::to_string(++n));
    // CreateDirectories tries each component of the path; the last is the CA's.
    const int nth =
        step.nth > 0 ? step.nth : static_cast<int>(std::count(dir.begin(), dir.end(), '/'));
    SCOPED_TRACE(std::string(step.operation) + " #" + std::to_string(nth));
    FaultInjectionEnv env;
    env.FailNth(step.operation, nth, ENOSPC);
    Result<std::unique_ptr<LocalCa>> ca = LocalCa::LoadOrCreate(dir, clock_, &env);
    ASSERT_FALSE(ca.ok());
    EXPECT_EQ(ca.status().code(), Code::kResourceExhausted) << ca.status().ToString();
    EXPECT_NE(ca.status().message().find("ENOSPC"), std::string::npos) << ca.status().ToString();
    EXPECT_EQ(env.calls(step.operation), nth);

    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
      EXPECT_TRUE(entry.path().filename() == "ca.key" || entry.path().filename() == "ca.crt")
          << "leftover " << entry.path();
    }
    if (std::filesystem::exists(dir + "/ca.crt")) {
      EXPECT_TRUE(
          LocalCa::FromFiles(dir + "/ca.crt", dir + "/ca.key", clock_, Env::Default()).ok());
    }
    Result<std::unique_ptr<LocalCa>> restarted = LocalCa::LoadOrCreate(dir, clock_, Env::Default());
    EXPECT_TRUE(restarted.ok()) << restarted.status().ToString();
  }
}

TEST_F(LocalCaTest, FromFilesChecksKeyAndCaFlag) {
  Result<CaMaterial> first = GenerateSelfSignedCa("first", 24h, clock_);
  Result<CaMaterial> second = GenerateSelfSignedCa("second", 24h, clock_);
  ASSERT_TRUE(first.ok() && second.ok());
  const std::string cert_path = dir_.Sub("first.crt");
  const std::string key_path = dir_.Sub("second.key");
  WriteAll(cert_path, first->certificate_pem);
  WriteAll(key_path, second->private_key_pem);
  Result<std::unique_ptr<LocalCa>> mismatched =
      LocalCa::FromFiles(cert_path, key_path, clock_, Env::Default());
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(mismatched.status().message().find(key_path), std::string::npos);

  // A leaf with its own key is consistent but is not a CA.
  Result<PrivateKey> leaf_key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  Result<IssuedCertificate> leaf = Issue(*ca_, *BuildCsrPem(*leaf_key, spec_));
  ASSERT_TRUE(leaf.ok());
  const std::string leaf_cert_path = dir_.Sub("leaf.crt");
  const std::string leaf_key_path = dir_.Sub("leaf.key");
  WriteAll(leaf_cert_path, leaf->certificate_chain_pem);
  WriteAll(leaf_key_path, *leaf_key->ToPem(KeyEncoding::kPkcs1));
  Result<std::unique_ptr<LocalCa>> not_ca =
      LocalCa::FromFiles(leaf_cert_path, leaf_key_path, clock_, Env::Default());
  ASSERT_FALSE(not_ca.ok());
  EXPECT_EQ(not_ca.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(not_ca.status().message().find(leaf_cert_path), std::string::npos);

  const std::string garbage_path = dir_.Sub("garbage.crt");
  WriteAll(garbage_path, "not a certificate");
  Result<std::unique_ptr<LocalCa>> garbage =
      LocalCa::FromFiles(garbage_path, key_path, clock_, Env::Default());
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), Code::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find(garbage_path), std::string::npos);

  Result<std::unique_ptr<LocalCa>> missing =
      LocalCa::FromFiles(dir_.Sub("missing.crt"), key_path, clock_, Env::Default());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("missing.crt"), std::string::npos);
}

TEST_F(LocalCaTest, LeafFactsMatchWhatTheCertificateSays) {
  Result<IssuedCertificate> issued = Issue(*ca_, Csr());
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  ASSERT_TRUE(issued->leaf.has_value());
  Result<CertificateInfo> parsed = ParseLeafCertificate(issued->certificate_chain_pem);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(issued->leaf->serial_hex, parsed->serial_hex);
  EXPECT_EQ(issued->leaf->not_before, parsed->not_before);
  EXPECT_EQ(issued->leaf->not_after, parsed->not_after);
  EXPECT_EQ(issued->leaf->subject, parsed->subject);
  EXPECT_EQ(issued->leaf->dns_names, parsed->dns_names);
  EXPECT_EQ(issued->leaf->not_before, clock_.NowUnix());
}

TEST_F(LocalCaTest, IssuedLeafVerifiesAndCarriesTheSpec) {
  Result<IssuedCertificate> issued = Issue(*ca_, Csr());
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(issued->ca_pem, ca_->certificate_pem());
  EXPECT_EQ(VerifyChain(issued->certificate_chain_pem, issued->ca_pem, clock_.NowUnix() + 60),
            X509_V_OK);

  X509Ptr leaf = ParseCert(issued->certificate_chain_pem);
  X509Ptr ca = ParseCert(issued->ca_pem);
  ASSERT_TRUE(leaf && ca);
  EXPECT_EQ(X509_get_version(leaf.get()), X509_VERSION_3);
  char cn[64] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(leaf.get()), NID_commonName, cn, sizeof(cn));
  EXPECT_STREQ(cn, "web");
  EXPECT_EQ(X509_NAME_cmp(X509_get_issuer_name(leaf.get()), X509_get_subject_name(ca.get())), 0);
  EXPECT_EQ(CertSans(leaf.get()),
            (std::vector<std::string>{"DNS:web.example.com", "DNS:web.default.svc", "IP:4B",
                                      "IP:16B", "URI", "email"}));

  EXPECT_EQ(X509_get_key_usage(leaf.get()), uint32_t{KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT});
  EXPECT_EQ(X509_get_extended_key_usage(leaf.get()), uint32_t{XKU_SSL_SERVER | XKU_SSL_CLIENT});
  EXPECT_EQ(X509_check_ca(leaf.get()), 0);
  int critical = 0;
  BasicConstraintsPtr constraints(static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(leaf.get(), NID_basic_constraints, &critical, nullptr)));
  ASSERT_NE(constraints, nullptr);
  EXPECT_EQ(constraints->ca, 0);
  EXPECT_EQ(critical, 1);

  const ASN1_OCTET_STRING* ski = X509_get0_subject_key_id(leaf.get());
  const ASN1_OCTET_STRING* aki = X509_get0_authority_key_id(leaf.get());
  ASSERT_TRUE(ski && aki);
  EXPECT_EQ(ASN1_STRING_length(ski), 20);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(aki, X509_get0_subject_key_id(ca.get())), 0);
  EXPECT_NE(ASN1_OCTET_STRING_cmp(ski, aki), 0);

  BignumPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf.get()), nullptr));
  EXPECT_FALSE(BN_is_negative(serial.get()));
  EXPECT_LE(BN_num_bits(serial.get()), 127);
  EXPECT_GE(BN_num_bits(serial.get()), 64);  // fails with chance 2^-63

  EXPECT_EQ(UnixTime(X509_get0_notBefore(leaf.get())), clock_.NowUnix());
  EXPECT_EQ(UnixTime(X509_get0_notAfter(leaf.get())), clock_.NowUnix() + 24 * 3600);
  // Not yet valid a second before issuance, expired after the duration.
  EXPECT_EQ(VerifyChain(issued->certificate_chain_pem, issued->ca_pem, clock_.NowUnix() - 1),
            X509_V_ERR_CERT_NOT_YET_VALID);
  EXPECT_EQ(
      VerifyChain(issued->certificate_chain_pem, issued->ca_pem, clock_.NowUnix() + 24 * 3600 + 1),
      X509_V_ERR_CERT_HAS_EXPIRED);
}

TEST_F(LocalCaTest, SerialsAreUnique) {
  std::set<std::string> serials;
  std::string csr = Csr();
  for (int i = 0; i < 20; ++i) {
    Result<IssuedCertificate> issued = Issue(*ca_, csr);
    ASSERT_TRUE(issued.ok());
    X509Ptr leaf = ParseCert(issued->certificate_chain_pem);
    BignumPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf.get()), nullptr));
    char* hex = BN_bn2hex(serial.get());
    serials.insert(hex);
    OPENSSL_free(hex);
  }
  EXPECT_EQ(serials.size(), 20u);
}

TEST_F(LocalCaTest, CaCertificatesGetCaConstraintsAndCertSign) {
  spec_.is_ca = true;
  spec_.usages = {"digital signature"};
  Result<IssuedCertificate> issued = Issue(*ca_, Csr());
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  X509Ptr leaf = ParseCert(issued->certificate_chain_pem);
  EXPECT_EQ(X509_check_ca(leaf.get()), 1);
  EXPECT_EQ(X509_get_key_usage(leaf.get()), uint32_t{KU_DIGITAL_SIGNATURE | KU_KEY_CERT_SIGN});
  EXPECT_EQ(X509_get_extension_flags(leaf.get()) & EXFLAG_XKUSAGE, 0u);
  int critical = 0;
  BasicConstraintsPtr constraints(static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(leaf.get(), NID_basic_constraints, &critical, nullptr)));
  ASSERT_NE(constraints, nullptr);
  EXPECT_NE(constraints->ca, 0);
  EXPECT_EQ(critical, 1);
  EXPECT_EQ(VerifyChain(issued->certificate_chain_pem, issued->ca_pem, clock_.NowUnix()),
            X509_V_OK);
}

TEST_F(LocalCaTest, MapsEveryCertManagerUsage) {
  spec_.usages = {"signing",
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
  Result<IssuedCertificate> issued = Issue(*ca_, Csr());
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  X509Ptr leaf = ParseCert(issued->certificate_chain_pem);
  EXPECT_EQ(X509_get_key_usage(leaf.get()),
            uint32_t{KU_DIGITAL_SIGNATURE | KU_NON_REPUDIATION | KU_KEY_ENCIPHERMENT |
                     KU_KEY_AGREEMENT | KU_DATA_ENCIPHERMENT | KU_KEY_CERT_SIGN | KU_CRL_SIGN |
                     KU_ENCIPHER_ONLY | KU_DECIPHER_ONLY});
  std::unique_ptr<EXTENDED_KEY_USAGE, OpensslFree<&EXTENDED_KEY_USAGE_free>> eku(
      static_cast<EXTENDED_KEY_USAGE*>(
          X509_get_ext_d2i(leaf.get(), NID_ext_key_usage, nullptr, nullptr)));
  ASSERT_NE(eku, nullptr);
  std::vector<int> nids;
  for (int i = 0; i < sk_ASN1_OBJECT_num(eku.get()); ++i) {
    nids.push_back(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku.get(), i)));
  }
  // "s/mime" is emailProtection again and is not repeated.
  EXPECT_EQ(nids, (std::vector<int>{NID_anyExtendedKeyUsage, NID_server_auth, NID_client_auth,
                                    NID_code_sign, NID_email_protect, NID_ipsecEndSystem,
                                    NID_ipsecTunnel, NID_ipsecUser, NID_time_stamp, NID_OCSP_sign,
                                    NID_ms_sgc, NID_ns_sgc}));
}

TEST_F(LocalCaTest, RejectsUnknownUsage) {
  spec_.usages = {"server auth", "world domination"};
  Result<IssuedCertificate> issued = Issue(*ca_, Csr());
  ASSERT_FALSE(issued.ok());
  EXPECT_EQ(issued.status().code(), Code::kInvalidArgument);
  EXPECT_NE(issued.status().message().find("world domination"), std::string::npos);
}

TEST_F(LocalCaTest, DurationIsCappedAtCaExpiry) {
  Result<CaMaterial> material = GenerateSelfSignedCa("short-lived", 1h, clock_);
  ASSERT_TRUE(material.ok());
  WriteAll(dir_.Sub("short.crt"), material->certificate_pem);
  WriteAll(dir_.Sub("short.key"), material->private_key_pem);
  Result<std::unique_ptr<LocalCa>> short_ca =
      LocalCa::FromFiles(dir_.Sub("short.crt"), dir_.Sub("short.key"), clock_, Env::Default());
  ASSERT_TRUE(short_ca.ok()) << short_ca.status().ToString();
  const int64_t ca_expiry = clock_.NowUnix() + 3600;
  EXPECT_EQ((*short_ca)->not_after(), ca_expiry);

  clock_.Advance(10min);
  spec_.duration = 2160h;
  Result<IssuedCertificate> issued = Issue(**short_ca, Csr());
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  X509Ptr leaf = ParseCert(issued->certificate_chain_pem);
  EXPECT_EQ(UnixTime(X509_get0_notBefore(leaf.get())), clock_.NowUnix());
  EXPECT_EQ(UnixTime(X509_get0_notAfter(leaf.get())), ca_expiry);
  EXPECT_EQ(VerifyChain(issued->certificate_chain_pem, issued->ca_pem, ca_expiry - 1), X509_V_OK);

  clock_.Advance(1h);
  Result<IssuedCertificate> expired = Issue(**short_ca, Csr());
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.status().code(), Code::kFailedPrecondition);
}

TEST_F(LocalCaTest, RejectsTamperedOrGarbageCsr) {
  X509ReqPtr request = ParseRequest(Csr());
  ASSERT_NE(request, nullptr);
  X509NamePtr other(X509_NAME_new());
  X509_NAME_add_entry_by_txt(other.get(), "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("admin"), -1, -1, 0);
  ASSERT_EQ(X509_REQ_set_subject_name(request.get(), other.get()), 1);
  BioPtr bio(BIO_new(BIO_s_mem()));
  ASSERT_EQ(PEM_write_bio_X509_REQ(bio.get(), request.get()), 1);
  Result<IssuedCertificate> tampered = Issue(*ca_, BioContents(bio.get()));
  ASSERT_FALSE(tampered.ok());
  EXPECT_EQ(tampered.status().code(), Code::kInvalidArgument);

  Result<IssuedCertificate> garbage = Issue(*ca_, "-----BEGIN CERTIFICATE REQUEST-----\nAA==\n");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), Code::kInvalidArgument);
}

TEST_F(LocalCaTest, SignsEveryKeyAlgorithm) {
  for (auto [algorithm, size] : {std::pair{KeyAlgorithm::kRsa, 2048},
                                 {KeyAlgorithm::kEcdsa, 384},
                                 {KeyAlgorithm::kEcdsa, 521},
                                 {KeyAlgorithm::kEd25519, 0}}) {
    const std::string csr = Csr(algorithm, size);
    Result<IssuedCertificate> issued = Issue(*ca_, csr);
    ASSERT_TRUE(issued.ok()) << issued.status().ToString();
    EXPECT_EQ(VerifyChain(issued->certificate_chain_pem, issued->ca_pem, clock_.NowUnix()),
              X509_V_OK);
    // The leaf certifies exactly the CSR's key.
    X509Ptr leaf = ParseCert(issued->certificate_chain_pem);
    X509ReqPtr request = ParseRequest(csr);
    ASSERT_TRUE(leaf && request);
    EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(leaf.get()), X509_REQ_get0_pubkey(request.get())), 1);
  }
}

TEST_F(LocalCaTest, HonoursStopAndDeadline) {
  std::string csr = Csr();
  std::stop_source stop;
  stop.request_stop();
  Result<IssuedCertificate> cancelled = Issue(*ca_, csr, stop.get_token());
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), Code::kCancelled);

  IssueInput input{"vol-1", csr, &spec_, {}, {}, {}};
  Result<IssuedCertificate> late = ca_->Issue(input, clock_.SteadyNow() - 1s, {});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Code::kDeadlineExceeded);

  IssueInput no_spec{"vol-1", csr, nullptr, {}, {}, {}};
  Result<IssuedCertificate> missing = ca_->Issue(no_spec, clock_.SteadyNow() + 1s, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kInvalidArgument);
}

TEST_F(LocalCaTest, ConcurrentIssuesAllVerify) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 15;
  std::vector<std::vector<std::string>> leaves(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
        if (!key.ok()) return;
        Result<std::string> csr = BuildCsrPem(*key, spec_);
        if (!csr.ok()) return;
        IssueInput input{"vol", *csr, &spec_, {}, {}, {}};
        Result<IssuedCertificate> issued = ca_->Issue(input, clock_.SteadyNow() + 30s, {});
        if (issued.ok()) leaves[t].push_back(issued->certificate_chain_pem);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& per_thread : leaves) {
    ASSERT_EQ(per_thread.size(), static_cast<size_t>(kPerThread));
    for (const std::string& leaf : per_thread) {
      EXPECT_EQ(VerifyChain(leaf, ca_->certificate_pem(), clock_.NowUnix()), X509_V_OK);
    }
  }
}

}  // namespace
}  // namespace certmount
