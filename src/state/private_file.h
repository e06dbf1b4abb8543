// The state database may hold pod identities; only root may read it.
#pragma once

#include <string>

#include "common/env.h"
#include "common/status.h"

namespace certmount {

// Creates `path` as an empty regular file with mode 0600 if it does not exist
// (before SQLite opens it, so it is never readable by others even briefly),
// narrows an existing file's mode to 0600, and verifies the result, all
// through `env` (EnsureFile, then LStat). Errors name the state database:
// RESOURCE_EXHAUSTED when the disk is full (ENOSPC, EDQUOT), otherwise
// INTERNAL (cannot be created, not a regular file, or does not keep 0600).
Status EnsurePrivateFile(const std::string& path, Env* env);

}  // namespace certmount
