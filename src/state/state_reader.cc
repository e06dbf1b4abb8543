#include "state/state_reader.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>
#include <exception>
#include <utility>

#include "common/env.h"
#include "state/migrations.h"
#include "state/sqlite_error.h"
#include "state/volume_rows.h"

namespace certmount {
namespace {

// Long enough to wait out a checkpoint or WAL recovery by certmountd, short
// enough that an admin is not left staring at a hung command.
constexpr int kBusyTimeoutMs = 5000;

Status NoStateAt(const std::string& db_path) {
  return Status::NotFound("no node state at " + db_path +
                          ": is --data-root right, has certmountd run on this node?");
}

// Checked before SQLite sees the path, so a missing file gets the admin's
// message and a read-only open is never asked to do something it cannot.
Status CheckReadableFile(const std::string& db_path, Env* env) {
  Result<FileStat> st = env->Stat(db_path);
  if (!st.ok()) {
    // ENOENT, and ENOTDIR for a file where a directory should be.
    if (st.status().code() == Code::kNotFound || st.status().code() == Code::kFailedPrecondition) {
      return NoStateAt(db_path);
    }
    return Status::Internal("cannot stat " + db_path + ": " + st.status().message());
  }
  if (st->type != FileStat::Type::kRegular) {
    return Status::FailedPrecondition(db_path + " is not a regular file");
  }
  if (Status readable = env->CheckReadable(db_path); !readable.ok()) {
    return Status::PermissionDenied("cannot read " + db_path + ": " + readable.message() +
                                    " (it is mode 0600 and names pods; run as root)");
  }
  return Status::Ok();
}

Result<int> KnownSchemaVersion() {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<Migration> migrations,
                             ParseMigrations(EmbeddedMigrations()));
  return migrations.empty() ? 0 : migrations.back().version;
}

bool HasTable(SQLite::Database& db, const std::string& table) {
  SQLite::Statement query(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  query.bind(1, table);
  return query.executeStep();
}

}  // namespace

std::string StateDbPath(const std::string& data_root) { return data_root + "/state.db"; }

StateReader::StateReader(ConstructionKey<StateReader>, std::unique_ptr<SQLite::Database> db,
                         std::string db_path, int schema_version, int known_schema_version)
    : db_(std::move(db)),
      db_path_(std::move(db_path)),
      schema_version_(schema_version),
      known_schema_version_(known_schema_version) {}

StateReader::~StateReader() = default;

Result<std::unique_ptr<StateReader>> StateReader::Open(const std::string& db_path) {
  CERTMOUNT_ASSIGN_OR_RETURN(const int known, KnownSchemaVersion());
  CERTMOUNT_RETURN_IF_ERROR(CheckReadableFile(db_path, Env::Default()));
  return Guarded(db_path, "opening read-only", [&]() -> Result<std::unique_ptr<StateReader>> {
    // No OPEN_CREATE: a file removed since the check makes SQLite fail
    // rather than leave an empty database behind.
    std::unique_ptr<SQLite::Database> db;
    try {
      db = std::make_unique<SQLite::Database>(db_path, SQLite::OPEN_READONLY, kBusyTimeoutMs);
    } catch (const SQLite::Exception& e) {
      if ((e.getErrorCode() & 0xff) == SQLITE_CANTOPEN) {
        // Removed or made unreadable since the first check: say which.
        Status readable = CheckReadableFile(db_path, Env::Default());
        if (!readable.ok()) return readable;
      }
      throw;
    }
    // A second guard against writes: query_only is a connection setting, not
    // stored in the file.
    db->exec("PRAGMA query_only = ON");
    CERTMOUNT_ASSIGN_OR_RETURN(const int version, ReadSchemaVersion(*db, db_path));
    if (version > known) {
      return Status::FailedPrecondition(db_path + " is at schema version " +
                                        std::to_string(version) +
                                        ", this certmountctl knows up to " + std::to_string(known) +
                                        "; use a newer certmountctl");
    }
    if (version == 0) {
      return Status::FailedPrecondition(
          db_path +
          " has no certmount schema yet (version 0): certmountd creates it when it "
          "starts; is it running on this node?");
    }
    return std::make_unique<StateReader>(ConstructionKey<StateReader>(), std::move(db), db_path,
                                         version, known);
  });
}

Result<std::vector<VolumeRecord>> StateReader::ListVolumes() {
  return Guarded(db_path_, "listing volumes",
                 [&]() { return certmount::ListVolumes(*db_, schema_version_); });
}

Result<std::vector<IssuanceRecord>> StateReader::ListIssuances(const std::string& volume_id) {
  return Guarded(
      db_path_, "listing issuances of volume " + volume_id,
      [&]() -> Result<std::vector<IssuanceRecord>> {
        // One read transaction: the volume check and the history are the same
        // snapshot even if certmountd deletes the volume in between.
        SQLite::Transaction snapshot(*db_, SQLite::TransactionBehavior::DEFERRED);
        SQLite::Statement volume(*db_, "SELECT 1 FROM volumes WHERE volume_id = ?");
        volume.bind(1, volume_id);
        if (!volume.executeStep()) {
          return Status::NotFound("no volume " + volume_id + " in " + db_path_);
        }
        if (!HasTable(*db_, "issuances")) {
          return Status::FailedPrecondition(
              db_path_ + " is at schema version " + std::to_string(schema_version_) +
              ", which has no issuance history yet; certmountd adds it when it next starts");
        }
        return certmount::ListIssuances(*db_, volume_id);
      });
}

}  // namespace certmount
