// The local CA's trust bundle and reload (docs/ca-rotation.md): what a bundle
// may hold, and that a change that fails any check leaves the working
// signer in place.
#include <gtest/gtest.h>
#include <openssl/pem.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "issue/csr.h"
#include "issue/local_ca.h"
#include "issue/local_ca_watcher.h"
#include "issue/openssl_ptr.h"
#include "issue/private_key.h"
#include "support/bad_ca_bundles.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;
using ::certmount::testing::BadCaBundle;
using ::certmount::testing::BadCaBundles;
using ::certmount::testing::CountPemCertificates;
using ::certmount::testing::FakeClock;
using ::certmount::testing::RealtimeNowUnix;
using ::certmount::testing::TempDir;
using namespace std::chrono_literals;

void WriteAll(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

// Whether `leaf_pem` verifies against the single anchor `ca_pem`, as of the
// realtime second the CA stamps (time() lags it by up to a tick).
bool Verifies(const std::string& leaf_pem, const std::string& ca_pem) {
  BioPtr leaf_bio = MemoryBio(leaf_pem.data(), leaf_pem.size());
  BioPtr ca_bio = MemoryBio(ca_pem.data(), ca_pem.size());
  X509Ptr leaf(PEM_read_bio_X509(leaf_bio.get(), nullptr, nullptr, nullptr));
  X509Ptr ca(PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr));
  if (!leaf || !ca) return false;
  X509StorePtr store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca.get());
  X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr);
  X509_STORE_CTX_set_time(ctx.get(), 0, static_cast<time_t>(RealtimeNowUnix()));
  const bool ok = X509_verify_cert(ctx.get()) == 1;
  DrainOpensslErrors();
  return ok;
}

class LocalCaRotationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The real clock: the leaves are verified with OpenSSL as of now.
    first_ = *GenerateSelfSignedCa("first", 24h, clock_);
    second_ = *GenerateSelfSignedCa("second", 24h, clock_);
    files_ = {dir_.Sub("tls.crt"), dir_.Sub("tls.key"), dir_.Sub("ca.crt")};
    WriteAll(files_.cert, first_.certificate_pem);
    WriteAll(files_.key, first_.private_key_pem);
    WriteAll(files_.bundle, first_.certificate_pem);
    spec_.subject.common_name = "leaf";
    spec_.duration = 1h;
    spec_.usages = {"server auth"};
  }

  std::string Csr() {
    Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
    return *BuildCsrPem(*key, spec_);
  }

  Result<IssuedCertificate> Issue(LocalCa& ca) {
    IssueInput input{"vol", Csr(), &spec_, {}, {}, {}};
    return ca.Issue(input, clock_.SteadyNow() + 30s, {});
  }

  std::unique_ptr<LocalCa> Load() {
    Result<std::unique_ptr<LocalCa>> ca = LocalCa::FromFiles(files_, clock_, Env::Default());
    EXPECT_TRUE(ca.ok()) << ca.status().ToString();
    return ca.ok() ? std::move(*ca) : nullptr;
  }

  TempDir dir_;
  SystemClock& clock_ = SystemClock::Instance();
  CaMaterial first_;
  CaMaterial second_;
  LocalCaFiles files_;
  CertificateSpec spec_;
};

TEST_F(LocalCaRotationTest, BundleWithTheSignerAndAnotherCaIsNormalised) {
  // Text around the blocks and a duplicate are dropped; order is kept.
  const std::string bundle = "# comment\n" + second_.certificate_pem + "\n" +
                             first_.certificate_pem + second_.certificate_pem;
  Result<std::string> checked = ValidateTrustBundle(bundle, "b.pem", first_.certificate_pem);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ(*checked, second_.certificate_pem + first_.certificate_pem);
}

TEST_F(LocalCaRotationTest, ACaBundleNeedsNoSigner) {
  // The same checks without a signing certificate to look for: a bundle of
  // CAs other than the signer is a CA bundle, not this signer's trust bundle.
  Result<std::string> checked = ValidateCaBundle(second_.certificate_pem + "\n", "b.pem");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ(*checked, second_.certificate_pem);
  EXPECT_FALSE(ValidateTrustBundle(second_.certificate_pem, "b.pem", first_.certificate_pem).ok());
}

TEST_F(LocalCaRotationTest, BadBundlesAreRefusedWithTheReason) {
  std::vector<BadCaBundle> cases = BadCaBundles(first_);
  cases.push_back({second_.certificate_pem, "signing CA certificate is not in the CA bundle"});
  for (const BadCaBundle& c : cases) {
    Result<std::string> checked = ValidateTrustBundle(c.pem, "b.pem", first_.certificate_pem);
    ASSERT_FALSE(checked.ok()) << c.reason;
    EXPECT_EQ(checked.status().code(), Code::kInvalidArgument) << c.reason;
    EXPECT_NE(checked.status().message().find(c.reason), std::string::npos)
        << checked.status().message();
    EXPECT_NE(checked.status().message().find("b.pem"), std::string::npos);
  }
}

TEST_F(LocalCaRotationTest, StartupRefusesABundleWithoutTheSigner) {
  WriteAll(files_.bundle, second_.certificate_pem);
  Result<std::unique_ptr<LocalCa>> ca = LocalCa::FromFiles(files_, clock_, Env::Default());
  ASSERT_FALSE(ca.ok());
  EXPECT_NE(ca.status().message().find(files_.bundle), std::string::npos);
}

TEST_F(LocalCaRotationTest, AMissingBundleFileIsTheSignerAlone) {
  fs::remove(files_.bundle);
  std::unique_ptr<LocalCa> ca = Load();
  ASSERT_NE(ca, nullptr);
  EXPECT_EQ(ca->TrustBundlePem(), ca->certificate_pem());
}

TEST_F(LocalCaRotationTest, ReloadSwitchesSignerAndBundle) {
  std::unique_ptr<LocalCa> ca = Load();
  ASSERT_NE(ca, nullptr);
  const std::string both = first_.certificate_pem + second_.certificate_pem;

  WriteAll(files_.bundle, both);
  Result<LocalCa::Change> change = ca->Reload(files_, Env::Default());
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_FALSE(change->signer);
  EXPECT_TRUE(change->bundle);
  Result<IssuedCertificate> issued = Issue(*ca);
  ASSERT_TRUE(issued.ok());
  EXPECT_EQ(issued->ca_pem, both);
  EXPECT_TRUE(Verifies(issued->certificate_chain_pem, first_.certificate_pem));

  WriteAll(files_.cert, second_.certificate_pem);
  WriteAll(files_.key, second_.private_key_pem);
  change = ca->Reload(files_, Env::Default());
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_TRUE(change->signer);
  EXPECT_FALSE(change->bundle);
  issued = Issue(*ca);
  ASSERT_TRUE(issued.ok());
  EXPECT_TRUE(Verifies(issued->certificate_chain_pem, second_.certificate_pem));
  EXPECT_FALSE(Verifies(issued->certificate_chain_pem, first_.certificate_pem));

  change = ca->Reload(files_, Env::Default());
  ASSERT_TRUE(change.ok());
  EXPECT_FALSE(change->any());
}

TEST_F(LocalCaRotationTest, ABadChangeKeepsTheWorkingSigner) {
  std::unique_ptr<LocalCa> ca = Load();
  ASSERT_NE(ca, nullptr);
  const auto still_first = [&] {
    Result<IssuedCertificate> issued = Issue(*ca);
    return issued.ok() && Verifies(issued->certificate_chain_pem, first_.certificate_pem) &&
           issued->ca_pem == first_.certificate_pem;
  };
  // The new certificate before its key (a non-atomic edit), a key that does
  // not parse, a bundle without the signer, a bundle that is gone unreadable.
  WriteAll(files_.cert, second_.certificate_pem);
  Result<LocalCa::Change> change = ca->Reload(files_, Env::Default());
  EXPECT_EQ(change.status().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(still_first());

  WriteAll(files_.cert, first_.certificate_pem);
  WriteAll(files_.key, "not a key");
  EXPECT_FALSE(ca->Reload(files_, Env::Default()).ok());
  EXPECT_TRUE(still_first());

  WriteAll(files_.key, first_.private_key_pem);
  WriteAll(files_.bundle, second_.certificate_pem);
  change = ca->Reload(files_, Env::Default());
  EXPECT_EQ(change.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(still_first());

  fs::remove(files_.bundle);
  fs::create_directory(files_.bundle);  // exists, cannot be read as a file
  EXPECT_FALSE(ca->Reload(files_, Env::Default()).ok());
  EXPECT_TRUE(still_first());
}

TEST_F(LocalCaRotationTest, WatcherReloadsOnASymlinkSwapAndReportsAFailureOnce) {
  // Secret-volume layout: the names resolve through ..data.
  const fs::path secret = dir_.path() / "secret";
  fs::create_directories(secret / "..gen1");
  WriteAll((secret / "..gen1/tls.crt").string(), first_.certificate_pem);
  WriteAll((secret / "..gen1/tls.key").string(), first_.private_key_pem);
  fs::create_symlink("..gen1", secret / "..data");
  fs::create_symlink("..data/tls.crt", secret / "tls.crt");
  fs::create_symlink("..data/tls.key", secret / "tls.key");
  const LocalCaFiles files{(secret / "tls.crt").string(), (secret / "tls.key").string(), ""};
  Result<std::unique_ptr<LocalCa>> ca = LocalCa::FromFiles(files, clock_, Env::Default());
  ASSERT_TRUE(ca.ok());
  LocalCaWatcher watcher(ca->get(), files, Env::Default());
  Result<LocalCa::Change> change = watcher.Poll(false);
  ASSERT_TRUE(change.ok());
  EXPECT_FALSE(change->any());

  const auto swap_to = [&](const std::string& generation, const CaMaterial& cert,
                           const CaMaterial& key) {
    fs::create_directories(secret / generation);
    WriteAll((secret / generation / "tls.crt").string(), cert.certificate_pem);
    WriteAll((secret / generation / "tls.key").string(), key.private_key_pem);
    fs::create_symlink(generation, secret / "..data_tmp");
    fs::rename(secret / "..data_tmp", secret / "..data");
  };
  // A broken Secret (certificate and key of different CAs): one error, then
  // quiet while the files stay as they are; the first CA keeps signing.
  swap_to("..gen2", second_, first_);
  EXPECT_FALSE(watcher.Poll(false).ok());
  change = watcher.Poll(false);
  ASSERT_TRUE(change.ok());
  EXPECT_FALSE(change->any());
  EXPECT_EQ((*ca)->certificate_pem(), first_.certificate_pem);

  swap_to("..gen3", second_, second_);
  change = watcher.Poll(false);
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_TRUE(change->signer);
  EXPECT_EQ((*ca)->certificate_pem(), second_.certificate_pem);
  EXPECT_EQ(CountPemCertificates((*ca)->TrustBundlePem()), 1);
  // Forced (SIGHUP) with nothing changed: reread, no change.
  change = watcher.Poll(true);
  ASSERT_TRUE(change.ok());
  EXPECT_FALSE(change->any());
}

}  // namespace
}  // namespace certmount
