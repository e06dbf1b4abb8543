#include "state/statement_cache.h"

#include <SQLiteCpp/Database.h>

namespace certmount {

CachedStatement::~CachedStatement() {
  // tryReset reports the last step's error, which its caller has already
  // seen as an exception; here only the clean slate matters.
  statement_->tryReset();
  try {
    statement_->clearBindings();
  } catch (...) {
    // sqlite3_clear_bindings cannot fail on a prepared statement.
  }
}

CachedStatement StatementCache::Get(const std::string& sql) {
  auto found = statements_.find(sql);
  if (found == statements_.end()) {
    found = statements_.emplace(sql, std::make_unique<SQLite::Statement>(db_, sql)).first;
  }
  return CachedStatement(*found->second);
}

CachedTransaction::CachedTransaction(StatementCache& cache) : cache_(cache) {
  cache_.Get("BEGIN IMMEDIATE")->exec();
}

CachedTransaction::~CachedTransaction() {
  if (!open_) return;
  try {
    cache_.Get("ROLLBACK")->exec();
  } catch (...) {
    // SQLite rolls back by itself after some errors (e.g. SQLITE_FULL), and
    // then ROLLBACK fails with "no transaction is active"; nothing is left
    // to undo either way.
  }
}

void CachedTransaction::Commit() {
  cache_.Get("COMMIT")->exec();
  open_ = false;
}

}  // namespace certmount
