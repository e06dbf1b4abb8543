// churn_bench: a node's worth of pods started at once against the real
// certmountd with the cert-manager issuer, its Kubernetes client throttled
// as configured (--qps, --burst), and kubelet's retries on top.
//
// The fake API server of the tests plays the API server and cert-manager
// (signing at once, or --sign-delay-ms after the create). Every pod exists
// there on the daemon's node, with its own namespace, name, UID and service
// account, and gets one ephemeral volume whose context carries kubelet's pod
// info keys. One thread per pod plays kubelet for that volume:
//
//   - NodePublishVolume with a client deadline far above --publish-timeout,
//     so each call's wall time is the daemon's own answer time;
//   - on an error, NodeUnpublishVolume first when the error is one kubelet
//     treats as "maybe still in progress" (CANCELLED, DEADLINE_EXCEEDED,
//     UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED), then a retry after the
//     volume's backoff: 0.5 s after the first failure, doubling up to
//     2 min 2 s, counted from the failure, as kubelet's per-volume backoff;
//   - after an OK, the certificate at the target is checked with OpenSSL:
//     tls.crt must verify against the fake's signer CA and against the
//     target's ca.crt, and tls.key must match it.
//
// Prints one line per figure (seconds until every pod is published against
// the floor, API calls per pod by kind, failed attempts by gRPC code,
// publishes that answered after --publish-timeout + 100 ms, OKs without a
// good certificate) and exits 1 when a pod is not published within
// --give-up-seconds or any OK came without a good certificate.
//
// Needs root: the daemon bind-mounts. Everything lives on a private tmpfs
// that is swept of mounts and removed at the end, also after a failure or
// SIGINT/SIGTERM (the daemon gets SIGTERM, then every mount under the tmpfs
// is detached).
//
//   sudo build/churn_bench --pods 110
//   sudo build/churn_bench --pods 40 --qps 2 --burst 2 --publish-timeout 4s
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "issue/go_duration.h"
#include "support/daemon.h"
#include "support/fake_kube_api.h"
#include "support/mounts.h"
#include "support/x509_inspect.h"

namespace {

using namespace certmount::testing;
using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// kubelet's per-operation backoff (exponential, per volume and pod).
constexpr auto kFirstBackoff = std::chrono::milliseconds(500);
constexpr auto kMaxBackoff = std::chrono::minutes(2) + std::chrono::seconds(2);
// A publish answering later than the daemon's own timeout plus this overran it.
constexpr auto kOverrunSlack = std::chrono::milliseconds(100);

struct Options {
  int pods = 110;
  double qps = 5;  // certmountd's default --kube-api-qps
  int burst = 10;  // and --kube-api-burst
  std::string publish_timeout = "60s";
  int sign_delay_ms = 0;
  double give_up_seconds = 600;
  std::string key_algorithm;  // empty: the driver's default
  bool unpublish_after_uncertain = true;
  std::string daemon_log;
};

volatile sig_atomic_t g_signalled = 0;
void OnSignal(int) { g_signalled = 1; }

const char* CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  if (index < 0 || index >= static_cast<int>(std::size(kNames))) return "CODE?";
  return kNames[index];
}

// A tmpfs that holds the daemon's sockets, data and targets. Private, so the
// mounts below it do not propagate anywhere; the destructor detaches every
// mount still below it, then the tmpfs, then removes the directory.
class Scratch {
 public:
  Scratch() {
    char path_template[] = "/tmp/churn-bench-XXXXXX";
    if (mkdtemp(path_template) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = path_template;
    if (mount("tmpfs", path_.c_str(), "tmpfs", 0, "mode=0755") != 0) {
      std::filesystem::remove(path_);
      throw std::runtime_error("cannot mount a tmpfs on " + path_ + ": " + strerror(errno));
    }
    mount(nullptr, path_.c_str(), nullptr, MS_PRIVATE, nullptr);
  }
  ~Scratch() { Sweep(); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

  // Returns how many mounts below the tmpfs were still there.
  int Sweep() {
    if (path_.empty()) return 0;
    std::vector<std::string> points = MountPointsUnder(path_);
    int left = 0;
    // Children before parents; the tmpfs itself last.
    for (auto it = points.rbegin(); it != points.rend(); ++it) {
      if (*it != path_) ++left;
      umount2(it->c_str(), MNT_DETACH);
    }
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    path_.clear();
    return left;
  }

 private:
  std::string path_;
};

struct Pod {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string volume_id;
  std::string target;
};

struct PodOutcome {
  bool published = false;
  double published_after_s = 0;          // from the start of all publishes
  std::vector<double> call_seconds;      // each answered publish's wall time
  std::vector<grpc::StatusCode> errors;  // each failed publish's code
  int unpublishes = 0;
  std::vector<grpc::StatusCode> unpublish_errors;
  std::string bad_certificate;  // why an OK came without a good one
  bool cancelled_at_give_up = false;
};

// Empty when `target` holds a certificate signed by the fake's CA, with
// ca.crt that verifies it and the key that belongs to it.
std::string CheckCertificate(const std::string& target, const std::string& signer_ca_path) {
  const std::string crt = target + "/tls.crt";
  const std::string key = target + "/tls.key";
  const std::string ca = target + "/ca.crt";
  for (const std::string& file : {crt, key, ca}) {
    if (!std::filesystem::is_regular_file(file)) return file + " is missing";
  }
  if (std::string error = VerifyChain(crt, signer_ca_path); !error.empty()) {
    return "tls.crt does not verify against the signer CA: " + error;
  }
  if (std::string error = VerifyChain(crt, ca); !error.empty()) {
    return "tls.crt does not verify against ca.crt: " + error;
  }
  if (!KeyMatchesCertificate(key, crt)) return "tls.key does not match tls.crt";
  return "";
}

// The calls in flight, so that a give-up or a signal can cancel them.
class InFlight {
 public:
  explicit InFlight(size_t slots) : contexts_(slots, nullptr) {}
  void Set(size_t slot, grpc::ClientContext* context) {
    std::lock_guard lock(mutex_);
    contexts_[slot] = context;
    if (context != nullptr && cancelled_) context->TryCancel();
  }
  void CancelAll() {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    for (grpc::ClientContext* context : contexts_) {
      if (context != nullptr) context->TryCancel();
    }
  }

 private:
  std::mutex mutex_;
  std::vector<grpc::ClientContext*> contexts_;
  bool cancelled_ = false;
};

struct Shared {
  Daemon* daemon;
  std::string signer_ca_path;
  std::chrono::milliseconds call_deadline;
  bool unpublish_after_uncertain;
  std::latch* start_gate;
  Clock::time_point start;
  std::atomic<bool> stop{false};
  std::atomic<int> published{0};
  InFlight* in_flight;
};

// Sleeps until `until` or until the run stops.
void SleepUntil(const Shared& shared, Clock::time_point until) {
  while (!shared.stop && Clock::now() < until) {
    std::this_thread::sleep_for(
        std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(50)));
  }
}

// kubelet's side of one pod's volume, until published or stopped.
void PlayKubelet(Shared& shared, size_t slot, const Pod& pod,
                 const csi::v1::NodePublishVolumeRequest& request, PodOutcome& out) {
  shared.start_gate->wait();
  Clock::duration backoff = kFirstBackoff;
  while (!shared.stop) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + shared.call_deadline);
    shared.in_flight->Set(slot, &context);
    csi::v1::NodePublishVolumeResponse response;
    const auto called = Clock::now();
    grpc::Status status = shared.daemon->node().NodePublishVolume(&context, request, &response);
    const auto answered = Clock::now();
    shared.in_flight->Set(slot, nullptr);
    if (shared.stop && status.error_code() == grpc::StatusCode::CANCELLED) {
      out.cancelled_at_give_up = true;  // our cancel, not the daemon's answer
      return;
    }
    out.call_seconds.push_back(Seconds(answered - called).count());
    if (status.ok()) {
      out.bad_certificate = CheckCertificate(pod.target, shared.signer_ca_path);
      out.published = true;
      out.published_after_s = Seconds(answered - shared.start).count();
      ++shared.published;
      return;
    }
    out.errors.push_back(status.error_code());
    if (shared.unpublish_after_uncertain && KubeletSeesUncertain(status)) {
      grpc::ClientContext unpublish_context;
      unpublish_context.set_deadline(std::chrono::system_clock::now() + shared.call_deadline);
      shared.in_flight->Set(slot, &unpublish_context);
      csi::v1::NodeUnpublishVolumeRequest unpublish;
      unpublish.set_volume_id(pod.volume_id);
      unpublish.set_target_path(pod.target);
      csi::v1::NodeUnpublishVolumeResponse unpublished;
      grpc::Status undone =
          shared.daemon->node().NodeUnpublishVolume(&unpublish_context, unpublish, &unpublished);
      shared.in_flight->Set(slot, nullptr);
      ++out.unpublishes;
      if (!undone.ok() && !shared.stop) out.unpublish_errors.push_back(undone.error_code());
      // kubelet removes the target directory after an unpublish; the
      // parent stays, and the next publish needs it.
      std::error_code ignored;
      std::filesystem::create_directories(std::filesystem::path(pod.target).parent_path(), ignored);
    }
    SleepUntil(shared, answered + backoff);
    backoff = std::min<Clock::duration>(backoff * 2, kMaxBackoff);
  }
}

std::string Tally(const std::vector<grpc::StatusCode>& codes) {
  std::map<std::string, int> counts;
  for (grpc::StatusCode code : codes) ++counts[CodeName(code)];
  std::string text;
  for (const auto& [name, count] : counts) {
    text += (text.empty() ? "" : ", ") + name + " " + std::to_string(count);
  }
  return text;
}

// The daemon's API calls by kind: "pod GET", "CertificateRequest POST", and
// the rest by method and resource.
std::string KindOf(const RecordedRequest& request) {
  static const std::regex kPod("^/api/v1/namespaces/[^/]+/pods/[^/]+$");
  static const std::regex kRequests(
      "^/apis/cert-manager\\.io/v1(/namespaces/[^/]+)?/certificaterequests(/[^/]+)?$");
  std::smatch match;
  if (request.method == "GET" && std::regex_match(request.path, kPod)) return "pod GET";
  if (std::regex_match(request.path, match, kRequests)) {
    if (request.method == "POST") return "CertificateRequest POST";
    if (request.method == "GET" && !match[2].matched) return "CertificateRequest LIST";
    return "CertificateRequest " + request.method;
  }
  if (request.path == "/api/v1/pods") return "pod LIST";
  return request.method + " " + request.path;
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

int Run(const Options& options) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "churn_bench: must run as root (the daemon mounts)\n");
    return 2;
  }
  certmount::Result<std::chrono::nanoseconds> timeout =
      certmount::ParseGoDuration(options.publish_timeout);
  if (!timeout.ok() || timeout->count() <= 0) {
    std::fprintf(stderr, "churn_bench: --publish-timeout %s is not a positive duration\n",
                 options.publish_timeout.c_str());
    return 2;
  }
  const auto publish_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout);
  // Far above the daemon's own bound, so its answer time is what is seen;
  // kubelet's is 2 min whatever the driver's timeout.
  const auto call_deadline = publish_timeout * 2 + std::chrono::minutes(2);

  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  // The machine may be shared; the figures depend on what else runs.
  double load[3] = {0, 0, 0};
  std::ifstream("/proc/loadavg") >> load[0] >> load[1] >> load[2];

  Scratch scratch;
  FakeKubeApi api;
  api.SetSignDelay(std::chrono::milliseconds(options.sign_delay_ms));
  const std::string signer_ca_path = scratch.Sub("signer-ca.crt");
  std::ofstream(signer_ca_path) << api.signer_ca_pem();
  const std::string kubeconfig =
      WriteKubeconfig(scratch.Sub("kubeconfig"), api.url(), api.server_ca_pem());

  std::vector<Pod> pods(options.pods);
  std::vector<csi::v1::NodePublishVolumeRequest> requests(options.pods);
  Daemon daemon(scratch.Sub("node"));
  for (int i = 0; i < options.pods; ++i) {
    Pod& pod = pods[i];
    char uid[64];
    std::snprintf(uid, sizeof(uid), "c4a0%04x-5e1f-4b2d-8c3e-%012x", i, 0x6a7b0000 + i);
    pod.namespace_ = "churn-" + std::to_string(i);
    pod.name = "app-" + std::to_string(i);
    pod.uid = uid;
    pod.volume_id = "csi-churn-" + std::to_string(i);
    pod.target = daemon.PodTarget(pod.uid);
    api.PutPod(pod.namespace_, pod.name, pod.uid);
    std::map<std::string, std::string> context = {
        {"csi.storage.k8s.io/pod.name", pod.name},
        {"csi.storage.k8s.io/pod.namespace", pod.namespace_},
        {"csi.storage.k8s.io/pod.uid", pod.uid},
        {"csi.storage.k8s.io/serviceAccount.name", "sa-" + std::to_string(i)},
        {"csi.cert-manager.io/issuer-name", "ca"},
        {"csi.cert-manager.io/dns-names", "${POD_NAME}.${POD_NAMESPACE}.svc"}};
    if (!options.key_algorithm.empty()) {
      context["csi.cert-manager.io/key-algorithm"] = options.key_algorithm;
    }
    requests[i] = KubeletPublishRequest(pod.volume_id, pod.target, context);
  }

  if (!daemon.Start({"--issuer=cert-manager", "--kubeconfig=" + kubeconfig,
                     "--kube-api-qps=" + std::to_string(options.qps),
                     "--kube-api-burst=" + std::to_string(options.burst),
                     "--publish-timeout=" + options.publish_timeout})) {
    std::fprintf(stderr, "certmountd did not start:\n%s\n", daemon.log().c_str());
    return 1;
  }

  std::latch start_gate(1);
  InFlight in_flight(pods.size());
  Shared shared;
  shared.daemon = &daemon;
  shared.signer_ca_path = signer_ca_path;
  shared.call_deadline = call_deadline;
  shared.unpublish_after_uncertain = options.unpublish_after_uncertain;
  shared.start_gate = &start_gate;
  shared.in_flight = &in_flight;
  std::vector<PodOutcome> outcomes(pods.size());
  std::vector<std::thread> kubelets;
  kubelets.reserve(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) {
    kubelets.emplace_back([&, i] { PlayKubelet(shared, i, pods[i], requests[i], outcomes[i]); });
  }
  shared.start = Clock::now();
  start_gate.count_down();

  // Progress on stderr every 10 s; stops the run at the give-up time or a signal.
  const auto give_up_at =
      shared.start + std::chrono::duration_cast<Clock::duration>(Seconds(options.give_up_seconds));
  auto next_report = shared.start + std::chrono::seconds(10);
  bool gave_up = false;
  while (shared.published < options.pods) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = Clock::now();
    if (now >= give_up_at || g_signalled) {
      gave_up = now >= give_up_at;
      shared.stop = true;
      in_flight.CancelAll();
      break;
    }
    if (now >= next_report) {
      std::fprintf(stderr, "  %4.0f s: %d of %d published\n", Seconds(now - shared.start).count(),
                   shared.published.load(), options.pods);
      next_report += std::chrono::seconds(10);
    }
  }
  for (std::thread& kubelet : kubelets) kubelet.join();
  const double elapsed_s = Seconds(Clock::now() - shared.start).count();

  std::vector<RecordedRequest> recorded = api.Requests();
  const int daemon_exit = daemon.Terminate();
  // The daemon is the only child, so the reaped children's time is its own.
  rusage own{}, children{};
  getrusage(RUSAGE_SELF, &own);
  getrusage(RUSAGE_CHILDREN, &children);
  auto cpu_s = [](const rusage& u) {
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  if (!options.daemon_log.empty()) std::ofstream(options.daemon_log) << daemon.log();

  // --- Figures -----------------------------------------------------------------
  int published = 0;
  double last_published_s = 0;
  std::vector<double> published_after;
  std::vector<double> call_seconds;
  std::vector<grpc::StatusCode> errors;
  std::vector<grpc::StatusCode> unpublish_errors;
  int unpublishes = 0;
  int cancelled = 0;
  int bad_certificates = 0;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const PodOutcome& o = outcomes[i];
    if (o.published) {
      ++published;
      last_published_s = std::max(last_published_s, o.published_after_s);
      published_after.push_back(o.published_after_s);
    }
    call_seconds.insert(call_seconds.end(), o.call_seconds.begin(), o.call_seconds.end());
    errors.insert(errors.end(), o.errors.begin(), o.errors.end());
    unpublish_errors.insert(unpublish_errors.end(), o.unpublish_errors.begin(),
                            o.unpublish_errors.end());
    unpublishes += o.unpublishes;
    cancelled += o.cancelled_at_give_up ? 1 : 0;
    if (o.published && !o.bad_certificate.empty()) {
      ++bad_certificates;
      if (bad_certificates <= 5) {
        std::fprintf(stderr, "%s/%s: OK without a good certificate: %s\n",
                     pods[i].namespace_.c_str(), pods[i].name.c_str(), o.bad_certificate.c_str());
      }
    }
  }
  std::map<std::string, int> kinds;
  int calls = 0;
  // Every call since the daemon started, its startup list included: the
  // daemon is the fake's only client.
  for (const RecordedRequest& request : recorded) {
    if (request.params.count("watch") != 0) continue;
    ++calls;
    ++kinds[KindOf(request)];
  }
  std::string others;
  int other_calls = 0;
  for (const auto& [kind, count] : kinds) {
    if (kind == "pod GET" || kind == "CertificateRequest POST") continue;
    other_calls += count;
    others += (others.empty() ? "" : ", ") + kind + " " + std::to_string(count);
  }
  const auto limit = publish_timeout + kOverrunSlack;
  const double limit_s = Seconds(limit).count();
  const int overruns = static_cast<int>(std::count_if(call_seconds.begin(), call_seconds.end(),
                                                      [&](double s) { return s > limit_s; }));
  const double floor_s = std::max(0, options.pods - options.burst) / options.qps;
  const double n = static_cast<double>(options.pods);

  std::printf(
      "churn_bench: pods %d, --kube-api-qps %g, --kube-api-burst %d, --publish-timeout %s, "
      "sign delay %d ms, give up after %g s, unpublish after uncertain errors %s\n",
      options.pods, options.qps, options.burst, options.publish_timeout.c_str(),
      options.sign_delay_ms, options.give_up_seconds,
      options.unpublish_after_uncertain ? "yes" : "no");
  std::printf("certmountd: %s\n", CERTMOUNTD_PATH);
  if (published == options.pods) {
    std::printf("published: %d of %d in %.2f s (floor (pods - burst) / qps = %.2f s", published,
                options.pods, last_published_s, floor_s);
    if (floor_s > 0) std::printf("; x%.2f", last_published_s / floor_s);
    std::printf(")\n");
  } else {
    std::printf("published: %d of %d, gave up at %.2f s%s (floor (pods - burst) / qps = %.2f s)\n",
                published, options.pods, elapsed_s, gave_up ? "" : " (signal)", floor_s);
  }
  std::printf("time to published: p50 %.2f s, p90 %.2f s, max %.2f s\n",
              Percentile(published_after, 0.5), Percentile(published_after, 0.9), last_published_s);
  std::printf(
      "api calls per pod: %.2f (%d non-watch calls: pod GET %d, CertificateRequest POST %d, "
      "other %d%s%s)\n",
      calls / n, calls, kinds["pod GET"], kinds["CertificateRequest POST"], other_calls,
      others.empty() ? "" : ": ", others.c_str());
  // What the limiter alone allows for the calls actually made: a daemon
  // that makes more calls per pod has a higher floor than the one above.
  std::printf("api limiter time for the calls made: (calls - burst) / qps = %.2f s\n",
              std::max(0, calls - options.burst) / options.qps);
  std::printf("publish calls: %zu answered (OK %d), %d cancelled at give-up\n", call_seconds.size(),
              published, cancelled);
  std::printf("failed attempts: %zu%s%s%s\n", errors.size(), errors.empty() ? "" : " (",
              Tally(errors).c_str(), errors.empty() ? "" : ")");
  std::printf("unpublish after uncertain: %d (failed %zu%s%s)\n", unpublishes,
              unpublish_errors.size(), unpublish_errors.empty() ? "" : ": ",
              Tally(unpublish_errors).c_str());
  std::printf("deadline overruns: %d (publishes answered after %.3f s; slowest %.3f s)\n", overruns,
              limit_s, Percentile(call_seconds, 1.0));
  std::printf("ok without certificate: %d\n", bad_certificates);
  std::printf(
      "cpu: certmountd %.1f s, churn_bench (fake API server, kubelets, checks) %.1f s, "
      "%u cores, load average at the start %.2f %.2f %.2f\n",
      cpu_s(children), cpu_s(own), std::thread::hardware_concurrency(), load[0], load[1], load[2]);
  if (daemon_exit != 0) std::printf("certmountd exit code after SIGTERM: %d\n", daemon_exit);
  const int leftover = scratch.Sweep();
  // The daemon keeps volumes mounted across its own exit (the pods still
  // use them), so their bind mounts and its data tmpfs are still there.
  std::printf("mounts detached at the end: %d\n", leftover);
  std::fflush(stdout);
  return published == options.pods && bad_certificates == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"churn_bench: pods published at once through a throttled Kubernetes client"};
  app.add_option("--pods", options.pods, "pods (one volume each) started at once")
      ->check(CLI::Range(1, 2000))
      ->capture_default_str();
  app.add_option("--qps", options.qps, "certmountd's --kube-api-qps")
      ->check(CLI::Range(0.001, 100000.0))
      ->capture_default_str();
  app.add_option("--burst", options.burst, "certmountd's --kube-api-burst")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--publish-timeout", options.publish_timeout, "certmountd's --publish-timeout")
      ->capture_default_str();
  app.add_option("--sign-delay-ms", options.sign_delay_ms,
                 "the fake cert-manager signs this long after each create")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--give-up-seconds", options.give_up_seconds,
                 "stop (and fail) when not every pod is published by then")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--key-algorithm", options.key_algorithm,
                 "csi.cert-manager.io/key-algorithm for every volume (default: not set)");
  app.add_flag("!--no-unpublish-after-uncertain", options.unpublish_after_uncertain,
               "retry without the NodeUnpublishVolume that otherwise follows an uncertain error");
  app.add_option("--daemon-log", options.daemon_log, "write certmountd's log here at the end");
  CLI11_PARSE(app, argc, argv);
  try {
    return Run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "churn_bench: %s\n", e.what());
    return 1;
  }
}
