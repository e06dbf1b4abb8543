// I/O errors at each filesystem step of a publish, injected through the Env
// seam into a real Publisher on a real store, tmpfs and bind mounts: the
// publish fails with a code kubelet reads correctly and leaves no row, no
// files and no mount; the next attempt succeeds.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "common/clock.h"
#include "issue/local_ca.h"
#include "state/store.h"
#include "support/fake_clock.h"
#include "support/fault_env.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"
#include "volume/publisher.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

struct Fault {
  const char* name;
  const char* operation;
  int nth;
  int error_number;
  Code expected;
};

// A real Publisher on a real store, CA, tmpfs and bind mounts, whose
// filesystem calls go through a fault-injecting Env.
class PublisherFixture {
 protected:
  void Open() {
    options_.data_root = dir_.Sub("data");
    options_.target_root = dir_.Sub("pods");
    fs::create_directories(options_.data_root);
    const std::string parent = options_.target_root + "/pod/volumes/kubernetes.io~csi/tls";
    fs::create_directories(parent);
    target_ = parent + "/mount";

    auto store = Store::Open(options_.data_root + "/state.db", SystemClock::Instance());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    auto ca =
        LocalCa::LoadOrCreate(options_.data_root + "/ca", SystemClock::Instance(), Env::Default());
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_ = std::move(*ca);
    publisher_ = std::make_unique<Publisher>(options_, store_.get(), ca_.get(), &env_, clock_);
    ASSERT_TRUE(publisher_->Startup().ok());

    request_.volume_id = "csi-fault";
    request_.target_path = target_;
    request_.volume_context = {
        {"csi.storage.k8s.io/ephemeral", "true"},     {"csi.storage.k8s.io/pod.name", "p"},
        {"csi.storage.k8s.io/pod.namespace", "ns"},   {"csi.cert-manager.io/issuer-name", "local"},
        {"csi.cert-manager.io/common-name", "fault"}, {"csi.cert-manager.io/pkcs12-enable", "true"},
        {"csi.cert-manager.io/pkcs12-password", "pw"}};
  }

  // Publishes, checks the volume is served, and unpublishes it again.
  void ExpectPublishWorks() {
    Status published = publisher_->Publish(request_);
    ASSERT_TRUE(published.ok()) << published.ToString();
    EXPECT_TRUE(IsMountPoint(target_));
    EXPECT_TRUE(fs::exists(target_ + "/tls.crt"));
    auto row = store_->GetVolume(request_.volume_id);
    ASSERT_TRUE(row.ok() && row->has_value());
    EXPECT_TRUE((*row)->mounted);
    ASSERT_TRUE(publisher_->Unpublish(request_.volume_id, target_).ok());
  }

  TempDir dir_;
  PublisherOptions options_;
  std::string target_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<LocalCa> ca_;
  FaultInjectionEnv env_;
  // Set before Open() to give the publisher another clock.
  const Clock* clock_ = &SystemClock::Instance();
  std::unique_ptr<Publisher> publisher_;
  PublishRequest request_;
};

class PublishFaultTest : public PublisherFixture, public ::testing::TestWithParam<Fault> {};

TEST_P(PublishFaultTest, FailedStepLeavesNothingAndTheRetrySucceeds) {
  CERTMOUNT_REQUIRE_ROOT();
  Open();
  const Fault fault = GetParam();
  env_.FailNth(fault.operation, fault.nth, fault.error_number);
  Status failed = publisher_->Publish(request_);
  ASSERT_FALSE(failed.ok()) << fault.operation;
  EXPECT_EQ(failed.code(), fault.expected) << failed.ToString();
  EXPECT_NE(failed.message().find("injected"), std::string::npos) << failed.ToString();

  Result<std::vector<VolumeRecord>> rows = StoreTestAccess(*store_).ListVolumes();
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
  EXPECT_FALSE(IsMountPoint(target_));
  EXPECT_FALSE(fs::exists(target_));
  EXPECT_TRUE(fs::is_empty(options_.data_root + "/volumes"));

  ExpectPublishWorks();
}

class StaleRowTest : public PublisherFixture, public ::testing::Test {};

// What a rollback that could not delete its row leaves behind: an unmounted
// row and part of a volume directory, with no publish in flight.
TEST_F(StaleRowTest, PublishClearsAnUnmountedRowLeftByAnUnfinishedRollback) {
  CERTMOUNT_REQUIRE_ROOT();
  Open();
  VolumeRecord stale;
  stale.volume_id = request_.volume_id;
  stale.target_path = target_;
  stale.pod_namespace = "ns";
  stale.pod_name = "p";
  stale.issuer = "local-ca";
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(stale).ok());
  const std::string leftover = options_.data_root + "/volumes/" + request_.volume_id + "/leftover";
  fs::create_directories(leftover);

  ExpectPublishWorks();
  EXPECT_FALSE(fs::exists(leftover));
}

TEST_F(StaleRowTest, PublishAtAnotherTargetThanAStaleRowIsAlreadyExists) {
  CERTMOUNT_REQUIRE_ROOT();
  Open();
  VolumeRecord stale;
  stale.volume_id = request_.volume_id;
  stale.target_path = options_.target_root + "/other/mount";
  stale.issuer = "local-ca";
  ASSERT_TRUE(StoreTestAccess(*store_).RegisterVolume(stale).ok());

  Status published = publisher_->Publish(request_);
  EXPECT_EQ(published.code(), Code::kAlreadyExists) << published.ToString();
  EXPECT_NE(published.message().find(stale.target_path), std::string::npos);
  auto row = store_->GetVolume(request_.volume_id);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->target_path, stale.target_path);
  EXPECT_FALSE(fs::exists(target_));
}

class OneOperationPerVolumeTest : public PublisherFixture, public ::testing::Test {};

// The crash torture's "mounted row whose data directory is missing": an
// unpublish that had deleted the row and was removing the volume's files let
// a publish of the same id register, write and mount, then deleted that
// publish's files under its mount. A publish waits for an unpublish of its
// id to finish; held at that step, it gives up with ABORTED (kubelet retries)
// and the node never shows a mounted row without its files.
TEST_F(OneOperationPerVolumeTest, PublishWaitsForAnUnpublishRemovingTheFiles) {
  CERTMOUNT_REQUIRE_ROOT();
  options_.publish_timeout = std::chrono::seconds(1);
  Open();
  // An ECDSA key keeps the successful publishes well inside the short timeout.
  request_.volume_context["csi.cert-manager.io/key-algorithm"] = "ECDSA";
  ASSERT_TRUE(publisher_->Publish(request_).ok());
  const std::string volume_dir = options_.data_root + "/volumes/" + request_.volume_id;
  env_.HoldRemoveTree(volume_dir);
  Status unpublished;
  std::thread unpublish([&] { unpublished = publisher_->Unpublish(request_.volume_id, target_); });
  env_.WaitUntilRemoveTreeHeld();

  Status published = publisher_->Publish(request_);
  env_.ReleaseRemoveTree();
  unpublish.join();
  ASSERT_TRUE(unpublished.ok()) << unpublished.ToString();
  EXPECT_EQ(published.code(), Code::kDeadlineExceeded) << published.ToString();
  EXPECT_NE(published.message().find("waiting behind an unpublish"), std::string::npos)
      << published.ToString();
  auto row = store_->GetVolume(request_.volume_id);
  ASSERT_TRUE(row.ok());
  EXPECT_FALSE(row->has_value());
  EXPECT_FALSE(IsMountPoint(target_));
  EXPECT_FALSE(fs::exists(volume_dir));

  ExpectPublishWorks();
}

// A FakeClock that counts its SteadyNow reads, so a test can tell that a
// publish has taken its start time and is polling in its wait.
class CountingClock final : public Clock {
 public:
  int64_t NowUnix() const override { return clock.NowUnix(); }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    ++reads;
    return clock.SteadyNow();
  }
  FakeClock clock;
  mutable std::atomic<int> reads{0};
};

// The local CA, remembering the deadline of the last Issue.
class DeadlineRecordingIssuer final : public Issuer {
 public:
  explicit DeadlineRecordingIssuer(Issuer* inner) : inner_(inner) {}
  std::string Name() const override { return inner_->Name(); }
  Result<IssuedCertificate> Issue(const IssueInput& input,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::stop_token stop) override {
    last_deadline = deadline;
    return inner_->Issue(input, deadline, stop);
  }
  std::optional<std::chrono::steady_clock::time_point> last_deadline;

 private:
  Issuer* inner_;
};

// A publish that waits behind an unpublish of its volume for `waited` (on
// the injected clock) and then runs. Returns its result; `issue_deadline`
// is the deadline it issued with, if it got that far.
class DeadlineBehindUnpublishTest : public PublisherFixture, public ::testing::Test {
 protected:
  Status PublishAfterWaiting(std::chrono::seconds waited) {
    options_.publish_timeout = std::chrono::seconds(10);
    clock_ = &counting_;
    Open();
    recording_ = std::make_unique<DeadlineRecordingIssuer>(ca_.get());
    publisher_ =
        std::make_unique<Publisher>(options_, store_.get(), recording_.get(), &env_, clock_);
    EXPECT_TRUE(publisher_->Startup().ok());
    request_.volume_context["csi.cert-manager.io/key-algorithm"] = "ECDSA";
    EXPECT_TRUE(publisher_->Publish(request_).ok());
    env_.HoldRemoveTree(options_.data_root + "/volumes/" + request_.volume_id);
    std::thread unpublish([&] { (void)publisher_->Unpublish(request_.volume_id, target_); });
    env_.WaitUntilRemoveTreeHeld();

    started_ = counting_.SteadyNow();
    const int reads_before = counting_.reads.load();
    Status published;
    std::thread publish([&] { published = publisher_->Publish(request_); });
    // A few reads: the publish took its start time and polls in its wait.
    while (counting_.reads.load() < reads_before + 3) std::this_thread::yield();
    counting_.clock.Advance(waited);
    if (waited >= options_.publish_timeout) {
      // Out of time before the unpublish ends: the publish gives up alone.
      publish.join();
      env_.ReleaseRemoveTree();
    } else {
      env_.ReleaseRemoveTree();
      publish.join();
    }
    unpublish.join();
    return published;
  }

  CountingClock counting_;
  std::unique_ptr<DeadlineRecordingIssuer> recording_;
  std::chrono::steady_clock::time_point started_;
};

TEST_F(DeadlineBehindUnpublishTest, TimeWaitedCountsAgainstThePublishTimeout) {
  CERTMOUNT_REQUIRE_ROOT();
  Status published = PublishAfterWaiting(std::chrono::seconds(9));
  ASSERT_TRUE(published.ok()) << published.ToString();
  ASSERT_TRUE(recording_->last_deadline.has_value());
  // The deadline of the publish's start, not a fresh 10 s after the wait
  // (less the 100 ms kept for undoing and answering).
  EXPECT_EQ(*recording_->last_deadline,
            started_ + std::chrono::seconds(10) - std::chrono::milliseconds(100));
}

TEST_F(DeadlineBehindUnpublishTest, ATimeoutSpentWaitingIsReportedAsSuch) {
  CERTMOUNT_REQUIRE_ROOT();
  Status published = PublishAfterWaiting(std::chrono::seconds(11));
  EXPECT_EQ(published.code(), Code::kDeadlineExceeded) << published.ToString();
  EXPECT_NE(published.message().find("ran out while waiting behind an unpublish"),
            std::string::npos)
      << published.ToString();
  auto row = store_->GetVolume(request_.volume_id);
  ASSERT_TRUE(row.ok());
  EXPECT_FALSE(row->has_value());
  EXPECT_FALSE(IsMountPoint(target_));
}

class UnpublishProofTest : public PublisherFixture, public ::testing::Test {
 protected:
  void PublishOne() {
    Open();
    request_.volume_context["csi.cert-manager.io/key-algorithm"] = "ECDSA";
    Status published = publisher_->Publish(request_);
    ASSERT_TRUE(published.ok()) << published.ToString();
  }

  void ExpectUnpublished() {
    EXPECT_FALSE(IsMountPoint(target_));
    EXPECT_FALSE(fs::exists(target_));
    EXPECT_FALSE(fs::exists(options_.data_root + "/volumes/" + request_.volume_id));
  }
};

// On a node with 10,000 volumes the mount table is about 1.5 MB: the
// unpublish of a mounted volume proves its bind per path instead of reading it.
TEST_F(UnpublishProofTest, UnpublishOfAMountedVolumeReadsNoMountTable) {
  CERTMOUNT_REQUIRE_ROOT();
  PublishOne();
  const int reads = env_.calls("ReadFile");
  Status unpublished = publisher_->Unpublish(request_.volume_id, target_);
  ASSERT_TRUE(unpublished.ok()) << unpublished.ToString();
  EXPECT_EQ(env_.calls("ReadFile"), reads);
  ExpectUnpublished();
}

// When the per-path proof cannot be had, the mount table decides.
TEST_F(UnpublishProofTest, FailedStatxFallsBackToTheMountTable) {
  CERTMOUNT_REQUIRE_ROOT();
  PublishOne();
  env_.FailNth("LStatMountRoot", 1, EIO);
  const int reads = env_.calls("ReadFile");
  Status unpublished = publisher_->Unpublish(request_.volume_id, target_);
  ASSERT_TRUE(unpublished.ok()) << unpublished.ToString();
  EXPECT_EQ(env_.calls("ReadFile"), reads + 1);
  ExpectUnpublished();
}

INSTANTIATE_TEST_SUITE_P(
    EveryFilesystemStep, PublishFaultTest,
    ::testing::Values(Fault{"FirstDirectory", "CreateDir", 1, EACCES, Code::kInternal},
                      Fault{"SecretsFileFull", "WriteNewFile", 1, ENOSPC, Code::kResourceExhausted},
                      Fault{"KeyFileFull", "WriteNewFile", 3, ENOSPC, Code::kResourceExhausted},
                      Fault{"KeystoreFileFull", "WriteNewFile", 5, ENOSPC,
                            Code::kResourceExhausted},
                      Fault{"DirectorySync", "SyncDir", 1, EIO, Code::kInternal},
                      Fault{"DataSwap", "Rename", 2, EIO, Code::kInternal},
                      Fault{"NameLink", "Symlink", 2, ENOSPC, Code::kResourceExhausted},
                      // The read-only bind mount (new mount API; the bind+remount
                      // fallback's faults are in mount_test).
                      Fault{"ReadOnlyBindMount", "MountReadOnlyBind", 1, EPERM, Code::kInternal}),
    [](const ::testing::TestParamInfo<Fault>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace certmount::testing
