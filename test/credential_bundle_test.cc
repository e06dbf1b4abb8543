// The credential bundle (certmount.io/credential-bundle-file): one file with
// the private key as PKCS#8 followed by the certificate chain, written in the
// same generation as the other files, so one read of it always gives a key
// and the certificate it belongs to. Checked with OpenSSL, independently of
// the driver's own key code.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "issue/attributes.h"
#include "issue/local_ca.h"
#include "issue/volume_attributes.h"
#include "renew/renewer.h"
#include "renew/scheduler.h"
#include "support/daemon.h"
#include "support/fake_clock.h"
#include "support/root.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"
#include "volume/issuance.h"
#include "volume/volume_layout.h"

namespace certmount {
namespace {

using namespace std::chrono_literals;
using Attributes = std::map<std::string, std::string>;

const std::string kBundleKey(kCredentialBundleFileAttribute);

// The file's bytes through one open(2), as an application reads its bundle;
// nullopt when the open or a read fails.
std::optional<std::string> ReadThroughOneOpen(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string contents;
  char buffer[16384];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0)
    contents.append(buffer, static_cast<size_t>(n));
  close(fd);
  if (n < 0) return std::nullopt;
  return contents;
}

std::string ReadAll(const std::string& path) { return ReadThroughOneOpen(path).value_or(""); }

// A bundle cut after its first PEM block.
struct BundleParts {
  std::string first_label;
  std::string key_pem;    // the first block, through its END line
  std::string chain_pem;  // everything after it
};

BundleParts SplitBundle(const std::string& bundle) {
  BundleParts parts;
  parts.first_label = testing::PemLabelOf(bundle);
  const std::string end = "-----END " + parts.first_label + "-----\n";
  const size_t cut = bundle.find(end);
  if (parts.first_label.empty() || cut == std::string::npos) return parts;
  parts.key_pem = bundle.substr(0, cut + end.size());
  parts.chain_pem = bundle.substr(cut + end.size());
  return parts;
}

// Whether one read of a bundle is what an application needs: a PKCS#8 key
// first, then a chain whose leaf that key belongs to.
bool IsMatchingBundle(const std::string& bundle) {
  const BundleParts parts = SplitBundle(bundle);
  return parts.first_label == "PRIVATE KEY" && testing::CountPemCertificates(parts.chain_pem) > 0 &&
         testing::KeyMatchesCertificatePem(parts.key_pem, parts.chain_pem);
}

TEST(CredentialBundleAttributeTest, WorksInSpiffeMode) {
  const Attributes attributes = {
      {std::string(kPodNamespace), "shop"},
      {std::string(kServiceAccountName), "web"},
      {std::string(kAttributePrefix) + "issuer-name", "ca"},
      {kBundleKey, "svid-bundle.pem"},
  };
  AttributeRules spiffe;
  spiffe.spiffe.trust_domain = "example.org";
  Result<CertificateSpec> spec = ParseVolumeAttributes(attributes, spiffe);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->credential_bundle_file, "svid-bundle.pem");
  EXPECT_EQ(spec->uris, (std::vector<std::string>{"spiffe://example.org/ns/shop/sa/web"}));
  EXPECT_EQ(spec->annotations.count(kBundleKey), 0u);
}

// The bundle has the key file's owner, group and mode, which is `mode` with
// group `gid`.
void ExpectOwnedAsTheKey(const std::string& bundle_path, const std::string& key_path, mode_t mode,
                         gid_t gid) {
  struct stat bundle {};
  struct stat key {};
  ASSERT_EQ(stat(bundle_path.c_str(), &bundle), 0);
  ASSERT_EQ(stat(key_path.c_str(), &key), 0);
  EXPECT_EQ(bundle.st_mode & 07777, mode);
  EXPECT_EQ(key.st_mode & 07777, mode);
  EXPECT_EQ(bundle.st_uid, 0u);
  EXPECT_EQ(key.st_uid, 0u);
  EXPECT_EQ(bundle.st_gid, gid);
  EXPECT_EQ(key.st_gid, gid);
}

// The bundle through the real certmountd, as a pod sees it.
class CredentialBundlePublishTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    daemon_ = std::make_unique<testing::Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start()) << daemon_->log();
  }

  // Publishes `volume_id` for a pod of the same name with `attributes` (the
  // issuer added) and returns the pod's target path.
  std::string Publish(const std::string& volume_id, Attributes attributes) {
    attributes[std::string(kAttributePrefix) + "issuer-name"] = "local";
    const std::string target = daemon_->PodTarget(volume_id);
    csi::v1::NodePublishVolumeRequest request =
        testing::KubeletPublishRequest(volume_id, target, attributes);
    csi::v1::NodePublishVolumeResponse response;
    last_ = daemon_->node().NodePublishVolume(testing::CallContext().get(), request, &response);
    return target;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
  grpc::Status last_;
};

TEST_F(CredentialBundlePublishTest, Pkcs8KeyThenTheChainWithTheKeysMode) {
  // csi-driver's default key: RSA in PKCS#1; the bundle still has PKCS#8.
  const std::string target = Publish(
      "csi-bundle-rsa",
      {{kBundleKey, "credentials.pem"}, {std::string(kAttributePrefix) + "key-encoding", "PKCS1"}});
  ASSERT_TRUE(last_.ok()) << last_.error_message() << daemon_->log();
  const std::string bundle = ReadAll(target + "/credentials.pem");
  const BundleParts parts = SplitBundle(bundle);
  EXPECT_EQ(parts.first_label, "PRIVATE KEY");
  EXPECT_EQ(testing::PemLabel(target + "/tls.key"), "RSA PRIVATE KEY");
  EXPECT_TRUE(testing::SamePrivateKey(parts.key_pem, ReadAll(target + "/tls.key")));
  EXPECT_EQ(parts.chain_pem, ReadAll(target + "/tls.crt"));
  EXPECT_TRUE(IsMatchingBundle(bundle));
  EXPECT_EQ(testing::VerifyChain(target + "/credentials.pem", target + "/ca.crt"), "");
  ExpectOwnedAsTheKey(target + "/credentials.pem", target + "/tls.key", 0600, 0);
}

TEST_F(CredentialBundlePublishTest, Pkcs8KeyIsTheKeyFileAsItIsAndAGroupGetsReadAccess) {
  const std::string target =
      Publish("csi-bundle-ec", {{kBundleKey, "bundle.pem"},
                                {std::string(kAttributePrefix) + "key-algorithm", "ECDSA"},
                                {std::string(kAttributePrefix) + "fs-group", "2345"}});
  ASSERT_TRUE(last_.ok()) << last_.error_message() << daemon_->log();
  const std::string bundle = ReadAll(target + "/bundle.pem");
  EXPECT_EQ(bundle, ReadAll(target + "/tls.key") + ReadAll(target + "/tls.crt"));
  EXPECT_TRUE(IsMatchingBundle(bundle));
  ExpectOwnedAsTheKey(target + "/bundle.pem", target + "/tls.key", 0640, 2345);
}

TEST_F(CredentialBundlePublishTest, MisspeltOrClashingKeysAreRefusedAndLeaveNothing) {
  Publish("csi-bundle-typo", {{"certmount.io/credentials-bundle-file", "bundle.pem"}});
  EXPECT_EQ(last_.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(last_.error_message().rfind("certmount.io/credentials-bundle-file: ", 0), 0u)
      << last_.error_message();
  Publish("csi-bundle-clash", {{kBundleKey, "tls.crt"}});
  EXPECT_EQ(last_.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(last_.error_message().rfind(kBundleKey + ": ", 0), 0u) << last_.error_message();
  EXPECT_FALSE(std::filesystem::exists(daemon_->data_root() + "/volumes/csi-bundle-typo"));
  EXPECT_FALSE(std::filesystem::exists(daemon_->data_root() + "/volumes/csi-bundle-clash"));
}

// Renewals through the real scheduler, renewer and file writer on a
// FakeClock (no mounts: the data directory is what the pod's bind mount
// shows).
class CredentialBundleRenewalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_root_ = dir_.Sub("data");
    ASSERT_TRUE(Env::Default()->CreateDirectories(data_root_ + "/volumes", 0700).ok());
    auto material = GenerateSelfSignedCa("bundle test CA", 3650 * 24h, clock_);
    ASSERT_TRUE(material.ok()) << material.status().ToString();
    auto ca = LocalCa::FromPem(material->certificate_pem, material->private_key_pem, clock_);
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_ = std::move(*ca);
    auto store = Store::Open(dir_.Sub("state.db"), clock_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    RenewerOptions options;
    options.data_root = data_root_;
    renewer_ = std::make_unique<Renewer>(options, ca_.get(), Env::Default(), &clock_);
  }

  // A mounted volume whose first files were issued as a publish issues
  // them, with ECDSA keys so that hundreds of renewals stay cheap.
  void AddVolume(const std::string& id) {
    VolumeRecord record;
    record.volume_id = id;
    record.target_path = dir_.Sub("pods/" + id);
    record.attributes = {{std::string(kAttributePrefix) + "issuer-name", "ca"},
                         {std::string(kAttributePrefix) + "dns-names", id + ".example"},
                         {std::string(kAttributePrefix) + "key-algorithm", "ECDSA"},
                         {kBundleKey, "bundle.pem"}};
    record.issuer = ca_->Name();
    ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(record).ok());
    layout_ = VolumeLayout::For(data_root_, id);
    ASSERT_TRUE(Env::Default()->CreateDirectories(layout_.data, 0700).ok());
    auto spec = ParseVolumeAttributes(record.attributes, {});
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    spec_ = *spec;
    IssuanceRequest request;
    request.volume_id = id;
    request.spec = &spec_;
    request.layout = layout_;
    auto fields = IssueIntoVolume(request, ca_.get(), Env::Default(), clock_.SteadyNow() + 60s, {});
    ASSERT_TRUE(fields.ok()) << fields.status().ToString();
    ASSERT_TRUE(StoreTestAccess(*store_).MarkMounted(id, *fields).ok());
  }

  std::string PodFile(const std::string& name) const { return layout_.data + "/" + name; }

  testing::TempDir dir_;
  testing::FakeClock clock_;
  std::string data_root_;
  std::unique_ptr<LocalCa> ca_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Renewer> renewer_;
  VolumeLayout layout_;
  CertificateSpec spec_;
};

// What the reader thread saw.
struct ReaderTally {
  std::atomic<int> bundles{0};             // bundle reads that opened and read
  std::atomic<int> mismatched_bundles{0};  // of those, key and leaf not a pair
  std::atomic<int> failed_opens{0};        // an old generation removed mid-lookup
  std::atomic<int> distinct_leaves{0};     // different chains seen in the bundle
  std::atomic<int> two_open_reads{0};      // tls.key, then tls.crt, opened apart
  std::atomic<int> two_open_mismatches{0};
};

TEST_F(CredentialBundleRenewalTest, EveryReadOfTheBundleMatchesDuringARenewalStorm) {
  AddVolume("csi-storm");
  SchedulerOptions options;
  options.random_seed = 7;
  RenewalScheduler scheduler(options, store_.get(), renewer_.get(), &clock_);
  ASSERT_TRUE(scheduler.Load().ok());

  // The reader keeps reading until the renewals stop; the renewals go on
  // until it has read enough bundles across enough generations.
  constexpr int kMinRenewals = 100;
  constexpr int kMinBundleReads = 300;
  constexpr int kMinDistinctLeaves = 20;
  constexpr int kMaxRenewals = 20000;
  ReaderTally tally;
  std::atomic<bool> renewing{true};
  std::thread reader([&] {
    std::set<std::string> leaves;
    while (renewing.load()) {
      // What the bundle is for: an application that reads tls.key, does
      // some work (here: checks the bundle), then reads tls.crt may get two
      // generations (counted, not asserted: it depends on timing).
      std::optional<std::string> key = ReadThroughOneOpen(PodFile("tls.key"));
      std::optional<std::string> bundle = ReadThroughOneOpen(PodFile("bundle.pem"));
      if (bundle) {
        if (!IsMatchingBundle(*bundle)) ++tally.mismatched_bundles;
        if (leaves.insert(SplitBundle(*bundle).chain_pem).second) ++tally.distinct_leaves;
        ++tally.bundles;
      } else {
        ++tally.failed_opens;
      }
      std::optional<std::string> chain = ReadThroughOneOpen(PodFile("tls.crt"));
      if (!key || !chain) continue;
      ++tally.two_open_reads;
      if (!testing::KeyMatchesCertificatePem(*key, *chain)) ++tally.two_open_mismatches;
    }
  });

  int renewals = 0;
  while (renewals < kMaxRenewals &&
         (renewals < kMinRenewals || tally.bundles.load() < kMinBundleReads ||
          tally.distinct_leaves.load() < kMinDistinctLeaves)) {
    clock_.Advance(1s);  // a token for the issuer
    if (!scheduler.RenewNow("csi-storm") || scheduler.RunOnce() != 1) {
      ADD_FAILURE() << "renewal " << renewals << " did not run";
      break;
    }
    ++renewals;
  }
  renewing.store(false);
  reader.join();

  std::printf(
      "%d renewals; %d bundle reads over %d generations, %d mismatched; %d failed opens; "
      "%d of %d reads of tls.key then tls.crt straddled a renewal\n",
      renewals, tally.bundles.load(), tally.distinct_leaves.load(), tally.mismatched_bundles.load(),
      tally.failed_opens.load(), tally.two_open_mismatches.load(), tally.two_open_reads.load());
  RecordProperty("two_open_mismatches", tally.two_open_mismatches.load());
  EXPECT_LT(renewals, kMaxRenewals) << "the reader did not get its reads in";
  EXPECT_GE(tally.bundles.load(), kMinBundleReads);
  EXPECT_GE(tally.distinct_leaves.load(), kMinDistinctLeaves);
  EXPECT_EQ(tally.mismatched_bundles.load(), 0);
  // Every renewal succeeded, and the last one is what the pod reads.
  auto row = store_->GetVolume("csi-storm");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->renewal_attempts, 0) << (*row)->last_error;
  EXPECT_EQ((*row)->serial, testing::InspectCertificateFile(PodFile("bundle.pem")).serial_hex);
}

TEST_F(CredentialBundleRenewalTest, ANewTrustBundleKeepsTheBundleByteForByte) {
  AddVolume("csi-ca");
  const std::string bundle = ReadAll(PodFile("bundle.pem"));
  struct stat before {};
  ASSERT_EQ(stat(PodFile("bundle.pem").c_str(), &before), 0);

  auto other = GenerateSelfSignedCa("next CA", 3650 * 24h, clock_);
  ASSERT_TRUE(other.ok());
  const std::string trust = ca_->TrustBundlePem() + other->certificate_pem;
  ASSERT_TRUE(RewriteTrustBundle(layout_, spec_, trust, {}, clock_.NowUnix(), Env::Default()).ok());

  EXPECT_EQ(ReadAll(PodFile("ca.crt")), trust);
  EXPECT_EQ(ReadAll(PodFile("bundle.pem")), bundle);
  struct stat after {};
  ASSERT_EQ(stat(PodFile("bundle.pem").c_str(), &after), 0);
  EXPECT_EQ(after.st_mode & 07777, before.st_mode & 07777);
  EXPECT_TRUE(IsMatchingBundle(ReadAll(PodFile("bundle.pem"))));
}

}  // namespace
}  // namespace certmount
