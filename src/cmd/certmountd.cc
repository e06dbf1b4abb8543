// certmountd: the CSI node plugin kubelet talks to.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>

#include "common/clock.h"
#include "common/env.h"
#include "common/logging.h"
#include "csi/endpoint.h"
#include "csi/identity_service.h"
#include "csi/metrics_server.h"
#include "csi/node_service.h"
#include "csi/rpc_log.h"
#include "issue/cert_manager_issuer.h"
#include "issue/go_duration.h"
#include "issue/local_ca.h"
#include "kube/client.h"
#include "kube/config.h"
#include "renew/renewer.h"
#include "renew/scheduler.h"
#include "renew/volume_health.h"
#include "state/data_root_lock.h"
#include "state/store.h"
#include "volume/legacy_data_root.h"
#include "volume/publisher.h"

namespace certmount {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

struct Flags {
  std::string endpoint = "unix:///csi/csi.sock";
  std::string node_id;
  std::string driver_name = "csi.certmount.io";
  std::string data_root = "/var/lib/certmount";
  std::string legacy_data_root;  // empty: no earlier data root to move from
  std::string target_root = "/var/lib/kubelet/pods";
  std::string log_level = "info";
  std::string log_format = "text";
  std::string issuer = "local-ca";
  std::string ca_cert;
  std::string ca_key;
  std::string publish_timeout = "60s";
  std::string shutdown_grace = "10s";
  bool mount_tmpfs = true;
  int max_concurrent_issuance = 4;
  double issuer_qps = 10;
  int issuer_burst = 20;
  std::string renewal_backoff_initial = "30s";
  std::string renewal_backoff_max = "5m";
  int history_limit = 10;
  std::string metrics_address;  // empty: no metrics endpoint
  std::string kubeconfig;       // empty: in-cluster config
  double kube_api_qps = 5;
  int kube_api_burst = 10;
  bool use_token_request = false;
  int max_requests_per_volume = 1;
};

// The cert-manager issuer from --kubeconfig (else the in-cluster config).
// Creating the client does not contact the API server, so an unreachable
// one delays nothing here; issuances report it as UNAVAILABLE.
Result<std::unique_ptr<CertManagerIssuer>> MakeCertManagerIssuer(const Flags& flags) {
  Result<kube::KubeConfig> config = flags.kubeconfig.empty()
                                        ? kube::LoadInClusterConfig()
                                        : kube::LoadKubeconfig(flags.kubeconfig);
  if (!config.ok()) {
    return config.status().WithContext(flags.kubeconfig.empty()
                                           ? "no in-cluster Kubernetes config (pass --kubeconfig "
                                             "outside a pod)"
                                           : "--kubeconfig " + flags.kubeconfig);
  }
  kube::ClientOptions client_options;
  client_options.qps = flags.kube_api_qps;
  client_options.burst = flags.kube_api_burst;
  CERTMOUNT_ASSIGN_OR_RETURN(std::unique_ptr<kube::Client> client,
                             kube::Client::Create(std::move(*config), client_options));
  CertManagerIssuerOptions options;
  options.node_id = flags.node_id;
  options.max_requests_per_volume = flags.max_requests_per_volume;
  return std::make_unique<CertManagerIssuer>(std::shared_ptr<kube::Client>(std::move(client)),
                                             options);
}

// CSI's plugin-name rule: at most 63 characters, alphanumerics at both ends,
// and only alphanumerics, '-', '.' and '_' between.
bool IsValidDriverName(const std::string& name) {
  static const std::regex kPattern("^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$");
  return std::regex_match(name, kPattern);
}

Result<std::chrono::milliseconds> ParseFlagDuration(const std::string& flag,
                                                    const std::string& text) {
  Result<std::chrono::nanoseconds> parsed = ParseGoDuration(text);
  if (!parsed.ok() || parsed->count() <= 0) {
    return Status::InvalidArgument(flag + ": \"" + text +
                                   "\" is not a positive duration (e.g. 60s, 2m)");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
}

// Test-only: CERTMOUNT_TEST_HOLD_AT=<step> makes the publish sequence stop
// at that step forever, after announcing it in CERTMOUNT_TEST_HOLD_FILE, so
// the crash tests can SIGKILL the process at a known point.
std::function<void(PublishStep, const std::string&)> TestHoldHook() {
  const char* step = std::getenv("CERTMOUNT_TEST_HOLD_AT");
  const char* file = std::getenv("CERTMOUNT_TEST_HOLD_FILE");
  if (step == nullptr || file == nullptr) return {};
  std::string hold_at = step;
  std::string announce = file;
  return [hold_at, announce](PublishStep reached, const std::string& volume_id) {
    if (hold_at != PublishStepName(reached)) return;
    std::ofstream(announce, std::ios::app) << PublishStepName(reached) << " " << volume_id << "\n";
    spdlog::warn("test hold at step {} for volume {}", hold_at, volume_id);
    for (;;) pause();
  };
}

// Blocks SIGTERM, SIGINT and SIGHUP in every thread, so that one thread can
// take them with sigwait; SIGPIPE (a peer that hung up) is ignored, so a
// write to a closed connection is an error, never the end of the daemon.
sigset_t BlockShutdownSignals() {
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Waits for SIGTERM or SIGINT. SIGHUP, which a terminal closing or an admin's
// habit of "reload" sends, is logged and otherwise ignored: certmountd reads
// its flags only at start, and dying on it would strand every publish.
int WaitForShutdownSignal(const sigset_t& signals) {
  for (;;) {
    int signal_number = 0;
    if (sigwait(&signals, &signal_number) != 0) continue;
    if (signal_number != SIGHUP) return signal_number;
    spdlog::info("received SIGHUP: ignored (flags are read only at start; restart to change them)");
  }
}

// The startup refusals that need no state: each comes before anything is
// created, mounted or written, so a refused start leaves the node as it was.
Status CheckStartable(const Flags& flags, const std::string& socket_path) {
  std::error_code error;
  if (!std::filesystem::is_directory(flags.target_root, error)) {
    return Status::FailedPrecondition("--target-root " + flags.target_root +
                                      " is not an existing directory (kubelet's pods directory, "
                                      "usually /var/lib/kubelet/pods)");
  }
  if (Status s = PrepareSocketPath(socket_path); !s.ok()) return s.WithContext("--endpoint");
  return Status::Ok();
}

int Run(const Flags& flags) {
  sigset_t shutdown_signals = BlockShutdownSignals();
  Status logging = ConfigureLogging(flags.log_level, flags.log_format);
  if (!logging.ok()) {
    std::cerr << "certmountd: " << logging.message() << "\n";
    return kExitUsage;
  }
  Result<std::string> socket_path = ParseUnixEndpoint(flags.endpoint);
  Result<std::chrono::milliseconds> publish_timeout =
      ParseFlagDuration("--publish-timeout", flags.publish_timeout);
  Result<std::chrono::milliseconds> grace =
      ParseFlagDuration("--shutdown-grace", flags.shutdown_grace);
  Result<std::chrono::milliseconds> backoff_initial =
      ParseFlagDuration("--renewal-backoff-initial", flags.renewal_backoff_initial);
  Result<std::chrono::milliseconds> backoff_max =
      ParseFlagDuration("--renewal-backoff-max", flags.renewal_backoff_max);
  for (const Status* s : {&socket_path.status(), &publish_timeout.status(), &grace.status(),
                          &backoff_initial.status(), &backoff_max.status()}) {
    if (!s->ok()) {
      std::cerr << "certmountd: " << s->message() << "\n";
      return kExitUsage;
    }
  }
  if (*backoff_initial < std::chrono::seconds(1) || *backoff_max < *backoff_initial) {
    std::cerr << "certmountd: --renewal-backoff-initial must be at least 1s and at most "
                 "--renewal-backoff-max\n";
    return kExitUsage;
  }
  std::optional<MetricsAddress> metrics_address;
  if (!flags.metrics_address.empty()) {
    Result<MetricsAddress> parsed = ParseMetricsAddress(flags.metrics_address);
    if (!parsed.ok()) {
      std::cerr << "certmountd: " << parsed.status().message() << "\n";
      return kExitUsage;
    }
    metrics_address = *parsed;
  }
  if (flags.issuer != "local-ca" && flags.issuer != "cert-manager") {
    std::cerr << "certmountd: --issuer: unknown issuer \"" << flags.issuer
              << "\" (available: local-ca, cert-manager)\n";
    return kExitUsage;
  }
  if (flags.ca_cert.empty() != flags.ca_key.empty()) {
    std::cerr << "certmountd: --ca-cert and --ca-key go together\n";
    return kExitUsage;
  }

  spdlog::info("certmountd {} starting: driver {} node {} data root {}", CERTMOUNT_VERSION,
               flags.driver_name, flags.node_id, flags.data_root);
  if (Status s = CheckStartable(flags, *socket_path); !s.ok()) {
    spdlog::error("{}", s.message());
    return kExitFailure;
  }
  const Clock& clock = SystemClock::Instance();
  Env* env = Env::Default();
  if (Status s = env->CreateDirectories(flags.data_root, 0700); !s.ok()) {
    spdlog::error("cannot create data root: {}", s.ToString());
    return kExitFailure;
  }

  Result<std::unique_ptr<DataRootLock>> lock = DataRootLock::Acquire(flags.data_root);
  if (!lock.ok()) {
    spdlog::error("{}", lock.status().message());
    return kExitFailure;
  }
  LegacyMigration legacy;  // holds the legacy root's lock for as long as certmountd runs
  if (!flags.legacy_data_root.empty() && flags.legacy_data_root != flags.data_root) {
    Result<LegacyMigration> moved =
        MigrateLegacyDataRoot(flags.data_root, flags.legacy_data_root, env);
    if (!moved.ok()) {
      spdlog::error("{}", moved.status().ToString());
      return kExitFailure;
    }
    legacy = std::move(*moved);
    if (legacy.migrated) {
      spdlog::warn(
          "moved node state from {} to {}: state.db copied, {} CA files copied, volumes "
          "tmpfs {}",
          flags.legacy_data_root, flags.data_root, legacy.ca_files_copied,
          legacy.volumes_bound ? "bound at the new place" : "not mounted (none to keep)");
    }
  }
  Result<std::unique_ptr<Store>> store = Store::Open(flags.data_root + "/state.db", clock);
  if (!store.ok()) {
    spdlog::error("cannot open node state: {}", store.status().ToString());
    return kExitFailure;
  }
  std::unique_ptr<LocalCa> local_ca;
  std::unique_ptr<CertManagerIssuer> cert_manager;
  Issuer* issuer = nullptr;
  if (flags.issuer == "cert-manager") {
    Result<std::unique_ptr<CertManagerIssuer>> made = MakeCertManagerIssuer(flags);
    if (!made.ok()) {
      spdlog::error("cannot set up the cert-manager issuer: {}", made.status().ToString());
      return kExitFailure;
    }
    cert_manager = std::move(*made);
    issuer = cert_manager.get();
  } else {
    Result<std::unique_ptr<LocalCa>> ca =
        flags.ca_cert.empty() ? LocalCa::LoadOrCreate(flags.data_root + "/ca", clock)
                              : LocalCa::FromFiles(flags.ca_cert, flags.ca_key, clock);
    if (!ca.ok()) {
      spdlog::error("cannot set up the local CA: {}", ca.status().ToString());
      return kExitFailure;
    }
    local_ca = std::move(*ca);
    issuer = local_ca.get();
  }

  PublisherOptions options;
  options.data_root = flags.data_root;
  options.target_root = flags.target_root;
  options.publish_timeout = *publish_timeout;
  options.mount_tmpfs = flags.mount_tmpfs;
  options.step_hook = TestHoldHook();
  options.history_limit = flags.history_limit;
  // Pods' tokens live in memory only (see service_account_tokens.h).
  ServiceAccountTokens tokens;
  if (flags.use_token_request) {
    if (cert_manager == nullptr) {
      spdlog::warn("--use-token-request has no effect with --issuer {}", flags.issuer);
    } else {
      options.tokens = &tokens;
    }
  }
  Publisher publisher(options, store->get(), issuer, env, &clock);

  RenewerOptions renewer_options;
  renewer_options.data_root = flags.data_root;
  renewer_options.timeout = *publish_timeout;
  renewer_options.store = store->get();
  renewer_options.tokens = options.tokens;
  Renewer renewer(renewer_options, issuer, env, &clock);
  SchedulerOptions scheduler_options;
  scheduler_options.max_concurrent_issuance = flags.max_concurrent_issuance;
  scheduler_options.issuer_qps = flags.issuer_qps;
  scheduler_options.issuer_burst = flags.issuer_burst;
  scheduler_options.backoff.initial =
      std::chrono::duration_cast<std::chrono::seconds>(*backoff_initial);
  scheduler_options.backoff.max = std::chrono::duration_cast<std::chrono::seconds>(*backoff_max);
  scheduler_options.history_limit = flags.history_limit;
  RenewalScheduler scheduler(scheduler_options, store->get(), &renewer, &clock);

  // Served from before the startup cleanup: /healthz answers during a long
  // cleanup, /readyz stays 503 until the CSI socket is served.
  std::optional<StateCollector> state_metrics;
  MetricsServer metrics_server(&metrics::DefaultRegistry(), store->get());
  if (metrics_address.has_value()) {
    state_metrics.emplace(&metrics::DefaultRegistry(), store->get(), &scheduler);
    if (Status s = metrics_server.Start(*metrics_address); !s.ok()) {
      spdlog::error("--metrics-address: {}", s.message());
      return kExitFailure;
    }
  }

  Result<StartupSummary> startup = publisher.Startup();
  if (!startup.ok()) {
    spdlog::error("startup cleanup failed: {}", startup.status().ToString());
    return kExitFailure;
  }
  spdlog::info(
      "startup cleanup: kept {} rows, deleted {} (of which {} no longer mounted), removed {} "
      "orphan directories, adopted {} still-mounted directories without a row (kept {} that "
      "could not be adopted), {} ms",
      startup->kept, startup->deleted, startup->unmounted_by_check, startup->orphans_removed,
      startup->adopted, startup->kept_unadoptable, startup->milliseconds);

  // Only now, with every unmounted row gone, may renewals be scheduled.
  Result<SchedulerLoadSummary> loaded = scheduler.Load();
  if (!loaded.ok()) {
    spdlog::error("cannot load the renewal schedule: {}", loaded.status().ToString());
    return kExitFailure;
  }
  spdlog::info("renewal scheduler: {} volumes, {} overdue spread over {} s", loaded->volumes,
               loaded->overdue, loaded->spread_seconds);
  publisher.set_observer(&scheduler);
  publisher.set_reissuer([&renewer](const VolumeRecord& volume, std::stop_token stop) {
    return renewer.Renew(volume, std::move(stop));
  });
  scheduler.Start();
  VolumeHealthChecker health(flags.data_root, store->get(), env, &clock);

  if (Status s = PrepareSocketPath(*socket_path); !s.ok()) {
    spdlog::error("--endpoint: {}", s.ToString());
    return kExitFailure;
  }
  std::atomic<bool> ready{false};
  IdentityService identity(flags.driver_name, CERTMOUNT_VERSION, &ready);
  NodeService node(flags.node_id, &publisher, &health);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + *socket_path, grpc::InsecureServerCredentials());
  // gRPC's sync server starts a thread whenever a call leaves fewer than
  // MIN_POLLERS threads polling, and ends a thread that finishes a call
  // while MAX_POLLERS are polling. With the two equal, every call cost a
  // thread start and exit, and a fresh thread pays OpenSSL's per-thread
  // random generator and a cold malloc arena again: a third of a publish in
  // the benchmark. Headroom above MIN lets finished threads go back to
  // polling; idle extras exit after gRPC's poll timeout.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 8);
  builder.RegisterService(&identity);
  builder.RegisterService(&node);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    spdlog::error("cannot listen on {}", flags.endpoint);
    return kExitFailure;
  }
  chmod(socket_path->c_str(), 0660);
  ready = true;
  metrics_server.SetStartupComplete(true);
  spdlog::info("serving CSI on {}", flags.endpoint);

  const int signal_number = WaitForShutdownSignal(shutdown_signals);
  spdlog::info("received {}, shutting down", strsignal(signal_number));
  RpcTracker::Instance().BeginShutdown();
  ready = false;
  metrics_server.SetStartupComplete(false);
  // No renewal starts from here on; running ones are cancelled and keep their
  // stored schedule, so the next start retries them on time.
  scheduler.Stop();

  // Running handlers get the grace period; publishes still issuing after it
  // are cancelled and roll back, so shutdown is bounded. gRPC's own Shutdown
  // deadline is not used for this: it also waits out idle connections, and
  // kubelet always keeps one open.
  if (!RpcTracker::Instance().WaitIdleUntil(std::chrono::steady_clock::now() + *grace)) {
    spdlog::warn("calls still running after --shutdown-grace; cancelling them");
    publisher.CancelAll();
  }
  server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
  server.reset();
  // The collector reads the store and the scheduler: both must still exist.
  metrics_server.Stop();
  state_metrics.reset();
  store->reset();
  unlink(socket_path->c_str());
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace certmount

int main(int argc, char** argv) {
  certmount::Flags flags;
  CLI::App app{"certmountd: CSI node driver that puts X.509 certificates into pods"};
  app.set_version_flag("--version", std::string("certmountd ") + CERTMOUNT_VERSION);
  app.add_option("--endpoint", flags.endpoint, "CSI endpoint, unix:///path")->capture_default_str();
  app.add_option("--node-id", flags.node_id, "this node's name (or env NODE_ID)")
      ->envname("NODE_ID");
  app.add_option("--driver-name", flags.driver_name, "CSI driver name")->capture_default_str();
  app.add_option("--data-root", flags.data_root, "node state and volume files")
      ->capture_default_str();
  app.add_option("--legacy-data-root", flags.legacy_data_root,
                 "an earlier data root (e.g. /var/lib/certmount) whose state and volumes move "
                 "to --data-root when that has no state.db yet (docs/kubernetes.md, Upgrades)");
  app.add_option("--target-root", flags.target_root,
                 "publish targets must be below this directory (kubelet's pods directory)")
      ->capture_default_str();
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.add_option("--log-format", flags.log_format, "text or json")->capture_default_str();
  app.add_option("--issuer", flags.issuer, "signer: local-ca or cert-manager")
      ->capture_default_str();
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "kubeconfig for --issuer cert-manager (default: the in-cluster config)");
  app.add_option("--kube-api-qps", flags.kube_api_qps,
                 "requests per second to the Kubernetes API server")
      ->check(CLI::Range(0.001, 100000.0))
      ->capture_default_str();
  app.add_option("--kube-api-burst", flags.kube_api_burst,
                 "requests that may go at once to the Kubernetes API server")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_flag("--use-token-request", flags.use_token_request,
               "create CertificateRequests with the pod's service account token "
               "(csi.storage.k8s.io/serviceAccount.tokens)");
  app.add_option("--max-requests-per-volume", flags.max_requests_per_volume,
                 "CertificateRequests kept per volume; older ones are deleted")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--ca-cert", flags.ca_cert, "local CA certificate PEM (default: generated)");
  app.add_option("--ca-key", flags.ca_key, "local CA private key PEM");
  app.add_option("--publish-timeout", flags.publish_timeout,
                 "how long one NodePublishVolume may take")
      ->capture_default_str();
  app.add_option("--shutdown-grace", flags.shutdown_grace,
                 "how long in-flight calls may finish after SIGTERM")
      ->capture_default_str();
  app.add_option("--mount-tmpfs", flags.mount_tmpfs,
                 "mount a tmpfs on <data-root>/volumes unless it is a mount point already")
      ->capture_default_str();
  app.add_option("--max-concurrent-issuance", flags.max_concurrent_issuance,
                 "renewals running at once")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--issuer-qps", flags.issuer_qps,
                 "renewal requests per second toward the issuer (all volumes together)")
      ->check(CLI::Range(0.001, 100000.0))
      ->capture_default_str();
  app.add_option("--issuer-burst", flags.issuer_burst,
                 "renewal requests that may go at once after a quiet period")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--renewal-backoff-initial", flags.renewal_backoff_initial,
                 "delay before retrying a failed renewal; doubles per failure")
      ->capture_default_str();
  app.add_option("--renewal-backoff-max", flags.renewal_backoff_max,
                 "longest delay between retries of a failing renewal")
      ->capture_default_str();
  app.add_option("--history-limit", flags.history_limit,
                 "issuance history rows kept per volume in state.db")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--metrics-address", flags.metrics_address,
                 "serve /metrics, /healthz and /readyz over HTTP on host:port or :port "
                 "(e.g. :9402); empty (the default) serves nothing")
      ->expected(0, 1);  // so that --metrics-address= (empty) parses
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << "certmountd " << CERTMOUNT_VERSION << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "certmountd: " << e.what() << "\n";
    return certmount::kExitUsage;
  }
  if (flags.node_id.empty()) {
    std::cerr << "certmountd: --node-id is required (or set NODE_ID)\n";
    return certmount::kExitUsage;
  }
  if (!certmount::IsValidDriverName(flags.driver_name)) {
    std::cerr << "certmountd: --driver-name: \"" << flags.driver_name
              << "\" is not a valid CSI plugin name (at most 63 characters: letters, digits, "
                 "'-', '.', '_', starting and ending with a letter or digit)\n";
    return certmount::kExitUsage;
  }
  return certmount::Run(flags);
}
