// The real certmountd's life: signals that must not kill it, calls after
// SIGTERM, key generation that a deadline or shutdown stops, and startup
// refusal of a missing target root before anything is created or written
// (endpoint and data-root refusals: certmountd_test.cc).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "support/daemon.h"
#include "support/root.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::map<std::string, std::string> kRsa8192 = {
    {"csi.cert-manager.io/issuer-name", "ca"},
    {"csi.cert-manager.io/common-name", "big"},
    {"csi.cert-manager.io/key-algorithm", "RSA"},
    {"csi.cert-manager.io/key-size", "8192"},
};

grpc::Status Publish(Daemon& daemon, const std::string& id,
                     const std::map<std::string, std::string>& attributes,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  csi::v1::NodePublishVolumeResponse response;
  return daemon.node().NodePublishVolume(
      CallContext(timeout).get(), KubeletPublishRequest(id, daemon.PodTarget(id), attributes),
      &response);
}

TEST(Lifecycle, SighupAndSigpipeDoNotKillTheDaemon) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  ASSERT_TRUE(daemon.Start()) << daemon.log();
  ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
  ASSERT_EQ(kill(daemon.pid(), SIGPIPE), 0);
  ASSERT_EQ(kill(daemon.pid(), SIGHUP), 0);
  csi::v1::ProbeResponse probe;
  // A call after the signals is answered by the same, still running process.
  EXPECT_TRUE(daemon.identity().Probe(CallContext().get(), {}, &probe).ok()) << daemon.log();
  EXPECT_TRUE(daemon.running());
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.log();
  EXPECT_NE(daemon.log().find("received SIGHUP: reloading the local CA files"), std::string::npos)
      << daemon.log();
  EXPECT_FALSE(fs::exists(daemon.socket_path()));
}

TEST(Lifecycle, PublishTimeoutStopsRsa8192Generation) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  ASSERT_TRUE(daemon.Start({"--publish-timeout=1s"})) << daemon.log();
  const auto started = Clock::now();
  grpc::Status status = Publish(daemon, "csi-rsa8192", kRsa8192);
  const auto took = Clock::now() - started;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  // The contract under test: the timeout holds within a second (an
  // RSA-8192 key alone takes several seconds here).
  EXPECT_LT(took, std::chrono::seconds(2)) << status.error_message();
  EXPECT_TRUE(fs::is_empty(daemon.data_root() + "/volumes"));
}

TEST(Lifecycle, AfterSigtermNewCallsAreUnavailableAndGraceHolds) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  ASSERT_TRUE(daemon.Start({"--publish-timeout=120s", "--shutdown-grace=1s"})) << daemon.log();
  std::vector<std::future<grpc::Status>> running;
  for (int i = 0; i < 4; ++i) {
    running.push_back(std::async(std::launch::async, [&daemon, i] {
      return Publish(daemon, "csi-slow-" + std::to_string(i), kRsa8192);
    }));
  }
  // Let the four reach key generation (each takes seconds).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(kill(daemon.pid(), SIGTERM), 0);
  const auto signalled = Clock::now();
  // Once the daemon has seen SIGTERM, a new call is refused with UNAVAILABLE.
  grpc::Status refused;
  for (int i = 0; i < 100; ++i) {
    csi::v1::ProbeResponse probe;
    refused = daemon.identity().Probe(CallContext().get(), {}, &probe);
    if (!refused.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.error_message().find("shutting down"), std::string::npos)
      << refused.error_message();
  grpc::Status late = Publish(daemon, "csi-late", {{"csi.cert-manager.io/issuer-name", "ca"}});
  EXPECT_EQ(late.error_code(), grpc::StatusCode::UNAVAILABLE) << late.error_message();
  for (auto& call : running) EXPECT_FALSE(call.get().ok());
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.log();
  // --shutdown-grace=1s, plus at most a second for the cancelled keys.
  EXPECT_LT(Clock::now() - signalled, std::chrono::seconds(3)) << daemon.log();
  EXPECT_TRUE(fs::is_empty(daemon.data_root() + "/volumes"));
}

TEST(Lifecycle, MissingTargetRootIsRefusedBeforeAnythingIsWritten) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  ProcessResult r =
      RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--endpoint=unix://" + dir.Sub("csi.sock"),
                  "--data-root=" + dir.Sub("data"), "--target-root=" + dir.Sub("no-such-pods")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--target-root"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.Sub("data")));
  EXPECT_FALSE(fs::exists(dir.Sub("csi.sock")));
}

}  // namespace
}  // namespace certmount::testing
