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
  // A volume mounted this long after a RequestForAll gets the request too:
  // its publish may have issued before the change. Node sets it from
  // --publish-timeout.
  int64_t refresh_window_seconds = 60;
  // Seeds the backoff jitter; 0 draws a seed from std::random_device.
  uint64_t random_seed = 0;
};

// Work RequestForAll asks of every scheduled volume, in increasing order: a
// re-issue also writes the new trust bundle.
enum class VolumeRefresh : uint8_t {
  kNone = 0,
  // Rewrite the CA file from Issuer::TrustBundlePem, keeping the
  // certificate and key (Renewer::RefreshTrustBundle); no issuer request.
  kTrustBundle = 1,
  // Issue a new certificate now (the signing CA changed).
  kReissue = 2,
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
  // Volumes still waiting for, or running, the work of RequestForAll.
  int64_t reissue_pending = 0;
  int64_t trust_bundle_pending = 0;
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
  // has none), replacing an earlier schedule of the same id; at once, with
  // the request, within refresh_window_seconds of a RequestForAll.
  void OnMounted(const ScheduledVolume& volume) override;
  // VolumeObserver: unschedules the volume. A renewal of it that is running
  // is cancelled and waited for; one not started yet never starts. Returns
  // only once no renewal of the volume runs or will start.
  void OnRemoved(const std::string& volume_id) override;

  // Asks for `work` on every volume known now: each is made due at once
  // (re-issues spread from now at issuer_qps, as Load spreads overdue
  // volumes, and each takes an issuer token; bundle rewrites take none). A
  // volume being renewed gets it right after. A failed attempt keeps the
  // request and retries after the initial backoff. The greater request wins
  // when they meet.
  void RequestForAll(VolumeRefresh work);
  // The same for the scheduled volumes among `volume_ids` only, without the
  // window that RequestForAll opens for volumes mounted after it.
  void RequestFor(const std::vector<std::string>& volume_ids, VolumeRefresh work);
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
  // the timer, and every volume only while a RequestForAll may be owed.
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
    uint64_t generation = 0;
    VolumeRefresh pending = VolumeRefresh::kNone;
    // What the running attempt does (taken from pending when it starts).
    VolumeRefresh running = VolumeRefresh::kNone;
    // Made when the renewal is taken; none while waiting (saves an
    // allocation per volume, which matters at 100k volumes).
    std::stop_source stop{std::nostopstate};
  };

  std::vector<std::string> TakeDueLocked();
  // RequestFor's work on one entry; `index` counts the re-issues spread.
  void RequestLocked(const std::string& volume_id, Entry& entry, VolumeRefresh work, int64_t now,
                     int64_t& index);
  void ScheduleLocked(const std::string& volume_id, Entry& entry, int64_t due);
  // The due time of the `index`-th of a batch spread from `now` at issuer_qps.
  int64_t SpreadDue(int64_t now, int64_t index) const;

  // Ends a taken renewal: reschedules at `next_due`, or forgets the volume
  // when it is nullopt or the volume was removed meanwhile.
  // `keep`: the work a failed attempt still owes, retried at next_due.
  void Finish(const std::string& volume_id, uint64_t generation, std::optional<int64_t> next_due,
              VolumeRefresh keep = VolumeRefresh::kNone);
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
  mutable bool refresh_outstanding_ = false;  // set by RequestForAll, cleared by Stats
  VolumeRefresh last_request_ = VolumeRefresh::kNone;
  int64_t last_request_until_ = 0;  // unix seconds: see refresh_window_seconds
  std::thread dispatcher_;
  std::vector<std::thread> workers_;
};

}  // namespace certmount
