// The one mapping from SQLite failures to Status, so every caller reports a
// damaged file the same way.
#pragma once

#include <string>

#include "common/status.h"

namespace certmount {

// DATA_LOSS for SQLITE_CORRUPT and SQLITE_NOTADB (the message names `db_path`,
// so the admin knows which file to restore or remove), INTERNAL for everything
// else. `operation` says what we were doing, e.g. "registering volume v1".
Status StatusFromSqliteError(int result_code, const std::string& sqlite_message,
                             const std::string& db_path, const std::string& operation);

}  // namespace certmount
