// Renewal end to end: the real certmountd over its socket, as root, with
// real mounts and short-lived local-CA certificates. A renewal must reach the
// pod through the mount it already has, and leave a history row.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <thread>

#include "support/daemon.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// The serial the pod sees, read through one resolution of ..data so the
// certificate and key come from the same generation.
struct PodView {
  std::string serial;
  bool key_matches = false;
  std::string verify_error;
};

PodView ReadPodView(const std::string& target) {
  PodView view;
  std::error_code error;
  const fs::path generation = fs::read_symlink(fs::path(target) / "..data", error);
  if (error) return view;
  const std::string dir = (fs::path(target) / generation).string();
  view.serial = InspectCertificateFile(dir + "/tls.crt").serial_hex;
  view.key_matches = KeyMatchesCertificate(dir + "/tls.key", dir + "/tls.crt");
  view.verify_error = VerifyChain(dir + "/tls.crt", dir + "/ca.crt");
  return view;
}

class RenewalE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start()) << daemon_->log();
  }

  std::string Target(const std::string& pod) { return daemon_->PodTarget(pod); }

  int64_t CountIssuances(const std::string& volume_id, const std::string& kind,
                         const std::string& result) {
    SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
    SQLite::Statement query(db,
                            "SELECT count(*) FROM issuances WHERE volume_id = ? AND kind = ? AND "
                            "result = ?");
    query.bind(1, volume_id);
    query.bind(2, kind);
    query.bind(3, result);
    query.executeStep();
    return query.getColumn(0).getInt64();
  }

  std::string RowSerial(const std::string& volume_id) {
    SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
    SQLite::Statement query(db, "SELECT serial FROM volumes WHERE volume_id = ?");
    query.bind(1, volume_id);
    return query.executeStep() ? query.getColumn(0).getString() : "";
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(RenewalE2eTest, RenewalReachesThePodThroughTheExistingMount) {
  const std::string target = Target("pod-a");
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-renew", target,
                            {{"csi.cert-manager.io/issuer-name", "local"},
                             {"csi.cert-manager.io/dns-names", "renew.example"},
                             {"csi.cert-manager.io/duration", "3s"}});
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status published =
      daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(published.ok()) << published.error_message() << daemon_->log();
  const PodView first = ReadPodView(target);
  ASSERT_FALSE(first.serial.empty());

  // Renewal is due two seconds in; wait (bounded) for the pod's view to change.
  PodView renewed = first;
  for (int i = 0; i < 200 && renewed.serial == first.serial; ++i) {
    std::this_thread::sleep_for(50ms);
    renewed = ReadPodView(target);
  }
  ASSERT_NE(renewed.serial, first.serial) << daemon_->log();
  EXPECT_TRUE(renewed.key_matches);
  EXPECT_EQ(renewed.verify_error, "");
  EXPECT_GE(CountIssuances("csi-renew", "renewal", "ok"), 1);
  EXPECT_EQ(CountIssuances("csi-renew", "renewal", "error"), 0);

  // The volume is healthy by NodeGetVolumeStats, and a wrong path is NOT_FOUND.
  csi::v1::NodeGetVolumeStatsRequest stats;
  stats.set_volume_id("csi-renew");
  stats.set_volume_path(target);
  csi::v1::NodeGetVolumeStatsResponse stats_response;
  grpc::Status got =
      daemon_->node().NodeGetVolumeStats(CallContext().get(), stats, &stats_response);
  ASSERT_TRUE(got.ok()) << got.error_message();
  EXPECT_FALSE(stats_response.volume_condition().abnormal())
      << stats_response.volume_condition().message();
  ASSERT_EQ(stats_response.usage_size(), 1);
  EXPECT_GT(stats_response.usage(0).used(), 0);
  stats.set_volume_path(target + "-elsewhere");
  EXPECT_EQ(
      daemon_->node().NodeGetVolumeStats(CallContext().get(), stats, &stats_response).error_code(),
      grpc::StatusCode::NOT_FOUND);

  // After unpublish nothing renews the volume or recreates its files.
  csi::v1::NodeUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id("csi-renew");
  unpublish.set_target_path(target);
  csi::v1::NodeUnpublishVolumeResponse unpublish_response;
  ASSERT_TRUE(daemon_->node()
                  .NodeUnpublishVolume(CallContext().get(), unpublish, &unpublish_response)
                  .ok());
  const std::string volume_dir = daemon_->data_root() + "/volumes/csi-renew";
  EXPECT_FALSE(fs::exists(volume_dir));
  // Two more renewal periods: long enough for a stray renewal to show.
  std::this_thread::sleep_for(4s);
  EXPECT_FALSE(fs::exists(volume_dir));
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(RowSerial("csi-renew"), "");
  EXPECT_EQ(CountIssuances("csi-renew", "renewal", "ok"), 0);  // history went with the row
}

TEST_F(RenewalE2eTest, RenewalScheduleSurvivesARestart) {
  const std::string target = Target("pod-b");
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-restart", target,
                            {{"csi.cert-manager.io/issuer-name", "local"},
                             {"csi.cert-manager.io/dns-names", "restart.example"},
                             {"csi.cert-manager.io/duration", "3s"}});
  csi::v1::NodePublishVolumeResponse response;
  ASSERT_TRUE(daemon_->node().NodePublishVolume(CallContext().get(), request, &response).ok())
      << daemon_->log();
  const std::string first = ReadPodView(target).serial;
  ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->log();

  // A new process loads the mounted row and renews it through the old mount.
  ASSERT_TRUE(daemon_->Start()) << daemon_->log();
  std::string serial = first;
  for (int i = 0; i < 200 && serial == first; ++i) {
    std::this_thread::sleep_for(50ms);
    serial = ReadPodView(target).serial;
  }
  EXPECT_NE(serial, first) << daemon_->log();
  EXPECT_THAT(daemon_->log(), HasSubstr("renewal scheduler: 1 volumes"));
}

}  // namespace
}  // namespace certmount::testing
