// What a hostile pod spec or kubelet request costs the real certmountd: size
// bounds before any work, one log line per record whatever the values hold,
// bounded status messages, and path shapes no filesystem takes.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "support/daemon.h"
#include "support/root.h"
#include "support/temp_dir.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

std::string Repeat(const std::string& piece, size_t times) {
  std::string out;
  for (size_t i = 0; i < times; ++i) out += piece;
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class HostileInputTest : public ::testing::Test {
 protected:
  void StartDaemon(const std::vector<std::string>& args = {}) {
    CERTMOUNT_REQUIRE_ROOT();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start(args)) << daemon_->log();
  }

  grpc::Status Publish(const csi::v1::NodePublishVolumeRequest& request) {
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  }

  void ExpectNothingWritten(const std::string& target) {
    EXPECT_TRUE(fs::is_empty(daemon_->data_root() + "/volumes"));
    std::error_code error;  // an overlong name is ENAMETOOLONG: not there either
    EXPECT_FALSE(fs::exists(target, error));
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(HostileInputTest, OversizedAttributesAreInvalidArgumentNamingKeyAndLimit) {
  StartDaemon();
  const std::string target = daemon_->PodTarget("pod");
  struct Case {
    std::map<std::string, std::string> attributes;
    std::string key;
    std::string limit;
  } cases[] = {
      {{{"csi.cert-manager.io/dns-names", std::string(1 << 20, 'a')}},
       "csi.cert-manager.io/dns-names",
       "16 KiB"},
      {{{"csi.cert-manager.io/common-name", std::string(1 << 20, 'c')}},
       "csi.cert-manager.io/common-name",
       "16 KiB"},
      {{{"csi.storage.k8s.io/pod.name", std::string(253, 'p')},
        {"csi.cert-manager.io/common-name", Repeat("${POD_NAME}", 1400)}},
       "csi.cert-manager.io/common-name",
       "expands to"},
      {{{"csi.cert-manager.io/dns-names", Repeat("a.example.com,", 1001)}},
       "csi.cert-manager.io/dns-names",
       "1000"},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> attributes = c.attributes;
    attributes["csi.cert-manager.io/issuer-name"] = "ca";
    grpc::Status status = Publish(KubeletPublishRequest("csi-big", target, attributes));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.key;
    EXPECT_EQ(status.error_message().rfind(c.key, 0), 0u) << status.error_message();
    EXPECT_NE(status.error_message().find(c.limit), std::string::npos) << status.error_message();
    EXPECT_LT(status.error_message().size(), 1024u);
  }
  ExpectNothingWritten(target);
  daemon_->Terminate();
  // Nothing of the megabyte values reached the log.
  EXPECT_LT(daemon_->log().size(), 64u * 1024) << daemon_->log().size();
}

TEST_F(HostileInputTest, TextLogHasOneLinePerRecordWhateverTheValuesHold) {
  StartDaemon();
  const std::string target = daemon_->PodTarget("pod");
  Publish(KubeletPublishRequest(
      "csi-forge", target,
      {{"csi.cert-manager.io/issuer-name", "ca"},
       {"csi.cert-manager.io/common-name", "forge"},
       {"csi.cert-manager.io/duration", "1h\n2026-01-01T00:00:00.000Z info forged record"}}));
  Publish(KubeletPublishRequest(std::string("csi-\0nul\nid", 11), target,
                                {{"csi.cert-manager.io/issuer-name", "ca"}}));
  daemon_->Terminate();
  const std::string log = daemon_->log();
  EXPECT_EQ(log.find('\0'), std::string::npos);
  const std::regex record(
      R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (trace|debug|info|warning|error|critical) .*)");
  // gRPC's own C-core lines ("E1203 15:52:29.1 ...") share stderr.
  const std::regex grpc_core(R"(^[EWID]\d{4} .*)");
  for (const std::string& line : Lines(log)) {
    EXPECT_TRUE(std::regex_match(line, record) || std::regex_match(line, grpc_core)) << line;
  }
  EXPECT_EQ(log.find("\ninfo forged record"), std::string::npos) << log;
  EXPECT_NE(log.find("1h\\n2026-01-01T00:00:00.000Z info forged record"), std::string::npos) << log;
  EXPECT_NE(log.find("csi-\\0nul\\nid"), std::string::npos) << log;
}

TEST_F(HostileInputTest, JsonLogHasOneObjectPerLine) {
  StartDaemon({"--log-format=json"});
  Publish(KubeletPublishRequest(std::string("csi-\0json\nid", 12),
                                daemon_->target_root() + "/pod/volumes/v",
                                {{"csi.cert-manager.io/issuer-name", "ca\n{\"forged\":1}"}}));
  daemon_->Terminate();
  for (const std::string& line : Lines(daemon_->log())) {
    nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(record.is_object()) << line;
    EXPECT_FALSE(record.contains("forged")) << line;
  }
}

TEST_F(HostileInputTest, StatusMessagesStayWithinAFewKiB) {
  StartDaemon();
  // A 4080-byte target outside the target root: the message quotes it.
  const std::string target = Repeat("/" + std::string(203, 'd'), 20);
  grpc::Status status = Publish(
      KubeletPublishRequest("csi-long", target, {{"csi.cert-manager.io/issuer-name", "ca"}}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  // Quoted short with its length noted; the whole message, 4 KiB and more
  // before, is now well under the 4 KiB cap on status messages.
  EXPECT_LE(status.error_message().size(), 1024u) << status.error_message();
  EXPECT_NE(status.error_message().find("(4080 bytes)"), std::string::npos)
      << status.error_message();
}

TEST_F(HostileInputTest, OverlongPathComponentIsInvalidArgument) {
  StartDaemon();
  const std::string target = daemon_->target_root() + "/" + std::string(300, 'c') + "/volumes/v";
  grpc::Status status = Publish(
      KubeletPublishRequest("csi-name", target, {{"csi.cert-manager.io/issuer-name", "ca"}}));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("255"), std::string::npos) << status.error_message();
  csi::v1::NodeUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id("csi-name");
  unpublish.set_target_path(target);
  csi::v1::NodeUnpublishVolumeResponse response;
  EXPECT_EQ(
      daemon_->node().NodeUnpublishVolume(CallContext().get(), unpublish, &response).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  ExpectNothingWritten(target);
}

}  // namespace
}  // namespace certmount::testing
