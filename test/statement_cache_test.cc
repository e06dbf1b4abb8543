// The prepared-statement cache and its transaction, on a real SQLite file.
#include "state/statement_cache.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace certmount {
namespace {

class StatementCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = std::make_unique<SQLite::Database>(dir_.Sub("cache.db"),
                                             SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db_->exec("PRAGMA journal_mode = WAL");
    db_->exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)");
    db_->exec("INSERT INTO t (name) VALUES ('a'), ('b'), ('c')");
    cache_ = std::make_unique<StatementCache>(*db_);
  }

  int64_t Count() { return db_->execAndGet("SELECT count(*) FROM t").getInt64(); }

  testing::TempDir dir_;
  std::unique_ptr<SQLite::Database> db_;
  std::unique_ptr<StatementCache> cache_;
};

TEST_F(StatementCacheTest, TheSameSqlGetsTheSamePreparedStatement) {
  const char* sql = "SELECT name FROM t WHERE id = ?";
  SQLite::Statement* first = nullptr;
  {
    CachedStatement query = cache_->Get(sql);
    first = &*query;
  }
  CachedStatement again = cache_->Get(sql);
  EXPECT_EQ(&*again, first);
  CachedStatement other = cache_->Get("SELECT id FROM t WHERE name = ?");
  EXPECT_NE(&*other, first);
}

TEST_F(StatementCacheTest, AReturnedStatementStartsOverWithNoBindings) {
  const std::string sql = "SELECT name FROM t WHERE id >= ? ORDER BY id";
  {
    CachedStatement query = cache_->Get(sql);
    query->bind(1, 2);
    ASSERT_TRUE(query->executeStep());
    EXPECT_EQ(query->getColumn(0).getString(), "b");
    // Returned half-read: one row of two left.
  }
  CachedStatement query = cache_->Get(sql);
  // The old binding is gone: `id >= NULL` matches nothing.
  EXPECT_FALSE(query->executeStep());
}

TEST_F(StatementCacheTest, AHalfReadSelectDoesNotKeepAReadTransactionOpen) {
  {
    CachedStatement query = cache_->Get("SELECT name FROM t ORDER BY id");
    ASSERT_TRUE(query->executeStep());
  }
  // An open read would pin the WAL: a TRUNCATE checkpoint from another
  // connection would then report busy (first column 1).
  db_->exec("INSERT INTO t (name) VALUES ('d')");
  SQLite::Database other(dir_.Sub("cache.db"), SQLite::OPEN_READWRITE);
  SQLite::Statement checkpoint(other, "PRAGMA wal_checkpoint(TRUNCATE)");
  ASSERT_TRUE(checkpoint.executeStep());
  EXPECT_EQ(checkpoint.getColumn(0).getInt(), 0);
}

TEST_F(StatementCacheTest, BadSqlThrowsAndIsNotCached) {
  EXPECT_THROW(cache_->Get("SELECT nope FROM t"), SQLite::Exception);
  EXPECT_THROW(cache_->Get("SELECT nope FROM t"), SQLite::Exception);
}

TEST_F(StatementCacheTest, AStatementThatFailedWorksOnItsNextLoan) {
  const char* sql = "INSERT INTO t (id, name) VALUES (?, ?)";
  {
    CachedStatement insert = cache_->Get(sql);
    insert->bind(1, 1);  // taken
    insert->bind(2, "dup");
    EXPECT_THROW(insert->exec(), SQLite::Exception);
  }
  CachedStatement insert = cache_->Get(sql);
  insert->bind(1, 10);
  insert->bind(2, "ten");
  EXPECT_EQ(insert->exec(), 1);
  EXPECT_EQ(Count(), 4);
}

TEST_F(StatementCacheTest, ATransactionCommitsOnlyWhenAskedTo) {
  {
    CachedTransaction transaction(*cache_);
    db_->exec("INSERT INTO t (name) VALUES ('rolled back')");
  }
  EXPECT_EQ(Count(), 3);
  {
    CachedTransaction transaction(*cache_);
    db_->exec("INSERT INTO t (name) VALUES ('kept')");
    transaction.Commit();
  }
  EXPECT_EQ(Count(), 4);
  // Both paths left autocommit on, so a new transaction can begin.
  CachedTransaction next(*cache_);
  next.Commit();
}

TEST_F(StatementCacheTest, ATransactionHoldsTheWriteLock) {
  CachedTransaction transaction(*cache_);
  SQLite::Database other(dir_.Sub("cache.db"), SQLite::OPEN_READWRITE);
  EXPECT_THROW(other.exec("INSERT INTO t (name) VALUES ('blocked')"), SQLite::Exception);
}

}  // namespace
}  // namespace certmount
