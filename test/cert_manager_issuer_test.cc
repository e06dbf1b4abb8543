// The cert-manager issuer against the fake API server playing cert-manager:
// the exact CertificateRequest it sends, every outcome, resuming after a
// deadline, the shared watch surviving drops and 410s, and pruning.
#include "issue/cert_manager_issuer.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "issue/csr.h"
#include "issue/private_key.h"
#include "kube/base64.h"
#include "support/fake_kube_api.h"
#include "support/pod_watch.h"

namespace certmount {
namespace {

using ::certmount::testing::FakeKubeApi;
using ::certmount::testing::SignerPolicy;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kNs = "team-a";

std::string MakeCsr(const CertificateSpec& spec) {
  Result<PrivateKey> key = PrivateKey::Generate(KeyAlgorithm::kEcdsa, 256);
  EXPECT_TRUE(key.ok());
  Result<std::string> csr = BuildCsrPem(*key, spec);
  EXPECT_TRUE(csr.ok()) << csr.status().ToString();
  return *csr;
}

// True when the first certificate of `chain_pem` is signed by `ca_pem`.
bool SignedBy(const std::string& chain_pem, const std::string& ca_pem) {
  auto read = [](const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    return std::unique_ptr<X509, decltype(&X509_free)>(cert, &X509_free);
  };
  auto leaf = read(chain_pem);
  auto ca = read(ca_pem);
  if (!leaf || !ca) return false;
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  return X509_verify(leaf.get(), ca_key) == 1;
}

class CertManagerIssuerTest : public ::testing::Test {
 protected:
  CertManagerIssuerTest() {
    spec_.issuer = {"my-issuer", "ClusterIssuer", "cert-manager.io"};
    spec_.dns_names = {"app.team-a.svc"};
    spec_.duration = std::chrono::hours(1) + std::chrono::minutes(30);
    spec_.usages = {"digital signature", "key encipherment", "server auth"};
    spec_.annotations = {{"venafi.cert-manager.io/custom-fields", "[]"}};
    input_.volume_id = "csi-0123456789abcdef";
    input_.spec = &spec_;
    input_.pod = {"app-7d9f", kNs, "9b2c6a1e-pod-uid", "app-sa"};
    input_.csr_pem = MakeCsr(spec_);
    input_.request_name = CertificateRequestName(input_.volume_id, 1);
    api_.PutPod(kNs, input_.pod.name, input_.pod.uid);
    MakeIssuer(api_.url());
  }

  void MakeIssuer(const std::string& server, int max_requests_per_volume = 1,
                  std::chrono::milliseconds retire_backoff = 10ms) {
    issuer_.reset();
    kube::KubeConfig config;
    config.server = server;
    config.ca_pem = api_.server_ca_pem();
    config.token = FakeKubeApi::kToken;
    kube::ClientOptions options;
    options.initial_backoff = 10ms;
    options.qps = qps_;
    options.burst = burst_;
    auto client = kube::Client::Create(config, options);
    ASSERT_TRUE(client.ok());
    CertManagerIssuerOptions issuer_options;
    issuer_options.node_id = "node-1";
    issuer_options.max_requests_per_volume = max_requests_per_volume;
    issuer_options.retire_backoff_initial = retire_backoff;
    issuer_options.pod_cache = pod_cache_;
    issuer_options.pod_cache_wait = pod_cache_wait_;
    issuer_ = std::make_unique<CertManagerIssuer>(std::shared_ptr<kube::Client>(std::move(*client)),
                                                  issuer_options);
  }

  Result<IssuedCertificate> Issue(std::chrono::milliseconds timeout = 10s,
                                  std::stop_token stop = {}) {
    return issuer_->Issue(input_, std::chrono::steady_clock::now() + timeout, stop);
  }

  // A try that ran out of time before its create queues the create, which
  // is made at its turn after the try has answered (a slow build, e.g.
  // under TSan): waits until the pending request exists.
  void AwaitPendingRequest() {
    ASSERT_TRUE(api_.WaitUntil([&] { return api_.Object(kNs, input_.request_name).has_value(); }));
  }

  std::vector<json> Posts() {
    std::vector<json> bodies;
    for (const auto& request : api_.Requests()) {
      if (request.method == "POST") bodies.push_back(json::parse(request.body));
    }
    return bodies;
  }

  // Makes the issuer ask the node's pod watch (as certmountd does) once its
  // first list is in.
  void WatchPods() {
    pods_ = std::make_unique<testing::PodWatch>(api_);
    ASSERT_TRUE(pods_->WaitSynced());
    pod_cache_ = &pods_->cache();
    MakeIssuer(api_.url());
  }

  // With a burst of three calls refilled at `qps`, the pod watch on, a
  // publish whose create and the request watch (a list and a watch) empty
  // the bucket; then input_ is another volume's publish. Returns the
  // creates made so far.
  int PublishOneThenOutOfCalls(double qps) {
    qps_ = qps;
    burst_ = 3;
    WatchPods();
    input_.purpose = IssuePurpose::kPublish;
    EXPECT_TRUE(Issue().ok());
    EXPECT_TRUE(api_.WaitUntil([&] { return api_.open_watches() >= 2; }));
    input_.volume_id = "csi-another-volume";
    input_.request_name = CertificateRequestName(input_.volume_id, 0);
    return Creates();
  }

  kube::PodRef Pod() const { return {input_.pod.namespace_, input_.pod.name, input_.pod.uid}; }
  // GETs of pods: the reads the pod watch is there to save.
  int PodReads() { return api_.Count("GET", "/api/v1/namespaces/"); }
  int Creates() { return api_.Count("POST", "/apis/cert-manager.io/"); }

  FakeKubeApi api_;
  // The client-side rate limit MakeIssuer gives the client.
  double qps_ = 5;
  int burst_ = 10;
  std::unique_ptr<testing::PodWatch> pods_;
  // What MakeIssuer hands the issuer.
  const kube::PodCache* pod_cache_ = nullptr;
  std::chrono::milliseconds pod_cache_wait_ = 1s;
  CertificateSpec spec_;
  IssueInput input_;
  std::unique_ptr<CertManagerIssuer> issuer_;
};

TEST_F(CertManagerIssuerTest, SendsTheExpectedRequestAndReturnsTheSignedChain) {
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_TRUE(SignedBy(issued->certificate_chain_pem, api_.signer_ca_pem()));
  EXPECT_EQ(issued->ca_pem, api_.signer_ca_pem());

  std::vector<json> posts = Posts();
  ASSERT_EQ(posts.size(), 1u);
  const json& body = posts[0];
  EXPECT_EQ(body["apiVersion"], "cert-manager.io/v1");
  EXPECT_EQ(body["kind"], "CertificateRequest");
  EXPECT_EQ(body["metadata"]["name"], input_.request_name);
  EXPECT_EQ(body["metadata"]["namespace"], kNs);
  EXPECT_EQ(body["metadata"]["labels"],
            json({{"certmount.io/node", IdLabelValue("node-1")},
                  {"certmount.io/volume", IdLabelValue(input_.volume_id)},
                  {"app.kubernetes.io/managed-by", "certmount"}}));
  EXPECT_EQ(IdLabelValue("node-1").size(), 32u);
  EXPECT_EQ(body["metadata"]["annotations"],
            json({{"venafi.cert-manager.io/custom-fields", "[]"}}));
  EXPECT_EQ(body["metadata"]["ownerReferences"],
            json::parse(R"([{"apiVersion":"v1","kind":"Pod","name":"app-7d9f",
                "uid":"9b2c6a1e-pod-uid","controller":false,"blockOwnerDeletion":false}])"));
  EXPECT_EQ(body["spec"]["issuerRef"],
            json({{"name", "my-issuer"}, {"kind", "ClusterIssuer"}, {"group", "cert-manager.io"}}));
  EXPECT_EQ(body["spec"]["duration"], "1h30m0s");
  EXPECT_EQ(body["spec"]["isCA"], false);
  EXPECT_EQ(body["spec"]["usages"], json({"digital signature", "key encipherment", "server auth"}));
  Result<std::string> csr = kube::Base64Decode(body["spec"]["request"].get<std::string>());
  ASSERT_TRUE(csr.ok());
  EXPECT_EQ(*csr, input_.csr_pem);

  // Requests are found through the watch; nothing polls.
  EXPECT_EQ(api_.Count("GET", "/apis/cert-manager.io/v1/namespaces/"), 0);
}

TEST_F(CertManagerIssuerTest, RequestNameIsAValidObjectName) {
  std::string name = CertificateRequestName("csi-ABC/with odd chars", 42);
  EXPECT_EQ(name.rfind("certmount-", 0), 0u);
  EXPECT_EQ(name.substr(name.size() - 3), "-42");
  EXPECT_LE(name.size(), 63u);
  for (char c : name) {
    EXPECT_TRUE(std::islower(c) || std::isdigit(c) || c == '-') << name;
  }
}

TEST_F(CertManagerIssuerTest, TerminalConditionsSurfaceTheirMessage) {
  struct Case {
    SignerPolicy policy;
    Code code;
  };
  int issuance = 1;
  for (Case c : {Case{SignerPolicy::kDeny, Code::kFailedPrecondition},
                 Case{SignerPolicy::kFail, Code::kFailedPrecondition},
                 Case{SignerPolicy::kInvalid, Code::kInvalidArgument}}) {
    const std::string message = "message number " + std::to_string(issuance);
    api_.SetPolicy(c.policy, message);
    input_.request_name = CertificateRequestName(input_.volume_id, issuance++);
    Result<IssuedCertificate> issued = Issue();
    EXPECT_EQ(issued.status().code(), c.code) << issued.status().ToString();
    EXPECT_NE(issued.status().message().find(message), std::string::npos)
        << issued.status().ToString();
    EXPECT_NE(issued.status().message().find(input_.request_name), std::string::npos);
  }
}

TEST_F(CertManagerIssuerTest, PendingAtTheDeadlineIsLeftInPlaceAndResumed) {
  api_.SetPolicy(SignerPolicy::kPending);
  Result<IssuedCertificate> first = Issue(300ms);
  EXPECT_EQ(first.status().code(), Code::kDeadlineExceeded) << first.status().ToString();
  AwaitPendingRequest();

  // Signed between two tries: the watch brings the outcome, and the next try
  // of the same issuance takes it without a call and without a new request.
  const int posts = api_.Count("POST", "/apis/cert-manager.io/");
  const int reads = api_.Count("GET", "/apis/cert-manager.io/v1/namespaces/");
  api_.Resolve(kNs, input_.request_name, SignerPolicy::kApprove);
  Result<IssuedCertificate> second = Issue();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(SignedBy(second->certificate_chain_pem, api_.signer_ca_pem()));
  EXPECT_EQ(api_.Count("POST", "/apis/cert-manager.io/"), posts);
  EXPECT_EQ(api_.Count("GET", "/apis/cert-manager.io/v1/namespaces/"), reads);
  EXPECT_EQ(api_.ObjectCount(), 1u);

  // And once signed, another retry (a lost reply) resumes the same request.
  Result<IssuedCertificate> third = Issue();
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->certificate_chain_pem, second->certificate_chain_pem);
  EXPECT_EQ(api_.ObjectCount(), 1u);
}

TEST_F(CertManagerIssuerTest, ARetryWhileStillPendingWaitsForTheSameRequest) {
  api_.SetPolicy(SignerPolicy::kPending);
  // Time enough for the first try to make its create itself (not queue it)
  // on a slow build: the retry then finds the request the try left waiting.
  EXPECT_EQ(Issue(2s).status().code(), Code::kDeadlineExceeded);
  AwaitPendingRequest();
  const int posts = api_.Count("POST", "/apis/cert-manager.io/");
  EXPECT_EQ(Issue(200ms).status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(api_.Count("POST", "/apis/cert-manager.io/"), posts);
  api_.Resolve(kNs, input_.request_name, SignerPolicy::kApprove);
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(api_.Count("POST", "/apis/cert-manager.io/"), posts);
}

TEST_F(CertManagerIssuerTest, APendingRequestARelistNoLongerShowsIsCreatedAgain) {
  api_.SetPolicy(SignerPolicy::kPending);
  EXPECT_EQ(Issue(200ms).status().code(), Code::kDeadlineExceeded);
  AwaitPendingRequest();
  // Deleted while the watch was away; it resumes, gets 410 and lists again.
  api_.DeleteUnseen(kNs, input_.request_name);
  api_.DropWatches();
  ASSERT_TRUE(api_.WaitUntil([&] { return issuer_->watch_lists() >= 2; }));
  api_.SetPolicy(SignerPolicy::kApprove);
  const int posts = api_.Count("POST", "/apis/cert-manager.io/");
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(api_.Count("POST", "/apis/cert-manager.io/"), posts + 1);
}

TEST_F(CertManagerIssuerTest, AVolumeThatGoesForgetsItsPendingRequest) {
  api_.SetPolicy(SignerPolicy::kPending);
  EXPECT_EQ(Issue(200ms).status().code(), Code::kDeadlineExceeded);
  AwaitPendingRequest();
  issuer_->Retire(kNs, input_.volume_id, std::nullopt);
  issuer_->WaitForRetirements();
  ASSERT_FALSE(api_.Object(kNs, input_.request_name).has_value());
  // Published again under the same issuance: a new request, not a wait for
  // the deleted one.
  api_.SetPolicy(SignerPolicy::kApprove);
  const int posts = api_.Count("POST", "/apis/cert-manager.io/");
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(api_.Count("POST", "/apis/cert-manager.io/"), posts + 1);
}

TEST_F(CertManagerIssuerTest, SameNameWithAnotherCsrIsReplaced) {
  api_.SetPolicy(SignerPolicy::kPending);
  EXPECT_EQ(Issue(200ms).status().code(), Code::kDeadlineExceeded);
  AwaitPendingRequest();
  // A restart lost the key: same issuance name, new CSR.
  input_.csr_pem = MakeCsr(spec_);
  api_.SetPolicy(SignerPolicy::kApprove);
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(api_.ObjectCount(), 1u);
  auto object = api_.Object(kNs, input_.request_name);
  ASSERT_TRUE(object.has_value());
  EXPECT_EQ(*kube::Base64Decode((*object)["spec"]["request"].get<std::string>()), input_.csr_pem);
}

TEST_F(CertManagerIssuerTest, WatchResumesAfterADroppedConnection) {
  api_.SetPolicy(SignerPolicy::kPending);
  std::thread resolver([&] {
    api_.WaitUntil([&] { return api_.open_watches() == 1 && api_.ObjectCount() == 1; });
    api_.DropWatches();
    api_.Resolve(kNs, input_.request_name, SignerPolicy::kApprove);
  });
  Result<IssuedCertificate> issued = Issue();
  resolver.join();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(issuer_->watch_lists(), 1);
}

TEST_F(CertManagerIssuerTest, WatchListsAgainAfterGone) {
  api_.SetPolicy(SignerPolicy::kPending);
  std::thread resolver([&] {
    api_.WaitUntil([&] { return api_.open_watches() == 1 && api_.ObjectCount() == 1; });
    api_.Compact();
    api_.DropWatches();
    api_.Resolve(kNs, input_.request_name, SignerPolicy::kApprove);
  });
  Result<IssuedCertificate> issued = Issue();
  resolver.join();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  // The outcome came after the compaction, so only a second list can have seen it.
  EXPECT_EQ(issuer_->watch_lists(), 2);
}

TEST_F(CertManagerIssuerTest, ServerErrorsOnCreateAreRetried) {
  api_.FailNext("POST", 1, 429, 0);
  api_.FailNext("POST", 1, 500, 0);
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(Posts().size(), 3u);
  EXPECT_EQ(api_.ObjectCount(), 1u);
}

TEST_F(CertManagerIssuerTest, EmptyStatusCaFallsBackToTheChainsLastCertificate) {
  api_.SetOmitCa(true);
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(issued->ca_pem, api_.signer_ca_pem());
}

TEST_F(CertManagerIssuerTest, GeneratedNamesWorkToo) {
  input_.request_name.clear();
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(Posts()[0]["metadata"]["generateName"], "certmount-");
}

TEST_F(CertManagerIssuerTest, UnreachableApiServerIsUnavailableQuickly) {
  api_.SetPolicy(SignerPolicy::kApprove);
  MakeIssuer("https://127.0.0.1:1");
  auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(Issue().status().code(), Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
}

TEST_F(CertManagerIssuerTest, CancelWhileWaiting) {
  api_.SetPolicy(SignerPolicy::kPending);
  std::stop_source stop;
  std::thread canceller([&] {
    api_.WaitUntil([&] { return api_.ObjectCount() == 1; });
    stop.request_stop();
  });
  EXPECT_EQ(Issue(10s, stop.get_token()).status().code(), Code::kCancelled);
  canceller.join();
}

TEST_F(CertManagerIssuerTest, PodTokenIsUsedAndNeverLogged) {
  std::ostringstream captured;
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(captured));
  logger->set_level(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  api_.AcceptToken("pod-sa-token-secret");
  input_.bearer_token_override = "pod-sa-token-secret";
  api_.FailNext("POST", 1, 500, 0);
  Result<IssuedCertificate> issued = Issue();
  issuer_.reset();
  spdlog::set_default_logger(previous);
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  for (const auto& request : api_.Requests()) {
    if (request.method == "POST") {
      EXPECT_EQ(request.authorization, "Bearer pod-sa-token-secret");
    }
    if (request.params.count("watch")) {
      EXPECT_EQ(request.authorization, std::string("Bearer ") + FakeKubeApi::kToken);
    }
  }
  EXPECT_NE(captured.str().find("created CertificateRequest"), std::string::npos);
  EXPECT_EQ(captured.str().find("pod-sa-token-secret"), std::string::npos) << captured.str();
  EXPECT_EQ(captured.str().find(FakeKubeApi::kToken), std::string::npos) << captured.str();
}

TEST_F(CertManagerIssuerTest, DeleteRequestsKeepsOnlyTheNamedOne) {
  for (int issuance = 1; issuance <= 3; ++issuance) {
    input_.request_name = CertificateRequestName(input_.volume_id, issuance);
    ASSERT_TRUE(Issue().ok());
  }
  IssueInput other = input_;
  other.volume_id = "csi-other";
  other.request_name = CertificateRequestName(other.volume_id, 1);
  ASSERT_TRUE(issuer_->Issue(other, std::chrono::steady_clock::now() + 10s, {}).ok());
  ASSERT_EQ(api_.ObjectCount(), 4u);

  const std::string keep = CertificateRequestName(input_.volume_id, 3);
  ASSERT_TRUE(issuer_->DeleteRequests(kNs, input_.volume_id, {keep}).ok());
  EXPECT_EQ(api_.ObjectCount(), 2u);
  EXPECT_TRUE(api_.Object(kNs, keep).has_value());
  EXPECT_TRUE(api_.Object(kNs, other.request_name).has_value());

  ASSERT_TRUE(issuer_->DeleteRequests(kNs, input_.volume_id, {}).ok());
  EXPECT_EQ(api_.ObjectCount(), 1u);
}

TEST_F(CertManagerIssuerTest, RetireKeepsTheNewestRequestsThenNoneWhenTheVolumeIsGone) {
  MakeIssuer(api_.url(), /*max_requests_per_volume=*/2);
  for (int issuance = 0; issuance <= 3; ++issuance) {
    input_.request_name = CertificateRequestName(input_.volume_id, issuance);
    ASSERT_TRUE(Issue().ok());
  }
  IssueInput other = input_;
  other.volume_id = "csi-other";
  other.request_name = CertificateRequestName(other.volume_id, 0);
  ASSERT_TRUE(issuer_->Issue(other, std::chrono::steady_clock::now() + 10s, {}).ok());
  ASSERT_EQ(api_.ObjectCount(), 5u);

  issuer_->Retire(kNs, input_.volume_id, 3);
  issuer_->WaitForRetirements();
  EXPECT_EQ(api_.ObjectCount(), 3u);
  EXPECT_TRUE(api_.Object(kNs, CertificateRequestName(input_.volume_id, 3)).has_value());
  EXPECT_TRUE(api_.Object(kNs, CertificateRequestName(input_.volume_id, 2)).has_value());

  issuer_->Retire(kNs, input_.volume_id, std::nullopt);
  issuer_->WaitForRetirements();
  EXPECT_EQ(api_.ObjectCount(), 1u);
  EXPECT_TRUE(api_.Object(kNs, other.request_name).has_value());
}

TEST_F(CertManagerIssuerTest, RetireNeverWaitsForAnUnreachableServer) {
  MakeIssuer("https://127.0.0.1:1");
  const auto started = std::chrono::steady_clock::now();
  issuer_->Retire(kNs, input_.volume_id, std::nullopt);
  // Queued, not run inline: returns at once; the failure is only logged.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  issuer_->WaitForRetirements();
}

TEST_F(CertManagerIssuerTest, NoRequestForAPodThatIsTerminatingGoneOrReplaced) {
  const std::string& name = input_.pod.name;
  api_.TerminatePod(kNs, name);
  Result<IssuedCertificate> terminating = Issue();
  EXPECT_EQ(terminating.status().code(), Code::kAborted) << terminating.status().ToString();
  EXPECT_NE(terminating.status().message().find("terminating"), std::string::npos);

  api_.PutPod(kNs, name, "another-uid");  // same name, another pod (a StatefulSet's next one)
  Result<IssuedCertificate> replaced = Issue();
  EXPECT_EQ(replaced.status().code(), Code::kAborted) << replaced.status().ToString();
  EXPECT_NE(replaced.status().message().find("gone"), std::string::npos);

  api_.DeletePod(kNs, name);
  EXPECT_EQ(Issue().status().code(), Code::kAborted);
  EXPECT_TRUE(Posts().empty());
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);

  input_.pod.uid.clear();
  EXPECT_EQ(Issue().status().code(), Code::kInvalidArgument);
}

TEST_F(CertManagerIssuerTest, PendingRequestOfAPodThatWentAwayIsDeletedAtTheDeadline) {
  // The check at the deadline reads no pod (its answer is due then): the
  // pod watch tells.
  WatchPods();
  api_.SetPolicy(SignerPolicy::kPending);
  std::thread deleter([&] {
    api_.WaitUntil([&] { return api_.ObjectCount() == 1; });
    api_.TerminatePod(kNs, input_.pod.name);
  });
  Result<IssuedCertificate> issued = Issue(500ms);
  deleter.join();
  EXPECT_EQ(issued.status().code(), Code::kAborted) << issued.status().ToString();
  issuer_->WaitForRetirements();
  EXPECT_EQ(api_.ObjectCount(), 0u);
  EXPECT_EQ(PodReads(), 0);
}

TEST_F(CertManagerIssuerTest, PodTheWatchKnowsCostsNoPodRead) {
  WatchPods();
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(Creates(), 1);
  EXPECT_EQ(PodReads(), 0);
}

TEST_F(CertManagerIssuerTest, ATryThatCannotGetAllItsCallsInTimeSpendsNone) {
  // Four calls in the bucket, then one a minute: the first issuance (a pod
  // read and a create, no pod watch) and the request watch (a list and a
  // watch) empty it.
  qps_ = 1.0 / 60;
  burst_ = 4;
  MakeIssuer(api_.url());
  input_.purpose = IssuePurpose::kPublish;
  ASSERT_TRUE(Issue().ok());
  ASSERT_TRUE(api_.WaitUntil([&] { return api_.open_watches() >= 1; }));
  const int reads = PodReads();
  const int creates = Creates();

  input_.volume_id = "csi-another-volume";
  input_.request_name = CertificateRequestName(input_.volume_id, 0);
  const auto started = std::chrono::steady_clock::now();
  Result<IssuedCertificate> issued = Issue(5s);
  EXPECT_EQ(issued.status().code(), Code::kDeadlineExceeded) << issued.status().ToString();
  EXPECT_NE(issued.status().message().find("no call was made"), std::string::npos)
      << issued.status().ToString();
  // At once, not at its deadline, and without spending the pod read.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
  EXPECT_EQ(PodReads(), reads);
  EXPECT_EQ(Creates(), creates);
}

TEST_F(CertManagerIssuerTest, APublishOutOfTimeQueuesItsCreateAndTheRetryTakesIt) {
  const int creates = PublishOneThenOutOfCalls(1);
  Result<IssuedCertificate> early = Issue(300ms);
  EXPECT_EQ(early.status().code(), Code::kDeadlineExceeded) << early.status().ToString();
  EXPECT_NE(early.status().message().find("the next try waits for it"), std::string::npos)
      << early.status().ToString();
  // The create is made when the rate limit allows, and is signed meanwhile.
  ASSERT_TRUE(api_.WaitUntil([&] { return Creates() == creates + 1; }));
  Result<IssuedCertificate> retried = Issue();
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_TRUE(SignedBy(retried->certificate_chain_pem, api_.signer_ca_pem()));
  EXPECT_EQ(Creates(), creates + 1);
  EXPECT_EQ(PodReads(), 0);
}

TEST_F(CertManagerIssuerTest, AQueuedCreateIsNotMadeForAPodThatWent) {
  // The queued create's call comes two seconds after the burst.
  const int creates = PublishOneThenOutOfCalls(0.5);
  EXPECT_EQ(Issue(300ms).status().code(), Code::kDeadlineExceeded);
  api_.TerminatePod(kNs, input_.pod.name);
  ASSERT_TRUE(pods_->WaitFor(Pod(), kube::PodLiveness::kTerminating));
  // The next try learns it; the queued create was never made.
  Result<IssuedCertificate> retried = Issue();
  EXPECT_EQ(retried.status().code(), Code::kAborted) << retried.status().ToString();
  EXPECT_EQ(Creates(), creates);
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);
}

TEST_F(CertManagerIssuerTest, PodFinishedTerminatingOrGonePerTheWatchCostsNoCall) {
  WatchPods();
  // Once the watch shows the pod `state`, an issuance is ABORTED naming it.
  auto expect_aborted_once_watched = [&](kube::PodLiveness state) {
    ASSERT_TRUE(pods_->WaitFor(Pod(), state));
    Result<IssuedCertificate> issued = Issue();
    EXPECT_EQ(issued.status().code(), Code::kAborted) << issued.status().ToString();
    EXPECT_NE(issued.status().message().find(kube::PodLivenessName(state)), std::string::npos)
        << issued.status().ToString();
  };
  api_.SetPodPhase(kNs, input_.pod.name, "Succeeded");
  expect_aborted_once_watched(kube::PodLiveness::kFinished);
  api_.TerminatePod(kNs, input_.pod.name);
  expect_aborted_once_watched(kube::PodLiveness::kTerminating);
  api_.DeletePod(kNs, input_.pod.name);
  expect_aborted_once_watched(kube::PodLiveness::kGone);
  EXPECT_EQ(Creates(), 0);
  EXPECT_EQ(PodReads(), 0);
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);
}

TEST_F(CertManagerIssuerTest, PodTheWatchHasNotSeenIsReadOnceAndIssuedFor) {
  // On another node than the watched one: the watch never sees it, as with
  // a pod its watch is too far behind to know.
  input_.pod = {"unseen-0", kNs, "uid-unseen", "app-sa"};
  api_.PutPod(kNs, input_.pod.name, input_.pod.uid, "other-node");
  pod_cache_wait_ = 100ms;
  WatchPods();
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(PodReads(), 1);
  EXPECT_EQ(Creates(), 1);
}

TEST_F(CertManagerIssuerTest, NewPodRacingTheWatchIsWaitedForNotRead) {
  WatchPods();
  // kubelet already runs it: its ADDED event is on its way to the watch.
  input_.pod = {"new-0", kNs, "uid-new", "app-sa"};
  api_.PutPod(kNs, input_.pod.name, input_.pod.uid);
  pod_cache_wait_ = 10s;
  MakeIssuer(api_.url());
  Result<IssuedCertificate> issued = Issue(20s);
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(PodReads(), 0);
  EXPECT_EQ(Creates(), 1);
}

TEST_F(CertManagerIssuerTest, PodRecreatedUnderTheSameNameIsNotMistakenForTheOldOne) {
  WatchPods();
  const std::string old_uid = input_.pod.uid;
  api_.PutPod(kNs, input_.pod.name, "uid-next");  // a StatefulSet's next pod
  input_.pod.uid = "uid-next";
  ASSERT_TRUE(pods_->WaitFor(Pod(), kube::PodLiveness::kRunning));

  input_.pod.uid = old_uid;
  Result<IssuedCertificate> old_pod = Issue();
  EXPECT_EQ(old_pod.status().code(), Code::kAborted) << old_pod.status().ToString();
  EXPECT_NE(old_pod.status().message().find("gone"), std::string::npos);
  EXPECT_EQ(Creates(), 0);

  input_.pod.uid = "uid-next";
  Result<IssuedCertificate> new_pod = Issue();
  ASSERT_TRUE(new_pod.ok()) << new_pod.status().ToString();
  EXPECT_EQ(Creates(), 1);
  EXPECT_EQ(PodReads(), 0);
}

TEST_F(CertManagerIssuerTest, AWatchBehindARecreatedPodFallsBackToARead) {
  // The watch's last word about the name is the old pod: that does not
  // make the new one gone.
  kube::PodCache behind;
  behind.OnListBoundary(kube::ListBoundary::kBegin);
  behind.OnEvent({"ADDED", api_.Pod(kNs, input_.pod.name)->dump()});
  behind.OnListBoundary(kube::ListBoundary::kEnd);
  pod_cache_ = &behind;
  pod_cache_wait_ = 0ms;
  MakeIssuer(api_.url());
  api_.PutPod(kNs, input_.pod.name, "uid-next");
  input_.pod.uid = "uid-next";
  Result<IssuedCertificate> issued = Issue();
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(PodReads(), 1);
  issuer_.reset();  // before `behind`
}

TEST_F(CertManagerIssuerTest, PendingAtTheDeadlineReadsNoPodAfterIt) {
  api_.SetPolicy(SignerPolicy::kPending);
  // Without the watch: the one read before the create, none at the deadline.
  Result<IssuedCertificate> unwatched = Issue(300ms);
  EXPECT_EQ(unwatched.status().code(), Code::kDeadlineExceeded) << unwatched.status().ToString();
  EXPECT_EQ(PodReads(), 1);
  // With it: none at all.
  WatchPods();
  Result<IssuedCertificate> watched = Issue(300ms);
  EXPECT_EQ(watched.status().code(), Code::kDeadlineExceeded) << watched.status().ToString();
  EXPECT_EQ(PodReads(), 1);
  EXPECT_EQ(api_.ObjectCount(), 1u);  // left for the next try
}

TEST_F(CertManagerIssuerTest, RefusedPodTokenIsSettledByOneReadWhenTheWatchSaysRunning) {
  WatchPods();
  api_.BindToken("bound-pod-token", kNs, input_.pod.name);
  input_.bearer_token_override = "bound-pod-token";
  // Deleted right before the create: the refusal may well arrive before the
  // watch's DELETED event does.
  api_.BeforeNext("POST", [&] { api_.DeletePod(kNs, input_.pod.name); });
  Result<IssuedCertificate> gone = Issue();
  EXPECT_EQ(gone.status().code(), Code::kAborted) << gone.status().ToString();
  EXPECT_LE(PodReads(), 1);
  EXPECT_EQ(api_.ObjectCount(), 0u);
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);
}

TEST_F(CertManagerIssuerTest, RefusedPodTokenMeansGoneOnlyWhenThePodIsGone) {
  api_.BindToken("bound-pod-token", kNs, input_.pod.name);
  input_.bearer_token_override = "bound-pod-token";
  // The pod is deleted between the pod check and the create: its token is
  // refused, and the driver's own read of the pod says why.
  api_.BeforeNext("POST", [&] { api_.DeletePod(kNs, input_.pod.name); });
  Result<IssuedCertificate> gone = Issue();
  EXPECT_EQ(gone.status().code(), Code::kAborted) << gone.status().ToString();
  EXPECT_EQ(api_.ObjectCount(), 0u);

  // A token refused while the pod runs is a real permission problem: final.
  api_.PutPod(kNs, input_.pod.name, input_.pod.uid);
  input_.bearer_token_override = "never-accepted";
  EXPECT_EQ(Issue().status().code(), Code::kPermissionDenied);
  EXPECT_EQ(api_.creates_for_gone_pods(), 0);
}

TEST_F(CertManagerIssuerTest, RetireWithoutANamespaceFindsTheRequestsByLabel) {
  ASSERT_TRUE(Issue().ok());
  IssueInput other = input_;
  other.volume_id = "csi-other";
  other.request_name = CertificateRequestName(other.volume_id, 0);
  ASSERT_TRUE(issuer_->Issue(other, std::chrono::steady_clock::now() + 10s, {}).ok());
  issuer_->Retire("", input_.volume_id, std::nullopt);
  issuer_->WaitForRetirements();
  EXPECT_EQ(api_.ObjectCount(), 1u);
  EXPECT_TRUE(api_.Object(kNs, other.request_name).has_value());
  // The namespace was not given: the list was cluster-wide, by labels.
  int cluster_wide_lists = 0;
  for (const auto& request : api_.Requests()) {
    auto selector = request.params.find("labelSelector");
    if (request.method == "GET" && request.path == "/apis/cert-manager.io/v1/certificaterequests" &&
        selector != request.params.end() &&
        selector->second.find("certmount.io/volume=" + IdLabelValue(input_.volume_id)) !=
            std::string::npos) {
      ++cluster_wide_lists;
    }
  }
  EXPECT_EQ(cluster_wide_lists, 1);
}

TEST_F(CertManagerIssuerTest, FailedRetirementIsRetriedUntilTheServerConfirms) {
  ASSERT_TRUE(Issue().ok());
  api_.FailNext("DELETE", 3, 403);
  issuer_->Retire(kNs, input_.volume_id, std::nullopt);
  EXPECT_TRUE(api_.WaitUntil([&] { return api_.ObjectCount() == 0; }));
  EXPECT_EQ(api_.Count("DELETE", "/apis/cert-manager.io/v1/namespaces/"), 4);
}

TEST_F(CertManagerIssuerTest, RetireAllExceptDeletesThisNodesRequestsOfVolumesWithoutARow) {
  MakeIssuer(api_.url(), 1, /*retire_backoff=*/300ms);
  IssueInput live = input_;
  live.volume_id = "csi-live";
  live.request_name = CertificateRequestName(live.volume_id, 0);
  ASSERT_TRUE(issuer_->Issue(live, std::chrono::steady_clock::now() + 10s, {}).ok());
  ASSERT_TRUE(Issue().ok());  // input_.volume_id: no row
  json foreign = api_.Object(kNs, input_.request_name).value();
  foreign["metadata"]["name"] = "other-node-request";
  foreign["metadata"]["labels"]["certmount.io/node"] = IdLabelValue("node-2");
  api_.Put(foreign);

  // The first try fails; a volume published meanwhile is not touched by the retry.
  api_.FailNext("GET", 1, 403);
  issuer_->RetireAllExcept({live.volume_id});
  issuer_->WaitForRetirements();
  IssueInput fresh = input_;
  fresh.volume_id = "csi-fresh";
  fresh.request_name = CertificateRequestName(fresh.volume_id, 0);
  ASSERT_TRUE(issuer_->Issue(fresh, std::chrono::steady_clock::now() + 10s, {}).ok());
  EXPECT_TRUE(api_.WaitUntil([&] { return !api_.Object(kNs, input_.request_name).has_value(); }));
  issuer_->WaitForRetirements();
  EXPECT_TRUE(api_.Object(kNs, live.request_name).has_value());
  EXPECT_TRUE(api_.Object(kNs, fresh.request_name).has_value());
  EXPECT_TRUE(api_.Object(kNs, "other-node-request").has_value());
  EXPECT_EQ(api_.ObjectCount(), 3u);
}

}  // namespace
}  // namespace certmount
