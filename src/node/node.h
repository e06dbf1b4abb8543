// One certmount node: the objects certmountd runs (lock, store, issuer,
// publisher, renewer, renewal scheduler, health checker, metrics, CSI
// services, gRPC server), wired once, here, and started in the only order
// that keeps "a volume counts only once it is published" true:
//
//   Node::Open -> CleanUp -> LoadSchedule -> StartRenewals -> Serve -> Shutdown
//
// Each step takes the proof the previous one returns (a value only Node can
// make), so a caller cannot load the schedule before the startup cleanup,
// start renewals from a schedule that was not loaded, or serve the socket
// before renewals are tracked. src/cmd/certmountd.cc turns flags into
// NodeOptions and runs these steps; tests build the same Node.
//
// Every failing step logs its error the way an admin reads it and returns
// it; nothing the step created is left running.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/construction_key.h"
#include "common/env.h"
#include "common/status.h"
#include "csi/identity_service.h"
#include "csi/metrics_server.h"
#include "csi/node_service.h"
#include "issue/issuer.h"
#include "issue/local_ca_watcher.h"
#include "issue/spiffe.h"
#include "issue/trust_bundle_source.h"
#include "kube/client.h"
#include "kube/pod_cache.h"
#include "kube/watcher.h"
#include "renew/pod_ip_reissuer.h"
#include "renew/renewer.h"
#include "renew/scheduler.h"
#include "renew/volume_health.h"
#include "state/data_root_lock.h"
#include "state/store.h"
#include "volume/legacy_data_root.h"
#include "volume/pod_ips.h"
#include "volume/publisher.h"
#include "volume/service_account_tokens.h"

namespace certmount {

enum class IssuerKind { kLocalCa, kCertManager };

// Everything a node is configured with, already parsed and checked for
// form (src/cmd/certmountd.cc does that from the flags).
struct NodeOptions {
  std::string node_id;
  std::string driver_name = "csi.certmount.io";
  std::string endpoint;     // as given, for logs
  std::string socket_path;  // the unix socket the endpoint names
  std::string data_root;
  std::string legacy_data_root;  // empty: no earlier data root to move from
  std::string target_root;
  IssuerKind issuer = IssuerKind::kLocalCa;
  // Local CA: PEM files, or both empty to generate one under <data_root>/ca.
  std::string ca_cert;
  std::string ca_key;
  // The trust bundle put into every volume's ca.crt (docs/ca-rotation.md);
  // empty: the signing CA alone.
  std::string ca_bundle;
  // How often the local CA's files are checked for a change.
  std::chrono::milliseconds ca_reload_interval{std::chrono::seconds(5)};
  // cert-manager: the kubeconfig (empty: in-cluster) and the client's limits.
  std::string kubeconfig;
  double kube_api_qps = 5;
  int kube_api_burst = 10;
  bool use_token_request = false;
  int max_requests_per_volume = 1;
  // A PEM file of CA certificates written as every volume's CA file instead
  // of the signer's CA, and rewritten in every volume when it changes
  // (--spiffe-source-ca-bundle); empty: the signer's CA.
  std::string trust_bundle_file;
  // SPIFFE mode; off when its trust domain is empty. Its issuer_required
  // and key_encipherment are set from `issuer` (both for cert-manager).
  SpiffeSettings spiffe;
  std::chrono::milliseconds publish_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds shutdown_grace{std::chrono::seconds(10)};
  bool mount_tmpfs = true;
  int history_limit = 10;
  SchedulerOptions scheduler;  // its history_limit is set from history_limit
  std::optional<MetricsAddress> metrics_address;
  // Called after each step of every publish (PublisherOptions::step_hook).
  // certmountd leaves it empty; the crash tests' build of the daemon
  // (test/helpers/certmountd_test_hooks.cc) holds a publish there.
  std::function<void(PublishStep, const std::string& volume_id)> publish_step_hook;
};

class Node {
 public:
  // Proof that the startup cleanup ran: every unmounted row is gone.
  class Cleaned {
   public:
    const StartupSummary& summary() const { return summary_; }

   private:
    friend class Node;
    explicit Cleaned(StartupSummary summary) : summary_(summary) {}
    StartupSummary summary_;
  };
  // Proof that the renewal schedule holds every mounted volume.
  class ScheduleLoaded {
   private:
    friend class Node;
    ScheduleLoaded() = default;
  };
  // Proof that renewals run and the publisher reports to the scheduler.
  class Renewing {
   private:
    friend class Node;
    Renewing() = default;
  };

  // Refuses a start that cannot work before touching anything (target root
  // missing, endpoint in use), then creates the data root, takes its lock,
  // moves a legacy data root, opens the store, sets up the issuer, wires the
  // rest, and starts the metrics server when asked (so /healthz answers
  // during a long cleanup). Nothing is served on the CSI socket yet.
  static Result<std::unique_ptr<Node>> Open(NodeOptions options);
  Node(ConstructionKey<Node> key, NodeOptions options);
  ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // The startup cleanup (Publisher::Startup), logged.
  Result<Cleaned> CleanUp();
  // Loads the renewal schedule: only from a cleaned node.
  Result<ScheduleLoaded> LoadSchedule(const Cleaned& cleaned);
  // Starts the renewal scheduler and connects the publisher to it.
  Renewing StartRenewals(ScheduleLoaded loaded);
  // Serves CSI on the socket (mode 0660) and reports ready.
  Status Serve(const Renewing& renewing);
  // Stops renewals, gives running calls shutdown_grace (then cancels
  // publishes), stops the server and the metrics, closes the store and
  // removes the socket. Only after Serve; a node that never served is
  // simply destroyed.
  void Shutdown();

  // Local CA: reads its files again (always, or only when they changed
  // since the last check) and, when they pass every check, switches to them
  // and makes the renewal scheduler rewrite every volume's CA file (bundle
  // changed) or re-issue every certificate (signing CA changed). The
  // trust_bundle_file likewise: a new valid one is written into every
  // volume. A change that fails a check is logged and what is in use stays.
  // SIGHUP calls it with `force`; a thread started by StartRenewals every
  // ca_reload_interval.
  void ReloadCa(bool force);

  // For tests that drive the pieces directly.
  Publisher& publisher() { return *publisher_; }
  Store& store() { return *store_; }

 private:
  Status OpenState();
  // The signer, wrapped in a TrustBundleIssuer with trust_bundle_file.
  Status OpenIssuer();
  Status OpenSigner();
  void ReloadTrustBundleFile(bool force);
  void ReloadLocalCa(bool force);
  void Wire();
  Status StartMetrics();
  // Local CA during a rotation (a bundle of several CAs): asks the
  // scheduler to re-issue every loaded volume whose leaf the current CA did
  // not sign, so a restart in the middle of a rotation forgets no old leaf.
  void ReissueLeavesOfOtherCas();
  void WirePodIps();
  void StartPodWatch();

  NodeOptions options_;
  const Clock& clock_ = SystemClock::Instance();
  Env* env_ = Env::Default();
  // Declared in start order; destroyed in reverse.
  std::unique_ptr<DataRootLock> lock_;
  // The node's pods as the pod watch shows them (cert-manager mode); before
  // the issuer, which asks it.
  kube::PodCache pod_cache_;
  LegacyMigration legacy_;  // holds the legacy root's lock while the node runs
  std::unique_ptr<Store> store_;
  // With trust_bundle_file; before issuer_, which reads it.
  std::unique_ptr<TrustBundleSource> bundle_source_;
  std::unique_ptr<Issuer> issuer_;
  std::unique_ptr<LocalCaWatcher> ca_watcher_;  // local CA only
  LocalCa* local_ca_ = nullptr;                 // the signer in issuer_, when it is the local CA
  std::mutex ca_reload_mu_;                     // one reload at a time
  // Cluster access (cert-manager mode); null with the local CA.
  std::shared_ptr<kube::Client> kube_client_;
  PodIps pod_ips_;               // the node's pods' addresses, from the pod watch
  ServiceAccountTokens tokens_;  // pods' tokens, in memory only
  std::unique_ptr<Publisher> publisher_;
  std::unique_ptr<Renewer> renewer_;
  std::unique_ptr<RenewalScheduler> scheduler_;
  std::unique_ptr<VolumeHealthChecker> health_;
  // ${POD_IP}: the reissuer; and the pod watch (cert-manager mode, from
  // startup) that feeds it and pod_cache_.
  std::unique_ptr<PodIpReissuer> pod_ip_reissuer_;
  std::unique_ptr<kube::Watcher> pod_watcher_;
  std::jthread pod_watch_;
  // The collector reads the store and the scheduler; the server that runs
  // it stops first.
  std::optional<StateCollector> state_metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::atomic<bool> ready_{false};
  std::unique_ptr<IdentityService> identity_;
  std::unique_ptr<NodeService> node_service_;
  std::unique_ptr<grpc::Server> server_;
  // Polls the CA files; stopped (and joined) first on destruction.
  std::jthread ca_poller_;
};

}  // namespace certmount
