#include "state/migrations.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <regex>

#include "state/sqlite_error.h"

namespace certmount {
namespace {

int NewestVersion(const std::vector<Migration>& migrations) {
  return migrations.empty() ? 0 : migrations.back().version;
}

int ReadUserVersion(SQLite::Database& db) { return db.execAndGet("PRAGMA user_version").getInt(); }

}  // namespace

Result<std::vector<Migration>> ParseMigrations(const std::vector<EmbeddedFile>& files) {
  static const std::regex kNamePattern("^([0-9]{4})_[a-z0-9_]+\\.sql$");
  std::vector<Migration> migrations;
  migrations.reserve(files.size());
  for (const EmbeddedFile& file : files) {
    const std::string name(file.name);
    std::smatch match;
    if (!std::regex_match(name, match, kNamePattern)) {
      return Status::Internal("migration file name '" + name + "' does not match NNNN_name.sql");
    }
    migrations.push_back(Migration{std::stoi(match[1].str()), name, file.content});
  }
  std::sort(migrations.begin(), migrations.end(),
            [](const Migration& a, const Migration& b) { return a.version < b.version; });
  for (size_t i = 0; i < migrations.size(); ++i) {
    const int expected = static_cast<int>(i) + 1;
    if (migrations[i].version != expected) {
      return Status::Internal("migrations are not contiguous: expected version " +
                              std::to_string(expected) + " but found " + migrations[i].name);
    }
  }
  return migrations;
}

Result<int> ReadSchemaVersion(SQLite::Database& db, const std::string& db_path) {
  try {
    return ReadUserVersion(db);
  } catch (const SQLite::Exception& e) {
    return StatusFromSqliteError(e.getErrorCode(), e.what(), db_path, "reading schema version");
  }
}

Status CheckSchemaNotNewer(int current_version, const std::vector<Migration>& migrations,
                           const std::string& db_path) {
  const int newest = NewestVersion(migrations);
  if (current_version > newest) {
    return Status::FailedPrecondition(
        db_path + " is at schema version " + std::to_string(current_version) +
        ", this certmountd knows up to " + std::to_string(newest) +
        "; upgrade certmountd, or move the file aside to start with an empty state");
  }
  return Status::Ok();
}

Result<int> ApplyMigrations(SQLite::Database& db, const std::vector<Migration>& migrations,
                            const std::string& db_path) {
  int version = 0;
  try {
    version = ReadUserVersion(db);
    CERTMOUNT_RETURN_IF_ERROR(CheckSchemaNotNewer(version, migrations, db_path));
    for (const Migration& migration : migrations) {
      if (migration.version <= version) continue;
      SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
      // Another process may have migrated between our read and the lock.
      const int locked_version = ReadUserVersion(db);
      if (locked_version >= migration.version) {
        version = locked_version;
        continue;
      }
      db.exec(std::string(migration.sql));
      db.exec("PRAGMA user_version = " + std::to_string(migration.version));
      transaction.commit();
      version = migration.version;
    }
  } catch (const SQLite::Exception& e) {
    return StatusFromSqliteError(e.getErrorCode(), e.what(), db_path,
                                 "migrating from schema version " + std::to_string(version));
  }
  return version;
}

}  // namespace certmount
