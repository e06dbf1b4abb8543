#include "state/store.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "state/attributes_json.h"
#include "state/migrations.h"
#include "state/private_file.h"
#include "state/sqlite_error.h"
#include "state/statement_cache.h"
#include "state/volume_rows.h"
#include "state/volume_writes.h"

namespace certmount {
namespace {

constexpr int kBusyTimeoutMs = 5000;
// What the WAL is cut back to once a checkpoint has copied it all: without a
// limit it keeps the largest size it ever reached (an admin's long read lets
// it grow), and SQLite reuses the file from its start without shrinking it.
constexpr int64_t kJournalSizeLimitBytes = 4 * 1024 * 1024;

// Every row `query` yields, each made by `from_row`.
template <typename FromRow>
auto CollectRows(SQLite::Statement& query, FromRow from_row) {
  std::vector<decltype(from_row(query))> rows;
  while (query.executeStep()) rows.push_back(from_row(query));
  return rows;
}

VolumeSummary SummaryFromRow(SQLite::Statement& row) {
  return VolumeSummary{row.getColumn(0).getString(),  row.getColumn(1).getString(),
                       row.getColumn(2).getString(),  row.getColumn(3).getInt() != 0,
                       OptionalInt(row.getColumn(4)), OptionalInt(row.getColumn(5))};
}

ScheduledVolume ScheduledFromRow(SQLite::Statement& row) {
  return ScheduledVolume{row.getColumn(0).getString(), OptionalInt(row.getColumn(1))};
}

// One history row: a success when `cert` is given, else a failure with
// `error`; the volume keeps its newest `limit` rows.
struct History {
  IssuanceKind kind;
  const IssuedCertificateFields* cert;
  std::string error;
  const IssuanceAttempt& attempt;
  int limit;
};

// Appends `history`'s row and prunes the volume's history to the newest
// `history.limit` rows. Expects an open transaction in which the volume row
// was just updated.
void AppendHistory(StatementCache& sql, const std::string& volume_id, const History& history,
                   int64_t now) {
  const IssuanceKind kind = history.kind;
  const IssuedCertificateFields* cert = history.cert;
  const IssuanceAttempt& attempt = history.attempt;
  const int limit = history.limit;
  CachedStatement insert = sql.Get(
      "INSERT INTO issuances (volume_id, kind, result, serial, not_before, "
      "not_after, issued_at, issuer, duration_ms, error) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert->bind(1, volume_id);
  insert->bind(2, IssuanceKindName(kind));
  insert->bind(3, cert != nullptr ? "ok" : "error");
  if (cert != nullptr) {
    insert->bind(4, cert->serial);
    insert->bind(5, cert->not_before);
    insert->bind(6, cert->not_after);
    insert->bind(10);
  } else {
    insert->bind(4);
    insert->bind(5);
    insert->bind(6);
    insert->bind(10, history.error);
  }
  insert->bind(7, now);
  insert->bind(8, attempt.issuer);
  insert->bind(9, std::max<int64_t>(0, attempt.duration_ms));
  insert->exec();

  // Everything at or below the (limit+1)-th newest id goes. With fewer rows
  // than that, as on every first publish, the subquery is NULL and the
  // delete touches nothing: two short walks of issuances_by_volume.
  CachedStatement prune = sql.Get(
      "DELETE FROM issuances WHERE volume_id = ?1 AND id <= "
      "(SELECT id FROM issuances WHERE volume_id = ?1 "
      "ORDER BY id DESC LIMIT 1 OFFSET ?2)");
  prune->bind(1, volume_id);
  prune->bind(2, std::max(1, limit));
  prune->exec();
}

// In ONE transaction: `update` changes the volume row (nothing is written
// when it fails), then `history`'s row is appended.
template <typename Update>
Status UpdateWithHistory(StatementCache& sql, const std::string& volume_id, const History& history,
                         int64_t now, Update update) {
  CachedTransaction transaction(sql);
  CERTMOUNT_RETURN_IF_ERROR(update());
  AppendHistory(sql, volume_id, history, now);
  transaction.Commit();
  return Status::Ok();
}

Status ApplyConnectionSettings(SQLite::Database& db) {
  // journal_mode answers with the mode now in effect; anything but "wal"
  // (e.g. on a filesystem without shared memory) would let readers block us.
  const std::string journal_mode = db.execAndGet("PRAGMA journal_mode = WAL").getString();
  if (journal_mode != "wal") {
    return Status::Internal("state database " + db.getFilename() +
                            " refused WAL mode (journal_mode=" + journal_mode + ")");
  }
  // NORMAL: in WAL mode a process crash loses nothing; only a power loss or
  // kernel crash can drop the last commits, and that also takes the tmpfs
  // and every bind mount with it, so the next start's mount check deletes
  // those rows anyway. FULL would add an fsync per commit under the store's
  // lock, which serialised concurrent publishes (docs/performance.md).
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA foreign_keys = ON");
  // The cascades delete a volume's attributes and history with its row, so
  // the startup cleanup's one DELETE leaves nothing behind; a SQLite built
  // without foreign keys ignores the pragma, and that must not go unnoticed.
  if (db.execAndGet("PRAGMA foreign_keys").getInt() != 1) {
    return Status::Internal("state database " + db.getFilename() +
                            ": SQLite does not enforce foreign keys");
  }
  // With the default automatic checkpoint (every 1000 pages), the first
  // write after the last reader of an old snapshot lets go restarts the WAL
  // and truncates it to this size (docs/state.md).
  db.exec("PRAGMA journal_size_limit = " + std::to_string(kJournalSizeLimitBytes));
  return Status::Ok();
}

// PRAGMA quick_check: the b-tree structure of every table and index (not
// index-to-table agreement). A damaged file is refused at open rather than
// found out by whichever query first reads the bad page.
Status CheckNotDamaged(SQLite::Database& db, const std::string& db_path) {
  SQLite::Statement check(db, "PRAGMA quick_check(5)");
  std::string problems;
  while (check.executeStep()) {
    const std::string line = check.getColumn(0).getString();
    if (line == "ok") return Status::Ok();
    problems += (problems.empty() ? "" : "; ") + line;
  }
  return DamagedDatabase(db_path, "quick_check: " + problems.substr(0, 512));
}

}  // namespace

Store::Store(ConstructionKey<Store>, std::unique_ptr<SQLite::Database> db, std::string db_path,
             const Clock& clock, int schema_version)
    : db_(std::move(db)),
      db_path_(std::move(db_path)),
      clock_(clock),
      schema_version_(schema_version),
      statements_(std::make_unique<StatementCache>(*db_)) {}

Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::Open(const std::string& db_path, const Clock& clock) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<Migration> migrations,
                             ParseMigrations(EmbeddedMigrations()));
  CERTMOUNT_RETURN_IF_ERROR(EnsurePrivateFile(db_path, Env::Default()));
  return Guarded(db_path, "opening", [&]() -> Result<std::unique_ptr<Store>> {
    auto db = std::make_unique<SQLite::Database>(
        db_path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_FULLMUTEX,
        kBusyTimeoutMs);
    // Check the version before any pragma writes to the file, so a newer
    // schema is refused with the file untouched.
    CERTMOUNT_ASSIGN_OR_RETURN(int version, ReadSchemaVersion(*db, db_path));
    CERTMOUNT_RETURN_IF_ERROR(CheckSchemaNotNewer(version, migrations, db_path));
    CERTMOUNT_RETURN_IF_ERROR(CheckNotDamaged(*db, db_path));
    CERTMOUNT_RETURN_IF_ERROR(ApplyConnectionSettings(*db));
    CERTMOUNT_ASSIGN_OR_RETURN(version, ApplyMigrations(*db, migrations, db_path));
    return std::make_unique<Store>(ConstructionKey<Store>(), std::move(db), db_path, clock,
                                   version);
  });
}

Result<std::optional<RegisteredVolume>> Store::TryRegisterVolume(const VolumeRecord& volume) {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "registering volume " + volume.volume_id,
                 [&]() -> Result<std::optional<RegisteredVolume>> {
                   CachedTransaction transaction(*statements_);
                   CERTMOUNT_ASSIGN_OR_RETURN(std::optional<RegisteredVolume> existing,
                                              InsertVolume(*statements_, volume, clock_.NowUnix()));
                   // Nothing was written when the id exists; committing an
                   // empty transaction costs the same as rolling it back.
                   transaction.Commit();
                   return existing;
                 });
}

Status Store::RecordRenewalFailure(const std::string& volume_id, int64_t attempts,
                                   int64_t next_attempt_at, const std::string& error) {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "recording failed renewal of volume " + volume_id, [&]() {
    return UpdateFailed(*statements_, volume_id, attempts, next_attempt_at, error,
                        clock_.NowUnix());
  });
}

Status Store::MarkMountedWithHistory(const std::string& volume_id,
                                     const IssuedCertificateFields& cert,
                                     const IssuanceAttempt& attempt, int history_limit) {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "marking volume " + volume_id + " mounted", [&]() -> Status {
    const int64_t now = clock_.NowUnix();
    const History history{IssuanceKind::kPublish, &cert, "", attempt, history_limit};
    return UpdateWithHistory(*statements_, volume_id, history, now,
                             [&] { return UpdateMounted(*statements_, volume_id, cert, now); });
  });
}

Status Store::RecordRenewalWithHistory(const std::string& volume_id,
                                       const IssuedCertificateFields& cert,
                                       const IssuanceAttempt& attempt, int history_limit) {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "recording renewal of volume " + volume_id, [&]() -> Status {
    const int64_t now = clock_.NowUnix();
    const History history{IssuanceKind::kRenewal, &cert, "", attempt, history_limit};
    return UpdateWithHistory(*statements_, volume_id, history, now,
                             [&] { return UpdateRenewed(*statements_, volume_id, cert, now); });
  });
}

Status Store::RecordRenewalFailureWithHistory(const std::string& volume_id, int64_t attempts,
                                              int64_t next_attempt_at, const std::string& error,
                                              const IssuanceAttempt& attempt, int history_limit) {
  if (error.empty()) {
    return Status::InvalidArgument("volume " + volume_id + ": a failed renewal needs its error");
  }
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "recording failed renewal of volume " + volume_id, [&]() -> Status {
    const int64_t now = clock_.NowUnix();
    const History history{IssuanceKind::kRenewal, nullptr, error, attempt, history_limit};
    return UpdateWithHistory(*statements_, volume_id, history, now, [&] {
      return UpdateFailed(*statements_, volume_id, attempts, next_attempt_at, error, now);
    });
  });
}

Status Store::BeginIssuance(const std::string& volume_id, int64_t issuance_number,
                            const std::string& request_name) {
  if (issuance_number < 0) {
    return Status::InvalidArgument("negative issuance number for volume " + volume_id);
  }
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "recording issuance number of volume " + volume_id, [&]() -> Status {
    CachedStatement update = statements_->Get(
        "UPDATE volumes SET issuance_number = ?, request_name = ?, "
        "updated_at = ? WHERE volume_id = ? AND mounted = 1");
    update->bind(1, issuance_number);
    BindOptional(*update, 2, request_name);
    update->bind(3, clock_.NowUnix());
    update->bind(4, volume_id);
    if (update->exec() == 0) return Status::NotFound("no mounted volume " + volume_id);
    return Status::Ok();
  });
}

Result<bool> Store::DeleteVolume(const std::string& volume_id) {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "deleting volume " + volume_id, [&]() -> Result<bool> {
    CachedStatement remove = statements_->Get("DELETE FROM volumes WHERE volume_id = ?");
    remove->bind(1, volume_id);
    return remove->exec() > 0;
  });
}

Result<std::optional<VolumeRecord>> Store::GetVolume(const std::string& volume_id) {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "reading volume " + volume_id,
                 [&]() -> Result<std::optional<VolumeRecord>> {
                   CachedStatement query =
                       statements_->Get(std::string(kVolumeSelectColumns) + "WHERE volume_id = ?");
                   query->bind(1, volume_id);
                   if (!query->executeStep()) return std::optional<VolumeRecord>();
                   CERTMOUNT_ASSIGN_OR_RETURN(VolumeRecord volume, VolumeFromRow(*query));
                   return std::optional<VolumeRecord>(std::move(volume));
                 });
}

Result<std::vector<VolumeSummary>> Store::ListVolumeSummaries() {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "listing volume summaries", [&]() -> Result<std::vector<VolumeSummary>> {
    CachedStatement query = statements_->Get(
        "SELECT volume_id, pod_namespace, pod_name, mounted, not_after, next_issuance_at "
        "FROM volumes ORDER BY volume_id");
    return CollectRows(*query, SummaryFromRow);
  });
}

Result<std::vector<ScheduledVolume>> Store::ListRenewalSchedule() {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "listing the renewal schedule",
                 [&]() -> Result<std::vector<ScheduledVolume>> {
                   CachedStatement query = statements_->Get(
                       "SELECT volume_id, next_issuance_at FROM volumes "
                       "WHERE mounted = 1 ORDER BY next_issuance_at, volume_id");
                   return CollectRows(*query, ScheduledFromRow);
                 });
}

Status Store::AdoptVolume(const VolumeRecord& volume, const IssuedCertificateFields& cert) {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "adopting volume " + volume.volume_id, [&]() -> Status {
    const int64_t now = clock_.NowUnix();
    CachedTransaction transaction(*statements_);
    CERTMOUNT_ASSIGN_OR_RETURN(std::optional<RegisteredVolume> existing,
                               InsertVolume(*statements_, volume, now));
    if (existing.has_value()) return AlreadyRegistered(volume.volume_id, *existing);
    CERTMOUNT_RETURN_IF_ERROR(UpdateMounted(*statements_, volume.volume_id, cert, now));
    transaction.Commit();
    return Status::Ok();
  });
}

Result<StartupCleanupResult> Store::StartupCleanupProven(
    const std::function<bool(const std::string& volume_id, const std::string& target_path)>&
        is_proven_mounted) {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "cleaning up at startup", [&]() -> Result<StartupCleanupResult> {
    const int64_t now = clock_.NowUnix();
    StartupCleanupResult result;
    SQLite::Transaction transaction(*db_, SQLite::TransactionBehavior::IMMEDIATE);

    std::vector<std::string> no_longer_mounted;
    SQLite::Statement mounted(*db_, "SELECT volume_id, target_path FROM volumes WHERE mounted = 1");
    while (mounted.executeStep()) {
      if (is_proven_mounted(mounted.getColumn(0).getString(), mounted.getColumn(1).getString())) {
        ++result.kept;
      } else {
        no_longer_mounted.push_back(mounted.getColumn(0).getString());
      }
    }
    SQLite::Statement unmount(*db_,
                              "UPDATE volumes SET mounted = 0, updated_at = ? WHERE volume_id = ?");
    for (const std::string& volume_id : no_longer_mounted) {
      unmount.bind(1, now);
      unmount.bind(2, volume_id);
      result.unmounted_by_check += unmount.exec();
      unmount.reset();
    }

    SQLite::Statement remove(
        *db_,
        "DELETE FROM volumes WHERE mounted = 0 RETURNING volume_id, target_path, pod_namespace");
    while (remove.executeStep()) {
      result.deleted.push_back(DeletedVolume{remove.getColumn(0).getString(),
                                             remove.getColumn(1).getString(),
                                             remove.getColumn(2).getString()});
    }
    transaction.commit();
    return result;
  });
}

Status Store::CheckWritable() {
  std::lock_guard lock(mutex_);
  return Guarded(db_path_, "checking that the database is writable", [&]() -> Status {
    // Taking the write lock and rolling back writes nothing, yet fails the
    // way a real write would on a read-only or locked database.
    CachedTransaction probe(*statements_);
    return Status::Ok();
  });
}

}  // namespace certmount
