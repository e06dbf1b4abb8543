#include "cmd/certmountd_main.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <regex>

#include "cmd/cli_parse.h"
#include "common/logging.h"
#include "csi/endpoint.h"
#include "issue/go_duration.h"
#include "issue/volume_attributes.h"

namespace certmount {
namespace {

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
  std::string ca_bundle;
  std::string ca_reload_interval = "5s";
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
  std::string spiffe_trust_domain;  // empty: SPIFFE mode off
  // SPIFFE mode's driver-level settings, named and defaulted as
  // csi-driver-spiffe's flags (without the spiffe- prefix).
  std::string spiffe_issuer_name;  // empty: the pod's issuer-* attributes
  std::string spiffe_issuer_kind = "ClusterIssuer";
  std::string spiffe_issuer_group = "cert-manager.io";
  std::string spiffe_certificate_duration = "1h";
  std::string spiffe_file_name_certificate = "tls.crt";
  std::string spiffe_file_name_key = "tls.key";
  std::string spiffe_file_name_ca = "ca.crt";
  std::string spiffe_source_ca_bundle;  // empty: the signer's CA
};

void AddNodeFlags(CLI::App& app, Flags& flags) {
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
}

void AddIssuerFlags(CLI::App& app, Flags& flags) {
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
  app.add_option("--spiffe-trust-domain", flags.spiffe_trust_domain,
                 "SPIFFE mode: every certificate is the pod's X.509-SVID "
                 "spiffe://<domain>/ns/<namespace>/sa/<service account> (docs/attributes.md)");
  app.add_option("--spiffe-issuer-name", flags.spiffe_issuer_name,
                 "SPIFFE mode: the issuer of every volume (empty: the pod's issuer-* attributes)");
  app.add_option("--spiffe-issuer-kind", flags.spiffe_issuer_kind,
                 "SPIFFE mode: the kind of --spiffe-issuer-name")
      ->capture_default_str();
  app.add_option("--spiffe-issuer-group", flags.spiffe_issuer_group,
                 "SPIFFE mode: the API group of --spiffe-issuer-name")
      ->capture_default_str();
  app.add_option("--spiffe-certificate-duration", flags.spiffe_certificate_duration,
                 "SPIFFE mode: the lifetime asked for; a pod may ask for less, not more")
      ->capture_default_str();
  app.add_option("--spiffe-file-name-certificate", flags.spiffe_file_name_certificate,
                 "SPIFFE mode: the certificate file, unless the pod names another")
      ->capture_default_str();
  app.add_option("--spiffe-file-name-key", flags.spiffe_file_name_key,
                 "SPIFFE mode: the private key file, unless the pod names another")
      ->capture_default_str();
  app.add_option("--spiffe-file-name-ca", flags.spiffe_file_name_ca,
                 "SPIFFE mode: the CA file, unless the pod names another")
      ->capture_default_str();
  app.add_option("--spiffe-source-ca-bundle", flags.spiffe_source_ca_bundle,
                 "SPIFFE mode: PEM CA certificates written as every volume's CA file, "
                 "rewritten when the file changes (default: the signer's CA)");
  app.add_option("--ca-cert", flags.ca_cert, "local CA certificate PEM (default: generated)");
  app.add_option("--ca-key", flags.ca_key, "local CA private key PEM");
  app.add_option("--ca-bundle", flags.ca_bundle,
                 "PEM CA certificates every volume's ca.crt holds; must contain the signing CA "
                 "(default: the signing CA alone; docs/ca-rotation.md)");
  app.add_option("--ca-reload-interval", flags.ca_reload_interval,
                 "how often the local CA files are checked for changes (SIGHUP checks at once)")
      ->capture_default_str();
}

void AddTimingFlags(CLI::App& app, Flags& flags) {
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

// Prints a usage error as certmountd's own and returns false.
bool UsageError(const std::string& message) {
  std::cerr << "certmountd: " << message << "\n";
  return false;
}

// The durations, in the order the flags are checked.
bool ParseDurations(const Flags& flags, NodeOptions& options) {
  Result<std::chrono::milliseconds> publish_timeout =
      ParseFlagDuration("--publish-timeout", flags.publish_timeout);
  Result<std::chrono::milliseconds> grace =
      ParseFlagDuration("--shutdown-grace", flags.shutdown_grace);
  Result<std::chrono::milliseconds> backoff_initial =
      ParseFlagDuration("--renewal-backoff-initial", flags.renewal_backoff_initial);
  Result<std::chrono::milliseconds> backoff_max =
      ParseFlagDuration("--renewal-backoff-max", flags.renewal_backoff_max);
  Result<std::chrono::milliseconds> ca_reload =
      ParseFlagDuration("--ca-reload-interval", flags.ca_reload_interval);
  for (const Status* s : {&publish_timeout.status(), &grace.status(), &backoff_initial.status(),
                          &backoff_max.status(), &ca_reload.status()}) {
    if (!s->ok()) return UsageError(s->message());
  }
  if (*backoff_initial < std::chrono::seconds(1) || *backoff_max < *backoff_initial) {
    return UsageError(
        "--renewal-backoff-initial must be at least 1s and at most --renewal-backoff-max");
  }
  options.publish_timeout = *publish_timeout;
  options.shutdown_grace = *grace;
  options.ca_reload_interval = *ca_reload;
  options.scheduler.backoff.initial =
      std::chrono::duration_cast<std::chrono::seconds>(*backoff_initial);
  options.scheduler.backoff.max = std::chrono::duration_cast<std::chrono::seconds>(*backoff_max);
  return true;
}

// The issuer and metrics flags that must agree with each other.
bool ParseIssuerAndMetrics(const Flags& flags, NodeOptions& options) {
  if (!flags.metrics_address.empty()) {
    Result<MetricsAddress> parsed = ParseMetricsAddress(flags.metrics_address);
    if (!parsed.ok()) return UsageError(parsed.status().message());
    options.metrics_address = *parsed;
  }
  if (flags.issuer != "local-ca" && flags.issuer != "cert-manager") {
    return UsageError("--issuer: unknown issuer \"" + flags.issuer +
                      "\" (available: local-ca, cert-manager)");
  }
  if (flags.ca_cert.empty() != flags.ca_key.empty()) {
    return UsageError("--ca-cert and --ca-key go together");
  }
  if (!flags.ca_bundle.empty() && flags.issuer != "local-ca") {
    return UsageError("--ca-bundle is for --issuer local-ca");
  }
  options.issuer = flags.issuer == "cert-manager" ? IssuerKind::kCertManager : IssuerKind::kLocalCa;
  return true;
}

// The SPIFFE flags; each is checked only with --spiffe-trust-domain.
bool ParseSpiffeSettings(const Flags& flags, NodeOptions& options) {
  if (flags.spiffe_trust_domain.empty()) {
    if (flags.spiffe_source_ca_bundle.empty()) return true;
    return UsageError("--spiffe-source-ca-bundle needs --spiffe-trust-domain");
  }
  Status domain = ValidateSpiffeTrustDomain(flags.spiffe_trust_domain);
  if (!domain.ok()) return UsageError("--spiffe-trust-domain: " + domain.message());
  Result<std::chrono::nanoseconds> duration = ParseGoDuration(flags.spiffe_certificate_duration);
  if (!duration.ok()) {
    return UsageError("--spiffe-certificate-duration: " + duration.status().message());
  }
  SpiffeSettings& spiffe = options.spiffe;
  spiffe.trust_domain = flags.spiffe_trust_domain;
  spiffe.issuer = {flags.spiffe_issuer_name, flags.spiffe_issuer_kind, flags.spiffe_issuer_group};
  spiffe.duration = *duration;
  spiffe.certificate_file = flags.spiffe_file_name_certificate;
  spiffe.private_key_file = flags.spiffe_file_name_key;
  spiffe.ca_file = flags.spiffe_file_name_ca;
  options.trust_bundle_file = flags.spiffe_source_ca_bundle;
  Status usable = CheckSpiffeSettings(spiffe);
  if (!usable.ok()) return UsageError("--spiffe-*: " + usable.message());
  return true;
}

// NodeOptions from the flags, or nullopt after printing the usage error.
// Flags that need no parsing are copied as they are.
std::optional<NodeOptions> ToNodeOptions(const Flags& flags) {
  NodeOptions options;
  Result<std::string> socket_path = ParseUnixEndpoint(flags.endpoint);
  if (!socket_path.ok()) {
    UsageError(socket_path.status().message());
    return std::nullopt;
  }
  options.socket_path = *socket_path;
  if (!ParseDurations(flags, options) || !ParseIssuerAndMetrics(flags, options)) {
    return std::nullopt;
  }
  options.endpoint = flags.endpoint;
  options.node_id = flags.node_id;
  options.driver_name = flags.driver_name;
  options.data_root = flags.data_root;
  options.legacy_data_root = flags.legacy_data_root;
  options.target_root = flags.target_root;
  options.ca_cert = flags.ca_cert;
  options.ca_key = flags.ca_key;
  options.ca_bundle = flags.ca_bundle;
  options.kubeconfig = flags.kubeconfig;
  options.kube_api_qps = flags.kube_api_qps;
  options.kube_api_burst = flags.kube_api_burst;
  options.use_token_request = flags.use_token_request;
  if (!ParseSpiffeSettings(flags, options)) return std::nullopt;
  options.max_requests_per_volume = flags.max_requests_per_volume;
  options.mount_tmpfs = flags.mount_tmpfs;
  options.history_limit = flags.history_limit;
  options.scheduler.max_concurrent_issuance = flags.max_concurrent_issuance;
  options.scheduler.issuer_qps = flags.issuer_qps;
  options.scheduler.issuer_burst = flags.issuer_burst;
  return options;
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

// Waits for SIGTERM or SIGINT. SIGHUP, an admin's "reload", re-reads the
// local CA files and the trust bundle file (Node::ReloadCa) and nothing
// else: flags are read only at
// start. It never ends the daemon, which would strand every publish.
int WaitForShutdownSignal(const sigset_t& signals, Node& node) {
  for (;;) {
    int signal_number = 0;
    if (sigwait(&signals, &signal_number) != 0) continue;
    if (signal_number != SIGHUP) return signal_number;
    spdlog::info("received SIGHUP: reloading the local CA files (flags are read only at start)");
    node.ReloadCa(true);
  }
}

// Runs a node through its startup order until SIGTERM or SIGINT, then
// shuts it down. Returns the process exit code.
int RunNode(NodeOptions options, const sigset_t& shutdown_signals) {
  Result<std::unique_ptr<Node>> node = Node::Open(std::move(options));
  if (!node.ok()) return kExitFailure;
  Result<Node::Cleaned> cleaned = (*node)->CleanUp();
  if (!cleaned.ok()) return kExitFailure;
  Result<Node::ScheduleLoaded> loaded = (*node)->LoadSchedule(*cleaned);
  if (!loaded.ok()) return kExitFailure;
  Node::Renewing renewing = (*node)->StartRenewals(std::move(*loaded));
  if (!(*node)->Serve(renewing).ok()) return kExitFailure;

  const int signal_number = WaitForShutdownSignal(shutdown_signals, **node);
  spdlog::info("received {}, shutting down", strsignal(signal_number));
  (*node)->Shutdown();
  return 0;
}

// Parses the command line into `flags`; returns an exit code when the
// process ends here (help, version, a usage error).
std::optional<int> ParseCommandLine(int argc, char** argv, Flags& flags) {
  CLI::App app{"certmountd: CSI node driver that puts X.509 certificates into pods"};
  app.set_version_flag("--version", std::string("certmountd ") + CERTMOUNT_VERSION);
  AddNodeFlags(app, flags);
  AddIssuerFlags(app, flags);
  AddTimingFlags(app, flags);
  if (std::optional<int> exit_code = ParseOrExit(app, "certmountd", argc, argv)) return exit_code;
  if (flags.node_id.empty()) {
    UsageError("--node-id is required (or set NODE_ID)");
    return kExitUsage;
  }
  if (!IsValidDriverName(flags.driver_name)) {
    UsageError("--driver-name: \"" + flags.driver_name +
               "\" is not a valid CSI plugin name (at most 63 characters: letters, digits, "
               "'-', '.', '_', starting and ending with a letter or digit)");
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace

int CertmountdMain(int argc, char** argv, const std::function<void(NodeOptions&)>& adjust) {
  Flags flags;
  if (std::optional<int> exit_code = ParseCommandLine(argc, argv, flags)) return *exit_code;
  sigset_t shutdown_signals = BlockShutdownSignals();
  if (Status s = ConfigureLogging(flags.log_level, flags.log_format); !s.ok()) {
    UsageError(s.message());
    return kExitUsage;
  }
  std::optional<NodeOptions> options = ToNodeOptions(flags);
  if (!options.has_value()) return kExitUsage;
  if (adjust) adjust(*options);
  spdlog::info("certmountd {} starting: driver {} node {} data root {}", CERTMOUNT_VERSION,
               flags.driver_name, flags.node_id, flags.data_root);
  return RunNode(std::move(*options), shutdown_signals);
}

}  // namespace certmount
