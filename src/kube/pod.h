// Whether a pod still exists as the pod a volume was published for, and
// what a pod watch needs of one Pod object. The node's pod watch
// (kube/pod_cache.h) answers most questions; ReadPodLiveness is the GET for
// the ones it cannot. See docs/cert-manager.md ("Pod liveness").
#pragma once

#include <chrono>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kube/client.h"

namespace certmount::kube {

enum class PodLiveness {
  kRunning,      // exists with the expected UID, no deletionTimestamp, not finished
  kTerminating,  // metadata.deletionTimestamp is set
  kFinished,     // status.phase Succeeded or Failed: its volumes are being torn down
  kGone,         // 404, or the name now belongs to another pod (another UID)
};

// "running", "terminating", "finished", "gone".
const char* PodLivenessName(PodLiveness liveness);

struct PodRef {
  std::string namespace_;
  std::string name;
  std::string uid;
};

// INVALID_ARGUMENT when namespace, name or uid is empty: a volume context
// without them (podInfoOnMount off) names no pod to check.
Status CheckPodRef(const PodRef& pod);

// GETs /api/v1/namespaces/<namespace>/pods/<name> and classifies it.
// CheckPodRef's INVALID_ARGUMENT first; other failures are
// the client's (UNAVAILABLE, DEADLINE_EXCEEDED, PERMISSION_DENIED when the
// driver may not `get` pods, ...), with context naming the pod. The GET
// spends a token of `budget` when given one (Client::Call).
Result<PodLiveness> ReadPodLiveness(Client* client, const PodRef& pod,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::stop_token stop, ApiBudget* budget = nullptr);

// What a pod watch needs of one Pod object: who it is and its addresses.
struct PodAddresses {
  PodRef pod;
  // status.podIPs[*].ip in order (status.podIP first), or status.podIP
  // alone when podIPs is absent; empty before the sandbox has an address.
  std::vector<std::string> ips;
};

// Reads a Pod object's JSON text. INVALID_ARGUMENT when it is not an object
// with metadata.uid; a missing or malformed status gives no addresses.
Result<PodAddresses> ParsePodAddresses(std::string_view pod_json);

// What decides a pod's liveness, and its addresses.
struct PodState {
  PodAddresses addresses;
  bool terminating = false;  // metadata.deletionTimestamp is set
  std::string phase;         // status.phase; empty when absent
};

// ParsePodAddresses, plus deletionTimestamp and phase. Same errors.
Result<PodState> ParsePodState(std::string_view pod_json);

// kTerminating, kFinished or kRunning for the pod `state` describes (never
// kGone: that depends on which UID the caller asks about).
PodLiveness LivenessOf(const PodState& state);

// Sets condition `type` of the pod to status "True" with `reason` and
// `message`: one strategic-merge PATCH of pods/<name>/status (conditions
// merge by type, so others are kept), with the pod's UID as precondition so
// a new pod of the same name is never marked (409 CONFLICT then, as
// ABORTED). Needs RBAC `patch` on pods/status.
Status SetPodConditionTrue(Client* client, const PodRef& pod, std::string_view type,
                           std::string_view reason, std::string_view message,
                           std::chrono::steady_clock::time_point deadline, std::stop_token stop);

}  // namespace certmount::kube
