// The upgrade from the DaemonSet's earlier data root (/var/lib/certmount) to
// the one under the kubelet directory: the real certmountd publishes on the
// old layout, stops, and starts on the new data root with
// --legacy-data-root. Every published volume must keep its pod's mount,
// receive renewals through it and unpublish cleanly; a failure at any step
// of the move must leave a node that still runs on the old layout.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <thread>

#include "common/env.h"
#include "support/daemon.h"
#include "support/fault_env.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"
#include "volume/legacy_data_root.h"
#include "volume/mountinfo.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// A file's contents through the driver's own Env ("" when unreadable).
std::string Slurp(const std::string& path) {
  Result<std::string> contents = Env::Default()->ReadFile(path);
  return contents.ok() ? *contents : "";
}

// The serial of the certificate the pod sees at `target` ("" if none).
std::string PodSerial(const std::string& target) {
  if (!fs::exists(target + "/tls.crt")) return "";
  return InspectCertificateFile(target + "/tls.crt").serial_hex;
}

int64_t CountRows(const std::string& db_path) {
  SQLite::Database db(db_path, SQLite::OPEN_READONLY);
  SQLite::Statement query(db, "SELECT count(*) FROM volumes WHERE mounted = 1");
  query.executeStep();
  return query.getColumn(0).getInt64();
}

// Device numbers of the visible mount at `path` ("" when none).
std::string MountDevice(const std::string& path) {
  Result<MountTable> table = MountTable::Read();
  if (!table.ok()) return "";
  const MountInfoEntry* top = table->TopMountAt(fs::canonical(path).string());
  if (top == nullptr) return "";
  return std::to_string(top->major) + ":" + std::to_string(top->minor) + " " + top->fstype;
}

class LegacyDataRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    fs::create_directories(dir_.Sub("new"));
    // Both daemons see the same kubelet pods directory.
    legacy_ = std::make_unique<Daemon>(dir_.Sub("old"));
    fs::create_symlink(legacy_->target_root(), dir_.Sub("new/pods"));
    upgraded_ = std::make_unique<Daemon>(dir_.Sub("new"));
    ASSERT_TRUE(legacy_->Start()) << legacy_->log();
  }

  // Publishes `volume_id` for `pod` on `daemon`; returns its target.
  std::string Publish(Daemon& daemon, const std::string& volume_id, const std::string& pod,
                      const std::string& duration) {
    const std::string target = legacy_->PodTarget(pod);
    csi::v1::NodePublishVolumeRequest request =
        KubeletPublishRequest(volume_id, target,
                              {{"csi.cert-manager.io/issuer-name", "local"},
                               {"csi.cert-manager.io/dns-names", pod + ".example"},
                               {"csi.cert-manager.io/duration", duration}});
    csi::v1::NodePublishVolumeResponse response;
    grpc::Status published =
        daemon.node().NodePublishVolume(CallContext().get(), request, &response);
    EXPECT_TRUE(published.ok()) << published.error_message() << daemon.log();
    return target;
  }

  std::string LegacyRoot() const { return legacy_->data_root(); }
  std::string NewRoot() const { return upgraded_->data_root(); }

  TempDir dir_;
  std::unique_ptr<Daemon> legacy_;
  std::unique_ptr<Daemon> upgraded_;
};

TEST_F(LegacyDataRootTest, UpgradeKeepsEveryPublishedVolumeAndRenewsThroughItsMount) {
  const std::string steady = Publish(*legacy_, "csi-steady", "pod-a", "1h");
  const std::string renewing = Publish(*legacy_, "csi-renewing", "pod-b", "4s");
  const std::string steady_serial = PodSerial(steady);
  ASSERT_FALSE(steady_serial.empty());
  ASSERT_EQ(legacy_->Terminate(), 0) << legacy_->log();
  const std::string legacy_ca = Slurp(LegacyRoot() + "/ca/ca.crt");
  const std::string legacy_tmpfs = MountDevice(LegacyRoot() + "/volumes");
  ASSERT_THAT(legacy_tmpfs, HasSubstr("tmpfs"));

  ASSERT_TRUE(upgraded_->Start({"--legacy-data-root=" + LegacyRoot()})) << upgraded_->log();
  EXPECT_THAT(upgraded_->log(), HasSubstr("moved node state from " + LegacyRoot()));
  EXPECT_THAT(upgraded_->log(), HasSubstr("kept 2 rows, deleted 0"));
  EXPECT_THAT(upgraded_->log(), HasSubstr("adopted 0"));
  // Proven in place, not rescued one by one through the pods' mounts.
  EXPECT_THAT(upgraded_->log(), Not(HasSubstr("reattached")));
  // The new root has the state, the same CA and the same volumes tmpfs.
  EXPECT_EQ(CountRows(NewRoot() + "/state.db"), 2);
  EXPECT_EQ(Slurp(NewRoot() + "/ca/ca.crt"), legacy_ca);
  EXPECT_EQ(MountDevice(NewRoot() + "/volumes"), legacy_tmpfs);
  // The pods' existing mounts still show their files.
  EXPECT_TRUE(IsMountPoint(steady));
  EXPECT_EQ(PodSerial(steady), steady_serial);

  // A renewal written at the new place reaches the pod's existing mount.
  const std::string before = PodSerial(renewing);
  std::string now = before;
  for (int i = 0; i < 300 && now == before; ++i) {
    std::this_thread::sleep_for(50ms);
    now = PodSerial(renewing);
  }
  EXPECT_NE(now, before) << upgraded_->log();
  EXPECT_EQ(VerifyChain(renewing + "/tls.crt", renewing + "/ca.crt"), "");

  // Unpublish removes the pod's mount and the files, seen from both roots.
  EXPECT_TRUE(UnpublishVolume(*upgraded_, "csi-steady", steady).ok()) << upgraded_->log();
  EXPECT_FALSE(IsMountPoint(steady));
  EXPECT_FALSE(fs::exists(NewRoot() + "/volumes/csi-steady"));
  EXPECT_FALSE(fs::exists(LegacyRoot() + "/volumes/csi-steady"));

  // The legacy root is left as docs/kubernetes.md says: its state.db as it
  // was, its CA, its lock and its tmpfs; a restart does not migrate again.
  EXPECT_EQ(CountRows(LegacyRoot() + "/state.db"), 2);
  EXPECT_EQ(Slurp(LegacyRoot() + "/ca/ca.crt"), legacy_ca);
  EXPECT_EQ(MountDevice(LegacyRoot() + "/volumes"), legacy_tmpfs);
  ASSERT_EQ(upgraded_->Terminate(), 0);
  ASSERT_TRUE(upgraded_->Start({"--legacy-data-root=" + LegacyRoot()})) << upgraded_->log();
  EXPECT_EQ(CountRows(NewRoot() + "/state.db"), 1);
  const std::string after = Publish(*upgraded_, "csi-after", "pod-c", "1h");

  // Rolling back to the earlier layout keeps the volumes too: its stale row
  // of the unpublished volume goes, the one published since is adopted.
  ASSERT_EQ(upgraded_->Terminate(), 0);
  ASSERT_TRUE(legacy_->Start()) << legacy_->log();
  EXPECT_THAT(legacy_->log(), HasSubstr("kept 1 rows, deleted 1"));
  EXPECT_THAT(legacy_->log(), HasSubstr("adopted 1"));
  for (const auto& [volume_id, target] :
       {std::pair{"csi-renewing", renewing}, {"csi-after", after}}) {
    EXPECT_TRUE(UnpublishVolume(*legacy_, volume_id, target).ok()) << legacy_->log();
    EXPECT_FALSE(IsMountPoint(target));
  }
}

TEST_F(LegacyDataRootTest, RefusesWhileAnEarlierDriverHoldsTheLegacyRoot) {
  Publish(*legacy_, "csi-held", "pod-a", "1h");
  EXPECT_FALSE(upgraded_->Start({"--legacy-data-root=" + LegacyRoot()}));
  EXPECT_THAT(upgraded_->log(), HasSubstr("another certmountd"));
  EXPECT_FALSE(fs::exists(NewRoot() + "/state.db"));
  EXPECT_FALSE(IsMountPoint(NewRoot() + "/volumes"));
}

TEST_F(LegacyDataRootTest, RefusesAVolumesMountThatIsNotTheLegacyTmpfs) {
  Publish(*legacy_, "csi-kept", "pod-a", "1h");
  ASSERT_EQ(legacy_->Terminate(), 0);
  fs::create_directories(NewRoot() + "/volumes");
  ASSERT_EQ(RunProcess({"/bin/mount", "-t", "tmpfs", "other", NewRoot() + "/volumes"}).exit_code,
            0);
  Result<LegacyMigration> moved = MigrateLegacyDataRoot(NewRoot(), LegacyRoot(), Env::Default());
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(moved.status().message(), HasSubstr("not the volumes tmpfs"));
  EXPECT_FALSE(fs::exists(NewRoot() + "/state.db"));
}

// A failure at each step in turn (every call of each Env operation the move
// makes): afterwards the new root has no state.db, so the node still runs on
// the legacy root, untouched; a second attempt completes the move.
TEST_F(LegacyDataRootTest, AFailureAtAnyStepLeavesTheLegacyLayoutAndARetryCompletes) {
  const std::string target = Publish(*legacy_, "csi-crash", "pod-a", "1h");
  ASSERT_EQ(legacy_->Terminate(), 0);
  const std::string legacy_db = Slurp(LegacyRoot() + "/state.db");
  const std::string legacy_tmpfs = MountDevice(LegacyRoot() + "/volumes");
  int faults = 0;
  for (const char* operation : {"CreateDir", "WriteNewFile", "SyncDir", "Rename", "Mount"}) {
    for (int nth = 1;; ++nth) {
      const std::string root = dir_.Sub("try-" + std::to_string(++faults));
      fs::create_directories(root);
      FaultInjectionEnv env;
      env.FailNth(operation, nth, EIO);
      Result<LegacyMigration> moved = MigrateLegacyDataRoot(root, LegacyRoot(), &env);
      if (moved.ok()) {
        EXPECT_TRUE(moved->migrated);
        break;  // `operation` has fewer than `nth` calls: every one was tried
      }
      SCOPED_TRACE(std::string(operation) + " #" + std::to_string(nth));
      EXPECT_EQ(Slurp(LegacyRoot() + "/state.db"), legacy_db);
      if (fs::exists(root + "/state.db")) {
        // Only the directory sync after the commit can fail this late: the
        // new layout is complete, and the next start runs on it.
        EXPECT_EQ(std::string(operation), "SyncDir");
        EXPECT_EQ(CountRows(root + "/state.db"), 1);
      }
      moved = MigrateLegacyDataRoot(root, LegacyRoot(), Env::Default());
      ASSERT_TRUE(moved.ok()) << moved.status().ToString();
      EXPECT_EQ(CountRows(root + "/state.db"), 1);
      EXPECT_EQ(Slurp(root + "/ca/ca.crt"), Slurp(LegacyRoot() + "/ca/ca.crt"));
      EXPECT_EQ(MountDevice(root + "/volumes"), legacy_tmpfs);
      EXPECT_TRUE(fs::exists(root + "/volumes/csi-crash/data/tls.crt"));
      EXPECT_FALSE(fs::exists(root + "/state.db.migrating"));
      EXPECT_FALSE(fs::exists(root + "/ca.migrating"));
    }
  }
  EXPECT_GE(faults, 8);
  EXPECT_TRUE(IsMountPoint(target));
}

}  // namespace
}  // namespace certmount::testing
