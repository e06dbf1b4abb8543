// The real certmountd binary over a real unix socket: flags, identity, node
// info, CSI argument checks, socket handling and orderly shutdown.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "support/daemon.h"
#include "support/root.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

int CountLines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

TEST(CertmountdFlags, VersionAndHelpExitZero) {
  ProcessResult version = RunProcess({CERTMOUNTD_PATH, "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("certmountd " CERTMOUNT_VERSION), std::string::npos);
  ProcessResult help = RunProcess({CERTMOUNTD_PATH, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag : {"--endpoint", "--node-id", "--driver-name", "--data-root", "--log-level",
                           "--log-format", "--version"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
}

TEST(CertmountdFlags, UnknownFlagIsOneLineNamingItExitTwo) {
  ProcessResult r = RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

TEST(CertmountdFlags, BadValuesExitTwoNamingTheFlag) {
  TempDir dir;
  const std::string data = "--data-root=" + dir.Sub("data");
  struct Case {
    std::vector<std::string> args;
    std::string named;
  } cases[] = {
      {{"--driver-name=-bad-"}, "--driver-name"},
      {{"--driver-name=" + std::string(64, 'a')}, "--driver-name"},
      {{"--log-format=xml"}, "--log-format"},
      {{"--log-level=loud"}, "--log-level"},
      {{"--endpoint=tcp://127.0.0.1:1"}, "--endpoint"},
      {{"--endpoint=unix://relative"}, "--endpoint"},
      {{"--publish-timeout=soon"}, "--publish-timeout"},
      {{"--issuer=vault"}, "--issuer"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {CERTMOUNTD_PATH, "--node-id=n", data};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    ProcessResult r = RunProcess(argv);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << ": " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.named), std::string::npos) << r.err;
  }
}

TEST(CertmountdFlags, NodeIdIsRequiredOrFromEnvironment) {
  ProcessResult missing = RunProcess({CERTMOUNTD_PATH});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--node-id"), std::string::npos);

  // With NODE_ID set, the node id check passes and the next check speaks.
  ProcessResult from_env =
      RunProcess({CERTMOUNTD_PATH, "--driver-name=-bad-"}, {{"NODE_ID", "n1"}});
  EXPECT_EQ(from_env.exit_code, 2);
  EXPECT_EQ(from_env.err.find("--node-id"), std::string::npos) << from_env.err;
  EXPECT_NE(from_env.err.find("--driver-name"), std::string::npos) << from_env.err;
}

class CertmountdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start()) << daemon_->log();
  }

  grpc::Status Publish(const csi::v1::NodePublishVolumeRequest& request) {
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  }

  std::string Target(const std::string& name) { return daemon_->target_root() + "/" + name; }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(CertmountdTest, IdentityAndNodeInfo) {
  csi::v1::GetPluginInfoResponse info;
  ASSERT_TRUE(daemon_->identity().GetPluginInfo(CallContext().get(), {}, &info).ok());
  EXPECT_EQ(info.name(), "csi.certmount.io");
  EXPECT_EQ(info.vendor_version(), CERTMOUNT_VERSION);

  csi::v1::GetPluginCapabilitiesResponse caps;
  ASSERT_TRUE(daemon_->identity().GetPluginCapabilities(CallContext().get(), {}, &caps).ok());
  for (const auto& cap : caps.capabilities()) {
    EXPECT_NE(cap.service().type(), csi::v1::PluginCapability::Service::CONTROLLER_SERVICE);
  }

  csi::v1::ProbeResponse probe;
  ASSERT_TRUE(daemon_->identity().Probe(CallContext().get(), {}, &probe).ok());
  EXPECT_TRUE(probe.has_ready());
  EXPECT_TRUE(probe.ready().value());

  csi::v1::NodeGetInfoResponse node;
  ASSERT_TRUE(daemon_->node().NodeGetInfo(CallContext().get(), {}, &node).ok());
  EXPECT_EQ(node.node_id(), "test-node");

  csi::v1::NodeGetCapabilitiesResponse node_caps;
  ASSERT_TRUE(daemon_->node().NodeGetCapabilities(CallContext().get(), {}, &node_caps).ok());
  std::vector<int> types;
  for (const auto& cap : node_caps.capabilities()) types.push_back(cap.rpc().type());
  EXPECT_EQ(types, (std::vector<int>{csi::v1::NodeServiceCapability::RPC::VOLUME_MOUNT_GROUP,
                                     csi::v1::NodeServiceCapability::RPC::GET_VOLUME_STATS,
                                     csi::v1::NodeServiceCapability::RPC::VOLUME_CONDITION}));
}

// The thread ids of the process's gRPC server threads alive right now.
std::set<std::string> ServerThreads(pid_t pid) {
  std::set<std::string> tids;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream comm_file(task.path() / "comm");
    std::string comm;
    std::getline(comm_file, comm);
    if (comm.rfind("grpcpp_sync", 0) == 0) tids.insert(task.path().filename().string());
  }
  return tids;
}

// A thread started and ended per call costs every publish OpenSSL's
// per-thread set-up and a cold malloc arena; calls one after another must be
// served by a pool that stays put. Under load gRPC may still grow the pool
// by a few threads (a call can arrive before the last one's thread is back
// polling), so the bound is far below one thread per call, not zero.
TEST_F(CertmountdTest, SequentialCallsReuseTheServerThreads) {
  auto call = [&] {
    csi::v1::NodeGetCapabilitiesResponse caps;
    ASSERT_TRUE(daemon_->node().NodeGetCapabilities(CallContext().get(), {}, &caps).ok());
  };
  for (int i = 0; i < 5; ++i) call();
  const std::set<std::string> before = ServerThreads(daemon_->pid());
  ASSERT_FALSE(before.empty());
  std::set<std::string> started;
  constexpr int kCalls = 50;
  for (int i = 0; i < kCalls; ++i) {
    call();
    for (const std::string& tid : ServerThreads(daemon_->pid())) {
      if (!before.contains(tid)) started.insert(tid);
    }
  }
  EXPECT_LE(started.size(), 8u) << "server threads started during " << kCalls << " calls";
}

TEST_F(CertmountdTest, StageUnstageExpandAreUnimplemented) {
  csi::v1::NodeStageVolumeRequest stage;
  stage.set_volume_id("v");
  csi::v1::NodeStageVolumeResponse stage_response;
  EXPECT_EQ(
      daemon_->node().NodeStageVolume(CallContext().get(), stage, &stage_response).error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
  csi::v1::NodeUnstageVolumeRequest unstage;
  csi::v1::NodeUnstageVolumeResponse unstage_response;
  EXPECT_EQ(daemon_->node()
                .NodeUnstageVolume(CallContext().get(), unstage, &unstage_response)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  csi::v1::NodeExpandVolumeRequest expand;
  csi::v1::NodeExpandVolumeResponse expand_response;
  EXPECT_EQ(
      daemon_->node().NodeExpandVolume(CallContext().get(), expand, &expand_response).error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(CertmountdTest, PublishArgumentChecksInOrder) {
  const std::string target = Target("pod/volumes/v");
  const std::map<std::string, std::string> attrs = {{"csi.cert-manager.io/issuer-name", "ca"},
                                                    {"csi.cert-manager.io/common-name", "x"}};
  struct Case {
    std::string name;
    std::function<void(csi::v1::NodePublishVolumeRequest&)> mutate;
    std::string message_part;
  } cases[] = {
      {"missing volume id", [](auto& r) { r.clear_volume_id(); }, "volume_id"},
      {"missing target", [](auto& r) { r.clear_target_path(); }, "target_path"},
      {"missing capability", [](auto& r) { r.clear_volume_capability(); }, "volume_capability"},
      // The first missing field is reported even when later checks would fail too.
      {"missing id and block",
       [](auto& r) {
         r.clear_volume_id();
         r.mutable_volume_capability()->mutable_block();
       },
       "volume_id"},
      {"block", [](auto& r) { r.mutable_volume_capability()->mutable_block(); }, "block"},
      {"writable", [](auto& r) { r.set_readonly(false); }, "readOnly: true"},
      {"not ephemeral",
       [](auto& r) { r.mutable_volume_context()->erase("csi.storage.k8s.io/ephemeral"); },
       "ephemeral"},
      {"ephemeral false",
       [](auto& r) { (*r.mutable_volume_context())["csi.storage.k8s.io/ephemeral"] = "false"; },
       "ephemeral"},
      {"unsafe id slash", [](auto& r) { r.set_volume_id("a/b"); }, "volume"},
      {"unsafe id dotdot", [](auto& r) { r.set_volume_id(".."); }, "volume"},
      {"unsafe id long", [](auto& r) { r.set_volume_id(std::string(129, 'a')); }, "128"},
      {"unsafe id nul", [](auto& r) { r.set_volume_id(std::string("a\0b", 3)); }, "volume"},
      {"unsafe id space", [](auto& r) { r.set_volume_id("a b"); }, "volume"},
  };
  for (const Case& c : cases) {
    csi::v1::NodePublishVolumeRequest request = KubeletPublishRequest("csi-abc", target, attrs);
    c.mutate(request);
    grpc::Status status = Publish(request);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_NE(status.error_message().find(c.message_part), std::string::npos)
        << c.name << ": " << status.error_message();
  }
  // Nothing was created by any of them.
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(fs::is_empty(daemon_->data_root() + "/volumes"));
}

TEST_F(CertmountdTest, UnpublishOfUnknownVolumeOrMissingTargetIsOk) {
  csi::v1::NodeUnpublishVolumeRequest request;
  request.set_volume_id("csi-unknown");
  request.set_target_path(Target("gone/volumes/v"));
  csi::v1::NodeUnpublishVolumeResponse response;
  grpc::Status status =
      daemon_->node().NodeUnpublishVolume(CallContext().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();

  request.clear_volume_id();
  EXPECT_EQ(
      daemon_->node().NodeUnpublishVolume(CallContext().get(), request, &response).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  request.set_volume_id("csi-unknown");
  request.clear_target_path();
  EXPECT_EQ(
      daemon_->node().NodeUnpublishVolume(CallContext().get(), request, &response).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(CertmountdTest, SigtermRemovesSocketAndExitsZero) {
  ASSERT_TRUE(fs::exists(daemon_->socket_path()));
  EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->log();
  EXPECT_FALSE(fs::exists(daemon_->socket_path()));
  EXPECT_NE(daemon_->log().find("startup cleanup"), std::string::npos);
}

TEST_F(CertmountdTest, LogsOneLinePerRpcWithCodeAndDuration) {
  csi::v1::NodeGetInfoResponse node;
  ASSERT_TRUE(daemon_->node().NodeGetInfo(CallContext().get(), {}, &node).ok());
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-logged", Target("p/v"), {});
  request.set_readonly(false);
  Publish(request);
  daemon_->Terminate();
  const std::string log = daemon_->log();
  EXPECT_NE(log.find("method=NodeGetInfo volume_id=- code=OK duration_ms="), std::string::npos)
      << log;
  EXPECT_NE(log.find("method=NodePublishVolume volume_id=csi-logged code=INVALID_ARGUMENT"),
            std::string::npos)
      << log;
}

TEST(CertmountdSocket, StaleSocketIsReplacedAndNonSocketRefused) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.path().string());
  {
    // A socket file nobody listens on, as a killed process leaves it.
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, daemon.socket_path().c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    close(fd);
  }
  ASSERT_TRUE(daemon.Start()) << daemon.log();
  // A second daemon on the same live socket must refuse, not steal it.
  TempDir other;
  ProcessResult second =
      RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--endpoint=" + daemon.endpoint(),
                  "--data-root=" + other.Sub("data"), "--target-root=" + daemon.target_root()});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("served by another running process"), std::string::npos) << second.err;
  // Refused before it created, mounted or cleaned up anything.
  EXPECT_FALSE(fs::exists(other.Sub("data")));
  // Nor may a second daemon share the data root: its startup cleanup would
  // delete the first one's in-flight volumes.
  ProcessResult shared =
      RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--endpoint=unix://" + other.Sub("other.sock"),
                  "--data-root=" + daemon.data_root(), "--target-root=" + daemon.target_root()});
  EXPECT_EQ(shared.exit_code, 1);
  EXPECT_NE(shared.err.find("another certmountd"), std::string::npos) << shared.err;
  EXPECT_FALSE(fs::exists(other.Sub("other.sock")));
  csi::v1::ProbeResponse probe;
  EXPECT_TRUE(daemon.identity().Probe(CallContext().get(), {}, &probe).ok());
  daemon.Terminate();

  std::ofstream(daemon.socket_path()) << "not a socket";
  Daemon third(dir.path().string());
  EXPECT_FALSE(third.Start());
  EXPECT_NE(third.log().find("not a socket"), std::string::npos) << third.log();
  EXPECT_TRUE(fs::is_regular_file(daemon.socket_path()));
}

}  // namespace
}  // namespace certmount::testing
