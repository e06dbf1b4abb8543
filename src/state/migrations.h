// Forward-only schema migrations. Migration N is the file NNNN_name.sql; the
// database's schema version is PRAGMA user_version (0 for a new file), and
// migration N moves it from N-1 to N in one transaction.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "state/embedded_migrations.h"

namespace SQLite {
class Database;
}

namespace certmount {

struct Migration {
  int version = 0;       // NNNN from the file name
  std::string name;      // the full file name, for messages
  std::string_view sql;  // statements to run
};

// Validates and orders `files`: every name must match NNNN_name.sql (four
// digits, then lowercase letters, digits or '_'), and the versions must be
// exactly 1, 2, ..., N. A violation is a bug in the build, hence INTERNAL.
Result<std::vector<Migration>> ParseMigrations(const std::vector<EmbeddedFile>& files);

// Reads the schema version without writing anything. Errors as
// StatusFromSqliteError (DATA_LOSS for a damaged file).
Result<int> ReadSchemaVersion(SQLite::Database& db, const std::string& db_path);

// FAILED_PRECONDITION, with advice for the admin, when `current_version` is
// newer than the newest of `migrations`: this binary must not touch a schema
// it does not know.
Status CheckSchemaNotNewer(int current_version, const std::vector<Migration>& migrations,
                           const std::string& db_path);

// Applies, in order, every migration newer than the database's version, each
// in its own IMMEDIATE transaction together with setting user_version, so a
// crash leaves the database at some whole version. Refuses (as
// CheckSchemaNotNewer) a database newer than `migrations`. Returns the final
// version. Must not be called inside a transaction.
Result<int> ApplyMigrations(SQLite::Database& db, const std::vector<Migration>& migrations,
                            const std::string& db_path);

}  // namespace certmount
