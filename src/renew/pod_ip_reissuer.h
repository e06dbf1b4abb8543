// Keeps the certificates of volumes whose ip-sans or dns-names use ${POD_IP}
// or ${POD_IPS} in step with their pods' addresses. kubelet publishes a volume
// before the pod has an address, so the first certificate goes out without
// it; this watches the node's pods (fed by a kube::Watcher on
// spec.nodeName=<node>) and, as soon as a pod's addresses appear, makes every
// volume of that pod whose certificate lacks them due at once through the
// renewal scheduler (which swaps the files in the existing mount). With the
// volume's readiness gate attribute it then sets the pod's condition.
//
// Which volumes await addresses is derived, never stored: a volume awaits
// while its spec asks for the pod's addresses and its tls.crt lacks one of
// them. So a restart needs no state: the watch's first list brings the
// addresses back and only certificates that lack them are issued again.
//
// All work runs on one worker thread, in arrival order; the callers (the
// publisher's observer calls, the renewer's hook and the watch) only queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "common/env.h"
#include "common/status.h"
#include "kube/pod.h"
#include "kube/watcher.h"
#include "renew/renewer.h"
#include "renew/scheduler.h"
#include "state/store.h"
#include "volume/pod_ips.h"
#include "volume/volume_observer.h"

namespace certmount {

// The pod condition the readiness gate waits for (the pod spec's
// readinessGates[].conditionType).
inline constexpr std::string_view kPodIpReadinessCondition = "certmount.io/pod-ip-certificate";

struct PodIpReissuerOptions {
  std::string data_root;
  // Sets kPodIpReadinessCondition True on the pod. Null: gates are not set
  // (logged once per pod).
  std::function<Status(const kube::PodRef& pod, std::stop_token stop)> set_condition;
};

class PodIpReissuer final : public VolumeObserver {
 public:
  // Everything passed must outlive the reissuer. `scheduler` also receives
  // every VolumeObserver call first.
  PodIpReissuer(PodIpReissuerOptions options, Store* store, Renewer* renewer,
                RenewalScheduler* scheduler, PodIps* pod_ips, Env* env);
  ~PodIpReissuer() override;
  PodIpReissuer(const PodIpReissuer&) = delete;
  PodIpReissuer& operator=(const PodIpReissuer&) = delete;

  // Starts the worker; its first job looks at every mounted row.
  void Start();
  // Drops queued work and joins the worker. Idempotent.
  void Stop();

  // A pod watch event (kube::Watcher's callback).
  void OnPodEvent(const kube::WatchEvent& event);
  // Renewer's on_renewed: a renewed certificate may be the one the
  // readiness gate waits for.
  void OnRenewed(const std::string& volume_id);

  // VolumeObserver: forwarded to the scheduler, then the volume is checked.
  void OnMounted(const ScheduledVolume& volume) override;
  void OnRemoved(const std::string& volume_id) override;

 private:
  enum class JobKind { kIndexAll, kPod, kPodDeleted, kMounted, kRenewed, kRemoved };
  struct Job {
    JobKind kind;
    std::string volume_id;
    kube::PodAddresses pod;
  };

  void Enqueue(Job job);
  void Run(std::stop_token stop);
  void Handle(const Job& job, std::stop_token stop);
  void IndexAll(std::stop_token stop);
  void HandlePod(const kube::PodAddresses& pod, std::stop_token stop);
  // Looks at one volume: forgets it unless it is mounted and asks for pod
  // addresses; when its pod's addresses are known and its certificate lacks
  // them, makes it due now (if `may_renew`), else sets the readiness gate.
  void CheckVolume(const std::string& volume_id, bool may_renew, std::stop_token stop);
  // Whether the volume's certificate file carries every IP and DNS SAN `spec`
  // wants (with the pod's addresses applied).
  bool CertificateHasAddresses(const std::string& volume_id, const CertificateSpec& spec);

  const PodIpReissuerOptions options_;
  Store* store_;
  Renewer* renewer_;
  RenewalScheduler* scheduler_;
  PodIps* pod_ips_;
  Env* env_;

  std::mutex mu_;
  std::condition_variable_any wake_;
  std::deque<Job> jobs_;
  bool stopped_ = false;

  // The worker's own: volumes asking for pod addresses (id -> pod UID),
  // and pods whose gate condition is set.
  std::map<std::string, std::string> volume_pods_;
  std::set<std::string> gated_pods_;
  std::set<std::string> gate_retry_pods_;  // setting the condition failed
  std::jthread worker_;
};

}  // namespace certmount
