// The node-state store: the SQLite database at <data-root>/state.db that
// remembers which volumes this node has published and their certificates.
//
// The rule it serves: a volume counts only once it is published. A row is
// registered with mounted = 0 before any work, becomes mounted = 1 in the same
// transaction that records the successful publish, and at startup every row
// still at 0 is deleted (StartupCleanupProven) before renewals start. A crash at any
// instant therefore leaves a node that the next start cleans completely.
//
// Thread-safe: one connection, every call serialised by a mutex. No function
// throws. SQLite failures are INTERNAL, or DATA_LOSS (naming the file) when the
// database is damaged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/construction_key.h"
#include "common/status.h"
#include "state/volume_record.h"

namespace SQLite {
class Database;
}

namespace certmount {

class StatementCache;

class Store {
 public:
  // Opens (creating with mode 0600 if absent) the database at `db_path`, sets
  // WAL, synchronous=NORMAL, foreign_keys=ON, a 4 MiB journal_size_limit and
  // a 5 s busy timeout, and applies pending migrations. FAILED_PRECONDITION,
  // without changing the file, when its schema is newer than this binary
  // knows; DATA_LOSS, also without changing it, when it is damaged (SQLite
  // says so, or PRAGMA quick_check finds a problem), with a message naming
  // the recovery procedure in docs/state.md.
  // `clock` stamps every row and must outlive the Store.
  static Result<std::unique_ptr<Store>> Open(const std::string& db_path, const Clock& clock);

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Inserts `volume`'s identity (id, target path, pod fields, service account,
  // attributes, issuer, request_name) with mounted=0, issuance_number=0 and
  // created_at=updated_at=now; its other fields are ignored. An id that
  // already has a row is not an error: nothing is written and that row's
  // target path and mounted flag come back, so a publish learns in one
  // transaction whether it is new. INVALID_ARGUMENT for an empty id or target
  // path, or for attributes holding kubelet's service account tokens (never
  // store secrets).
  Result<std::optional<RegisteredVolume>> TryRegisterVolume(const VolumeRecord& volume);

  // Records a failed renewal: the attempt count, when to try next and why it
  // failed. NOT_FOUND unless the row exists and is mounted.
  Status RecordRenewalFailure(const std::string& volume_id, int64_t attempts,
                              int64_t next_attempt_at, const std::string& error);

  // The history table: every issuance attempt appends one row to
  // `issuances`; the functions below change the volume row and append the
  // history row in ONE transaction, then keep only the newest
  // `history_limit` rows of that volume (at least 1 is always kept). Deleting
  // the volume deletes its history (ON DELETE CASCADE).

  // Records a successful publish: mounted=1, mounted_at=now, the certificate
  // fields, renewal_attempts=0, last_error NULL, plus a 'publish'/'ok'
  // history row with `cert`'s fields. NOT_FOUND if no such row;
  // INVALID_ARGUMENT for an empty serial.
  Status MarkMountedWithHistory(const std::string& volume_id, const IssuedCertificateFields& cert,
                                const IssuanceAttempt& attempt, int history_limit);

  // Records a successful renewal: the certificate fields (including the next
  // issuance time), renewal_attempts=0, last_error NULL, plus a
  // 'renewal'/'ok' history row with `cert`'s fields. NOT_FOUND (and no
  // history row) unless the row exists and is mounted; INVALID_ARGUMENT for
  // an empty serial.
  Status RecordRenewalWithHistory(const std::string& volume_id, const IssuedCertificateFields& cert,
                                  const IssuanceAttempt& attempt, int history_limit);

  // RecordRenewalFailure plus a 'renewal'/'error' history row holding
  // `error`. NOT_FOUND (and no history row) unless the row exists and is
  // mounted; INVALID_ARGUMENT for an empty error.
  Status RecordRenewalFailureWithHistory(const std::string& volume_id, int64_t attempts,
                                         int64_t next_attempt_at, const std::string& error,
                                         const IssuanceAttempt& attempt, int history_limit);

  // Records that issuance `issuance_number` of a mounted volume, signer-side
  // name `request_name` ("" stores NULL), is about to be asked for; done
  // before the issuer is called so a restart resumes the same name.
  // NOT_FOUND unless the row exists and is mounted; INVALID_ARGUMENT for a
  // negative number. TryRegisterVolume stores number 0 and the record's
  // request_name for the publish.
  Status BeginIssuance(const std::string& volume_id, int64_t issuance_number,
                       const std::string& request_name);

  // Deletes the row. True if it existed, false (still OK) if there was none.
  Result<bool> DeleteVolume(const std::string& volume_id);

  // The row, or nullopt if there is none. DATA_LOSS if its attributes (the
  // volume_attributes row) are missing or do not parse.
  Result<std::optional<VolumeRecord>> GetVolume(const std::string& volume_id);

  // Every row ordered by volume_id, with only VolumeSummary's columns.
  Result<std::vector<VolumeSummary>> ListVolumeSummaries();

  // Id and next_issuance_at of every mounted row, ordered by next_issuance_at
  // (then volume_id); what the renewal scheduler loads at startup.
  Result<std::vector<ScheduledVolume>> ListRenewalSchedule();

  // The startup cleanup, in ONE transaction: sets mounted=0 on every mounted
  // row that `is_proven_mounted` denies, asked about the row's id and target
  // path (the publisher's proof is a bind mount of that volume's own
  // directory at the target, not any mount point; after a reboot there is
  // none), then deletes every row with mounted=0. Returns what it deleted;
  // the caller removes those volumes' files after this returns. Call before
  // any renewal starts. `is_proven_mounted` runs under the store's lock and
  // must not call back into the Store. On error nothing changes.
  Result<StartupCleanupResult> StartupCleanupProven(
      const std::function<bool(const std::string& volume_id, const std::string& target_path)>&
          is_proven_mounted);

  // Rebuilds the row of a volume found mounted on the node without one (the
  // database was lost or moved aside): inserts `volume`'s identity as
  // TryRegisterVolume does and marks it mounted with `cert`, in ONE
  // transaction. ALREADY_EXISTS when the id has a row; nothing written then.
  Status AdoptVolume(const VolumeRecord& volume, const IssuedCertificateFields& cert);

  // OK when a write transaction can start right now: BEGIN IMMEDIATE, then
  // ROLLBACK, writing nothing. For readiness probes. INTERNAL (or DATA_LOSS)
  // with SQLite's reason otherwise, e.g. a read-only file or a lock held
  // past the busy timeout.
  Status CheckWritable();

  // For Open only.
  Store(ConstructionKey<Store>, std::unique_ptr<SQLite::Database> db, std::string db_path,
        const Clock& clock, int schema_version);

 private:
  // Test support (test/support/store_test_access.h) writes and reads through
  // the same connection and lock; nothing in src/ uses it.
  friend class StoreTestAccess;

  mutable std::mutex mutex_;
  std::unique_ptr<SQLite::Database> db_;
  const std::string db_path_;
  const Clock& clock_;
  // PRAGMA user_version after Open migrated the file.
  const int schema_version_;
  // After db_, so its statements are finalized before the connection closes.
  std::unique_ptr<StatementCache> statements_;
};

}  // namespace certmount
