// The driver-wide trust bundle file: what it may hold, and how it follows
// a ConfigMap's `..data` swaps without ever dropping a working bundle.
#include "issue/trust_bundle_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "issue/local_ca.h"
#include "support/bad_ca_bundles.h"
#include "support/fault_env.h"
#include "support/temp_dir.h"

namespace certmount {
namespace {

namespace fs = std::filesystem;
using ::certmount::testing::BadCaBundle;
using ::certmount::testing::BadCaBundles;
using ::certmount::testing::FaultInjectionEnv;
using ::certmount::testing::LeafSignedBy;
using ::certmount::testing::TempDir;
using namespace std::chrono_literals;

void Put(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A ConfigMap volume as kubelet lays it out: `ca.crt` -> `..data/ca.crt`,
// `..data` -> the current generation's directory. Publish swaps `..data` to
// a new generation with one rename.
class ConfigMapVolume {
 public:
  explicit ConfigMapVolume(fs::path root) : root_(std::move(root)) {
    fs::create_directories(root_);
    fs::create_symlink("..data/ca.crt", root_ / "ca.crt");
  }

  std::string path() const { return (root_ / "ca.crt").string(); }

  void Publish(const std::string& contents) {
    const std::string generation = "..gen" + std::to_string(++generations_);
    fs::create_directory(root_ / generation);
    Put(root_ / generation / "ca.crt", contents);
    fs::create_directory_symlink(generation, root_ / "..data_tmp");
    fs::rename(root_ / "..data_tmp", root_ / "..data");
  }

 private:
  fs::path root_;
  int generations_ = 0;
};

class TrustBundleSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_a_ = *GenerateSelfSignedCa("bundle A", 24h, clock_);
    ca_b_ = *GenerateSelfSignedCa("bundle B", 24h, clock_);
  }

  TempDir dir_;
  SystemClock& clock_ = SystemClock::Instance();
  CaMaterial ca_a_;
  CaMaterial ca_b_;
};

TEST_F(TrustBundleSourceTest, LoadKeepsTheCertificatesOnceEachInFileOrder) {
  const std::string path = dir_.Sub("bundle.pem");
  Put(path, "intro text\n" + ca_b_.certificate_pem + "\n\n" + ca_a_.certificate_pem +
                ca_b_.certificate_pem + "trailing text\n");
  TrustBundleSource source(path, Env::Default());
  EXPECT_EQ(source.Pem(), "") << "nothing before Load";
  Status loaded = source.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  EXPECT_EQ(source.Pem(), ca_b_.certificate_pem + ca_a_.certificate_pem);
  EXPECT_EQ(source.path(), path);
}

TEST_F(TrustBundleSourceTest, EachRuleRefusesTheFileNamingIt) {
  const std::string path = dir_.Sub("bundle.pem");
  for (const BadCaBundle& bad : BadCaBundles(ca_a_)) {
    Put(path, bad.pem);
    TrustBundleSource source(path, Env::Default());
    Status loaded = source.Load();
    EXPECT_EQ(loaded.code(), Code::kInvalidArgument) << bad.reason;
    EXPECT_NE(loaded.message().find(path + ": "), std::string::npos) << loaded.message();
    EXPECT_NE(loaded.message().find(bad.reason), std::string::npos) << loaded.message();
    EXPECT_EQ(source.Pem(), "");
  }
}

TEST_F(TrustBundleSourceTest, AFileThatCannotBeReadIsAFailedPrecondition) {
  const std::string path = dir_.Sub("absent.pem");
  TrustBundleSource source(path, Env::Default());
  Status loaded = source.Load();
  EXPECT_EQ(loaded.code(), Code::kFailedPrecondition);
  EXPECT_NE(loaded.message().find(path), std::string::npos) << loaded.message();
}

TEST_F(TrustBundleSourceTest, PollFollowsTheDataLinkAndReportsOnlyContentChanges) {
  ConfigMapVolume volume(dir_.path() / "configmap");
  volume.Publish(ca_a_.certificate_pem);
  TrustBundleSource source(volume.path(), Env::Default());
  ASSERT_TRUE(source.Load().ok());
  Result<bool> changed = source.Poll();
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed) << "nothing changed since Load";

  volume.Publish(ca_a_.certificate_pem + ca_b_.certificate_pem);
  changed = source.Poll();
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(source.Pem(), ca_a_.certificate_pem + ca_b_.certificate_pem);
  changed = source.Poll();
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);

  // A new generation with the same certificates (other text around them) is
  // read, and is no change.
  volume.Publish("# edited\n" + ca_a_.certificate_pem + ca_b_.certificate_pem);
  changed = source.Poll();
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(source.Pem(), ca_a_.certificate_pem + ca_b_.certificate_pem);
}

TEST_F(TrustBundleSourceTest, PollSeesAFileRewrittenInPlace) {
  const std::string path = dir_.Sub("bundle.pem");
  Put(path, ca_a_.certificate_pem);
  TrustBundleSource source(path, Env::Default());
  // Poll before any Load reads the file too.
  Result<bool> changed = source.Poll();
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(source.Pem(), ca_a_.certificate_pem);

  Put(path, ca_b_.certificate_pem);
  changed = source.Poll();
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(source.Pem(), ca_b_.certificate_pem);
}

TEST_F(TrustBundleSourceTest, ABadNewFileKeepsTheBundleAndIsReportedOnce) {
  ConfigMapVolume volume(dir_.path() / "configmap");
  volume.Publish(ca_a_.certificate_pem);
  TrustBundleSource source(volume.path(), Env::Default());
  ASSERT_TRUE(source.Load().ok());

  volume.Publish(ca_a_.certificate_pem + LeafSignedBy(ca_b_));
  Result<bool> polled = source.Poll();
  EXPECT_EQ(polled.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(source.Pem(), ca_a_.certificate_pem);
  for (int i = 0; i < 3; ++i) {
    polled = source.Poll();
    ASSERT_TRUE(polled.ok()) << "the same bad file again: " << polled.status().ToString();
    EXPECT_FALSE(*polled);
  }
  EXPECT_EQ(source.Pem(), ca_a_.certificate_pem);

  // The next edit is checked again: a good one is taken.
  volume.Publish(ca_b_.certificate_pem);
  polled = source.Poll();
  ASSERT_TRUE(polled.ok()) << polled.status().ToString();
  EXPECT_TRUE(*polled);
  EXPECT_EQ(source.Pem(), ca_b_.certificate_pem);

  // A file that goes away is an error too, once, and the bundle stays.
  fs::remove(dir_.path() / "configmap" / "..data");
  EXPECT_EQ(source.Poll().status().code(), Code::kFailedPrecondition);
  polled = source.Poll();
  ASSERT_TRUE(polled.ok());
  EXPECT_FALSE(*polled);
  EXPECT_EQ(source.Pem(), ca_b_.certificate_pem);
}

TEST_F(TrustBundleSourceTest, AReadErrorKeepsTheBundle) {
  const std::string path = dir_.Sub("bundle.pem");
  Put(path, ca_a_.certificate_pem);
  FaultInjectionEnv env;
  TrustBundleSource source(path, &env);
  ASSERT_TRUE(source.Load().ok());
  Put(path, ca_a_.certificate_pem + ca_b_.certificate_pem);
  env.FailNth("ReadFile", 1, EIO);
  Result<bool> polled = source.Poll();
  EXPECT_EQ(polled.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(polled.status().message().find(path), std::string::npos);
  EXPECT_EQ(source.Pem(), ca_a_.certificate_pem);
}

TEST_F(TrustBundleSourceTest, PemIsSafeToReadWhilePollSwapsTheBundle) {
  const std::string one = ca_a_.certificate_pem;
  const std::string two = ca_a_.certificate_pem + ca_b_.certificate_pem;
  const std::string path = dir_.Sub("bundle.pem");
  Put(path, one);
  TrustBundleSource source(path, Env::Default());
  ASSERT_TRUE(source.Load().ok());

  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        const std::string pem = source.Pem();
        if (pem != one && pem != two) torn.fetch_add(1);
      }
    });
  }
  int swaps = 0;
  for (int i = 0; i < 40; ++i) {
    Put(path, i % 2 == 0 ? two : one);  // the sizes differ: always a new fingerprint
    Result<bool> changed = source.Poll();
    if (changed.ok() && *changed) ++swaps;
  }
  done.store(true);
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(swaps, 40);
  EXPECT_EQ(source.Pem(), one);
}

}  // namespace
}  // namespace certmount
