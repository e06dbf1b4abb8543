// The state database may hold pod identities; only root may read it.
#pragma once

#include <string>

#include "common/status.h"

namespace certmount {

// Creates `path` as an empty regular file with mode 0600 if it does not exist
// (before SQLite opens it, so it is never readable by others even briefly),
// narrows an existing file's mode to 0600, and verifies the result.
// INTERNAL if the file cannot be created, is not a regular file, or keeps
// group/other permission bits.
Status EnsurePrivateFile(const std::string& path);

}  // namespace certmount
