// The Kubernetes API client against the in-process fake API server: config
// parsing, errors, retries, rate limit, token rotation, watches, and the
// token never reaching a log.
#include "kube/client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "kube/base64.h"
#include "kube/config.h"
#include "kube/http_status.h"
#include "kube/rate_limiter.h"
#include "kube/watcher.h"
#include "support/fake_kube_api.h"
#include "support/temp_dir.h"

namespace certmount::kube {
namespace {

using ::certmount::testing::FakeKubeApi;
using ::certmount::testing::TempDir;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kCollection = "/apis/cert-manager.io/v1/certificaterequests";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A clock moved only by ManualSleeper, with nanosecond steady time.
class ManualClock final : public Clock {
 public:
  int64_t NowUnix() const override { return 1'700'000'000 + nanos_.load() / 1'000'000'000; }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(nanos_.load()));
  }
  void AdvanceTo(std::chrono::steady_clock::time_point t) {
    int64_t target = t.time_since_epoch() / std::chrono::nanoseconds(1);
    int64_t current = nanos_.load();
    while (current < target && !nanos_.compare_exchange_weak(current, target)) {
    }
  }

 private:
  std::atomic<int64_t> nanos_{1'000'000'000'000};
};

// Records every wait and moves the clock instead of sleeping.
class ManualSleeper final : public Sleeper {
 public:
  explicit ManualSleeper(ManualClock* clock) : clock_(clock) {}
  bool SleepUntil(std::chrono::steady_clock::time_point until, std::stop_token stop) override {
    std::lock_guard lock(mutex_);
    waits_.push_back(
        std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_->SteadyNow()));
    clock_->AdvanceTo(until);
    return !stop.stop_requested();
  }
  std::vector<std::chrono::milliseconds> waits() {
    std::lock_guard lock(mutex_);
    return waits_;
  }

 private:
  ManualClock* clock_;
  std::mutex mutex_;
  std::vector<std::chrono::milliseconds> waits_;
};

KubeConfig ConfigFor(const FakeKubeApi& api, const std::string& token = FakeKubeApi::kToken) {
  KubeConfig config;
  config.server = api.url();
  config.ca_pem = api.server_ca_pem();
  config.token = token;
  return config;
}

std::unique_ptr<Client> MakeClient(KubeConfig config, ClientOptions options = {}) {
  Result<std::unique_ptr<Client>> client = Client::Create(std::move(config), options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(*client);
}

auto Soon() { return std::chrono::steady_clock::now() + 10s; }

json Request(const std::string& ns, const std::string& name, const std::string& node = "n") {
  return {{"apiVersion", "cert-manager.io/v1"},
          {"kind", "CertificateRequest"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"node", node}}}}},
          {"spec", {{"request", "eA=="}}}};
}

// --- configuration ------------------------------------------------------------

TEST(KubeconfigTest, InlineDataIsDecodedIntoMemory) {
  TempDir dir;
  const std::string path = dir.Sub("config");
  WriteFile(path, R"(apiVersion: v1
kind: Config
current-context: main
contexts:
- name: other
  context: {cluster: c2, user: u2}
- name: main
  context: {cluster: c1, user: u1}
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: )" +
                      Base64Encode("CA PEM") + R"(
- name: c2
  cluster: {server: https://other:443}
users:
- name: u1
  user:
    client-certificate-data: )" +
                      Base64Encode("CERT PEM") + R"(
    client-key-data: )" +
                      Base64Encode("KEY PEM") + R"(
    token: abc
- name: u2
  user: {token: other-token}
)");
  Result<KubeConfig> config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://10.0.0.1:6443");
  EXPECT_EQ(config->ca_pem, "CA PEM");
  EXPECT_EQ(config->client_certificate_pem, "CERT PEM");
  EXPECT_EQ(config->client_key_pem, "KEY PEM");
  EXPECT_EQ(config->token, "abc");

  Result<KubeConfig> other = LoadKubeconfig(path, "other");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->server, "https://other:443");
  EXPECT_EQ(other->token, "other-token");
  EXPECT_TRUE(other->ca_pem.empty());

  Result<KubeConfig> missing = LoadKubeconfig(path, "nope");
  EXPECT_EQ(missing.status().code(), Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST(KubeconfigTest, FilesAreRelativeToTheKubeconfig) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("pki"));
  WriteFile(dir.Sub("pki/ca.crt"), "CA FROM FILE");
  WriteFile(dir.Sub("pki/client.crt"), "CERT FROM FILE");
  WriteFile(dir.Sub("pki/client.key"), "KEY FROM FILE");
  WriteFile(dir.Sub("config"), R"(current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h:1", certificate-authority: pki/ca.crt}}]
users: [{name: u, user: {client-certificate: pki/client.crt, client-key: pki/client.key, tokenFile: pki/token}}]
)");
  Result<KubeConfig> config = LoadKubeconfig(dir.Sub("config"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->ca_pem, "CA FROM FILE");
  EXPECT_EQ(config->client_certificate_pem, "CERT FROM FILE");
  EXPECT_EQ(config->client_key_pem, "KEY FROM FILE");
  EXPECT_EQ(config->token_file, dir.Sub("pki/token"));
}

TEST(KubeconfigTest, BadInputIsRefused) {
  TempDir dir;
  WriteFile(dir.Sub("exec"), R"(current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://h:1"}}]
users: [{name: u, user: {exec: {command: aws}}}]
)");
  EXPECT_EQ(LoadKubeconfig(dir.Sub("exec")).status().code(), Code::kInvalidArgument);
  WriteFile(dir.Sub("yaml"), "current-context: [unclosed\n");
  EXPECT_EQ(LoadKubeconfig(dir.Sub("yaml")).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(LoadKubeconfig(dir.Sub("absent")).status().code(), Code::kFailedPrecondition);
}

// Found by fuzz/kubeconfig_fuzz.cc: a byte >= 0x80 in inline base64 data made
// yaml-cpp's decoder read outside its table and crash certmountd at start.
TEST(KubeconfigTest, BytesOutsideTheBase64AlphabetAreRefusedNotDecoded) {
  TempDir dir;
  WriteFile(dir.Sub("high"),
            "current-context: x\n"
            "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "clusters: [{name: c, cluster: {server: \"https://h:1\"}}]\n"
            "users: [{name: u, user: {client-key-data: \"LS0tL\xd7"
            "1CRUdJTiB\"}}]\n");
  EXPECT_EQ(LoadKubeconfig(dir.Sub("high")).status().code(), Code::kInvalidArgument);
  for (const char* text : {"LS0t\xd7", "\xff\xff\xff\xff", "ab!d", "YWJj\x80"}) {
    EXPECT_EQ(Base64Decode(text).status().code(), Code::kInvalidArgument) << text;
  }
  EXPECT_EQ(*Base64Decode("YWJj\nZGVm"), "abcdef");
}

TEST(InClusterConfigTest, ReadsEnvironmentAndServiceAccountDir) {
  TempDir dir;
  WriteFile(dir.Sub("ca.crt"), "CLUSTER CA");
  WriteFile(dir.Sub("token"), "sa-token\n");
  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  Result<KubeConfig> config = LoadInClusterConfig(dir.path().string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://[fd00::1]:443");
  EXPECT_EQ(config->ca_pem, "CLUSTER CA");
  EXPECT_EQ(config->token_file, dir.Sub("token"));
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(LoadInClusterConfig(dir.path().string()).status().code(), Code::kFailedPrecondition);
  ::unsetenv("KUBERNETES_SERVICE_PORT");
}

// --- requests ---------------------------------------------------------------------

TEST(KubeClientTest, ErrorsCarryTheApiServersMessage) {
  FakeKubeApi api;
  auto client = MakeClient(ConfigFor(api));
  Result<Response> list = client->Call({"GET", kCollection, "", ""}, Soon(), {});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(json::parse(list->body)["kind"], "CertificateRequestList");

  Result<Response> missing = client->Call(
      {"GET", "/apis/cert-manager.io/v1/namespaces/ns/certificaterequests/x", "", ""}, Soon(), {});
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("\"x\" not found"), std::string::npos);

  const std::string create = "/apis/cert-manager.io/v1/namespaces/ns/certificaterequests";
  api.SetPolicy(testing::SignerPolicy::kPending);
  ASSERT_TRUE(client->Call({"POST", create, Request("ns", "a").dump(), ""}, Soon(), {}).ok());
  Result<Response> again =
      client->Call({"POST", create, Request("ns", "a").dump(), ""}, Soon(), {});
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos);

  auto intruder = MakeClient(ConfigFor(api, "wrong-token"));
  Result<Response> denied = intruder->Call({"GET", kCollection, "", ""}, Soon(), {});
  EXPECT_EQ(denied.status().code(), Code::kPermissionDenied);
  EXPECT_NE(denied.status().message().find("401"), std::string::npos);
}

TEST(KubeClientTest, StatusMapping) {
  EXPECT_EQ(StatusFromHttp(400, "").code(), Code::kInvalidArgument);
  EXPECT_EQ(StatusFromHttp(422, "").code(), Code::kInvalidArgument);
  EXPECT_EQ(StatusFromHttp(403, "").code(), Code::kPermissionDenied);
  EXPECT_TRUE(IsGone(StatusFromHttp(410, "")));
  EXPECT_FALSE(IsGone(StatusFromHttp(409, "")));
  EXPECT_EQ(StatusFromHttp(503, "").code(), Code::kUnavailable);
  EXPECT_EQ(StatusFromHttp(429, "").code(), Code::kResourceExhausted);
  Status status = StatusFromHttp(
      422, R"({"kind":"Status","reason":"Invalid","message":"spec.request: Required value"})");
  EXPECT_EQ(status.message(), "API server answered 422 Invalid: spec.request: Required value");
}

TEST(KubeClientTest, RetriesHonourRetryAfter) {
  FakeKubeApi api;
  ManualClock clock;
  ManualSleeper sleeper(&clock);
  ClientOptions options;
  options.clock = &clock;
  options.sleeper = &sleeper;
  auto client = MakeClient(ConfigFor(api), options);
  api.FailNext("GET", 2, 429, 3);
  Result<Response> list = client->Call({"GET", kCollection, "", ""}, clock.SteadyNow() + 60s, {});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(api.Count("GET", kCollection), 3);
  EXPECT_EQ(sleeper.waits(), (std::vector<std::chrono::milliseconds>{3s, 3s}));
}

TEST(KubeClientTest, ServerErrorsAreRetriedWithBackoff) {
  FakeKubeApi api;
  ManualClock clock;
  ManualSleeper sleeper(&clock);
  ClientOptions options;
  options.clock = &clock;
  options.sleeper = &sleeper;
  auto client = MakeClient(ConfigFor(api), options);
  api.FailNext("GET", 3, 500);
  Result<Response> list = client->Call({"GET", kCollection, "", ""}, clock.SteadyNow() + 60s, {});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(api.Count("GET", kCollection), 4);
  EXPECT_EQ(sleeper.waits(), (std::vector<std::chrono::milliseconds>{250ms, 500ms, 1000ms}));
}

TEST(KubeClientTest, RetriesStopAtTheDeadline) {
  FakeKubeApi api;
  ManualClock clock;
  ManualSleeper sleeper(&clock);
  ClientOptions options;
  options.clock = &clock;
  options.sleeper = &sleeper;
  auto client = MakeClient(ConfigFor(api), options);
  api.FailNext("GET", 5, 429, 100);
  Result<Response> list = client->Call({"GET", kCollection, "", ""}, clock.SteadyNow() + 10s, {});
  EXPECT_EQ(list.status().code(), Code::kResourceExhausted);
  EXPECT_NE(list.status().message().find("injected failure 429"), std::string::npos);
  EXPECT_EQ(api.Count("GET", kCollection), 1);
  EXPECT_TRUE(sleeper.waits().empty());
}

TEST(KubeClientTest, ClientSideRateLimit) {
  FakeKubeApi api;
  ManualClock clock;
  ManualSleeper sleeper(&clock);
  ClientOptions options;
  options.clock = &clock;
  options.sleeper = &sleeper;
  options.qps = 2;
  options.burst = 3;
  auto client = MakeClient(ConfigFor(api), options);
  const auto start = clock.SteadyNow();
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(client->Call({"GET", kCollection, "", ""}, clock.SteadyNow() + 60s, {}).ok());
  }
  EXPECT_EQ(api.Count("GET", kCollection), 7);
  // Three from the burst, then one every half second.
  EXPECT_EQ(sleeper.waits().size(), 4u);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(clock.SteadyNow() - start),
            2000ms);

  // A token that would come after the deadline is not waited for.
  Result<Response> late = client->Call({"GET", kCollection, "", ""}, clock.SteadyNow() + 100ms, {});
  EXPECT_EQ(late.status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(api.Count("GET", kCollection), 7);
}

TEST(RateLimiterTest, AWaiterThatIsCancelledGivesItsTokenBack) {
  ManualClock clock;
  ManualSleeper sleeper(&clock);
  RateLimiter limiter(/*qps=*/1, /*burst=*/1, &clock, &sleeper);
  ASSERT_TRUE(
      limiter.Acquire(1, ApiPriority::kBackground, clock.SteadyNow() + 10s, {}).ok());  // the burst
  std::stop_source cancelled;
  cancelled.request_stop();
  EXPECT_EQ(
      limiter.Acquire(1, ApiPriority::kBackground, clock.SteadyNow() + 10s, cancelled.get_token())
          .code(),
      Code::kCancelled);
  ASSERT_EQ(sleeper.waits().size(), 1u);  // it waited a second, then gave up
  // The second's token is still there for the next caller, taken at once.
  EXPECT_TRUE(limiter.Acquire(1, ApiPriority::kBackground, clock.SteadyNow() + 10s, {}).ok());
  EXPECT_EQ(sleeper.waits().size(), 1u);
}

TEST(RateLimiterTest, NoQpsMeansNoLimit) {
  ManualClock clock;
  ManualSleeper sleeper(&clock);
  RateLimiter limiter(/*qps=*/0, /*burst=*/1, &clock, &sleeper);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(limiter.Acquire(1, ApiPriority::kBackground, clock.SteadyNow(), {}).ok());
  }
  EXPECT_TRUE(sleeper.waits().empty());
}

// --- budgets ----------------------------------------------------------------------

// Clients on a manual clock, with a rate limit the test chooses.
class ApiBudgetTest : public ::testing::Test {
 protected:
  std::unique_ptr<Client> LimitedClient(double qps, int burst) {
    ClientOptions options;
    options.clock = &clock_;
    options.sleeper = &sleeper_;
    options.qps = qps;
    options.burst = burst;
    return MakeClient(ConfigFor(api_), options);
  }
  Result<Response> List(Client& client, std::chrono::steady_clock::duration timeout,
                        ApiBudget* budget = nullptr) {
    return client.Call({"GET", kCollection, "", ""}, clock_.SteadyNow() + timeout, {}, budget);
  }

  FakeKubeApi api_;
  ManualClock clock_;
  ManualSleeper sleeper_{&clock_};
};

TEST_F(ApiBudgetTest, CallsWithABudgetSpendItsTokensAndNoOthers) {
  auto client = LimitedClient(/*qps=*/1, /*burst=*/3);
  Result<ApiBudget> budget = client->Reserve(2, ApiPriority::kPublish, clock_.SteadyNow(), {});
  ASSERT_TRUE(budget.ok()) << budget.status().ToString();
  EXPECT_EQ(budget->remaining(), 2);
  EXPECT_EQ(budget->priority(), ApiPriority::kPublish);
  // Half a second is too soon for a new token.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(List(*client, 500ms, &*budget).ok());
  EXPECT_EQ(budget->remaining(), 0);
  // The third token of the burst is still in the bucket, and only it.
  EXPECT_TRUE(List(*client, 500ms).ok());
  EXPECT_EQ(List(*client, 500ms).status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(api_.Count("GET", kCollection), 3);
  EXPECT_TRUE(sleeper_.waits().empty());
}

TEST_F(ApiBudgetTest, ASpentBudgetWaitsForNewTokens) {
  auto client = LimitedClient(/*qps=*/1, /*burst=*/1);
  Result<ApiBudget> budget = client->Reserve(1, ApiPriority::kWatch, clock_.SteadyNow(), {});
  ASSERT_TRUE(budget.ok()) << budget.status().ToString();
  ASSERT_TRUE(List(*client, 10s, &*budget).ok());
  ASSERT_TRUE(List(*client, 10s, &*budget).ok());
  EXPECT_EQ(sleeper_.waits(), std::vector<std::chrono::milliseconds>{1s});
}

TEST_F(ApiBudgetTest, RetriesTakeNewTokens) {
  auto client = LimitedClient(/*qps=*/1, /*burst=*/1);
  Result<ApiBudget> budget = client->Reserve(1, ApiPriority::kPublish, clock_.SteadyNow(), {});
  ASSERT_TRUE(budget.ok()) << budget.status().ToString();
  api_.FailNext("GET", 1, 500);
  ASSERT_TRUE(List(*client, 10s, &*budget).ok());
  EXPECT_EQ(api_.Count("GET", kCollection), 2);
  // The backoff, then the rest of the second the retry's token took.
  EXPECT_EQ(sleeper_.waits(), (std::vector<std::chrono::milliseconds>{250ms, 750ms}));
}

TEST_F(ApiBudgetTest, UnspentTokensComeBackWhenTheBudgetGoes) {
  auto client = LimitedClient(/*qps=*/1, /*burst=*/3);
  {
    Result<ApiBudget> budget = client->Reserve(3, ApiPriority::kPublish, clock_.SteadyNow(), {});
    ASSERT_TRUE(budget.ok()) << budget.status().ToString();
    ApiBudget moved = std::move(*budget);
    EXPECT_EQ(budget->remaining(), 0);
    ASSERT_EQ(moved.remaining(), 3);
    ASSERT_TRUE(List(*client, 10s, &moved).ok());
    // Nothing left in the bucket while the budget holds two.
    EXPECT_EQ(client->Reserve(1, ApiPriority::kWatch, clock_.SteadyNow(), {}).status().code(),
              Code::kDeadlineExceeded);
  }
  // Its two unspent tokens, and no more (the moved-from one gave none).
  Result<ApiBudget> again = client->Reserve(2, ApiPriority::kBackground, clock_.SteadyNow(), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(client->Reserve(1, ApiPriority::kWatch, clock_.SteadyNow(), {}).status().code(),
            Code::kDeadlineExceeded);
  EXPECT_TRUE(sleeper_.waits().empty());
}

TEST_F(ApiBudgetTest, AReserveThatCouldNotBeMetFailsAtOnceTakingNothing) {
  // The throttled setting that made publishes burn tokens and then fail.
  auto client = LimitedClient(/*qps=*/2, /*burst=*/2);
  ASSERT_TRUE(List(*client, 10s).ok());
  Result<ApiBudget> publish =
      client->Reserve(2, ApiPriority::kPublish, clock_.SteadyNow() + 100ms, {});
  EXPECT_EQ(publish.status().code(), Code::kDeadlineExceeded);
  EXPECT_TRUE(sleeper_.waits().empty());
  // The token left is untouched.
  Result<ApiBudget> one = client->Reserve(1, ApiPriority::kPublish, clock_.SteadyNow(), {});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->remaining(), 1);
}

TEST_F(ApiBudgetTest, MoreCallsThanTheBurstReserveTheBurst) {
  auto client = LimitedClient(/*qps=*/1, /*burst=*/2);
  Result<ApiBudget> budget = client->Reserve(5, ApiPriority::kPublish, clock_.SteadyNow(), {});
  ASSERT_TRUE(budget.ok()) << budget.status().ToString();
  EXPECT_EQ(budget->remaining(), 2);
}

TEST(KubeRequestTest, AggregateFormStillWorksAndDefaultsToBackground) {
  const kube::Request request{"GET", kCollection, "", ""};
  EXPECT_EQ(request.priority, ApiPriority::kBackground);
}

TEST(KubeClientTest, UnreachableServerIsUnavailableQuickly) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);  // nothing listens there now
  KubeConfig config;
  config.server = "https://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  config.token = "t";
  auto client = MakeClient(config);
  auto started = std::chrono::steady_clock::now();
  Result<Response> list = client->Call({"GET", kCollection, "", ""}, Soon(), {});
  EXPECT_EQ(list.status().code(), Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
}

TEST(KubeClientTest, UntrustedServerIsUnavailable) {
  FakeKubeApi api;
  KubeConfig config = ConfigFor(api);
  config.ca_pem = api.signer_ca_pem();  // not the server's CA
  auto client = MakeClient(config);
  EXPECT_EQ(client->Call({"GET", kCollection, "", ""}, Soon(), {}).status().code(),
            Code::kUnavailable);
}

TEST(KubeClientTest, RotatedTokenFileIsReRead) {
  FakeKubeApi api;
  TempDir dir;
  WriteFile(dir.Sub("token"), std::string(FakeKubeApi::kToken) + "\n");
  KubeConfig config = ConfigFor(api, "");
  config.token_file = dir.Sub("token");
  auto client = MakeClient(config);
  ASSERT_TRUE(client->Call({"GET", kCollection, "", ""}, Soon(), {}).ok());

  api.AcceptToken("rotated-token");
  api.RevokeToken(FakeKubeApi::kToken);
  // As kubelet does it: a new file renamed into place.
  WriteFile(dir.Sub("token.new"), "rotated-token");
  std::filesystem::rename(dir.Sub("token.new"), dir.Sub("token"));
  Result<Response> list = client->Call({"GET", kCollection, "", ""}, Soon(), {});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(api.Requests().back().authorization, "Bearer rotated-token");
}

TEST(KubeClientTest, PerRequestTokenOverridesTheConfiguredOne) {
  FakeKubeApi api;
  api.AcceptToken("pod-token");
  auto client = MakeClient(ConfigFor(api, "unknown"));
  ASSERT_TRUE(client->Call({"GET", kCollection, "", "pod-token"}, Soon(), {}).ok());
  EXPECT_EQ(api.Requests().back().authorization, "Bearer pod-token");
}

TEST(KubeClientTest, TokenNeverReachesTheLog) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  logger->set_level(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  {
    FakeKubeApi api;
    ClientOptions options;
    options.initial_backoff = 1ms;
    auto client = MakeClient(ConfigFor(api), options);
    api.FailNext("GET", 2, 500);
    Result<Response> ok = client->Call({"GET", kCollection, "", ""}, Soon(), {});
    EXPECT_TRUE(ok.ok());
    Result<Response> missing = client->Call(
        {"DELETE", "/apis/cert-manager.io/v1/namespaces/a/certificaterequests/b", "", ""}, Soon(),
        {});
    EXPECT_EQ(missing.status().code(), Code::kNotFound);
    EXPECT_EQ(missing.status().message().find(FakeKubeApi::kToken), std::string::npos);
    auto intruder = MakeClient(ConfigFor(api, "secret-wrong-token"));
    Result<Response> denied = intruder->Call({"GET", kCollection, "", ""}, Soon(), {});
    EXPECT_EQ(denied.status().message().find("secret-wrong-token"), std::string::npos);
  }
  spdlog::set_default_logger(previous);
  const std::string log = captured.str();
  EXPECT_NE(log.find("retrying"), std::string::npos) << log;
  EXPECT_EQ(log.find(FakeKubeApi::kToken), std::string::npos) << log;
  EXPECT_EQ(log.find("secret-wrong-token"), std::string::npos) << log;
}

TEST(KubeClientTest, StreamIsCancelledPromptly) {
  FakeKubeApi api;
  auto client = MakeClient(ConfigFor(api));
  std::stop_source stop;
  std::thread canceller([&] {
    api.WaitUntil([&] { return api.open_watches() == 1; });
    stop.request_stop();
  });
  auto started = std::chrono::steady_clock::now();
  Status status = client->Stream({"GET", std::string(kCollection) + "?watch=1", "", ""},
                                 std::chrono::steady_clock::now() + 60s, stop.get_token(),
                                 [](std::string_view) { return true; });
  canceller.join();
  EXPECT_EQ(status.code(), Code::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST(KubeClientTest, StreamEndsAtItsDeadline) {
  FakeKubeApi api;
  auto client = MakeClient(ConfigFor(api));
  Status status = client->Stream({"GET", std::string(kCollection) + "?watch=1", "", ""},
                                 std::chrono::steady_clock::now() + 300ms, {},
                                 [](std::string_view) { return true; });
  EXPECT_EQ(status.code(), Code::kDeadlineExceeded);
}

// --- watches ----------------------------------------------------------------------

struct Seen {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> events;  // type, name
  void Add(const WatchEvent& event) {
    std::lock_guard lock(mutex);
    events.emplace_back(event.type, json::parse(event.object_json)["metadata"]["name"]);
  }
  bool Has(const std::string& type, const std::string& name) {
    std::lock_guard lock(mutex);
    return std::find(events.begin(), events.end(), std::make_pair(type, name)) != events.end();
  }
};

class WatcherTest : public ::testing::TestWithParam<bool> {};

TEST_P(WatcherTest, ResumesAfterDropAndRelistsAfterGone) {
  FakeKubeApi api;
  api.SetGoneAsEvent(GetParam());
  api.SetPolicy(testing::SignerPolicy::kPending);
  api.Put(Request("ns", "before"));
  api.Put(Request("ns", "elsewhere", "other-node"));
  auto client = MakeClient(ConfigFor(api));
  Seen seen;
  WatcherOptions options;
  options.collection_path = kCollection;
  options.label_selector = "node=n";
  options.initial_backoff = 10ms;
  Watcher watcher(client.get(), options, [&](const WatchEvent& event) { seen.Add(event); });
  std::jthread thread([&](std::stop_token stop) { watcher.Run(stop); });

  ASSERT_TRUE(api.WaitUntil([&] { return api.open_watches() == 1; }));
  EXPECT_TRUE(seen.Has("ADDED", "before"));
  EXPECT_FALSE(seen.Has("ADDED", "elsewhere"));

  api.Put(Request("ns", "first"));
  ASSERT_TRUE(api.WaitUntil([&] { return seen.Has("ADDED", "first"); }));

  // A dropped connection resumes from the last version, without a list.
  api.DropWatches();
  api.Put(Request("ns", "while-away"));
  ASSERT_TRUE(api.WaitUntil([&] { return seen.Has("ADDED", "while-away"); }));
  EXPECT_EQ(watcher.lists(), 1);
  std::vector<testing::RecordedRequest> requests = api.Requests();
  std::vector<std::string> watch_versions;
  for (const auto& request : requests) {
    if (request.params.count("watch"))
      watch_versions.push_back(request.params.at("resourceVersion"));
  }
  ASSERT_GE(watch_versions.size(), 2u);
  EXPECT_FALSE(watch_versions[1].empty());
  EXPECT_NE(watch_versions[1], watch_versions[0]);

  // After compaction the old version is gone: list again.
  api.Compact();
  api.DropWatches();
  api.Put(Request("ns", "after-gone"));
  ASSERT_TRUE(
      api.WaitUntil([&] { return watcher.lists() == 2 && seen.Has("ADDED", "after-gone"); }));
  thread.request_stop();
}

INSTANTIATE_TEST_SUITE_P(GoneAsEventOrHttp, WatcherTest, ::testing::Bool());

// A consumer that keeps a copy learns where each list's objects begin and
// end, the first list and the one after 410 alike; watch events come outside.
TEST(WatcherListBoundaries, BracketEveryListAndNothingElse) {
  FakeKubeApi api;
  api.SetPolicy(testing::SignerPolicy::kPending);
  api.Put(Request("ns", "before"));
  auto client = MakeClient(ConfigFor(api));
  std::mutex mu;
  std::vector<std::string> seen;
  auto record = [&](std::string what) {
    std::lock_guard lock(mu);
    seen.push_back(std::move(what));
  };
  WatcherOptions options;
  options.collection_path = kCollection;
  options.initial_backoff = 10ms;
  Watcher watcher(
      client.get(), options,
      [&](const WatchEvent& event) {
        record(event.type + " " + json::parse(event.object_json)["metadata"].value("name", ""));
      },
      [&](ListBoundary boundary) { record(boundary == ListBoundary::kBegin ? "begin" : "end"); });
  std::jthread thread([&](std::stop_token stop) { watcher.Run(stop); });
  ASSERT_TRUE(api.WaitUntil([&] { return api.open_watches() == 1; }));
  api.Put(Request("ns", "watched"));
  auto count = [&] {
    std::lock_guard lock(mu);
    return seen.size();
  };
  ASSERT_TRUE(api.WaitUntil([&] { return count() == 4; }));
  api.Compact();
  api.DropWatches();
  ASSERT_TRUE(api.WaitUntil([&] { return watcher.lists() == 2 && count() == 8; }));
  thread.request_stop();
  thread.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"begin", "ADDED before", "end", "ADDED watched",
                                            "begin", "ADDED before", "ADDED watched", "end"}));
}

}  // namespace
}  // namespace certmount::kube
