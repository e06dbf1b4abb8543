// Read-only access to a node's state.db for admin tools (certmountctl status,
// history), safe while certmountd runs: the connection is opened
// SQLITE_OPEN_READONLY with query_only set, so it never creates the database,
// never migrates it and never writes to it; in WAL mode its reads never block
// certmountd's writes and see only committed transactions. (Reading a WAL
// database needs its -wal and -shm sidecars; when certmountd is not running
// SQLite creates them, empty, as it does for the sqlite3 shell.)
//
// Not thread-safe: one reader per thread. No function throws. SQLite failures
// are INTERNAL, or DATA_LOSS (naming the file) when the database is damaged.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/construction_key.h"
#include "common/status.h"
#include "state/volume_record.h"

namespace SQLite {
class Database;
}

namespace certmount {

// The database file certmountd keeps under `data_root`.
std::string StateDbPath(const std::string& data_root);

class StateReader {
 public:
  // Opens the database at `db_path` read-only. NOT_FOUND if there is no such
  // file (it is never created); PERMISSION_DENIED if it cannot be read;
  // FAILED_PRECONDITION when its schema version is newer than this binary's
  // migrations know (the file is left as it was), or 0 (certmountd has not
  // created the schema); DATA_LOSS when the file is not a readable database.
  // An older, known version opens: ListVolumes works on every version, and
  // ListIssuances says clearly when the version predates the history table.
  static Result<std::unique_ptr<StateReader>> Open(const std::string& db_path);

  ~StateReader();
  StateReader(const StateReader&) = delete;
  StateReader& operator=(const StateReader&) = delete;

  // Every row of `volumes` ordered by volume_id, mapped exactly as the Store
  // maps them. DATA_LOSS naming the volume if its attributes do not parse.
  Result<std::vector<VolumeRecord>> ListVolumes();

  // The volume's `issuances` rows, newest first, read in one snapshot with the
  // volume's existence. NOT_FOUND if no such volume; FAILED_PRECONDITION if the
  // file's schema predates the history table (certmountd adds it when it next
  // starts). A known volume with no history yields an empty list.
  Result<std::vector<IssuanceRecord>> ListIssuances(const std::string& volume_id);

  // PRAGMA user_version of the file when it was opened.
  int schema_version() const { return schema_version_; }

  // The newest schema version this binary's embedded migrations know.
  int known_schema_version() const { return known_schema_version_; }

  // The path given to Open.
  const std::string& db_path() const { return db_path_; }

  // For Open only.
  StateReader(ConstructionKey<StateReader>, std::unique_ptr<SQLite::Database> db,
              std::string db_path, int schema_version, int known_schema_version);

 private:
  std::unique_ptr<SQLite::Database> db_;
  const std::string db_path_;
  const int schema_version_;
  const int known_schema_version_;
};

}  // namespace certmount
