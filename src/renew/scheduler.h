// The renewal scheduler: one timer for every mounted volume on the node.
//
// Volumes wait in one set ordered by (next issuance time, volume id). A single
// dispatcher thread sleeps on a condition variable until the earliest of them
// is due (or a token or a worker frees up), hands due volumes to a bounded
// pool of workers, and each worker renews one volume (Renewer) and records
// the outcome: on success the new certificate, on failure an exponential
// backoff with jitter, both persisted with a history row, so a restart
// neither renews everything at once nor forgets a backoff. All requests to
// the issuer pass one token bucket.
//
// The core (TakeDue, RunRenewal, RunOnce) runs without threads, so tests
// drive it with a FakeClock; Start() builds the production loop on it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/token_bucket.h"
#include "renew/backoff.h"
#include "renew/renewer.h"
#include "state/store.h"
#include "volume/volume_observer.h"

namespace certmount {

struct SchedulerOptions {
  // Renewals running at once (--max-concurrent-issuance); at least 1.
  int max_concurrent_issuance = 4;
  // Requests per second toward the issuer (--issuer-qps), and how many may
  // go at once after a quiet period (--issuer-burst).
  double issuer_qps = 10;
  int issuer_burst = 20;
  BackoffPolicy backoff;
  // History rows kept per volume (--history-limit).
  int history_limit = 10;
  // Seeds the backoff jitter; 0 draws a seed from std::random_device.
  uint64_t random_seed = 0;
};

// What Load found.
struct SchedulerLoadSummary {
  int64_t volumes = 0;         // mounted volumes now scheduled
  int64_t overdue = 0;         // of those, due at or before now
  int64_t spread_seconds = 0;  // the overdue ones are spread over this long
};

// A snapshot of the scheduler for metrics.
struct SchedulerStats {
  int64_t scheduled = 0;  // volumes known (waiting or being renewed)
  int64_t due = 0;        // due now but not started: waiting for a token, a worker, or queued
  int64_t running = 0;    // renewals running now
  int64_t rate_limit_waits = 0;        // see TokenBucket::waits
  double rate_limit_wait_seconds = 0;  // see TokenBucket::waited
};

class RenewalScheduler final : public VolumeObserver {
 public:
  // `store`, `renewer` and `clock` must outlive the scheduler.
  RenewalScheduler(SchedulerOptions options, Store* store, Renewer* renewer, const Clock* clock);
  // Stops (see Stop).
  ~RenewalScheduler() override;
  RenewalScheduler(const RenewalScheduler&) = delete;
  RenewalScheduler& operator=(const RenewalScheduler&) = delete;

  // Schedules every mounted row (Store::ListRenewalSchedule) at its
  // next_issuance_at. Rows already due are spread out from now at
  // issuer_qps, most overdue first, so that after downtime the issuer sees a
  // steady stream instead of a burst. Call once, after the startup cleanup
  // and before Start and serving; it sees only mounted rows.
  Result<SchedulerLoadSummary> Load();

  // VolumeObserver: schedules the volume at its next_issuance_at (now if it
  // has none), replacing an earlier schedule of the same id.
  void OnMounted(const ScheduledVolume& volume) override;
  // VolumeObserver: unschedules the volume. A renewal of it that is running
  // is cancelled and waited for; one not started yet never starts. Returns
  // only once no renewal of the volume runs or will start.
  void OnRemoved(const std::string& volume_id) override;

  // Makes a scheduled volume due now (e.g. its pod's addresses just became
  // known). One being renewed is renewed once more right after, as that
  // renewal may have started before the change. False for a volume that is
  // not scheduled.
  bool RenewNow(const std::string& volume_id);

  // The volumes that may start now: due by the clock, at most one issuer
  // token each, and no more than the free worker slots. They count as busy
  // until RunRenewal finishes them (or OnRemoved drops them).
  std::vector<std::string> TakeDue();

  // Renews a volume TakeDue returned, on the calling thread, records the
  // outcome in the store and schedules its next issuance (the new
  // certificate's next_issuance_at, or now + backoff after a failure). A
  // volume removed in the meantime, or whose row is gone or unmounted, is
  // dropped. Cancelled attempts record nothing.
  void RunRenewal(const std::string& volume_id);

  // TakeDue, then RunRenewal for each in turn. Returns how many ran.
  int RunOnce();

  // When `volume_id` is next due (unix seconds); nullopt when it is not
  // scheduled or is being renewed now.
  std::optional<int64_t> DueAt(const std::string& volume_id) const;
  // The earliest due time of any waiting volume.
  std::optional<int64_t> NextDueAt() const;
  // Volumes known (waiting or being renewed).
  size_t size() const;
  // The counts above in one consistent snapshot; walks only the due part of
  // the timer.
  SchedulerStats Stats() const;

  // Starts the dispatcher and max_concurrent_issuance workers.
  void Start();
  // Cancels running renewals, waits for them, and joins the threads; nothing
  // starts afterwards. Idempotent.
  void Stop();

 private:
  enum class State { kWaiting, kQueued, kRunning };
  struct Entry {
    int64_t due = 0;
    State state = State::kWaiting;
    bool removed = false;
    bool again = false;  // RenewNow while renewing: due again right after
    uint64_t generation = 0;
    // Made when the renewal is taken; none while waiting (saves an
    // allocation per volume, which matters at 100k volumes).
    std::stop_source stop{std::nostopstate};
  };

  std::vector<std::string> TakeDueLocked();
  void ScheduleLocked(const std::string& volume_id, Entry& entry, int64_t due);
  // Ends a taken renewal: reschedules at `next_due`, or forgets the volume
  // when it is nullopt or the volume was removed meanwhile.
  void Finish(const std::string& volume_id, uint64_t generation, std::optional<int64_t> next_due);
  // Record a finished renewal attempt of a mounted row and return when the
  // volume is next due: the certificate's next issuance time, or a backoff
  // after a failure. nullopt when the row is gone (unpublished meanwhile).
  std::optional<int64_t> RecordRenewed(const std::string& volume_id,
                                       const IssuedCertificateFields& renewed,
                                       const IssuanceAttempt& attempt);
  std::optional<int64_t> RecordFailed(const VolumeRecord& volume, const Status& failure,
                                      const IssuanceAttempt& attempt);
  void DispatchLoop();
  void WorkerLoop();

  const SchedulerOptions options_;
  Store* store_;
  Renewer* renewer_;
  const Clock* clock_;

  mutable std::mutex mu_;
  std::condition_variable dispatcher_wake_;
  std::condition_variable work_ready_;
  std::condition_variable finished_;
  std::unordered_map<std::string, Entry> entries_;
  std::set<std::pair<int64_t, std::string>> timer_;
  std::deque<std::string> work_;
  int busy_ = 0;  // taken and not finished: queued for a worker or running
  uint64_t next_generation_ = 1;
  TokenBucket bucket_;
  std::mt19937_64 random_;
  bool stopping_ = false;
  std::thread dispatcher_;
  std::vector<std::thread> workers_;
};

}  // namespace certmount
