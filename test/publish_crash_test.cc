// SIGKILL the real certmountd at each step of the publish sequence and start
// it again: unless the publish had committed, the row, the files and the
// mount are gone, and nothing is ever issued for that volume again.
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/daemon.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

int CountOccurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

class PublishCrashTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PublishCrashTest, KilledAtStepLeavesCleanNodeAfterRestart) {
  CERTMOUNT_REQUIRE_ROOT();
  const std::string step = GetParam();
  TempDir dir;
  Daemon daemon(dir.path().string());
  const std::string hold_file = dir.Sub("held");
  ASSERT_TRUE(daemon.StartHeldAt(step, hold_file)) << daemon.log();

  const std::string target = daemon.PodTarget("pod");
  const std::string volume_id = "csi-crash";
  csi::v1::NodePublishVolumeRequest request = KubeletPublishRequest(
      volume_id, target,
      {{"csi.cert-manager.io/issuer-name", "local"}, {"csi.cert-manager.io/common-name", "c"}});

  grpc::Status publish_status;
  std::thread publisher([&] {
    csi::v1::NodePublishVolumeResponse response;
    publish_status = daemon.node().NodePublishVolume(CallContext(std::chrono::seconds(60)).get(),
                                                     request, &response);
  });
  // Waits for the driver to announce that it holds at the step (an event).
  for (int i = 0; i < 600 && !fs::exists(hold_file); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(hold_file)) << daemon.log();
  daemon.Kill();
  publisher.join();
  EXPECT_FALSE(publish_status.ok()) << "the publish must not have returned OK";

  ASSERT_TRUE(daemon.Start()) << daemon.log();
  SQLite::Database db(daemon.data_root() + "/state.db", SQLite::OPEN_READONLY);
  const int rows = db.execAndGet("SELECT count(*) FROM volumes").getInt();
  const std::string volume_dir = daemon.data_root() + "/volumes/" + volume_id;
  if (step == std::string("committed")) {
    // The commit is the point of no return: the volume is published, and
    // kubelet's retry of the call it never saw answered is a no-op success.
    EXPECT_EQ(rows, 1);
    EXPECT_TRUE(IsMountPoint(target));
    csi::v1::NodePublishVolumeResponse response;
    grpc::Status retry = daemon.node().NodePublishVolume(CallContext().get(), request, &response);
    EXPECT_TRUE(retry.ok()) << retry.error_message();
    EXPECT_TRUE(fs::exists(target + "/tls.crt"));
  } else {
    EXPECT_EQ(rows, 0);
    EXPECT_FALSE(IsMountPoint(target));
    EXPECT_FALSE(fs::exists(volume_dir));
    EXPECT_TRUE(fs::is_empty(daemon.data_root() + "/volumes"));
  }
  daemon.Terminate();
  // Across both lives, at most the one issuance the held publish made.
  EXPECT_EQ(CountOccurrences(daemon.log(), "published volume " + volume_id), 0) << daemon.log();
}

TEST(PublishInFlightTest, RetryWhileIssuingSharesTheFirstAttemptInsteadOfIssuingAgain) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  const std::string hold_file = dir.Sub("held");
  ASSERT_TRUE(daemon.StartHeldAt("key-generated", hold_file, {"--publish-timeout=2s"}))
      << daemon.log();
  const std::string target = daemon.PodTarget("pod");
  const std::string parent = fs::path(target).parent_path().string();
  csi::v1::NodePublishVolumeRequest request = KubeletPublishRequest(
      "csi-twice", target,
      {{"csi.cert-manager.io/issuer-name", "local"}, {"csi.cert-manager.io/common-name", "t"}});

  std::thread first([&] {
    csi::v1::NodePublishVolumeResponse response;
    daemon.node().NodePublishVolume(CallContext(std::chrono::seconds(60)).get(), request,
                                    &response);
  });
  for (int i = 0; i < 600 && !fs::exists(hold_file); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(hold_file)) << daemon.log();

  // kubelet's retry of the same volume and target waits for the first
  // attempt, and gives up at its own publish timeout, saying why.
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status retry = daemon.node().NodePublishVolume(CallContext().get(), request, &response);
  EXPECT_EQ(retry.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << retry.error_message();
  EXPECT_NE(retry.error_message().find("waiting behind another publish"), std::string::npos)
      << retry.error_message();
  // The same volume id for another target is a conflict, not a second issuance.
  csi::v1::NodePublishVolumeRequest elsewhere = request;
  elsewhere.set_target_path(parent + "/other");
  grpc::Status conflict =
      daemon.node().NodePublishVolume(CallContext().get(), elsewhere, &response);
  EXPECT_EQ(conflict.error_code(), grpc::StatusCode::ALREADY_EXISTS) << conflict.error_message();

  daemon.Kill();
  first.join();
  std::ifstream held(hold_file);
  int issuances = 0;
  for (std::string line; std::getline(held, line);) ++issuances;
  EXPECT_EQ(issuances, 1) << "only the first attempt may reach key generation";
}

INSTANTIATE_TEST_SUITE_P(EveryStep, PublishCrashTest,
                         ::testing::Values("registered", "key-generated", "issued", "files-written",
                                           "mounted", "committed"));

}  // namespace
}  // namespace certmount::testing
