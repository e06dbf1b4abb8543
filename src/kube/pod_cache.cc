#include "kube/pod_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

namespace certmount::kube {

PodCache::PodCache(size_t max_tombstones) : max_tombstones_(std::max<size_t>(1, max_tombstones)) {}

std::string PodCache::KeyOf(const std::string& namespace_, const std::string& name) {
  return namespace_ + "/" + name;
}

void PodCache::OnListBoundary(ListBoundary boundary) {
  std::lock_guard lock(mutex_);
  if (boundary == ListBoundary::kBegin) {
    listing_.emplace();
    return;
  }
  if (!listing_.has_value()) return;
  std::set<std::string> listed;
  for (const auto& [key, state] : *listing_) {
    listed.insert(state.addresses.pod.uid);
    ForgetDeletedLocked(state.addresses.pod.uid);
  }
  for (const auto& [key, state] : pods_) {
    const std::string& uid = state.addresses.pod.uid;
    if (listed.count(uid) == 0) RememberDeletedLocked(uid);
  }
  pods_ = std::move(*listing_);
  listing_.reset();
  synced_ = true;
  ChangedLocked();
}

void PodCache::OnEvent(const WatchEvent& event) {
  Result<PodState> state = ParsePodState(event.object_json);
  if (!state.ok()) {
    spdlog::warn("pod watch: {}", state.status().ToString());
    return;
  }
  const PodRef& pod = state->addresses.pod;
  const std::string key = KeyOf(pod.namespace_, pod.name);
  std::lock_guard lock(mutex_);
  if (listing_.has_value()) {
    (*listing_)[key] = std::move(*state);
    return;
  }
  if (event.type == "DELETED") {
    auto it = pods_.find(key);
    // A newer pod of the same name may already be in its place.
    if (it != pods_.end() && it->second.addresses.pod.uid == pod.uid) pods_.erase(it);
    RememberDeletedLocked(pod.uid);
  } else {
    ForgetDeletedLocked(pod.uid);
    pods_[key] = std::move(*state);
  }
  ChangedLocked();
}

void PodCache::MarkUnsynced() {
  std::lock_guard lock(mutex_);
  synced_ = false;
  listing_.reset();
  ChangedLocked();
}

bool PodCache::synced() const {
  std::lock_guard lock(mutex_);
  return synced_;
}

size_t PodCache::size() const {
  std::lock_guard lock(mutex_);
  return pods_.size();
}

size_t PodCache::tombstones() const {
  std::lock_guard lock(mutex_);
  return tombstones_.size();
}

std::optional<PodLiveness> PodCache::Liveness(const PodRef& pod) const {
  std::lock_guard lock(mutex_);
  return LivenessLocked(pod);
}

std::optional<PodLiveness> PodCache::LivenessLocked(const PodRef& pod) const {
  if (tombstones_.count(pod.uid) != 0) return PodLiveness::kGone;
  auto it = pods_.find(KeyOf(pod.namespace_, pod.name));
  if (it == pods_.end() || it->second.addresses.pod.uid != pod.uid) return std::nullopt;
  const PodLiveness liveness = LivenessOf(it->second);
  // Terminating and finished are never undone, so even an old view proves
  // them; running holds only as of a view the watch keeps current.
  if (liveness == PodLiveness::kRunning && !synced_) return std::nullopt;
  return liveness;
}

std::optional<PodLiveness> PodCache::WaitForLiveness(const PodRef& pod, const Clock& clock,
                                                     std::chrono::steady_clock::time_point until,
                                                     std::stop_token stop) const {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (std::optional<PodLiveness> known = LivenessLocked(pod)) return known;
    if (stop.stop_requested()) return std::nullopt;
    const auto remaining = until - clock.SteadyNow();
    if (remaining <= std::chrono::steady_clock::duration::zero()) return std::nullopt;
    // Slices, so that a clock moved by hand is noticed too.
    const auto slice =
        std::min<std::chrono::steady_clock::duration>(remaining, std::chrono::milliseconds(50));
    const uint64_t seen = generation_;
    changed_.wait_for(lock, stop, slice, [&] { return generation_ != seen; });
  }
}

void PodCache::RememberDeletedLocked(const std::string& uid) {
  if (!tombstones_.insert(uid).second) return;
  tombstone_order_.push_back(uid);
  while (tombstone_order_.size() > max_tombstones_) {
    tombstones_.erase(tombstone_order_.front());
    tombstone_order_.pop_front();
  }
}

void PodCache::ForgetDeletedLocked(const std::string& uid) {
  // UIDs are never reused, so this undoes nothing real; but the newest word
  // about a UID is the one that holds.
  if (tombstones_.erase(uid) != 0) std::erase(tombstone_order_, uid);
}

void PodCache::ChangedLocked() {
  ++generation_;
  changed_.notify_all();
}

}  // namespace certmount::kube
