// The node's pods as its pod watch (a kube::Watcher on /api/v1/pods with
// fieldSelector spec.nodeName=<node>) last showed them, so that whether a
// volume's pod still runs is answered from memory instead of one GET per
// issuance. It answers only what the watch's view proves (see Liveness);
// the caller reads the pod itself for everything else. See
// docs/cert-manager.md ("Pod liveness").
//
// Thread-safe: the watch thread feeds it, any thread asks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_set>

#include "common/clock.h"
#include "kube/pod.h"
#include "kube/watcher.h"

namespace certmount::kube {

class PodCache {
 public:
  // UIDs of deleted pods remembered; the oldest are forgotten first. A
  // node runs at most a few hundred pods, so a few thousand deletions cover
  // far more churn than any answer has to wait for.
  static constexpr size_t kDefaultMaxTombstones = 4096;

  explicit PodCache(size_t max_tombstones = kDefaultMaxTombstones);
  PodCache(const PodCache&) = delete;
  PodCache& operator=(const PodCache&) = delete;

  // The Watcher's callbacks. A list's objects replace the whole view at
  // kEnd; pods of the old view missing from it were deleted meanwhile (a
  // pod never leaves its node, and UIDs are never reused) and are
  // remembered as deleted. The first kEnd makes the cache synced. A
  // DELETED event removes the pod and remembers its UID as deleted.
  // Objects that are not Pods are ignored.
  void OnListBoundary(ListBoundary boundary);
  void OnEvent(const WatchEvent& event);
  // The watch stopped: no pod is called running again until a list ends.
  // What is already proven final (deleted, terminating, finished) stays.
  void MarkUnsynced();

  // Whether a list has completed since construction or MarkUnsynced.
  bool synced() const;
  // Pods in the view, and UIDs remembered as deleted; for tests and logs.
  size_t size() const;
  size_t tombstones() const;

  // What the watch proves about `pod` (namespace, name and uid): kGone when
  // its UID was seen deleted; kTerminating or kFinished when the pod of that
  // name with that UID was last seen with a deletionTimestamp or phase
  // Succeeded/Failed (neither is ever undone); kRunning when it was last
  // seen otherwise and the cache is synced. Else nullopt: not synced, never
  // seen, or the name holds another UID (which may be the watch lagging
  // behind a pod recreated under the same name).
  std::optional<PodLiveness> Liveness(const PodRef& pod) const;

  // Liveness, waiting until it answers, `until` passes on `clock`, or
  // `stop`; wakes as soon as a list or event makes it answer.
  std::optional<PodLiveness> WaitForLiveness(const PodRef& pod, const Clock& clock,
                                             std::chrono::steady_clock::time_point until,
                                             std::stop_token stop) const;

 private:
  static std::string KeyOf(const std::string& namespace_, const std::string& name);
  // Must hold mutex_.
  std::optional<PodLiveness> LivenessLocked(const PodRef& pod) const;
  void RememberDeletedLocked(const std::string& uid);
  void ForgetDeletedLocked(const std::string& uid);
  void ChangedLocked();

  const size_t max_tombstones_;
  mutable std::mutex mutex_;
  mutable std::condition_variable_any changed_;
  // "namespace/name" -> the pod last seen under that name.
  std::map<std::string, PodState> pods_;
  // The objects of the list in progress, between kBegin and kEnd.
  std::optional<std::map<std::string, PodState>> listing_;
  bool synced_ = false;
  // Deleted UIDs, oldest first, and the same as a set.
  std::deque<std::string> tombstone_order_;
  std::unordered_set<std::string> tombstones_;
  // Bumped at every change, so a waiter can tell a wake-up from a timeout.
  uint64_t generation_ = 0;
};

}  // namespace certmount::kube
