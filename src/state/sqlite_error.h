// The one mapping from SQLite failures to Status, so every caller reports a
// damaged file the same way.
#pragma once

#include <SQLiteCpp/Exception.h>

#include <exception>
#include <string>

#include "common/status.h"

namespace certmount {

// DATA_LOSS for a damaged state database: names `db_path`, what was found
// (`problem`) and the recovery procedure in docs/state.md.
Status DamagedDatabase(const std::string& db_path, const std::string& problem);

// DATA_LOSS for SQLITE_CORRUPT and SQLITE_NOTADB (the message names `db_path`,
// so the admin knows which file to restore or remove), RESOURCE_EXHAUSTED for
// SQLITE_FULL, UNAVAILABLE for a lock held past the busy timeout, INTERNAL for
// everything else. `operation` says what we were doing, e.g. "registering volume v1".
Status StatusFromSqliteError(int result_code, const std::string& sqlite_message,
                             const std::string& db_path, const std::string& operation);

// Runs `body` (returning Status or Result<T>), turning any exception into a
// Status so none escapes the state layer.
template <typename Body>
auto Guarded(const std::string& db_path, const std::string& operation, Body&& body)
    -> decltype(body()) {
  try {
    return body();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqliteError(e.getErrorCode(), e.what(), db_path, operation);
  } catch (const std::exception& e) {
    return Status::Internal("state database " + db_path + ": " + operation +
                            " failed: " + e.what());
  }
}

}  // namespace certmount
