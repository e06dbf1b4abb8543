#include "state/sqlite_error.h"

#include <sqlite3.h>

namespace certmount {

Status DamagedDatabase(const std::string& db_path, const std::string& problem) {
  return Status::DataLoss("state database " + db_path + " is damaged (" + problem +
                          "); recover it as docs/state.md \"Recovering a damaged state.db\" "
                          "says: stop certmountd, salvage the rows with sqlite3's .recover into "
                          "a new file, move the damaged one aside");
}

Status StatusFromSqliteError(int result_code, const std::string& sqlite_message,
                             const std::string& db_path, const std::string& operation) {
  const int primary_code = result_code & 0xff;
  if (primary_code == SQLITE_CORRUPT || primary_code == SQLITE_NOTADB) {
    return DamagedDatabase(db_path, sqlite_message + ", while " + operation);
  }
  if (primary_code == SQLITE_FULL) {
    return Status::ResourceExhausted("state database " + db_path + ": " + operation +
                                     " failed: the disk is full (" + sqlite_message + ")");
  }
  if (primary_code == SQLITE_BUSY || primary_code == SQLITE_LOCKED) {
    // Another connection (an admin's shell in a write transaction) held the
    // lock past the busy timeout; retrying later can succeed.
    return Status::Unavailable("state database " + db_path + ": " + operation +
                               " failed: " + sqlite_message);
  }
  return Status::Internal("state database " + db_path + ": " + operation +
                          " failed: " + sqlite_message);
}

}  // namespace certmount
