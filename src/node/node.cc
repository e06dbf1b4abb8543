#include "node/node.h"

#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>

#include "csi/endpoint.h"
#include "csi/rpc_log.h"
#include "issue/cert_manager_issuer.h"
#include "issue/local_ca.h"
#include "issue/trust_bundle_issuer.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/pod.h"

namespace certmount {
namespace {

// The startup refusals that need no state: each comes before anything is
// created, mounted or written, so a refused start leaves the node as it was.
Status CheckStartable(const NodeOptions& options, Env* env) {
  Result<FileStat> target_root = env->Stat(options.target_root);
  if (!target_root.ok() || target_root->type != FileStat::Type::kDirectory) {
    return Status::FailedPrecondition("--target-root " + options.target_root +
                                      " is not an existing directory (kubelet's pods directory, "
                                      "usually /var/lib/kubelet/pods)");
  }
  if (Status s = PrepareSocketPath(options.socket_path); !s.ok()) {
    return s.WithContext("--endpoint");
  }
  return Status::Ok();
}

// The Kubernetes client from --kubeconfig (else the in-cluster config).
// Creating it does not contact the API server, so an unreachable one delays
// nothing here; calls report it as UNAVAILABLE.
Result<std::shared_ptr<kube::Client>> MakeKubeClient(const NodeOptions& options) {
  Result<kube::KubeConfig> config = options.kubeconfig.empty()
                                        ? kube::LoadInClusterConfig()
                                        : kube::LoadKubeconfig(options.kubeconfig);
  if (!config.ok()) {
    return config.status().WithContext(options.kubeconfig.empty()
                                           ? "no in-cluster Kubernetes config (pass --kubeconfig "
                                             "outside a pod)"
                                           : "--kubeconfig " + options.kubeconfig);
  }
  kube::ClientOptions client_options;
  client_options.qps = options.kube_api_qps;
  client_options.burst = options.kube_api_burst;
  CERTMOUNT_ASSIGN_OR_RETURN(std::unique_ptr<kube::Client> client,
                             kube::Client::Create(std::move(*config), client_options));
  return std::shared_ptr<kube::Client>(std::move(client));
}

// The cert-manager issuer, on a new client that is also kept in `client`;
// it asks `pods` (fed by the node's pod watch) before reading a pod.
Result<std::unique_ptr<Issuer>> MakeCertManagerIssuer(const NodeOptions& options,
                                                      const kube::PodCache* pods,
                                                      std::shared_ptr<kube::Client>* client) {
  CERTMOUNT_ASSIGN_OR_RETURN(*client, MakeKubeClient(options));
  CertManagerIssuerOptions issuer_options;
  issuer_options.node_id = options.node_id;
  issuer_options.max_requests_per_volume = options.max_requests_per_volume;
  issuer_options.pod_cache = pods;
  return std::unique_ptr<Issuer>(std::make_unique<CertManagerIssuer>(*client, issuer_options));
}

// The local CA's files: --ca-cert/--ca-key, else the generated pair under
// <data_root>/ca; --ca-bundle either way.
LocalCaFiles LocalCaPaths(const NodeOptions& options) {
  if (options.ca_cert.empty()) {
    return {options.data_root + "/ca/ca.crt", options.data_root + "/ca/ca.key", options.ca_bundle};
  }
  return {options.ca_cert, options.ca_key, options.ca_bundle};
}

Result<std::unique_ptr<LocalCa>> MakeLocalCa(const NodeOptions& options, const Clock& clock,
                                             Env* env) {
  if (options.ca_cert.empty()) {
    CERTMOUNT_RETURN_IF_ERROR(
        LocalCa::LoadOrCreate(options.data_root + "/ca", clock, env).status());
  }
  return LocalCa::FromFiles(LocalCaPaths(options), clock, env);
}

// Logs `status` as `what: <status>` and returns it.
Status Failed(const char* what, const Status& status) {
  spdlog::error("{}: {}", what, status.ToString());
  return status;
}

// The rules every reader of a volume's attributes applies. A cert-manager
// issuer needs a name, and csi-driver-spiffe's approver requires its usage
// set, key encipherment included; the local CA needs neither.
AttributeRules AttributeRulesOf(const NodeOptions& options) {
  AttributeRules rules;
  rules.spiffe = options.spiffe;
  const bool cert_manager = options.issuer == IssuerKind::kCertManager;
  rules.spiffe.issuer_required = cert_manager;
  rules.spiffe.key_encipherment = cert_manager;
  return rules;
}

}  // namespace

Node::Node(ConstructionKey<Node> /*key*/, NodeOptions options) : options_(std::move(options)) {
  options_.scheduler.history_limit = options_.history_limit;
  options_.scheduler.refresh_window_seconds =
      std::chrono::ceil<std::chrono::seconds>(options_.publish_timeout).count() + 1;
}

Result<std::unique_ptr<Node>> Node::Open(NodeOptions options) {
  auto node = std::make_unique<Node>(ConstructionKey<Node>(), std::move(options));
  CERTMOUNT_RETURN_IF_ERROR(node->OpenState());
  CERTMOUNT_RETURN_IF_ERROR(node->OpenIssuer());
  node->Wire();
  CERTMOUNT_RETURN_IF_ERROR(node->StartMetrics());
  return node;
}

Status Node::OpenState() {
  if (Status s = CheckStartable(options_, env_); !s.ok()) {
    spdlog::error("{}", s.message());
    return s;
  }
  if (Status s = env_->CreateDirectories(options_.data_root, 0700); !s.ok()) {
    return Failed("cannot create data root", s);
  }
  Result<std::unique_ptr<DataRootLock>> lock = DataRootLock::Acquire(options_.data_root, env_);
  if (!lock.ok()) {
    spdlog::error("{}", lock.status().message());
    return lock.status();
  }
  lock_ = std::move(*lock);
  const std::string& legacy_root = options_.legacy_data_root;
  if (!legacy_root.empty() && legacy_root != options_.data_root) {
    Result<LegacyMigration> moved = MigrateLegacyDataRoot(options_.data_root, legacy_root, env_);
    if (!moved.ok()) {
      spdlog::error("{}", moved.status().ToString());
      return moved.status();
    }
    legacy_ = std::move(*moved);
    if (legacy_.migrated) {
      spdlog::warn(
          "moved node state from {} to {}: state.db copied, {} CA files copied, volumes "
          "tmpfs {}",
          legacy_root, options_.data_root, legacy_.ca_files_copied,
          legacy_.volumes_bound ? "bound at the new place" : "not mounted (none to keep)");
    }
  }
  Result<std::unique_ptr<Store>> store = Store::Open(options_.data_root + "/state.db", clock_);
  if (!store.ok()) return Failed("cannot open node state", store.status());
  store_ = std::move(*store);
  return Status::Ok();
}

Status Node::OpenIssuer() {
  CERTMOUNT_RETURN_IF_ERROR(OpenSigner());
  if (options_.trust_bundle_file.empty()) return Status::Ok();
  bundle_source_ = std::make_unique<TrustBundleSource>(options_.trust_bundle_file, env_);
  if (Status loaded = bundle_source_->Load(); !loaded.ok()) {
    return Failed("--spiffe-source-ca-bundle", loaded);
  }
  issuer_ = std::make_unique<TrustBundleIssuer>(std::move(issuer_), bundle_source_.get());
  return Status::Ok();
}

Status Node::OpenSigner() {
  if (options_.issuer == IssuerKind::kCertManager) {
    Result<std::unique_ptr<Issuer>> issuer =
        MakeCertManagerIssuer(options_, &pod_cache_, &kube_client_);
    if (!issuer.ok()) return Failed("cannot set up the cert-manager issuer", issuer.status());
    issuer_ = std::move(*issuer);
    return Status::Ok();
  }
  Result<std::unique_ptr<LocalCa>> ca = MakeLocalCa(options_, clock_, env_);
  if (!ca.ok()) return Failed("cannot set up the local CA", ca.status());
  ca_watcher_ = std::make_unique<LocalCaWatcher>(ca->get(), LocalCaPaths(options_), env_);
  local_ca_ = ca->get();
  issuer_ = std::move(*ca);
  return Status::Ok();
}

void Node::Wire() {
  PublisherOptions publisher_options;
  publisher_options.data_root = options_.data_root;
  publisher_options.target_root = options_.target_root;
  publisher_options.publish_timeout = options_.publish_timeout;
  publisher_options.mount_tmpfs = options_.mount_tmpfs;
  publisher_options.step_hook = options_.publish_step_hook;
  publisher_options.history_limit = options_.history_limit;
  publisher_options.attribute_rules = AttributeRulesOf(options_);
  // ${POD_IP} needs the pod watch, hence cluster access.
  if (kube_client_ != nullptr) publisher_options.pod_ips = &pod_ips_;
  if (options_.use_token_request) {
    // Only a signer that acts as the pod can use its token.
    if (options_.issuer == IssuerKind::kCertManager) {
      publisher_options.tokens = &tokens_;
    } else {
      spdlog::warn("--use-token-request has no effect with --issuer {}", issuer_->Name());
    }
  }
  publisher_ =
      std::make_unique<Publisher>(publisher_options, store_.get(), issuer_.get(), env_, &clock_);
  RenewerOptions renewer_options;
  renewer_options.data_root = options_.data_root;
  renewer_options.timeout = options_.publish_timeout;
  renewer_options.store = store_.get();
  renewer_options.tokens = publisher_options.tokens;
  renewer_options.attribute_rules = publisher_options.attribute_rules;
  renewer_options.pod_ips = publisher_options.pod_ips;
  renewer_options.on_renewed = [this](const std::string& volume_id) {
    if (pod_ip_reissuer_ != nullptr) pod_ip_reissuer_->OnRenewed(volume_id);
  };
  renewer_ = std::make_unique<Renewer>(renewer_options, issuer_.get(), env_, &clock_);
  scheduler_ =
      std::make_unique<RenewalScheduler>(options_.scheduler, store_.get(), renewer_.get(), &clock_);
  if (kube_client_ != nullptr) {
    WirePodIps();
    StartPodWatch();
  }
  health_ = std::make_unique<VolumeHealthChecker>(
      options_.data_root, publisher_options.attribute_rules, store_.get(), env_, &clock_);
}

void Node::WirePodIps() {
  PodIpReissuerOptions reissuer_options;
  reissuer_options.data_root = options_.data_root;
  reissuer_options.set_condition = [client = kube_client_](const kube::PodRef& pod,
                                                           std::stop_token stop) {
    return kube::SetPodConditionTrue(
        client.get(), pod, kPodIpReadinessCondition, "CertificateHasPodIPs",
        "certmount issued the volume's certificate with the pod's IP addresses",
        client->clock().SteadyNow() + std::chrono::seconds(30), std::move(stop));
  };
  // The pod addresses come from the pod watch that runs from startup
  // (StartPodWatch).
  pod_ip_reissuer_ = std::make_unique<PodIpReissuer>(
      std::move(reissuer_options), store_.get(), renewer_.get(), scheduler_.get(), &pod_ips_, env_);
}

// One watch of this node's pods from startup on, feeding the pod cache (the
// issuer's pod checks) and the pod-address reissuer: the issuer needs it for
// every issuance, so opening it on first need would only delay the first
// publishes. Until its first list is done the issuer waits briefly, then
// reads pods itself.
void Node::StartPodWatch() {
  kube::WatcherOptions watch;
  watch.collection_path = "/api/v1/pods";
  watch.field_selector = "spec.nodeName=" + options_.node_id;
  pod_watcher_ = std::make_unique<kube::Watcher>(
      kube_client_.get(), watch,
      [cache = &pod_cache_, reissuer = pod_ip_reissuer_.get()](const kube::WatchEvent& event) {
        cache->OnEvent(event);
        reissuer->OnPodEvent(event);
      },
      [cache = &pod_cache_](kube::ListBoundary boundary) { cache->OnListBoundary(boundary); });
  pod_watch_ =
      std::jthread([watcher = pod_watcher_.get(), cache = &pod_cache_](std::stop_token stop) {
        watcher->Run(std::move(stop));
        // A view nobody updates any more must not call a pod running (the
        // issuer may still be asked during the shutdown grace).
        cache->MarkUnsynced();
      });
  spdlog::info("watching the pods of node {}", options_.node_id);
}

// Served from before the startup cleanup: /healthz answers during a long
// cleanup, /readyz stays 503 until the CSI socket is served.
Status Node::StartMetrics() {
  metrics_server_ = std::make_unique<MetricsServer>(&metrics::DefaultRegistry(), store_.get());
  if (!options_.metrics_address.has_value()) return Status::Ok();
  state_metrics_.emplace(&metrics::DefaultRegistry(), store_.get(), scheduler_.get());
  if (Status s = metrics_server_->Start(*options_.metrics_address); !s.ok()) {
    spdlog::error("--metrics-address: {}", s.message());
    return s;
  }
  return Status::Ok();
}

Result<Node::Cleaned> Node::CleanUp() {
  Result<StartupSummary> startup = publisher_->Startup();
  if (!startup.ok()) return Failed("startup cleanup failed", startup.status());
  spdlog::info(
      "startup cleanup: kept {} rows, deleted {} (of which {} no longer mounted), removed {} "
      "orphan directories, adopted {} still-mounted directories without a row (kept {} that "
      "could not be adopted), {} ms",
      startup->kept, startup->deleted, startup->unmounted_by_check, startup->orphans_removed,
      startup->adopted, startup->kept_unadoptable, startup->milliseconds);
  return Cleaned(*startup);
}

Result<Node::ScheduleLoaded> Node::LoadSchedule(const Cleaned& /*cleaned*/) {
  // Only now, with every unmounted row gone, may renewals be scheduled.
  Result<SchedulerLoadSummary> loaded = scheduler_->Load();
  if (!loaded.ok()) return Failed("cannot load the renewal schedule", loaded.status());
  spdlog::info("renewal scheduler: {} volumes, {} overdue spread over {} s", loaded->volumes,
               loaded->overdue, loaded->spread_seconds);
  ReissueLeavesOfOtherCas();
  // The cleanup and the load parsed the mount table and every row; glibc
  // keeps the freed heap (tens of MiB on a node of 10,000 volumes) unless
  // asked to give it back, and a daemon's resident size should show what
  // it holds, not what it held.
  malloc_trim(0);
  return ScheduleLoaded();
}

void Node::ReissueLeavesOfOtherCas() {
  // With the signing CA alone in the bundle, a leaf of another CA would not
  // verify in its own volume anyway; reading every volume is then not worth it.
  if (local_ca_ == nullptr || !local_ca_->BundleHasOtherCas()) return;
  Result<std::vector<ScheduledVolume>> volumes = store_->ListRenewalSchedule();
  if (!volumes.ok()) {
    spdlog::warn("cannot list volumes to find leaves of other CAs: {}",
                 volumes.status().ToString());
    return;
  }
  std::vector<std::string> other;
  for (const ScheduledVolume& scheduled : *volumes) {
    Result<std::optional<VolumeRecord>> row = store_->GetVolume(scheduled.volume_id);
    if (!row.ok() || !row->has_value()) continue;
    Result<std::string> leaf = renewer_->CurrentCertificate(**row);
    if (leaf.ok() && !local_ca_->SignedByCurrentCa(*leaf)) other.push_back(scheduled.volume_id);
  }
  if (other.empty()) return;
  spdlog::warn(
      "{} of {} volumes hold a certificate of another CA in the trust bundle; "
      "re-issuing them from the signing CA",
      other.size(), volumes->size());
  scheduler_->RequestFor(other, VolumeRefresh::kReissue);
}

Node::Renewing Node::StartRenewals(ScheduleLoaded /*loaded*/) {
  if (pod_ip_reissuer_ != nullptr) {
    publisher_->set_observer(pod_ip_reissuer_.get());
    pod_ip_reissuer_->Start();
  } else {
    publisher_->set_observer(scheduler_.get());
  }
  publisher_->set_reissuer(
      [renewer = renewer_.get()](const VolumeRecord& volume,
                                 std::chrono::steady_clock::time_point deadline,
                                 std::stop_token stop) {
        return renewer->Renew(volume, std::move(stop), {deadline, IssuePurpose::kPublish});
      });
  scheduler_->Start();
  if (ca_watcher_ != nullptr || bundle_source_ != nullptr) {
    ca_poller_ = std::jthread([this](std::stop_token stop) {
      std::mutex mu;
      std::condition_variable_any wake;
      std::unique_lock lock(mu);
      for (;;) {
        // Returns early only when stop is requested.
        wake.wait_for(lock, stop, options_.ca_reload_interval, [] { return false; });
        if (stop.stop_requested()) return;
        ReloadCa(false);
      }
    });
  }
  return Renewing();
}

void Node::ReloadCa(bool force) {
  if (ca_watcher_ == nullptr && bundle_source_ == nullptr) {
    if (force) spdlog::info("CA reload asked: nothing to reload with --issuer {}", issuer_->Name());
    return;
  }
  std::lock_guard lock(ca_reload_mu_);
  if (bundle_source_ != nullptr) ReloadTrustBundleFile(force);
  if (ca_watcher_ != nullptr) ReloadLocalCa(force);
}

void Node::ReloadTrustBundleFile(bool force) {
  Result<bool> changed = bundle_source_->Poll(force);
  if (!changed.ok()) {
    spdlog::error("{} changed but cannot be used; volumes keep the bundle read before: {}",
                  bundle_source_->path(), changed.status().ToString());
    return;
  }
  if (!*changed) return;
  spdlog::warn("{} changed: rewriting the CA file of {} mounted volumes", bundle_source_->path(),
               scheduler_->size());
  scheduler_->RequestForAll(VolumeRefresh::kTrustBundle);
}

void Node::ReloadLocalCa(bool force) {
  Result<LocalCa::Change> change = ca_watcher_->Poll(force);
  if (!change.ok()) {
    spdlog::error(
        "local CA files changed but cannot be used; still signing with the CA loaded "
        "before: {}",
        change.status().ToString());
    return;
  }
  if (!change->any()) {
    if (force) spdlog::info("CA reload: the local CA files are unchanged");
    return;
  }
  const VolumeRefresh work = change->signer ? VolumeRefresh::kReissue : VolumeRefresh::kTrustBundle;
  spdlog::warn("local CA reloaded: {}; {} mounted volumes",
               change->signer ? "new signing CA, re-issuing every certificate"
                              : "new trust bundle, rewriting every volume's CA file",
               scheduler_->size());
  scheduler_->RequestForAll(work);
}

Status Node::Serve(const Renewing& /*renewing*/) {
  const std::string& socket_path = options_.socket_path;
  if (Status s = PrepareSocketPath(socket_path); !s.ok()) return Failed("--endpoint", s);
  identity_ = std::make_unique<IdentityService>(options_.driver_name, CERTMOUNT_VERSION, &ready_);
  node_service_ = std::make_unique<NodeService>(options_.node_id, publisher_.get(), health_.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path, grpc::InsecureServerCredentials());
  // gRPC's sync server starts a thread whenever a call leaves fewer than
  // MIN_POLLERS threads polling, and ends a thread that finishes a call
  // while MAX_POLLERS are polling. With the two equal, every call cost a
  // thread start and exit, and a fresh thread pays OpenSSL's per-thread
  // random generator and a cold malloc arena again: a third of a publish in
  // the benchmark. Headroom above MIN lets finished threads go back to
  // polling; idle extras exit after gRPC's poll timeout.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 8);
  builder.RegisterService(identity_.get());
  builder.RegisterService(node_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    spdlog::error("cannot listen on {}", options_.endpoint);
    return Status::Unavailable("cannot listen on " + options_.endpoint);
  }
  chmod(socket_path.c_str(), 0660);
  ready_ = true;
  metrics_server_->SetStartupComplete(true);
  spdlog::info("serving CSI on {}", options_.endpoint);
  return Status::Ok();
}

void Node::Shutdown() {
  RpcTracker::Instance().BeginShutdown();
  ca_poller_.request_stop();
  if (ca_poller_.joinable()) ca_poller_.join();
  ready_ = false;
  metrics_server_->SetStartupComplete(false);
  // No renewal starts from here on; running ones are cancelled and keep their
  // stored schedule, so the next start retries them on time.
  if (pod_ip_reissuer_ != nullptr) pod_ip_reissuer_->Stop();
  if (pod_watch_.joinable()) {
    pod_watch_.request_stop();
    pod_watch_.join();
  }
  scheduler_->Stop();

  // Running handlers get the grace period; publishes still issuing after it
  // are cancelled and roll back, so shutdown is bounded. gRPC's own Shutdown
  // deadline is not used for this: it also waits out idle connections, and
  // kubelet always keeps one open.
  const auto grace_ends = std::chrono::steady_clock::now() + options_.shutdown_grace;
  if (!RpcTracker::Instance().WaitIdleUntil(grace_ends)) {
    spdlog::warn("calls still running after --shutdown-grace; cancelling them");
    publisher_->CancelAll();
  }
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }
  // The collector reads the store and the scheduler: both must still exist.
  metrics_server_->Stop();
  state_metrics_.reset();
  store_.reset();
  unlink(options_.socket_path.c_str());
  spdlog::info("stopped");
}

}  // namespace certmount
