// --issuer=cert-manager end to end: the real certmountd against the fake API
// server playing cert-manager (publish, denial, an unreachable server), and
// the resumable renewal in process (a timed-out request resumed, not
// duplicated).
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "issue/cert_manager_issuer.h"
#include "renew/renewer.h"
#include "state/store.h"
#include "support/daemon.h"
#include "support/fake_clock.h"
#include "support/fake_kube_api.h"
#include "support/mounts.h"
#include "support/root.h"
#include "support/store_test_access.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"
#include "volume/issuance.h"
#include "volume/volume_layout.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kPodUid = kKubeletPodUid;

// ECDSA: these tests time the signer, and an RSA key takes longer than their
// short publish and renewal timeouts on a loaded machine under ASan.
std::map<std::string, std::string> CertManagerAttributes() {
  return {{"csi.cert-manager.io/key-algorithm", "ECDSA"},
          {"csi.cert-manager.io/issuer-name", "team-ca"},
          {"csi.cert-manager.io/issuer-kind", "ClusterIssuer"},
          {"csi.cert-manager.io/issuer-group", "cert-manager.io"},
          {"csi.cert-manager.io/dns-names", "web.default.svc"},
          {"csi.cert-manager.io/duration", "48h"},
          {"csi.cert-manager.io/key-usages", "digital signature,key encipherment,server auth"}};
}

// A loopback port nothing listens on.
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class CertManagerDaemonTest : public ::testing::Test {
 protected:
  // KubeletPublishRequest's pod, running.
  CertManagerDaemonTest() { api_.PutPod("default", "web-0", kPodUid); }
  void SetUp() override { CERTMOUNT_REQUIRE_ROOT(); }

  // With `hold_step`, the daemon holds every publish there (Daemon::StartHeldAt).
  void StartDaemon(const std::string& server, std::vector<std::string> extra = {},
                   const std::string& hold_step = "", const std::string& hold_file = "") {
    const std::string kubeconfig =
        WriteKubeconfig(dir_.Sub("kubeconfig"), server, api_.server_ca_pem());
    daemon_ = std::make_unique<Daemon>(dir_.Sub("node"));
    args_ = {"--issuer=cert-manager", "--kubeconfig=" + kubeconfig};
    args_.insert(args_.end(), extra.begin(), extra.end());
    ASSERT_TRUE(hold_step.empty() ? daemon_->Start(args_)
                                  : daemon_->StartHeldAt(hold_step, hold_file, args_))
        << daemon_->log();
  }

  std::string Target(const std::string& pod) {
    std::string parent = daemon_->target_root() + "/" + pod + "/volumes/kubernetes.io~csi/tls";
    fs::create_directories(parent);
    return parent + "/mount";
  }

  grpc::Status Publish(
      const std::string& volume_id, const std::string& target, const std::string& pod_token = "",
      const std::map<std::string, std::string>& attributes = CertManagerAttributes()) {
    csi::v1::NodePublishVolumeRequest request =
        KubeletPublishRequest(volume_id, target, attributes);
    if (!pod_token.empty()) {
      (*request.mutable_volume_context())["csi.storage.k8s.io/serviceAccount.tokens"] =
          R"({"":{"token":")" + pod_token + R"(","expirationTimestamp":"2030-01-01T00:00:00Z"}})";
    }
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  }

  grpc::Status Unpublish(const std::string& volume_id, const std::string& target) {
    return UnpublishVolume(*daemon_, volume_id, target);
  }

  // Publishes in the background until its request exists (the signer is
  // down), then kills certmountd: the publish never answers.
  void KillDuringPendingPublish(const std::string& volume_id, const std::string& target,
                                const std::string& pod_token = "") {
    std::thread publish([&] { Publish(volume_id, target, pod_token); });
    EXPECT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 1; })) << daemon_->log();
    daemon_->Kill();
    publish.join();
  }

  int Rows() {
    SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
    return db.execAndGet("SELECT count(*) FROM volumes").getInt();
  }

  std::vector<json> Posts() { return api_.PostedBodies(); }
  // GETs of pods: the reads the node's pod watch is there to save.
  int PodReads() { return api_.Count("GET", "/api/v1/namespaces/"); }
  // The pod watch's request follows its list: once it is in, so is every
  // pod the fake held before.
  bool PodWatchSynced() {
    return api_.WaitUntil([&] { return api_.Count("GET", "/api/v1/pods", true) > 0; });
  }

  TempDir dir_;
  FakeKubeApi api_;
  std::unique_ptr<Daemon> daemon_;
  std::vector<std::string> args_;
};

TEST_F(CertManagerDaemonTest, StartupCleanupDeletesTheRequestOfAnAbandonedPublish) {
  const std::string hold_file = dir_.Sub("held");
  StartDaemon(api_.url(), {}, "issued", hold_file);
  const std::string target = Target("pod-c");
  std::thread publish([&] { Publish("csi-cm-c", target); });
  for (int i = 0; i < 600 && !fs::exists(hold_file); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(hold_file)) << daemon_->log();
  ASSERT_EQ(api_.ObjectCount(), 1u);
  daemon_->Kill();  // the publish never returned: the pod may be gone
  publish.join();

  ASSERT_TRUE(daemon_->Start(args_)) << daemon_->log();
  EXPECT_EQ(Rows(), 0);
  // Its CertificateRequest goes too, in the background after the restart.
  EXPECT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; })) << daemon_->log();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST_F(CertManagerDaemonTest, UseTokenRequestSignsWithThePodsTokenAndNeverStoresIt) {
  const std::string pod_token = "pod-token-7f3e9a0c";
  api_.AcceptToken(pod_token);
  StartDaemon(api_.url(), {"--use-token-request"});

  // Without the tokens kubelet adds for the CSIDriver's tokenRequests: a
  // final error that says what to configure.
  grpc::Status missing = Publish("csi-cm-t0", Target("pod-t0"));
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(missing.error_message().find("tokenRequests"), std::string::npos)
      << missing.error_message();

  const std::string target = Target("pod-t");
  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-cm-t", target, CertManagerAttributes());
  (*request.mutable_volume_context())["csi.storage.k8s.io/serviceAccount.tokens"] =
      R"({"":{"token":")" + pod_token + R"(","expirationTimestamp":"2030-01-01T00:00:00Z"}})";
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << daemon_->log();

  int creates_with_pod_token = 0;
  for (const RecordedRequest& recorded : api_.Requests()) {
    if (recorded.method == "POST") {
      EXPECT_EQ(recorded.authorization, "Bearer " + pod_token);
      ++creates_with_pod_token;
    }
  }
  EXPECT_EQ(creates_with_pod_token, 1);

  daemon_->Terminate();
  for (const std::string& file : {daemon_->log(), Slurp(daemon_->data_root() + "/state.db"),
                                  Slurp(daemon_->data_root() + "/state.db-wal")}) {
    EXPECT_EQ(file.find(pod_token), std::string::npos);
  }
}

// KEP-5538 (CSIDriver serviceAccountTokenInSecrets): the tokens arrive in
// NodePublishVolumeRequest.secrets; they win over any in the volume context,
// and are never logged or stored either.
TEST_F(CertManagerDaemonTest, TokenFromTheSecretsFieldIsPreferredAndNeverStored) {
  const std::string pod_token = "secrets-token-5a1c";
  const std::string stale_token = "context-token-9e2b";
  api_.AcceptToken(pod_token);
  api_.AcceptToken(stale_token);
  StartDaemon(api_.url(), {"--use-token-request"});

  csi::v1::NodePublishVolumeRequest request =
      KubeletPublishRequest("csi-cm-s", Target("pod-s"), CertManagerAttributes());
  auto tokens = [](const std::string& token) {
    return R"({"":{"token":")" + token + R"(","expirationTimestamp":"2030-01-01T00:00:00Z"}})";
  };
  (*request.mutable_secrets())["csi.storage.k8s.io/serviceAccount.tokens"] = tokens(pod_token);
  (*request.mutable_volume_context())["csi.storage.k8s.io/serviceAccount.tokens"] =
      tokens(stale_token);
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon_->node().NodePublishVolume(CallContext().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << daemon_->log();

  // Only in secrets: still found.
  csi::v1::NodePublishVolumeRequest only_secrets =
      KubeletPublishRequest("csi-cm-s2", Target("pod-s2"), CertManagerAttributes());
  (*only_secrets.mutable_secrets())["csi.storage.k8s.io/serviceAccount.tokens"] = tokens(pod_token);
  status = daemon_->node().NodePublishVolume(CallContext().get(), only_secrets, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << daemon_->log();

  std::vector<std::string> authorizations;
  for (const RecordedRequest& recorded : api_.Requests()) {
    if (recorded.method == "POST") authorizations.push_back(recorded.authorization);
  }
  EXPECT_EQ(authorizations, std::vector<std::string>(2, "Bearer " + pod_token));

  daemon_->Terminate();
  for (const std::string& file : {daemon_->log(), Slurp(daemon_->data_root() + "/state.db"),
                                  Slurp(daemon_->data_root() + "/state.db-wal")}) {
    EXPECT_EQ(file.find(pod_token), std::string::npos);
    EXPECT_EQ(file.find(stale_token), std::string::npos);
  }
}

TEST_F(CertManagerDaemonTest, RetriedPublishResumesTheRequestItTimedOutOn) {
  api_.SetPolicy(SignerPolicy::kPending);
  StartDaemon(api_.url(), {"--publish-timeout=2s"});
  const std::string target = Target("pod-p");
  grpc::Status timed_out = Publish("csi-cm-p", target);
  EXPECT_EQ(timed_out.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << timed_out.error_message();
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(IsMountPoint(target));
  const std::string name = CertificateRequestName("csi-cm-p", 0);
  ASSERT_EQ(api_.ObjectCount(), 1u);

  // cert-manager signs while kubelet waits to retry; the retry resumes the
  // same request: no delete, no second object.
  ASSERT_TRUE(api_.Resolve("default", name, SignerPolicy::kApprove));
  grpc::Status retried = Publish("csi-cm-p", target);
  ASSERT_TRUE(retried.ok()) << retried.error_message() << daemon_->log();
  EXPECT_EQ(api_.ObjectCount(), 1u);
  EXPECT_EQ(api_.Count("DELETE", "/apis/cert-manager.io/v1/namespaces/default/certificaterequests"),
            0);
  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
  EXPECT_TRUE(KeyMatchesCertificate(target + "/tls.key", target + "/tls.crt"));
}

TEST_F(CertManagerDaemonTest, UnpublishDeletesTheVolumesRequests) {
  StartDaemon(api_.url());
  const std::string target = Target("pod-d");
  ASSERT_TRUE(Publish("csi-cm-d", target).ok()) << daemon_->log();
  ASSERT_EQ(api_.ObjectCount(), 1u);
  ASSERT_TRUE(Unpublish("csi-cm-d", target).ok());
  EXPECT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; })) << daemon_->log();
}

TEST_F(CertManagerDaemonTest, PublishCreatesOneOwnedRequestAndMountsItsCertificate) {
  StartDaemon(api_.url());
  const std::string target = Target("pod-a");
  grpc::Status status = Publish("csi-cm-a", target);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << daemon_->log();

  std::vector<json> posts = Posts();
  ASSERT_EQ(posts.size(), 1u);
  const json& body = posts[0];
  const std::string name = CertificateRequestName("csi-cm-a", 0);
  EXPECT_EQ(body["metadata"]["name"], name);
  EXPECT_EQ(body["metadata"]["namespace"], "default");
  EXPECT_EQ(body["metadata"]["ownerReferences"],
            json::parse(std::string(R"([{"apiVersion":"v1","kind":"Pod","name":"web-0","uid":")") +
                        kPodUid + R"(","controller":false,"blockOwnerDeletion":false}])"));
  EXPECT_EQ(body["metadata"]["labels"]["certmount.io/node"], IdLabelValue("test-node"));
  EXPECT_EQ(body["metadata"]["labels"]["certmount.io/volume"], IdLabelValue("csi-cm-a"));
  EXPECT_EQ(body["spec"]["duration"], "48h0m0s");
  EXPECT_EQ(body["spec"]["usages"], json({"digital signature", "key encipherment", "server auth"}));
  EXPECT_EQ(body["spec"]["issuerRef"],
            json({{"name", "team-ca"}, {"kind", "ClusterIssuer"}, {"group", "cert-manager.io"}}));
  EXPECT_EQ(api_.ObjectCount(), 1u);

  ASSERT_TRUE(IsMountPoint(target));
  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
  EXPECT_TRUE(KeyMatchesCertificate(target + "/tls.key", target + "/tls.crt"));

  SQLite::Database db(daemon_->data_root() + "/state.db", SQLite::OPEN_READONLY);
  SQLite::Statement row(db,
                        "SELECT issuance_number, request_name, issuer FROM volumes "
                        "WHERE volume_id = 'csi-cm-a'");
  ASSERT_TRUE(row.executeStep());
  EXPECT_EQ(row.getColumn(0).getInt64(), 0);
  EXPECT_EQ(row.getColumn(1).getString(), name);
  EXPECT_EQ(row.getColumn(2).getString(), "cert-manager");
  // The publish's pending key and CSR are gone once the files are written.
  EXPECT_FALSE(fs::exists(daemon_->data_root() + "/volumes/csi-cm-a/private/pending.key"));
  EXPECT_FALSE(fs::exists(daemon_->data_root() + "/volumes/csi-cm-a/private/pending.csr"));
}

TEST_F(CertManagerDaemonTest, DeniedRequestFailsFinallyAndLeavesNothing) {
  api_.SetPolicy(SignerPolicy::kDeny, "policy says no to web-0");
  StartDaemon(api_.url());
  const std::string target = Target("pod-b");
  grpc::Status status = Publish("csi-cm-b", target);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_NE(status.error_message().find("policy says no to web-0"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(fs::exists(daemon_->data_root() + "/volumes/csi-cm-b"));
  EXPECT_FALSE(IsMountPoint(target));
}

TEST_F(CertManagerDaemonTest, UnreachableApiServerDelaysNothingAndPublishFailsRetryably) {
  StartDaemon("https://127.0.0.1:" + std::to_string(ClosedPort()), {"--publish-timeout=3s"});
  csi::v1::ProbeResponse probe;
  ASSERT_TRUE(daemon_->identity().Probe(CallContext().get(), {}, &probe).ok());
  EXPECT_TRUE(probe.ready().value());

  const std::string target = Target("pod-c");
  grpc::Status status = Publish("csi-cm-c", target);
  EXPECT_TRUE(status.error_code() == grpc::StatusCode::UNAVAILABLE ||
              status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      << status.error_code() << " " << status.error_message();
  EXPECT_EQ(Rows(), 0);
  EXPECT_FALSE(IsMountPoint(target));
}

// The restart-during-pending-publish sequence, steps 1-4, with the pod terminating before
// certmountd is back: the restart races kubelet's retries; nothing is created for the terminating
// pod, and the pending request of the killed publish does not survive.
TEST_F(CertManagerDaemonTest, PodDeletedWhileTheSignerIsDownLeavesNoRequest) {
  api_.SetPolicy(SignerPolicy::kPending);  // the signer is down
  StartDaemon(api_.url(), {"--publish-timeout=2s"});
  const std::string target = Target("pod-s");
  KillDuringPendingPublish("csi-cm-s", target);
  api_.TerminatePod("default", "web-0");

  ASSERT_TRUE(daemon_->Start(args_)) << daemon_->log();
  // In the same second, kubelet retries the publish, twice.
  for (int retry = 0; retry < 2; ++retry) {
    grpc::Status status = Publish("csi-cm-s", target);
    EXPECT_TRUE(KubeletSeesUncertain(status))
        << status.error_code() << " " << status.error_message();
    EXPECT_NE(status.error_message().find("terminating"), std::string::npos)
        << status.error_message();
  }
  EXPECT_EQ(Rows(), 0);
  EXPECT_TRUE(Unpublish("csi-cm-s", target).ok());

  api_.SetPolicy(SignerPolicy::kApprove);  // the signer is back
  EXPECT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; })) << daemon_->log();
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);
  api_.DeletePod("default", "web-0");
  EXPECT_EQ(api_.RequestsOwnedBy(kPodUid), 0);
}

// The same sequence with the pod going away during kubelet's retry: the
// retry creates a request for the running pod, times out after the pod began
// terminating, and deletes it instead of leaving it "for the next try".
TEST_F(CertManagerDaemonTest, RetryThatTimesOutAfterThePodBeganTerminatingDeletesItsRequest) {
  api_.SetPolicy(SignerPolicy::kPending);
  StartDaemon(api_.url(), {"--publish-timeout=2s"});
  const std::string target = Target("pod-r");
  KillDuringPendingPublish("csi-cm-r", target);
  ASSERT_TRUE(daemon_->Start(args_)) << daemon_->log();
  // Step 1: the startup cleanup deletes the row, the files and the request.
  ASSERT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; })) << daemon_->log();

  std::thread terminate([&] {
    // Once the retry's request exists (the old one is deleted by the startup
    // cleanup, the new one created by the retry).
    api_.WaitUntil([&] { return api_.Count("POST", "/apis/") == 2 && api_.ObjectCount() == 1; });
    api_.TerminatePod("default", "web-0");
  });
  grpc::Status timed_out = Publish("csi-cm-r", target);
  terminate.join();
  EXPECT_EQ(timed_out.error_code(), grpc::StatusCode::ABORTED) << timed_out.error_message();
  EXPECT_TRUE(KubeletSeesUncertain(timed_out));
  grpc::Status again = Publish("csi-cm-r", target);
  EXPECT_TRUE(KubeletSeesUncertain(again)) << again.error_message();
  EXPECT_TRUE(Unpublish("csi-cm-r", target).ok());

  api_.SetPolicy(SignerPolicy::kApprove);
  EXPECT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; })) << daemon_->log();
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);
  EXPECT_EQ(api_.Count("POST", "/apis/"), 2);
}

// The token-request variant: the deleted pod's token is refused (401). That
// is read as "the pod is gone" (after the driver's own read of the pod
// confirms it), a non-final answer, so kubelet unpublishes.
TEST_F(CertManagerDaemonTest, RefusedTokenOfADeletedPodIsNotFinalAndLeavesNoRequest) {
  const std::string pod_token = "bound-token-of-web-0";
  api_.BindToken(pod_token, "default", "web-0");
  api_.SetPolicy(SignerPolicy::kPending);
  StartDaemon(api_.url(), {"--use-token-request", "--publish-timeout=2s"});
  const std::string target = Target("pod-k");
  KillDuringPendingPublish("csi-cm-k", target, pod_token);
  ASSERT_TRUE(daemon_->Start(args_)) << daemon_->log();

  // The pod is deleted between certmountd's check of it and the create.
  api_.BeforeNext("POST", [&] { api_.DeletePod("default", "web-0"); });
  grpc::Status refused = Publish("csi-cm-k", target, pod_token);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ABORTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("401"), std::string::npos) << refused.error_message();
  grpc::Status again = Publish("csi-cm-k", target, pod_token);
  EXPECT_TRUE(KubeletSeesUncertain(again)) << again.error_message();
  EXPECT_TRUE(Unpublish("csi-cm-k", target).ok());

  EXPECT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; })) << daemon_->log();
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);
}

// With the node's pod watch in, a publish and the renewals after it cost
// their creates alone: no pod is read.
TEST_F(CertManagerDaemonTest, PublishAndRenewalOfAPodTheWatchKnowsReadNoPod) {
  StartDaemon(api_.url());
  ASSERT_TRUE(PodWatchSynced()) << daemon_->log();
  std::map<std::string, std::string> attributes = CertManagerAttributes();
  attributes["csi.cert-manager.io/duration"] = "3s";  // renewed two seconds in
  grpc::Status published = Publish("csi-cm-w", Target("pod-w"), "", attributes);
  ASSERT_TRUE(published.ok()) << published.error_message() << daemon_->log();
  EXPECT_EQ(Posts().size(), 1u);
  ASSERT_TRUE(api_.WaitUntil([&] { return Posts().size() >= 2; }, 20s)) << daemon_->log();
  EXPECT_EQ(PodReads(), 0);
}

// A pod the watch lists as terminating gets ABORTED with neither a create
// nor a read of the pod.
TEST_F(CertManagerDaemonTest, PodTheWatchShowsTerminatingCostsNoCall) {
  api_.TerminatePod("default", "web-0");
  StartDaemon(api_.url());
  ASSERT_TRUE(PodWatchSynced()) << daemon_->log();
  const std::string target = Target("pod-t");
  grpc::Status status = Publish("csi-cm-t", target);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED) << status.error_message();
  EXPECT_NE(status.error_message().find("terminating"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(Posts().size(), 0u);
  EXPECT_EQ(PodReads(), 0);
  EXPECT_EQ(Rows(), 0);
}

// A pod created just before its publish races the watch: the publish waits
// for its event, reading the pod at most once, and succeeds.
TEST_F(CertManagerDaemonTest, PodNewerThanTheWatchIsPublishedWithAtMostOneRead) {
  StartDaemon(api_.url());
  ASSERT_TRUE(PodWatchSynced()) << daemon_->log();
  api_.PutPod("default", "web-1", "uid-web-1");
  std::map<std::string, std::string> attributes = CertManagerAttributes();
  attributes["csi.storage.k8s.io/pod.name"] = "web-1";
  attributes["csi.storage.k8s.io/pod.uid"] = "uid-web-1";
  grpc::Status published = Publish("csi-cm-n", Target("pod-n"), "", attributes);
  ASSERT_TRUE(published.ok()) << published.error_message() << daemon_->log();
  EXPECT_EQ(Posts().size(), 1u);
  EXPECT_LE(PodReads(), 1);
}

// A publish that timed out keeps its request for kubelet's retry (the pod
// runs) and leaves no row; an unpublish then still finds it by its labels.
// kubelet unpublishes after a publish that timed out, and retries it while
// the pod runs: the pending request stays for the retry, which takes it once
// signed without another create. Once the pod is going, the unpublish
// deletes it.
TEST_F(CertManagerDaemonTest, UnpublishAfterATimeoutKeepsThePendingRequestOnlyWhileThePodRuns) {
  api_.SetPolicy(SignerPolicy::kPending);
  StartDaemon(api_.url(), {"--publish-timeout=1s"});
  const std::string target = Target("pod-u");
  EXPECT_EQ(Publish("csi-cm-u", target).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(Rows(), 0);
  ASSERT_EQ(api_.ObjectCount(), 1u);
  EXPECT_TRUE(Unpublish("csi-cm-u", target).ok());
  ASSERT_TRUE(
      api_.Resolve("default", CertificateRequestName("csi-cm-u", 0), SignerPolicy::kApprove));
  grpc::Status retried = Publish("csi-cm-u", target);
  ASSERT_TRUE(retried.ok()) << retried.error_message() << daemon_->log();
  EXPECT_EQ(api_.Count("POST", "/apis/"), 1);
  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
  EXPECT_TRUE(KeyMatchesCertificate(target + "/tls.key", target + "/tls.crt"));
  ASSERT_TRUE(Unpublish("csi-cm-u", target).ok());
  ASSERT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; })) << daemon_->log();

  const std::string other = Target("pod-v");
  EXPECT_EQ(Publish("csi-cm-v", other).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_EQ(api_.ObjectCount(), 1u);
  api_.TerminatePod("default", "web-0");
  // Once the daemon's pod watch shows it terminating (a retry says so), the
  // unpublish removes the pending request.
  for (int retry = 0; retry < 50; ++retry) {
    grpc::Status status = Publish("csi-cm-v", other);
    if (status.error_message().find("terminating") != std::string::npos) break;
  }
  EXPECT_TRUE(Unpublish("csi-cm-v", other).ok());
  EXPECT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; })) << daemon_->log();
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);
}

// At startup, requests labelled with this node whose volume has no row are
// deleted (a deletion lost with a killed process is finished this way);
// other nodes' requests are left alone.
TEST_F(CertManagerDaemonTest, StartupDeletesThisNodesRequestsOfVolumesWithoutARow) {
  auto request = [](const std::string& name, const std::string& node) {
    return json{{"apiVersion", "cert-manager.io/v1"},
                {"kind", "CertificateRequest"},
                {"metadata",
                 {{"name", name},
                  {"namespace", "default"},
                  {"labels",
                   {{"certmount.io/node", IdLabelValue(node)},
                    {"certmount.io/volume", IdLabelValue(name)}}}}},
                {"spec", {{"request", ""}}}};
  };
  api_.Put(request("left-behind", "test-node"));
  api_.Put(request("of-another-node", "node-2"));
  StartDaemon(api_.url());
  EXPECT_TRUE(api_.WaitUntil([&] { return !api_.Object("default", "left-behind").has_value(); }))
      << daemon_->log();
  EXPECT_TRUE(api_.Object("default", "of-another-node").has_value());
}

TEST(CertManagerDaemonConfig, MissingKubeconfigIsExitOneWithAClearMessage) {
  TempDir dir;
  ProcessResult r = RunProcess({CERTMOUNTD_PATH, "--node-id=n", "--data-root=" + dir.Sub("data"),
                                "--endpoint=unix://" + dir.Sub("csi.sock"), "--mount-tmpfs=false",
                                "--target-root=" + dir.path().string(), "--issuer=cert-manager",
                                "--kubeconfig=" + dir.Sub("missing")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--kubeconfig"), std::string::npos) << r.err;
}

// The renewal's request survives its own timeout: the second attempt resumes
// the same CertificateRequest (same name, byte-identical CSR) instead of
// creating another, and the next renewal gets a new number.
// A cert-manager issuer talking to `api` with the driver's own token, for
// the in-process renewal tests; null if the client cannot be made.
std::unique_ptr<CertManagerIssuer> InProcessIssuer(const FakeKubeApi& api) {
  kube::KubeConfig config;
  config.server = api.url();
  config.ca_pem = api.server_ca_pem();
  config.token = FakeKubeApi::kToken;
  auto client = kube::Client::Create(config);
  if (!client.ok()) return nullptr;
  return std::make_unique<CertManagerIssuer>(std::shared_ptr<kube::Client>(std::move(*client)),
                                             CertManagerIssuerOptions{"node-1"});
}

TEST(CertManagerRenewal, TimedOutRenewalIsResumedNotDuplicated) {
  TempDir dir;
  FakeKubeApi api;
  api.PutPod("default", "web-0", kPodUid);
  const std::string data_root = dir.Sub("data");
  const std::string volume_id = "csi-cm-renew";
  Result<std::unique_ptr<Store>> store = Store::Open(dir.Sub("state.db"), SystemClock::Instance());
  ASSERT_TRUE(store.ok()) << store.status().ToString();

  std::map<std::string, std::string> attributes = CertManagerAttributes();
  attributes["csi.storage.k8s.io/pod.name"] = "web-0";
  attributes["csi.storage.k8s.io/pod.namespace"] = "default";
  attributes["csi.storage.k8s.io/pod.uid"] = kPodUid;
  VolumeRecord record;
  record.volume_id = volume_id;
  record.target_path = "/nowhere";
  record.pod_namespace = "default";
  record.pod_name = "web-0";
  record.pod_uid = kPodUid;
  record.attributes = attributes;
  record.issuer = "cert-manager";
  record.request_name = CertificateRequestName(volume_id, 0);
  ASSERT_TRUE(StoreTestAccess(**store).RegisterVolume(record).ok());
  IssuedCertificateFields fields{"01", 1, 2, 3};
  ASSERT_TRUE(StoreTestAccess(**store).MarkMounted(volume_id, fields).ok());
  const VolumeLayout layout = VolumeLayout::For(data_root, volume_id);
  fs::create_directories(layout.data);

  std::unique_ptr<CertManagerIssuer> issuer_owner = InProcessIssuer(api);
  ASSERT_NE(issuer_owner, nullptr);
  CertManagerIssuer& issuer = *issuer_owner;
  RenewerOptions options;
  options.data_root = data_root;
  // The signer never answers this attempt, so it always times out; the
  // deadline only has to outlast key generation on a loaded machine.
  options.timeout = 3s;
  options.store = store->get();
  Renewer renewer(options, &issuer, Env::Default(), &SystemClock::Instance());
  auto row = [&] { return **(*store)->GetVolume(volume_id); };

  api.SetPolicy(SignerPolicy::kPending);
  Result<IssuedCertificateFields> first = renewer.Renew(row(), {});
  EXPECT_EQ(first.status().code(), Code::kDeadlineExceeded) << first.status().ToString();
  const std::string name = CertificateRequestName(volume_id, 1);
  EXPECT_EQ(row().issuance_number, 1);
  EXPECT_EQ(row().request_name, name);
  EXPECT_TRUE(HasPendingIssuance(layout, Env::Default()));
  ASSERT_TRUE(api.Resolve("default", name, SignerPolicy::kApprove));

  options.timeout = 10s;
  Renewer patient(options, &issuer, Env::Default(), &SystemClock::Instance());
  Result<IssuedCertificateFields> second = patient.Renew(row(), {});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(api.ObjectCount(), 1u);
  // The second attempt's create met the first's request (409) and resumed it.
  EXPECT_TRUE(api.Object("default", name).has_value());
  EXPECT_EQ(VerifyChain(layout.data + "/tls.crt", layout.data + "/ca.crt"), "");
  EXPECT_TRUE(KeyMatchesCertificate(layout.data + "/tls.key", layout.data + "/tls.crt"));
  EXPECT_FALSE(HasPendingIssuance(layout, Env::Default()));
  EXPECT_EQ(row().issuance_number, 1);

  // The next renewal is a new issuance under a new name.
  api.SetPolicy(SignerPolicy::kApprove);
  Result<IssuedCertificateFields> third = patient.Renew(row(), {});
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(row().issuance_number, 2);
  EXPECT_TRUE(api.Object("default", CertificateRequestName(volume_id, 2)).has_value());
}

// A final failure drops the pending key and CSR, so the retry is a new
// issuance (a new number) instead of the same denial again.
TEST(CertManagerRenewal, FinalFailureStartsANewIssuanceNextTime) {
  TempDir dir;
  FakeKubeApi api;
  api.PutPod("default", "web-0", kPodUid);
  const std::string data_root = dir.Sub("data");
  const std::string volume_id = "csi-cm-denied";
  Result<std::unique_ptr<Store>> store = Store::Open(dir.Sub("state.db"), SystemClock::Instance());
  ASSERT_TRUE(store.ok());
  std::map<std::string, std::string> attributes = CertManagerAttributes();
  attributes["csi.storage.k8s.io/pod.name"] = "web-0";
  attributes["csi.storage.k8s.io/pod.namespace"] = "default";
  attributes["csi.storage.k8s.io/pod.uid"] = kPodUid;
  VolumeRecord record;
  record.volume_id = volume_id;
  record.target_path = "/nowhere";
  record.attributes = attributes;
  ASSERT_TRUE(StoreTestAccess(**store).RegisterVolume(record).ok());
  ASSERT_TRUE(
      StoreTestAccess(**store).MarkMounted(volume_id, IssuedCertificateFields{"01", 1, 2, 3}).ok());
  const VolumeLayout layout = VolumeLayout::For(data_root, volume_id);
  fs::create_directories(layout.data);

  std::unique_ptr<CertManagerIssuer> issuer_owner = InProcessIssuer(api);
  ASSERT_NE(issuer_owner, nullptr);
  CertManagerIssuer& issuer = *issuer_owner;
  RenewerOptions options;
  options.data_root = data_root;
  options.timeout = 10s;
  options.store = store->get();
  Renewer renewer(options, &issuer, Env::Default(), &SystemClock::Instance());
  auto row = [&] { return **(*store)->GetVolume(volume_id); };

  api.SetPolicy(SignerPolicy::kDeny, "no");
  EXPECT_EQ(renewer.Renew(row(), {}).status().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(HasPendingIssuance(layout, Env::Default()));
  api.SetPolicy(SignerPolicy::kApprove);
  Result<IssuedCertificateFields> retried = renewer.Renew(row(), {});
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ(row().issuance_number, 2);
  // The denied request is pruned once the new one succeeded.
  issuer.WaitForRetirements();
  EXPECT_EQ(api.ObjectCount(), 1u);
  EXPECT_TRUE(api.Object("default", CertificateRequestName(volume_id, 2)).has_value());

  // With --use-token-request a renewal needs the pod's token, which lives in
  // memory only: none yet (as after a restart) is UNAVAILABLE, so it backs
  // off until kubelet republishes; with one, the request carries it.
  ServiceAccountTokens tokens;
  options.tokens = &tokens;
  Renewer token_renewer(options, &issuer, Env::Default(), &SystemClock::Instance());
  Result<IssuedCertificateFields> no_token = token_renewer.Renew(row(), {});
  EXPECT_EQ(no_token.status().code(), Code::kUnavailable) << no_token.status().ToString();
  EXPECT_NE(no_token.status().message().find("republish"), std::string::npos);
  api.AcceptToken("renewal-pod-token");
  tokens.Set(volume_id, "renewal-pod-token");
  Result<IssuedCertificateFields> with_token = token_renewer.Renew(row(), {});
  ASSERT_TRUE(with_token.ok()) << with_token.status().ToString();
  int posts_with_pod_token = 0;
  for (const RecordedRequest& recorded : api.Requests()) {
    if (recorded.method == "POST" && recorded.authorization == "Bearer renewal-pod-token") {
      ++posts_with_pod_token;
    }
  }
  EXPECT_EQ(posts_with_pod_token, 1);
}

}  // namespace
}  // namespace certmount::testing
