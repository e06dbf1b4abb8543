// Moving a node from an earlier data root (the DaemonSet used
// /var/lib/certmount, a hostPath that needs a shared "/" on the host) to the
// current one, keeping every published volume. docs/kubernetes.md, Upgrades,
// tells the admin's side; this is the driver's.
//
// What moves, in this order (the order is what makes a crash at any instant
// safe, see MigrateLegacyDataRoot):
//   1. <legacy>/ca/*        copied into <data_root>/ca (the built-in local CA)
//   2. <legacy>/volumes     the volumes tmpfs, bind-mounted (with what is
//                           mounted below it) onto <data_root>/volumes: the
//                           same superblock, so the pods' bind mounts, which
//                           show directories of it, are proven the driver's
//                           at the new place by mountinfo alone, and
//                           renewals written there reach them
//   3. <legacy>/state.db    copied (SQLite backup) to <data_root>/state.db;
//                           its appearance there is the commit
// The legacy root keeps its files: state.db as it was at the copy (never read
// again while <data_root>/state.db exists), ca/, certmountd.lock, and its
// volumes tmpfs, which still backs every volume until the node reboots.
#pragma once

#include <memory>
#include <string>

#include "common/env.h"
#include "common/status.h"
#include "state/data_root_lock.h"

namespace certmount {

struct LegacyMigration {
  // Held for as long as the driver runs on the migrated state, so that an
  // earlier certmountd started on the legacy root by mistake cannot sweep
  // the volumes tmpfs both share. Null when the legacy root has no state.db
  // (a node that never ran the earlier layout: nothing to hold).
  std::unique_ptr<DataRootLock> legacy_lock;
  bool migrated = false;       // this call committed the copy of state.db
  bool volumes_bound = false;  // this call found or bound the legacy tmpfs there
  int ca_files_copied = 0;
};

// Run after taking `data_root`'s own lock and before opening its state.db.
// Does nothing (OK, no lock) when <legacy_root>/state.db does not exist.
// Otherwise takes the legacy root's lock (FAILED_PRECONDITION when an earlier
// certmountd still holds it: it must stop first) and, when
// <data_root>/state.db does not exist yet, performs steps 1 to 3 above.
// Every step is idempotent and each is checked before the next, so a crash
// anywhere before step 3's rename leaves a node that still runs on the
// legacy layout (the legacy root is untouched; a new start redoes the steps)
// and a crash after it leaves one that runs on the new layout. Touches only
// what it proves is the driver's: the legacy lock, state.db and ca/ files of
// the legacy root, and the mount that /proc/self/mountinfo shows as a tmpfs
// at <legacy_root>/volumes. Refuses (FAILED_PRECONDITION, nothing changed by
// this step) when <data_root>/ca or <data_root>/volumes already holds
// something other than what the migration would put there.
Result<LegacyMigration> MigrateLegacyDataRoot(const std::string& data_root,
                                              const std::string& legacy_root, Env* env);

}  // namespace certmount
