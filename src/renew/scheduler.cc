#include "renew/scheduler.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "volume/issuance_metrics.h"

namespace certmount {

namespace {

// Named threads let an admin (and the renewal bench) tell the scheduler's
// wake-ups from gRPC's in /proc/<pid>/task/*/comm.
void NameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

uint64_t SeedFrom(uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

RenewalScheduler::RenewalScheduler(SchedulerOptions options, Store* store, Renewer* renewer,
                                   const Clock* clock)
    : options_(std::move(options)),
      store_(store),
      renewer_(renewer),
      clock_(clock),
      bucket_(options_.issuer_qps, options_.issuer_burst, clock),
      random_(SeedFrom(options_.random_seed)) {}

RenewalScheduler::~RenewalScheduler() { Stop(); }

Result<SchedulerLoadSummary> RenewalScheduler::Load() {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<ScheduledVolume> rows, store_->ListRenewalSchedule());
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowUnix();
  SchedulerLoadSummary summary;
  entries_.reserve(entries_.size() + rows.size());
  for (const ScheduledVolume& row : rows) {
    int64_t due = row.next_issuance_at.value_or(now);
    if (due <= now) {
      due = SpreadDue(now, summary.overdue);
      summary.spread_seconds = due - now;
      ++summary.overdue;
    }
    Entry& entry = entries_[row.volume_id];
    if (entry.state == State::kWaiting && entry.generation != 0) {
      timer_.erase({entry.due, row.volume_id});
    }
    ScheduleLocked(row.volume_id, entry, due);
    ++summary.volumes;
  }
  dispatcher_wake_.notify_one();
  return summary;
}

// The k-th volume of a batch waits k / qps seconds: the token bucket alone
// would let a burst through first, and the spread keeps the timer's order
// honest for volumes published meanwhile.
int64_t RenewalScheduler::SpreadDue(int64_t now, int64_t index) const {
  return now + static_cast<int64_t>(std::floor(static_cast<double>(index) / options_.issuer_qps));
}

void RenewalScheduler::RequestForAll(VolumeRefresh work) {
  std::lock_guard lock(mu_);
  refresh_outstanding_ = true;
  const int64_t now = clock_->NowUnix();
  const bool recent = now <= last_request_until_;
  last_request_ = recent ? std::max(last_request_, work) : work;
  last_request_until_ = now + options_.refresh_window_seconds;
  int64_t index = 0;
  for (auto& [volume_id, entry] : entries_) RequestLocked(volume_id, entry, work, now, index);
  dispatcher_wake_.notify_one();
}

void RenewalScheduler::RequestFor(const std::vector<std::string>& volume_ids, VolumeRefresh work) {
  std::lock_guard lock(mu_);
  refresh_outstanding_ = true;
  const int64_t now = clock_->NowUnix();
  int64_t index = 0;
  for (const std::string& volume_id : volume_ids) {
    auto it = entries_.find(volume_id);
    if (it != entries_.end()) RequestLocked(volume_id, it->second, work, now, index);
  }
  dispatcher_wake_.notify_one();
}

void RenewalScheduler::RequestLocked(const std::string& volume_id, Entry& entry, VolumeRefresh work,
                                     int64_t now, int64_t& index) {
  entry.pending = std::max(entry.pending, work);
  // A volume being renewed is rescheduled at once by Finish.
  if (entry.state != State::kWaiting) return;
  const int64_t due = work == VolumeRefresh::kReissue ? SpreadDue(now, index++) : now;
  if (entry.due <= due) return;
  timer_.erase({entry.due, volume_id});
  entry.due = due;
  timer_.insert({due, volume_id});
}

void RenewalScheduler::ScheduleLocked(const std::string& volume_id, Entry& entry, int64_t due) {
  entry.due = due;
  entry.state = State::kWaiting;
  entry.removed = false;
  entry.generation = next_generation_++;
  entry.stop = std::stop_source(std::nostopstate);
  timer_.insert({due, volume_id});
}

void RenewalScheduler::OnMounted(const ScheduledVolume& volume) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowUnix();
  int64_t due = volume.next_issuance_at.value_or(now);
  auto [it, inserted] = entries_.try_emplace(volume.volume_id);
  Entry& entry = it->second;
  if (last_request_ != VolumeRefresh::kNone && now <= last_request_until_) {
    entry.pending = std::max(entry.pending, last_request_);
    due = std::min(due, now);
  }
  if (!inserted) {
    if (entry.state != State::kWaiting) {
      // Being renewed right now: that renewal reschedules it when done.
      entry.removed = false;
      return;
    }
    timer_.erase({entry.due, volume.volume_id});
  }
  ScheduleLocked(volume.volume_id, entry, due);
  // The dispatcher sleeps until the earliest due time; only a new earliest
  // changes that. Waking it for every publish would cost each one a context
  // switch on a small node.
  if (timer_.begin()->second == volume.volume_id) dispatcher_wake_.notify_one();
}

bool RenewalScheduler::RenewNow(const std::string& volume_id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(volume_id);
  if (it == entries_.end() || it->second.removed) return false;
  refresh_outstanding_ = true;
  int64_t index = 0;
  RequestLocked(volume_id, it->second, VolumeRefresh::kReissue, clock_->NowUnix(), index);
  dispatcher_wake_.notify_one();
  return true;
}

void RenewalScheduler::OnRemoved(const std::string& volume_id) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(volume_id);
  if (it == entries_.end()) return;
  Entry& entry = it->second;
  switch (entry.state) {
    case State::kWaiting:
      timer_.erase({entry.due, volume_id});
      entries_.erase(it);
      return;
    case State::kQueued: {
      // Taken but not started: it never will be. RunRenewal finds no entry.
      auto queued = std::find(work_.begin(), work_.end(), volume_id);
      if (queued != work_.end()) work_.erase(queued);
      entries_.erase(it);
      --busy_;
      dispatcher_wake_.notify_one();
      return;
    }
    case State::kRunning: {
      entry.removed = true;
      entry.stop.request_stop();
      const uint64_t generation = entry.generation;
      finished_.wait(lock, [&] {
        auto current = entries_.find(volume_id);
        return current == entries_.end() || current->second.generation != generation ||
               current->second.state != State::kRunning;
      });
      return;
    }
  }
}

std::vector<std::string> RenewalScheduler::TakeDue() {
  std::lock_guard lock(mu_);
  return TakeDueLocked();
}

std::vector<std::string> RenewalScheduler::TakeDueLocked() {
  std::vector<std::string> taken;
  if (stopping_) return taken;
  const int64_t now = clock_->NowUnix();
  const int slots = std::max(1, options_.max_concurrent_issuance);
  while (!timer_.empty() && busy_ < slots) {
    auto first = timer_.begin();
    if (first->first > now) break;
    Entry& entry = entries_.at(first->second);
    // Rewriting a bundle asks the issuer nothing.
    if (entry.pending != VolumeRefresh::kTrustBundle && !bucket_.TryTake()) break;
    std::string volume_id = first->second;
    timer_.erase(first);
    entry.state = State::kQueued;
    entry.stop = std::stop_source();
    ++busy_;
    taken.push_back(std::move(volume_id));
  }
  return taken;
}

void RenewalScheduler::Finish(const std::string& volume_id, uint64_t generation,
                              std::optional<int64_t> next_due, VolumeRefresh keep) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(volume_id);
  if (it != entries_.end() && it->second.generation == generation) {
    --busy_;
    Entry& entry = it->second;
    if (entry.removed || !next_due.has_value() || stopping_) {
      entries_.erase(it);
    } else {
      // Asked for more while it ran: at once. What a failed attempt keeps
      // waits for next_due, its retry time.
      const VolumeRefresh asked = entry.pending;
      ScheduleLocked(
          volume_id, entry,
          asked == VolumeRefresh::kNone ? *next_due : std::min(*next_due, clock_->NowUnix()));
      entry.pending = std::max(asked, keep);
      entry.running = VolumeRefresh::kNone;
    }
  }
  finished_.notify_all();
  dispatcher_wake_.notify_one();
}

void RenewalScheduler::RunRenewal(const std::string& volume_id) {
  uint64_t generation = 0;
  VolumeRefresh work = VolumeRefresh::kNone;
  std::stop_token stop;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(volume_id);
    if (it == entries_.end() || it->second.state != State::kQueued) return;
    it->second.state = State::kRunning;
    it->second.running = std::exchange(it->second.pending, VolumeRefresh::kNone);
    work = it->second.running;
    generation = it->second.generation;
    stop = it->second.stop.get_token();
  }
  if (stop.stop_requested()) return Finish(volume_id, generation, std::nullopt);

  Result<std::optional<VolumeRecord>> row = store_->GetVolume(volume_id);
  if (!row.ok()) {
    spdlog::warn("renewal of volume {}: cannot read its row: {}", volume_id,
                 row.status().ToString());
    return Finish(volume_id, generation, clock_->NowUnix() + options_.backoff.initial.count());
  }
  if (!row->has_value() || !(*row)->mounted) {
    return Finish(volume_id, generation, std::nullopt);
  }
  const VolumeRecord& volume = **row;
  if (work == VolumeRefresh::kTrustBundle) {
    Status refreshed = renewer_->RefreshTrustBundle(volume);
    if (refreshed.ok()) {
      return Finish(volume_id, generation, volume.next_issuance_at.value_or(clock_->NowUnix()));
    }
    spdlog::warn("volume {}: cannot rewrite its CA bundle, retrying in {}s: {}", volume_id,
                 options_.backoff.initial.count(), refreshed.ToString());
    return Finish(volume_id, generation, clock_->NowUnix() + options_.backoff.initial.count(),
                  work);
  }

  const auto started = clock_->SteadyNow();
  Result<IssuedCertificateFields> renewed = renewer_->Renew(volume, stop);
  IssuanceAttempt attempt;
  attempt.issuer = renewer_->issuer_name();
  attempt.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - started).count();
  // Cancelled attempts are neither history nor metrics: they say nothing
  // about the issuer.
  if (renewed.ok() || !stop.stop_requested()) {
    RecordIssuanceMetrics(attempt.issuer, IssuanceKind::kRenewal, renewed.ok(),
                          std::chrono::duration<double>(clock_->SteadyNow() - started).count());
  }

  if (renewed.ok()) {
    // Recorded even when a stop came late: the files are already new, and
    // the row (deleted only after OnRemoved returns) should say so.
    return Finish(volume_id, generation, RecordRenewed(volume_id, *renewed, attempt));
  }
  if (stop.stop_requested()) {
    // Unpublished or shutting down: the row keeps its schedule, so a
    // restart tries again at the same time and the backoff is unchanged.
    return Finish(volume_id, generation, std::nullopt);
  }
  // A failed re-issue keeps its request: an old-CA leaf must not outlive
  // the rotation.
  Finish(volume_id, generation, RecordFailed(volume, renewed.status(), attempt), work);
}

std::optional<int64_t> RenewalScheduler::RecordRenewed(const std::string& volume_id,
                                                       const IssuedCertificateFields& renewed,
                                                       const IssuanceAttempt& attempt) {
  Status recorded =
      store_->RecordRenewalWithHistory(volume_id, renewed, attempt, options_.history_limit);
  if (recorded.code() == Code::kNotFound) return std::nullopt;
  if (!recorded.ok()) {
    spdlog::warn("renewal of volume {}: certificate {} is in place but not recorded: {}", volume_id,
                 renewed.serial, recorded.ToString());
  }
  spdlog::info("renewed volume {} serial {} not_after {} next issuance at {}", volume_id,
               renewed.serial, renewed.not_after, renewed.next_issuance_at);
  return renewed.next_issuance_at;
}

std::optional<int64_t> RenewalScheduler::RecordFailed(const VolumeRecord& volume,
                                                      const Status& failure,
                                                      const IssuanceAttempt& attempt) {
  const int64_t attempts = volume.renewal_attempts + 1;
  std::chrono::seconds delay;
  {
    std::lock_guard lock(mu_);
    delay = RetryDelay(options_.backoff, attempts, random_);
  }
  const int64_t next_attempt_at = clock_->NowUnix() + delay.count();
  const std::string error = failure.ToString();
  Status recorded = store_->RecordRenewalFailureWithHistory(
      volume.volume_id, attempts, next_attempt_at, error, attempt, options_.history_limit);
  if (recorded.code() == Code::kNotFound) return std::nullopt;
  if (!recorded.ok()) {
    spdlog::warn("renewal of volume {}: cannot record its failure: {}", volume.volume_id,
                 recorded.ToString());
  }
  spdlog::warn("renewal of volume {} failed (attempt {}), retrying in {}s: {}", volume.volume_id,
               attempts, delay.count(), error);
  return next_attempt_at;
}

int RenewalScheduler::RunOnce() {
  std::vector<std::string> taken = TakeDue();
  for (const std::string& volume_id : taken) RunRenewal(volume_id);
  return static_cast<int>(taken.size());
}

std::optional<int64_t> RenewalScheduler::DueAt(const std::string& volume_id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(volume_id);
  if (it == entries_.end() || it->second.state != State::kWaiting) return std::nullopt;
  return it->second.due;
}

std::optional<int64_t> RenewalScheduler::NextDueAt() const {
  std::lock_guard lock(mu_);
  if (timer_.empty()) return std::nullopt;
  return timer_.begin()->first;
}

size_t RenewalScheduler::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

SchedulerStats RenewalScheduler::Stats() const {
  std::lock_guard lock(mu_);
  SchedulerStats stats;
  stats.scheduled = static_cast<int64_t>(entries_.size());
  const int64_t now = clock_->NowUnix();
  for (auto it = timer_.begin(); it != timer_.end() && it->first <= now; ++it) ++stats.due;
  stats.due += static_cast<int64_t>(work_.size());
  stats.running = busy_ - static_cast<int64_t>(work_.size());
  stats.rate_limit_waits = bucket_.waits();
  stats.rate_limit_wait_seconds = bucket_.waited().count();
  // Walked only while a RequestForAll may still be owed.
  for (auto it = entries_.begin(); refresh_outstanding_ && it != entries_.end(); ++it) {
    const Entry& entry = it->second;
    const VolumeRefresh owed = std::max(entry.pending, entry.running);
    if (owed == VolumeRefresh::kReissue) ++stats.reissue_pending;
    if (owed == VolumeRefresh::kTrustBundle) ++stats.trust_bundle_pending;
  }
  if (stats.reissue_pending == 0 && stats.trust_bundle_pending == 0) refresh_outstanding_ = false;
  return stats;
}

void RenewalScheduler::Start() {
  std::lock_guard lock(mu_);
  if (stopping_ || dispatcher_.joinable()) return;
  const int workers = std::max(1, options_.max_concurrent_issuance);
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this] {
      NameThisThread("renew-worker");
      WorkerLoop();
    });
  }
  dispatcher_ = std::thread([this] {
    NameThisThread("renew-dispatch");
    DispatchLoop();
  });
}

void RenewalScheduler::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [id, entry] : entries_) {
      if (entry.state != State::kWaiting) entry.stop.request_stop();
    }
    // Queued renewals never start; their entries are finished here.
    for (const std::string& volume_id : work_) {
      auto it = entries_.find(volume_id);
      if (it != entries_.end()) entries_.erase(it);
      --busy_;
    }
    work_.clear();
  }
  dispatcher_wake_.notify_all();
  work_ready_.notify_all();
  finished_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
}

void RenewalScheduler::DispatchLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    std::vector<std::string> taken = TakeDueLocked();
    for (std::string& volume_id : taken) work_.push_back(std::move(volume_id));
    if (!taken.empty()) work_ready_.notify_all();

    // Sleep until something can change: the earliest due time, the next
    // token, or (when every worker is busy) a worker finishing; publishes,
    // removals and Stop notify as well.
    if (timer_.empty() || busy_ >= std::max(1, options_.max_concurrent_issuance)) {
      dispatcher_wake_.wait(lock);
      continue;
    }
    const int64_t due = timer_.begin()->first;
    const int64_t now = clock_->NowUnix();
    if (due > now) {
      dispatcher_wake_.wait_for(lock, std::chrono::seconds(due - now));
    } else {
      const auto wait = bucket_.NextTokenAt() - clock_->SteadyNow();
      dispatcher_wake_.wait_for(
          lock, std::max<std::chrono::steady_clock::duration>(wait, std::chrono::milliseconds(1)));
    }
  }
}

void RenewalScheduler::WorkerLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    work_ready_.wait(lock, [&] { return stopping_ || !work_.empty(); });
    if (stopping_) return;
    std::string volume_id = std::move(work_.front());
    work_.pop_front();
    lock.unlock();
    RunRenewal(volume_id);
    lock.lock();
  }
}

}  // namespace certmount
