// JKS keystores and truststores (issue/jks.h) read back by the JDK's own
// keytool: the alias, entry types, chain, fingerprints, the password, and the
// key itself (through keytool's conversion to PKCS#12 and openssl). Then the
// same through the real certmountd over its socket, on publish and renewal.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/env.h"
#include "issue/attributes.h"
#include "issue/csr.h"
#include "issue/jks.h"
#include "issue/local_ca.h"
#include "issue/private_key.h"
#include "issue/volume_attributes.h"
#include "support/daemon.h"
#include "support/fake_clock.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"
#include "volume/issuance.h"
#include "volume/volume_layout.h"

// keytool is a test dependency (scripts/install-deps.sh); under CI=true its
// absence fails the test instead of silently dropping the check.
#define CERTMOUNT_REQUIRE_KEYTOOL()                                            \
  do {                                                                         \
    if (std::system("command -v keytool >/dev/null 2>&1") != 0) {              \
      const char* ci = std::getenv("CI");                                      \
      if (ci != nullptr && std::strcmp(ci, "true") == 0) {                     \
        FAIL() << "keytool (openjdk-17-jre-headless) is missing, and CI=true " \
                  "forbids skipping";                                          \
      }                                                                        \
      GTEST_SKIP() << "needs keytool (openjdk-17-jre-headless)";               \
    }                                                                          \
  } while (0)

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult Command(const std::string& command) {
  CommandResult run;
  FILE* pipe = popen((command + " </dev/null 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// keytool in English, UTC and UTF-8, whatever the machine's locale.
std::string Keytool(const std::string& arguments) {
  return "LC_ALL=C.UTF-8 keytool -J-Duser.language=en -J-Duser.country=US "
         "-J-Duser.timezone=UTC " +
         arguments;
}

CommandResult KeytoolList(const std::string& path, const std::string& password,
                          const std::string& extra = "") {
  return Command(Keytool("-list -v -keystore " + path + " -storepass '" + password + "' " + extra));
}

// "AB:CD:..." as keytool prints a SHA-256 fingerprint.
std::string Sha256Fingerprint(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) return "";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  X509_digest(cert, EVP_sha256(), digest, &length);
  X509_free(cert);
  std::string out;
  char hex[4];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(hex, sizeof(hex), i == 0 ? "%02X" : ":%02X", digest[i]);
    out += hex;
  }
  return out;
}

// A file's bytes; empty when it cannot be read.
std::string ReadAll(const std::string& path) {
  Result<std::string> bytes = Env::Default()->ReadFile(path);
  return bytes.ok() ? *bytes : std::string();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The block keytool -list -v prints for `alias`, up to the next alias.
std::string EntryOf(const std::string& listing, const std::string& alias) {
  const std::string header = "Alias name: " + alias + "\n";
  size_t start = listing.find(header);
  if (start == std::string::npos) return "";
  size_t end = listing.find("Alias name: ", start + header.size());
  return listing.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

class JksTest : public ::testing::TestWithParam<KeyAlgorithm> {
 protected:
  void SetUp() override {
    Result<CaMaterial> material = GenerateSelfSignedCa("jks CA", 24h, clock_);
    ASSERT_TRUE(material.ok());
    ca_pem_ = material->certificate_pem;
    Result<std::unique_ptr<LocalCa>> ca =
        LocalCa::FromPem(material->certificate_pem, material->private_key_pem, clock_);
    ASSERT_TRUE(ca.ok());
    Result<PrivateKey> key = PrivateKey::Generate(GetParam(), 0);
    ASSERT_TRUE(key.ok());
    key_.emplace(std::move(*key));
    CertificateSpec spec;
    spec.subject.common_name = "jks.example";
    spec.dns_names = {"jks.example"};
    IssueInput input{"vol", *BuildCsrPem(*key_, spec), &spec, {}, {}, {}};
    Result<IssuedCertificate> issued = (*ca)->Issue(input, clock_.SteadyNow() + 10s, {});
    ASSERT_TRUE(issued.ok()) << issued.status().ToString();
    leaf_pem_ = issued->certificate_chain_pem;
  }

  FakeClock clock_;  // 2023-11-14 22:13:20 UTC
  std::optional<PrivateKey> key_;
  std::string leaf_pem_;
  std::string ca_pem_;
  TempDir dir_;
};

TEST_P(JksTest, KeytoolReadsTheKeyEntryChainAndCaWithThePasswordOnly) {
  CERTMOUNT_REQUIRE_KEYTOOL();
  // The CA certificate stands in for an intermediate: a chain of two.
  Result<std::string> store =
      BuildJksKeystore(*key_, leaf_pem_ + ca_pem_, ca_pem_, "s3cret", clock_.NowUnix() * 1000);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string path = dir_.Sub("keystore.jks");
  WriteAll(path, *store);

  CommandResult listed = KeytoolList(path, "s3cret", "-storetype JKS");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("Keystore type: JKS"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("Your keystore contains 2 entries"), std::string::npos);
  const std::string key_entry = EntryOf(listed.output, "certificate");
  EXPECT_NE(key_entry.find("Entry type: PrivateKeyEntry"), std::string::npos) << listed.output;
  EXPECT_NE(key_entry.find("Certificate chain length: 2"), std::string::npos) << key_entry;
  EXPECT_NE(key_entry.find("Creation date: Nov 14, 2023"), std::string::npos) << key_entry;
  // Certificate[1] is the leaf, with OpenSSL's fingerprint.
  const size_t leaf_at = key_entry.find("Certificate[1]:");
  const size_t issuer_at = key_entry.find("Certificate[2]:");
  ASSERT_NE(leaf_at, std::string::npos);
  ASSERT_NE(issuer_at, std::string::npos);
  EXPECT_NE(key_entry.substr(leaf_at, issuer_at - leaf_at)
                .find("SHA256: " + Sha256Fingerprint(leaf_pem_)),
            std::string::npos)
      << key_entry;
  const std::string ca_entry = EntryOf(listed.output, "ca");
  EXPECT_NE(ca_entry.find("Entry type: trustedCertEntry"), std::string::npos) << listed.output;
  EXPECT_NE(ca_entry.find("SHA256: " + Sha256Fingerprint(ca_pem_)), std::string::npos);

  // The integrity digest is checked: a wrong password, or one changed byte, fails.
  CommandResult wrong = KeytoolList(path, "s3creT");
  EXPECT_NE(wrong.exit_code, 0) << wrong.output;
  EXPECT_NE(wrong.output.find("password was incorrect"), std::string::npos) << wrong.output;
  std::string tampered = *store;
  tampered[tampered.size() / 2] ^= 1;
  WriteAll(dir_.Sub("tampered.jks"), tampered);
  EXPECT_NE(KeytoolList(dir_.Sub("tampered.jks"), "s3cret").exit_code, 0);
}

TEST_P(JksTest, TheKeyRoundTripsThroughKeytoolAndOpenssl) {
  CERTMOUNT_REQUIRE_KEYTOOL();
  const std::string password = "pässwörd €";  // UTF-16 as Java sees it
  Result<std::string> store = BuildJksKeystore(*key_, leaf_pem_, "", password, 0);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string path = dir_.Sub("keystore.jks");
  WriteAll(path, *store);

  // keytool recovers the key (the key protector and its check value) to
  // copy it into a PKCS#12, which openssl then opens.
  const std::string p12 = dir_.Sub("copy.p12");
  CommandResult converted = Command(Keytool("-importkeystore -noprompt -srckeystore " + path +
                                            " -srcstoretype JKS -srcstorepass '" + password +
                                            "' -srcalias certificate -destkeystore " + p12 +
                                            " -deststoretype PKCS12 -deststorepass copypass"));
  ASSERT_EQ(converted.exit_code, 0) << converted.output;
  CommandResult key =
      Command("openssl pkcs12 -in " + p12 + " -passin pass:copypass -nocerts -nodes");
  if (key.exit_code != 0) {
    key = Command("openssl pkcs12 -legacy -in " + p12 + " -passin pass:copypass -nocerts -nodes");
  }
  ASSERT_EQ(key.exit_code, 0) << key.output;
  Result<PrivateKey> recovered = PrivateKey::FromPem(key.output);
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString() << "\n" << key.output;
  EXPECT_EQ(*recovered->ToPem(KeyEncoding::kPkcs8), *key_->ToPem(KeyEncoding::kPkcs8));

  // Without a CA bundle the keystore holds the key entry only.
  CommandResult listed = KeytoolList(path, password);
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("Your keystore contains 1 entry"), std::string::npos);
  EXPECT_NE(listed.output.find("Certificate chain length: 1"), std::string::npos);
  EXPECT_NE(listed.output.find("Creation date: Jan 1, 1970"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Keys, JksTest,
                         ::testing::Values(KeyAlgorithm::kRsa, KeyAlgorithm::kEcdsa,
                                           KeyAlgorithm::kEd25519),
                         [](const ::testing::TestParamInfo<KeyAlgorithm>& info) {
                           switch (info.param) {
                             case KeyAlgorithm::kRsa:
                               return std::string("Rsa");
                             case KeyAlgorithm::kEcdsa:
                               return std::string("Ecdsa");
                             case KeyAlgorithm::kEd25519:
                               return std::string("Ed25519");
                           }
                           return std::string("Unknown");
                         });

class JksStoreTest : public ::testing::Test {
 protected:
  static std::string NewCa(const std::string& name) {
    FakeClock clock;
    Result<CaMaterial> material = GenerateSelfSignedCa(name, 24h, clock);
    return material.ok() ? material->certificate_pem : "";
  }

  TempDir dir_;
};

TEST_F(JksStoreTest, TruststoreHoldsEachDistinctCaUnderCertManagersAliases) {
  CERTMOUNT_REQUIRE_KEYTOOL();
  const std::string first = NewCa("first CA");
  const std::string second = NewCa("second CA");
  Result<std::string> store = BuildJksTruststore(first + second + first, "changeit", 1000);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string path = dir_.Sub("truststore.jks");
  WriteAll(path, *store);
  CommandResult listed = KeytoolList(path, "changeit", "-storetype JKS");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("Your keystore contains 2 entries"), std::string::npos)
      << listed.output;
  const std::string ca = EntryOf(listed.output, "ca");
  const std::string ca1 = EntryOf(listed.output, "ca-1");
  EXPECT_NE(ca.find("Entry type: trustedCertEntry"), std::string::npos) << listed.output;
  EXPECT_NE(ca.find("SHA256: " + Sha256Fingerprint(first)), std::string::npos) << ca;
  EXPECT_NE(ca1.find("Entry type: trustedCertEntry"), std::string::npos) << listed.output;
  EXPECT_NE(ca1.find("SHA256: " + Sha256Fingerprint(second)), std::string::npos) << ca1;
  EXPECT_NE(KeytoolList(path, "changeme").exit_code, 0);

  // An issuer that returns no CA gives an empty, still valid, truststore.
  Result<std::string> empty = BuildJksTruststore("", "changeit", 0);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  WriteAll(dir_.Sub("empty.jks"), *empty);
  CommandResult listed_empty = KeytoolList(dir_.Sub("empty.jks"), "changeit");
  EXPECT_EQ(listed_empty.exit_code, 0) << listed_empty.output;
  EXPECT_NE(listed_empty.output.find("Your keystore contains 0 entries"), std::string::npos)
      << listed_empty.output;
}

// A CA rotation's bundle change (RewriteTrustBundle) keeps the certificate
// and key but must rebuild both stores: they hold ca.crt's certificates too.
TEST_F(JksStoreTest, ATrustBundleRewriteRebuildsBothStoresAroundTheNewBundle) {
  CERTMOUNT_REQUIRE_KEYTOOL();
  FakeClock clock;
  Result<CaMaterial> material = GenerateSelfSignedCa("signing CA", 24h, clock);
  ASSERT_TRUE(material.ok());
  Result<std::unique_ptr<LocalCa>> ca =
      LocalCa::FromPem(material->certificate_pem, material->private_key_pem, clock);
  ASSERT_TRUE(ca.ok());
  Result<CertificateSpec> spec = ParseVolumeAttributes(
      {
          {"csi.cert-manager.io/issuer-name", "ca"},
          {"csi.cert-manager.io/key-algorithm", "ECDSA"},
          {"csi.cert-manager.io/dns-names",
           "jks.example"},  // keytool refuses a leaf naming nothing
          {"csi.cert-manager.io/keystore-jks-enable", "true"},
          {"csi.cert-manager.io/keystore-jks-password", "changeit"},
      },
      {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const VolumeLayout layout = VolumeLayout::For(dir_.Sub("data"), "vol");
  ASSERT_TRUE(Env::Default()->CreateDirectories(layout.data, 0700).ok());
  IssuanceRequest request;
  request.volume_id = "vol";
  request.spec = &*spec;
  request.layout = layout;
  request.now_unix = clock.NowUnix();
  ASSERT_TRUE(
      IssueIntoVolume(request, ca->get(), Env::Default(), clock.SteadyNow() + 10s, {}).ok());
  const std::string leaf = ReadAll(layout.data + "/tls.crt");

  const std::string bundle = material->certificate_pem + NewCa("next CA");
  ASSERT_TRUE(RewriteTrustBundle(layout, *spec, bundle, {}, clock.NowUnix(), Env::Default()).ok());
  EXPECT_EQ(ReadAll(layout.data + "/ca.crt"), bundle);
  EXPECT_EQ(ReadAll(layout.data + "/tls.crt"), leaf);
  for (const char* store : {"keystore.jks", "truststore.jks"}) {
    CommandResult listed = KeytoolList(layout.data + "/" + store, "changeit", "-storetype JKS");
    ASSERT_EQ(listed.exit_code, 0) << store << ": " << listed.output;
    EXPECT_NE(EntryOf(listed.output, "ca-1").find("Entry type: trustedCertEntry"),
              std::string::npos)
        << store << ": " << listed.output;
  }
  CommandResult keystore = KeytoolList(layout.data + "/keystore.jks", "changeit");
  EXPECT_NE(EntryOf(keystore.output, "certificate").find("SHA256: " + Sha256Fingerprint(leaf)),
            std::string::npos)
      << keystore.output;
}

TEST_F(JksStoreTest, RefusesBadInputWithInvalidArgument) {
  FakeClock clock;
  Result<CaMaterial> ca = GenerateSelfSignedCa("self", 24h, clock);
  ASSERT_TRUE(ca.ok());
  Result<PrivateKey> key = PrivateKey::FromPem(ca->private_key_pem);
  Result<PrivateKey> other = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  ASSERT_TRUE(key.ok() && other.ok());
  const std::string& cert = ca->certificate_pem;
  std::string too_long(kJksMaxCertificateBytes + 1, 'x');
  std::string long_chain;
  for (size_t i = 0; i <= kJksMaxChainCertificates; ++i) long_chain += NewCa(std::to_string(i));

  struct Case {
    const char* what;
    Result<std::string> result;
  };
  std::vector<Case> cases;
  cases.push_back({"empty password", BuildJksKeystore(*key, cert, "", "", 0)});
  cases.push_back({"password not UTF-8", BuildJksKeystore(*key, cert, "", "\xff\xfe", 0)});
  cases.push_back(
      {"password too long",
       BuildJksKeystore(*key, cert, "", std::string(kJksMaxPasswordBytes + 1, 'p'), 0)});
  cases.push_back({"empty chain", BuildJksKeystore(*key, "", "", "pw", 0)});
  cases.push_back({"chain not PEM", BuildJksKeystore(*key, "garbage", "", "pw", 0)});
  cases.push_back({"key of another certificate", BuildJksKeystore(*other, cert, "", "pw", 0)});
  cases.push_back({"date before 1970", BuildJksKeystore(*key, cert, "", "pw", -1)});
  cases.push_back({"chain too long", BuildJksKeystore(*key, cert + long_chain, "", "pw", 0)});
  cases.push_back({"CA bundle not PEM", BuildJksKeystore(*key, cert, "garbage", "pw", 0)});
  cases.push_back({"truststore not PEM", BuildJksTruststore("garbage", "pw", 0)});
  cases.push_back({"truststore empty password", BuildJksTruststore(cert, "", 0)});
  for (const Case& c : cases) {
    ASSERT_FALSE(c.result.ok()) << c.what;
    EXPECT_EQ(c.result.status().code(), Code::kInvalidArgument)
        << c.what << ": " << c.result.status().ToString();
  }
  // Within the bounds all is well.
  EXPECT_TRUE(BuildJksKeystore(*key, cert, cert, "pw", 0).ok());
}

// ---- Through the real certmountd ---------------------------------------------

class JksDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    CERTMOUNT_REQUIRE_KEYTOOL();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start()) << daemon_->log();
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

// The directory ..data points to: one generation of the volume's files.
std::string Generation(const std::string& target) {
  std::error_code error;
  const fs::path link = fs::read_symlink(fs::path(target) / "..data", error);
  return error ? "" : (fs::path(target) / link).string();
}

// Copies the files of `generation` into `into`; returns `into`, or "" when
// the generation is gone.
std::string Snapshot(const std::string& generation, const std::string& into) {
  std::error_code error;
  fs::create_directories(into, error);
  for (const char* name : {"tls.crt", "ca.crt", "keystore.jks", "trust.jks"}) {
    fs::copy_file(fs::path(generation) / name, fs::path(into) / name, error);
    if (error) return "";
  }
  return into;
}

TEST_F(JksDaemonTest, PublishWritesBothStoresAndRenewalRewritesThem) {
  const std::string target = daemon_->PodTarget("pod-jks");
  csi::v1::NodePublishVolumeRequest request = KubeletPublishRequest(
      "csi-jks", target,
      {{"csi.cert-manager.io/issuer-name", "local"},
       {"csi.cert-manager.io/common-name", "jks"},
       {"csi.cert-manager.io/duration", "3s"},
       {"csi.cert-manager.io/keystore-jks-enable", "true"},
       {"csi.cert-manager.io/keystore-jks-password", "jks-s3cret"},
       {"csi.cert-manager.io/keystore-jks-truststore-filename", "trust.jks"}});
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status published =
      daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(published.ok()) << published.error_message() << daemon_->log();

  // A copy of the first generation: renewal (due two seconds in) removes it,
  // and keytool is slow to start on a loaded machine.
  const std::string first_generation = Generation(target);
  const std::string first = Snapshot(first_generation, dir_.Sub("first"));
  ASSERT_FALSE(first.empty());
  struct stat st {};
  ASSERT_EQ(stat((target + "/keystore.jks").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);  // as tls.key and keystore.p12
  ASSERT_EQ(stat((target + "/trust.jks").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);  // certificates only, as ca.crt

  CommandResult keystore = KeytoolList(first + "/keystore.jks", "jks-s3cret");
  ASSERT_EQ(keystore.exit_code, 0) << keystore.output;
  const std::string entry = EntryOf(keystore.output, "certificate");
  EXPECT_NE(entry.find("Entry type: PrivateKeyEntry"), std::string::npos) << keystore.output;
  EXPECT_NE(entry.find("SHA256: " + Sha256Fingerprint(ReadAll(first + "/tls.crt"))),
            std::string::npos)
      << entry;
  CommandResult truststore = KeytoolList(first + "/trust.jks", "jks-s3cret");
  ASSERT_EQ(truststore.exit_code, 0) << truststore.output;
  EXPECT_NE(EntryOf(truststore.output, "ca")
                .find("SHA256: " + Sha256Fingerprint(ReadAll(first + "/ca.crt"))),
            std::string::npos)
      << truststore.output;
  // The password is kept on the tmpfs, never in the database.
  for (const char* file : {"/state.db", "/state.db-wal"}) {
    EXPECT_EQ(ReadAll(daemon_->data_root() + file).find("jks-s3cret"), std::string::npos) << file;
  }

  // Renewal is due two seconds in: the new generation has new stores.
  std::string generation = first_generation;
  for (int i = 0; i < 200 && (generation == first_generation || generation.empty()); ++i) {
    std::this_thread::sleep_for(50ms);
    generation = Generation(target);
  }
  ASSERT_NE(generation, first_generation) << daemon_->log();
  const std::string renewed = Snapshot(generation, dir_.Sub("renewed"));
  ASSERT_FALSE(renewed.empty());
  const std::string new_leaf = ReadAll(renewed + "/tls.crt");
  ASSERT_NE(Sha256Fingerprint(new_leaf), Sha256Fingerprint(ReadAll(first + "/tls.crt")));
  CommandResult rewritten = KeytoolList(renewed + "/keystore.jks", "jks-s3cret");
  ASSERT_EQ(rewritten.exit_code, 0) << rewritten.output;
  EXPECT_NE(EntryOf(rewritten.output, "certificate").find("SHA256: " + Sha256Fingerprint(new_leaf)),
            std::string::npos)
      << rewritten.output;
  EXPECT_TRUE(fs::exists(renewed + "/trust.jks"));
}

TEST_F(JksDaemonTest, BadJksAttributesAreRefusedAndNothingIsWritten) {
  const std::string target = daemon_->PodTarget("pod-bad");
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-bad", target,
                            {{"csi.cert-manager.io/issuer-name", "local"},
                             {"csi.cert-manager.io/keystore-jks-enable", "true"}});
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status refused = daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("keystore-jks-password"), std::string::npos)
      << refused.error_message();
  EXPECT_FALSE(fs::exists(daemon_->data_root() + "/volumes/csi-bad"));
}

}  // namespace
}  // namespace certmount::testing
