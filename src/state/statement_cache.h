// Prepared statements kept for the life of one SQLite connection, so a hot
// path parses its SQL once instead of on every call: before this cache,
// sqlite3_prepare was a tenth of certmountd's CPU per publish
// (docs/performance.md). Not thread-safe: the Store's mutex guards it, as it
// guards the connection.
#pragma once

#include <SQLiteCpp/Statement.h>

#include <memory>
#include <string>
#include <unordered_map>

namespace SQLite {
class Database;
}

namespace certmount {

// A statement on loan from the cache. On destruction it is reset and its
// bindings cleared, so the next user starts clean and a half-read SELECT
// never keeps a read transaction open.
class CachedStatement {
 public:
  explicit CachedStatement(SQLite::Statement& statement) : statement_(&statement) {}
  ~CachedStatement();
  CachedStatement(const CachedStatement&) = delete;
  CachedStatement& operator=(const CachedStatement&) = delete;

  SQLite::Statement& operator*() const { return *statement_; }
  SQLite::Statement* operator->() const { return statement_; }

 private:
  SQLite::Statement* statement_;
};

class StatementCache {
 public:
  // `db` must outlive the cache.
  explicit StatementCache(SQLite::Database& db) : db_(db) {}
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  // The statement for `sql`, prepared on first use. Throws SQLite::Exception
  // when `sql` does not compile. Only one loan of a given `sql` may be out at
  // a time.
  CachedStatement Get(const std::string& sql);

  SQLite::Database& db() const { return db_; }

 private:
  SQLite::Database& db_;
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> statements_;
};

// BEGIN IMMEDIATE ... COMMIT with the three statements taken from the cache
// (SQLite::Transaction re-parses them each time). Rolls back on destruction
// unless committed.
class CachedTransaction {
 public:
  // Takes the write lock now; throws SQLite::Exception if it cannot.
  explicit CachedTransaction(StatementCache& cache);
  ~CachedTransaction();
  CachedTransaction(const CachedTransaction&) = delete;
  CachedTransaction& operator=(const CachedTransaction&) = delete;

  // Throws SQLite::Exception if the commit fails; the destructor then rolls
  // back.
  void Commit();

 private:
  StatementCache& cache_;
  bool open_ = true;
};

}  // namespace certmount
