#include "state/database_copy.h"

#include <SQLiteCpp/Backup.h>
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <sqlite3.h>

#include "state/sqlite_error.h"

namespace certmount {

Status CopyDatabase(const std::string& from, const std::string& to, Env* env) {
  Result<FileStat> existing = env->LStat(to);
  if (existing.ok()) {
    return Status::AlreadyExists(to + " already exists; not copying " + from + " over it");
  }
  if (existing.status().code() != Code::kNotFound) return existing.status();
  return Guarded(from, "copying to " + to, [&]() -> Status {
    SQLite::Database source(from, SQLite::OPEN_READWRITE);
    SQLite::Database copy(to, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    // The copy is committed through a rollback journal with synchronous=FULL
    // (SQLite's default outside WAL), so it is on disk once the step is done.
    copy.exec("PRAGMA synchronous=FULL");
    SQLite::Backup backup(copy, source);
    if (const int result = backup.executeStep(-1); result != SQLITE_DONE) {
      return Status::Unavailable("copying " + from + " to " + to + ": " + sqlite3_errstr(result) +
                                 " (a writer holds it?)");
    }
    SQLite::Statement check(copy, "PRAGMA quick_check");
    if (!check.executeStep() || check.getColumn(0).getString() != "ok") {
      return Status::DataLoss("the copy of " + from + " at " + to + " fails quick_check");
    }
    return Status::Ok();
  });
}

}  // namespace certmount
