// Local CA rotation end to end (docs/ca-rotation.md): the real certmountd
// over its socket, as root, with real mounts, signing from CA files laid out
// as a Kubernetes Secret volume lays them out (names that are symlinks
// through `..data`, swapped atomically on every edit). The three admin steps
// run by swapping those files; throughout, every volume's tls.crt must
// verify against that same volume's ca.crt (checked with OpenSSL,
// independent of the driver's code).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "issue/local_ca.h"
#include "support/daemon.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

void WriteFile(const fs::path& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A directory laid out like a Secret volume of type kubernetes.io/tls:
// tls.crt, tls.key, ca.crt -> ..data/<name>, ..data -> a generation
// directory, replaced by one rename(2) per edit as kubelet does.
class SecretDir {
 public:
  explicit SecretDir(fs::path dir) : dir_(std::move(dir)) {
    fs::create_directories(dir_);
    for (const char* name : {"tls.crt", "tls.key", "ca.crt"}) {
      fs::create_symlink(std::string("..data/") + name, dir_ / name);
    }
  }

  void Write(const CaMaterial& signer, const std::string& bundle) {
    const std::string generation = "..gen" + std::to_string(++generation_);
    fs::create_directory(dir_ / generation);
    WriteFile(dir_ / generation / "tls.crt", signer.certificate_pem);
    WriteFile(dir_ / generation / "tls.key", signer.private_key_pem);
    WriteFile(dir_ / generation / "ca.crt", bundle);
    fs::create_symlink(generation, dir_ / "..data_tmp");
    fs::rename(dir_ / "..data_tmp", dir_ / "..data");
    if (generation_ > 1) {
      fs::remove_all(dir_ / ("..gen" + std::to_string(generation_ - 1)));
    }
  }

  std::string path(const char* name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
  int generation_ = 0;
};

// One volume's files as the pod sees them, through one resolution of ..data.
struct VolumeView {
  fs::path generation;
  std::string ca;
  std::string serial;
};

VolumeView ViewOf(const std::string& target) {
  VolumeView view;
  std::error_code error;
  const fs::path link = fs::read_symlink(fs::path(target) / "..data", error);
  if (error) return view;
  view.generation = fs::path(target) / link;
  view.ca = ReadFile(view.generation / "ca.crt");
  view.serial = InspectCertificateFile((view.generation / "tls.crt").string()).serial_hex;
  return view;
}

class CaRotationE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    old_ca_ = MakeCa("rotation CA old");
    new_ca_ = MakeCa("rotation CA new");
    secret_ = std::make_unique<SecretDir>(dir_.path() / "secret");
    WriteFile(dir_.path() / "old.pem", old_ca_.certificate_pem);
    WriteFile(dir_.path() / "new.pem", new_ca_.certificate_pem);
    daemon_ = std::make_unique<Daemon>(dir_.Sub("node"));
  }

  void TearDown() override {
    checking_ = false;
    if (checker_.joinable()) checker_.join();
  }

  static CaMaterial MakeCa(const std::string& name) {
    Result<CaMaterial> ca =
        GenerateSelfSignedCa(name, std::chrono::hours(24), SystemClock::Instance());
    EXPECT_TRUE(ca.ok()) << ca.status().ToString();
    return ca.ok() ? *ca : CaMaterial{};
  }

  bool StartDaemon(const std::string& reload_interval) {
    return daemon_->Start(
        {"--ca-cert=" + secret_->path("tls.crt"), "--ca-key=" + secret_->path("tls.key"),
         "--ca-bundle=" + secret_->path("ca.crt"), "--ca-reload-interval=" + reload_interval,
         "--issuer-qps=50", "--issuer-burst=5"});
  }

  void PublishVolumes(int count) {
    const int first = static_cast<int>(targets_.size());
    for (int i = first; i < first + count; ++i) {
      const std::string id = "csi-rot-" + std::to_string(i);
      const std::string target = daemon_->PodTarget("pod-" + std::to_string(i));
      csi::v1::NodePublishVolumeResponse response;
      grpc::Status published = daemon_->node().NodePublishVolume(
          CallContext().get(),
          KubeletPublishRequest(id, target,
                                {{"csi.cert-manager.io/issuer-name", "local"},
                                 {"csi.cert-manager.io/dns-names", id + ".example"},
                                 {"csi.cert-manager.io/duration", "1h"}}),
          &response);
      ASSERT_TRUE(published.ok()) << published.error_message() << daemon_->log();
      std::lock_guard lock(mu_);
      targets_.push_back(target);
    }
  }

  // Checks, over and over until TearDown, that every volume's leaf verifies
  // against its own ca.crt, both read through the same generation.
  void StartChecking() {
    checking_ = true;
    checker_ = std::thread([this] {
      while (checking_) {
        std::vector<std::string> targets;
        {
          std::lock_guard lock(mu_);
          targets = targets_;
        }
        for (const std::string& target : targets) {
          std::error_code error;
          const fs::path link = fs::read_symlink(fs::path(target) / "..data", error);
          if (error) continue;  // the generation just went: read again next round
          const fs::path generation = fs::path(target) / link;
          const std::string result =
              VerifyChain((generation / "tls.crt").string(), (generation / "ca.crt").string());
          // A generation removed between readlink and the reads is not a
          // verdict about the volume.
          if (result.empty() || !fs::exists(generation)) continue;
          std::lock_guard lock(mu_);
          failures_.push_back(target + ": " + result);
        }
        ++check_rounds_;
        std::this_thread::sleep_for(5ms);
      }
    });
  }

  // Polls until `done` holds for every volume (bounded), returning how long
  // that took; fails the test when it never does.
  std::chrono::milliseconds WaitForAll(const std::function<bool(const VolumeView&)>& done,
                                       const char* what) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 1200; ++i) {
      bool all = true;
      for (const std::string& target : targets_) {
        if (!done(ViewOf(target))) {
          all = false;
          break;
        }
      }
      if (all) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start);
      }
      std::this_thread::sleep_for(25ms);
    }
    ADD_FAILURE() << "not every volume converged: " << what << "\n" << daemon_->log();
    return std::chrono::milliseconds(-1);
  }

  bool SignedBy(const VolumeView& view, const char* ca_file) {
    return !view.generation.empty() &&
           VerifyChain((view.generation / "tls.crt").string(), dir_.Sub(ca_file)).empty();
  }

  std::vector<std::string> Failures() {
    std::lock_guard lock(mu_);
    return failures_;
  }

  TempDir dir_;
  CaMaterial old_ca_;
  CaMaterial new_ca_;
  std::unique_ptr<SecretDir> secret_;
  std::unique_ptr<Daemon> daemon_;
  std::vector<std::string> targets_;  // appended under mu_ (the checker reads it)
  std::atomic<bool> checking_{false};
  std::atomic<int> check_rounds_{0};
  std::thread checker_;
  std::mutex mu_;
  std::vector<std::string> failures_;
};

TEST_F(CaRotationE2eTest, ThreeSecretEditsRotateTheCaWithoutAVolumeFailingToVerify) {
  const char* env_count = std::getenv("CERTMOUNT_ROTATION_VOLUMES");
  const int volumes = env_count != nullptr ? std::atoi(env_count) : 6;
  secret_->Write(old_ca_, old_ca_.certificate_pem);
  ASSERT_TRUE(StartDaemon("100ms")) << daemon_->log();
  PublishVolumes(volumes);
  std::map<std::string, std::string> first_serials;
  for (const std::string& target : targets_) {
    const VolumeView view = ViewOf(target);
    ASSERT_TRUE(SignedBy(view, "old.pem")) << target;
    ASSERT_EQ(CountPemCertificates(view.ca), 1) << target;
    first_serials[target] = view.serial;
  }
  StartChecking();

  // 1) Introduce the new CA: every ca.crt holds both, no leaf is re-issued.
  const std::string both = old_ca_.certificate_pem + new_ca_.certificate_pem;
  secret_->Write(old_ca_, both);
  const auto step1 = WaitForAll(
      [&](const VolumeView& v) { return CountPemCertificates(v.ca) == 2; }, "both CAs in ca.crt");
  for (const std::string& target : targets_) {
    const VolumeView view = ViewOf(target);
    EXPECT_EQ(view.serial, first_serials[target]) << "a bundle change re-issued " << target;
    EXPECT_NE(view.ca.find(new_ca_.certificate_pem), std::string::npos) << target;
  }

  // 2) Sign with the new CA: every leaf is re-issued from it.
  secret_->Write(new_ca_, both);
  const auto step2 = WaitForAll([&](const VolumeView& v) { return SignedBy(v, "new.pem"); },
                                "every leaf signed by the new CA");
  for (const std::string& target : targets_) {
    EXPECT_EQ(CountPemCertificates(ViewOf(target).ca), 2) << target;
  }
  // A publish now gets a new-CA leaf and the two-CA bundle too.
  PublishVolumes(1);
  EXPECT_TRUE(SignedBy(ViewOf(targets_.back()), "new.pem"));
  EXPECT_EQ(CountPemCertificates(ViewOf(targets_.back()).ca), 2);

  // 3) Retire the old CA.
  secret_->Write(new_ca_, new_ca_.certificate_pem);
  const auto step3 = WaitForAll(
      [&](const VolumeView& v) {
        return CountPemCertificates(v.ca) == 1 &&
               v.ca.find(old_ca_.certificate_pem) == std::string::npos;
      },
      "the old CA gone from every ca.crt");
  for (const std::string& target : targets_) {
    EXPECT_TRUE(SignedBy(ViewOf(target), "new.pem")) << target;
  }

  // The checker ran throughout and never saw a leaf its own ca.crt rejects.
  const int rounds_before = check_rounds_;
  for (int i = 0; i < 200 && check_rounds_ < rounds_before + 2; ++i)
    std::this_thread::sleep_for(5ms);
  checking_ = false;
  checker_.join();
  EXPECT_GT(check_rounds_.load(), 2);
  EXPECT_EQ(Failures(), std::vector<std::string>{});
  std::cout << "rotation with " << volumes << " volumes: step 1 (bundle) " << step1.count()
            << " ms, step 2 (re-issue) " << step2.count() << " ms, step 3 (retire) "
            << step3.count() << " ms\n";
  EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->log();
}

TEST_F(CaRotationE2eTest, ABadChangeIsRefusedAndTheWorkingCaStays) {
  secret_->Write(old_ca_, old_ca_.certificate_pem);
  ASSERT_TRUE(StartDaemon("100ms")) << daemon_->log();
  PublishVolumes(2);
  const VolumeView before = ViewOf(targets_[0]);

  // The new CA's key with a bundle that lacks it: refused as a whole.
  secret_->Write(new_ca_, old_ca_.certificate_pem);
  for (int i = 0; i < 400; ++i) {
    if (daemon_->log().find("cannot be used") != std::string::npos) break;
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_NE(daemon_->log().find("the signing CA certificate is not in the CA bundle"),
            std::string::npos)
      << daemon_->log();
  // Polls go on; the old CA still signs, the volumes are as they were.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(ViewOf(targets_[0]).serial, before.serial);
  EXPECT_EQ(ViewOf(targets_[0]).ca, before.ca);
  PublishVolumes(1);
  EXPECT_TRUE(SignedBy(ViewOf(targets_.back()), "old.pem"));
  EXPECT_EQ(CountPemCertificates(ViewOf(targets_.back()).ca), 1);

  // A good edit afterwards is taken.
  secret_->Write(old_ca_, old_ca_.certificate_pem + new_ca_.certificate_pem);
  WaitForAll([](const VolumeView& v) { return CountPemCertificates(v.ca) == 2; },
             "the corrected bundle in every ca.crt");
  EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->log();
}

TEST_F(CaRotationE2eTest, SighupReloadsAtOnce) {
  secret_->Write(old_ca_, old_ca_.certificate_pem);
  ASSERT_TRUE(StartDaemon("1h")) << daemon_->log();  // no poll during the test
  PublishVolumes(2);
  secret_->Write(new_ca_, old_ca_.certificate_pem + new_ca_.certificate_pem);
  ASSERT_EQ(kill(daemon_->pid(), SIGHUP), 0);
  WaitForAll([&](const VolumeView& v) { return SignedBy(v, "new.pem"); },
             "every leaf signed by the new CA after SIGHUP");
  EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->log();
}

TEST_F(CaRotationE2eTest, ARestartDuringARotationStillReissuesTheOldLeaves) {
  secret_->Write(old_ca_, old_ca_.certificate_pem + new_ca_.certificate_pem);
  ASSERT_TRUE(StartDaemon("1h")) << daemon_->log();
  PublishVolumes(3);
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->log();
  // Step 2 while the daemon is down: the new one starts with the new signer
  // and has no earlier files to compare with.
  secret_->Write(new_ca_, old_ca_.certificate_pem + new_ca_.certificate_pem);
  ASSERT_TRUE(StartDaemon("1h")) << daemon_->log();
  WaitForAll([&](const VolumeView& v) { return SignedBy(v, "new.pem"); },
             "every leaf re-issued from the new CA after the restart");
  EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->log();
}

}  // namespace
}  // namespace certmount::testing
