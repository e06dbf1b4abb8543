// The metrics endpoint of the real certmountd: what a Prometheus scrape and
// kubelet's probes see after a publish over the CSI socket, and how the
// --metrics-address flag fails.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "common/token_bucket.h"
#include "support/daemon.h"
#include "support/fake_clock.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;

// A TCP socket on 127.0.0.1; port 0 lets the kernel pick a free one.
class ListeningSocket {
 public:
  explicit ListeningSocket(int port = 0) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    bound_ =
        bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd_, 1) == 0;
    socklen_t length = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length);
    port_ = ntohs(addr.sin_port);
  }
  ~ListeningSocket() { close(fd_); }
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;
  bool bound() const { return bound_; }
  int port() const { return port_; }

 private:
  int fd_;
  bool bound_ = false;
  int port_ = 0;
};

int FreePort() {
  ListeningSocket probe;
  return probe.port();  // closed again on return, free for the daemon
}

// "name{labels} value" lines of a scrape, keyed by everything before the value.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

// Inodes of the TCP sockets in LISTEN state (st 0A) in this network namespace.
std::set<std::string> ListeningTcpInodes() {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::vector<std::string> field;
      for (std::string f; fields >> f;) field.push_back(f);
      if (field.size() > 9 && field[3] == "0A") inodes.insert(field[9]);
    }
  }
  return inodes;
}

// How many TCP listeners the certmountd serving `data_root` holds, found by
// its command line; -1 if no such process.
int TcpListenersOfDaemon(const std::string& data_root) {
  const std::string wanted = "--data-root=" + data_root;
  const std::set<std::string> listening = ListeningTcpInodes();
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    bool match = false;
    for (std::string arg; std::getline(cmdline, arg, '\0');) match = match || arg == wanted;
    if (!match) continue;
    int count = 0;
    std::error_code error;
    for (const fs::directory_entry& fd : fs::directory_iterator(entry.path() / "fd", error)) {
      const std::string link = fs::read_symlink(fd.path(), error).string();
      if (link.starts_with("socket:[") && listening.count(link.substr(8, link.size() - 9)) != 0) {
        ++count;
      }
    }
    return count;
  }
  return -1;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CERTMOUNT_REQUIRE_ROOT();
    port_ = FreePort();
    daemon_ = std::make_unique<Daemon>(dir_.path().string());
    ASSERT_TRUE(daemon_->Start({"--metrics-address=127.0.0.1:" + std::to_string(port_)}))
        << daemon_->log();
  }

  httplib::Result Get(const std::string& path) {
    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(std::chrono::seconds(5));
    client.set_read_timeout(std::chrono::seconds(30));
    return client.Get(path);
  }

  std::string Target(const std::string& pod) { return daemon_->PodTarget(pod); }

  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(MetricsTest, ScrapeAfterPublishShowsTheVolumeItsIssuanceAndStartup) {
  const std::string target = Target("pod-m");
  csi::v1::NodePublishVolumeRequest request = KubeletPublishRequest(
      "csi-m", target,
      {{"csi.cert-manager.io/issuer-name", "local"}, {"csi.cert-manager.io/common-name", "m"}});
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status published =
      daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(published.ok()) << published.error_message() << "\n" << daemon_->log();
  InspectedCertificate cert = InspectCertificateFile(target + "/tls.crt");
  ASSERT_TRUE(cert.parsed);

  httplib::Result scrape = Get("/metrics");
  ASSERT_TRUE(scrape) << httplib::to_string(scrape.error());
  EXPECT_EQ(scrape->status, 200);
  EXPECT_EQ(scrape->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  std::map<std::string, double> samples = Samples(scrape->body);
  auto value = [&](const std::string& key) -> double {
    auto it = samples.find(key);
    EXPECT_NE(it, samples.end()) << key << " missing in\n" << scrape->body;
    return it == samples.end() ? -1 : it->second;
  };
  // Labels ordered by name, as prometheus-cpp writes them.
  const std::string volume_labels =
      "{pod_name=\"web-0\",pod_namespace=\"default\",volume_id=\"csi-m\"}";
  EXPECT_EQ(value("certmount_certificate_expiration_timestamp_seconds" + volume_labels),
            static_cast<double>(cert.not_after));
  // Renewal at two thirds of the lifetime (the default renew-before).
  EXPECT_EQ(value("certmount_certificate_renewal_timestamp_seconds" + volume_labels),
            static_cast<double>(cert.not_before + (cert.not_after - cert.not_before) * 2 / 3));
  EXPECT_EQ(value("certmount_volumes{state=\"mounted\"}"), 1);
  EXPECT_EQ(value("certmount_volumes{state=\"publishing\"}"), 0);
  EXPECT_EQ(value("certmount_issuances_total{issuer=\"local-ca\",kind=\"publish\",result=\"ok\"}"),
            1);
  EXPECT_EQ(
      value("certmount_issuance_duration_seconds_count{issuer=\"local-ca\",kind=\"publish\"}"), 1);
  EXPECT_EQ(value("certmount_publish_duration_seconds_count{result=\"ok\"}"), 1);
  EXPECT_EQ(value("certmount_publish_duration_seconds_bucket{result=\"ok\",le=\"+Inf\"}"), 1);
  EXPECT_EQ(value("certmount_publish_duration_seconds_count{result=\"error\"}"), 0);
  EXPECT_EQ(value("certmount_grpc_requests_total{code=\"OK\",method=\"NodePublishVolume\"}"), 1);
  EXPECT_EQ(value("certmount_build_info{version=\"" CERTMOUNT_VERSION "\"}"), 1);
  EXPECT_GT(value("process_open_fds"), 2);
  EXPECT_GT(value("process_resident_memory_bytes"), 0);
  // A fresh data root: nothing to keep, delete or sweep.
  EXPECT_EQ(value("certmount_startup_cleanup_volumes{outcome=\"kept\"}"), 0);
  EXPECT_EQ(value("certmount_startup_cleanup_volumes{outcome=\"deleted\"}"), 0);
  EXPECT_EQ(value("certmount_startup_cleanup_volumes{outcome=\"orphans_removed\"}"), 0);
  EXPECT_GE(value("certmount_startup_cleanup_duration_seconds"), 0);
  EXPECT_EQ(value("certmount_renewal_scheduled_volumes"), 1);
  EXPECT_EQ(value("certmount_renewal_queue_depth"), 0);
  EXPECT_EQ(value("certmount_issuer_rate_limit_waits"), 0);

  // Unpublished: its per-volume samples go with it.
  csi::v1::NodeUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id("csi-m");
  unpublish.set_target_path(target);
  csi::v1::NodeUnpublishVolumeResponse unpublished;
  ASSERT_TRUE(
      daemon_->node().NodeUnpublishVolume(CallContext().get(), unpublish, &unpublished).ok());
  scrape = Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->body.find("volume_id=\"csi-m\""), std::string::npos) << scrape->body;
  EXPECT_EQ(Samples(scrape->body)["certmount_volumes{state=\"mounted\"}"], 0);
}

TEST_F(MetricsTest, HealthzAndReadyzAnswerOk) {
  httplib::Result health = Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  // Readiness follows the CSI socket by a few instructions; wait for the
  // event, bounded.
  httplib::Result ready = Get("/readyz");
  for (int i = 0; i < 100 && ready && ready->status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ready = Get("/readyz");
  }
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
  EXPECT_EQ(ready->body, "ok\n");
  EXPECT_EQ(Get("/nothing-here")->status, 404);
  EXPECT_EQ(TcpListenersOfDaemon(daemon_->data_root()), 1);
}

class MetricsFlagTest : public ::testing::Test {
 protected:
  void SetUp() override { CERTMOUNT_REQUIRE_ROOT(); }

  std::vector<std::string> Argv(const std::string& metrics_flag) {
    fs::create_directories(dir_.Sub("pods"));
    return {CERTMOUNTD_PATH,
            "--endpoint=unix://" + dir_.Sub("csi.sock"),
            "--node-id=test-node",
            "--data-root=" + dir_.Sub("data"),
            "--target-root=" + dir_.Sub("pods"),
            metrics_flag};
  }

  TempDir dir_;
};

TEST_F(MetricsFlagTest, BadAddressExitsTwoWithOneLineNamingTheFlag) {
  for (const std::string bad :
       {"nonsense", "127.0.0.1:99999", "127.0.0.1:", ":0", "::1:80", "host:12x"}) {
    ProcessResult result = RunProcess(Argv("--metrics-address=" + bad));
    EXPECT_EQ(result.exit_code, 2) << bad << ": " << result.err;
    EXPECT_NE(result.err.find("--metrics-address"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(bad), std::string::npos) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

TEST_F(MetricsFlagTest, PortInUseExitsOne) {
  ListeningSocket taken;
  ASSERT_TRUE(taken.bound());
  ProcessResult result =
      RunProcess(Argv("--metrics-address=127.0.0.1:" + std::to_string(taken.port())));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("--metrics-address"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("cannot listen on 127.0.0.1:" + std::to_string(taken.port())),
            std::string::npos)
      << result.err;
}

TEST_F(MetricsFlagTest, EmptyAddressServesNothing) {
  Daemon daemon(dir_.path().string());
  ASSERT_TRUE(daemon.Start({"--metrics-address="})) << daemon.log();
  EXPECT_EQ(daemon.log().find("serving metrics"), std::string::npos) << daemon.log();
  EXPECT_EQ(TcpListenersOfDaemon(daemon.data_root()), 0);
  EXPECT_EQ(daemon.Terminate(), 0);
}

TEST(TokenBucketWaitsTest, AWaitRunsFromTheFirstRefusalToTheNextToken) {
  FakeClock clock;
  TokenBucket bucket(/*rate=*/1, /*burst=*/1, &clock);
  EXPECT_TRUE(bucket.TryTake());
  EXPECT_FALSE(bucket.TryTake());
  EXPECT_FALSE(bucket.TryTake());  // the same wait, not a second one
  EXPECT_EQ(bucket.waits(), 1);
  EXPECT_EQ(bucket.waited().count(), 0);
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(bucket.waited().count(), 1);  // counts while still waiting
  EXPECT_TRUE(bucket.TryTake());
  clock.Advance(std::chrono::seconds(5));
  EXPECT_EQ(bucket.waited().count(), 1);  // ended with the token
  EXPECT_TRUE(bucket.TryTake());
  EXPECT_FALSE(bucket.TryTake());
  EXPECT_EQ(bucket.waits(), 2);
}

}  // namespace
}  // namespace certmount::testing
