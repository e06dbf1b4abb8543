// A consistent copy of a state database file, for moving a node's state to
// another data root (volume/legacy_data_root.h).
#pragma once

#include <string>

#include "common/env.h"
#include "common/status.h"

namespace certmount {

// Copies the database at `from` (with whatever its WAL holds) into a new
// database file `to` through SQLite's online backup, so the copy is one
// consistent snapshot even if `from` has uncheckpointed frames. `to` must
// not exist (ALREADY_EXISTS otherwise, checked with env->LStat); the copy is complete and synced to
// disk when this returns OK, and on failure `to` may hold a partial copy
// that the caller removes. `from` is opened read-write only because reading
// a WAL database needs its -shm file; its contents are not changed (closing
// the last connection may checkpoint the WAL into it, which keeps them
// equal). Nothing else may write `from` meanwhile: the caller holds its
// data root's lock. The copy is verified with SQLite's quick_check.
Status CopyDatabase(const std::string& from, const std::string& to, Env* env);

}  // namespace certmount
