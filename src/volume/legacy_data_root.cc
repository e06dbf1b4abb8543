#include "volume/legacy_data_root.h"

#include <sys/mount.h>

#include <vector>

#include "state/database_copy.h"
#include "volume/mount.h"
#include "volume/mountinfo.h"
#include "volume/paths.h"

namespace certmount {
namespace {

// Names only the migration uses inside the (locked) new data root.
constexpr char kCaStaging[] = "/ca.migrating";
constexpr char kDatabaseStaging[] = "/state.db.migrating";

bool Exists(Env* env, const std::string& path) { return env->LStat(path).ok(); }

Status RemoveIfPresent(Env* env, const std::string& path) {
  Status removed = env->Remove(path);
  return removed.code() == Code::kNotFound ? Status::Ok() : removed;
}

// The regular files directly in `dir` (the CA's ca.crt and ca.key).
Result<std::vector<std::string>> RegularFiles(Env* env, const std::string& dir) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDirectory(dir));
  std::vector<std::string> files;
  for (const std::string& name : names) {
    CERTMOUNT_ASSIGN_OR_RETURN(FileStat stat, env->LStat(dir + "/" + name));
    if (stat.type == FileStat::Type::kRegular) files.push_back(name);
  }
  return files;
}

// Step 1. A <data_root>/ca already there is accepted only when it holds the
// same files (a crash after this step); the copy goes through a staging
// directory renamed into place, so ca/ is either complete or absent.
Result<int> CopyCa(const std::string& legacy_ca, const std::string& data_root, Env* env) {
  if (!Exists(env, legacy_ca)) return 0;
  CERTMOUNT_ASSIGN_OR_RETURN(std::vector<std::string> files, RegularFiles(env, legacy_ca));
  const std::string ca = data_root + "/ca";
  if (Exists(env, ca)) {
    for (const std::string& name : files) {
      Result<std::string> ours = env->ReadFile(ca + "/" + name);
      CERTMOUNT_ASSIGN_OR_RETURN(std::string theirs, env->ReadFile(legacy_ca + "/" + name));
      if (!ours.ok() || *ours != theirs) {
        return Status::FailedPrecondition(
            ca + " exists and differs from " + legacy_ca + " (" + name +
            "); move one of them aside: certmountd will not pick a CA for you");
      }
    }
    return 0;
  }
  const std::string staging = data_root + kCaStaging;
  CERTMOUNT_RETURN_IF_ERROR(env->RemoveTree(staging));
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDir(staging, 0700, std::nullopt));
  for (const std::string& name : files) {
    CERTMOUNT_ASSIGN_OR_RETURN(FileStat stat, env->LStat(legacy_ca + "/" + name));
    CERTMOUNT_ASSIGN_OR_RETURN(std::string contents, env->ReadFile(legacy_ca + "/" + name));
    CERTMOUNT_RETURN_IF_ERROR(
        env->WriteNewFile(staging + "/" + name, contents, stat.permissions, std::nullopt));
  }
  CERTMOUNT_RETURN_IF_ERROR(env->SyncDir(staging));
  CERTMOUNT_RETURN_IF_ERROR(env->Rename(staging, ca));
  CERTMOUNT_RETURN_IF_ERROR(env->SyncDir(data_root));
  return static_cast<int>(files.size());
}

// Step 2. Only a tmpfs that mountinfo shows at <legacy>/volumes is bound; a
// node that rebooted has none (its pods' volumes went with it). A mount
// already at <data_root>/volumes is accepted only when it shows that same
// tmpfs (a crash after this step).
Result<bool> BindLegacyVolumes(const std::string& legacy_root, const std::string& data_root,
                               Env* env) {
  Result<std::string> legacy = env->RealPath(VolumesRoot(legacy_root));
  if (!legacy.ok()) return false;
  CERTMOUNT_ASSIGN_OR_RETURN(MountTable table, MountTable::Read(env));
  const MountInfoEntry* tmpfs = table.TopMountAt(*legacy);
  if (tmpfs == nullptr || tmpfs->fstype != "tmpfs") return false;
  CERTMOUNT_RETURN_IF_ERROR(env->CreateDirectories(VolumesRoot(data_root), kDataTmpfsMode));
  CERTMOUNT_ASSIGN_OR_RETURN(std::string volumes, env->RealPath(VolumesRoot(data_root)));
  if (const MountInfoEntry* there = table.TopMountAt(volumes); there != nullptr) {
    if (there->major == tmpfs->major && there->minor == tmpfs->minor &&
        there->root == tmpfs->root) {
      return true;
    }
    return Status::FailedPrecondition(volumes + " is already a mount point (" + there->fstype +
                                      " " + there->source + ") that is not the volumes tmpfs at " +
                                      *legacy + "; unmount it so the volumes can move there");
  }
  // MS_REC: a volume reattached at startup is a mount below the tmpfs and
  // must come along. A bind copies the tmpfs's nosuid,nodev,noexec.
  CERTMOUNT_RETURN_IF_ERROR(env->Mount(*legacy, volumes, "", MS_BIND | MS_REC, "")
                                .WithContext("binding the legacy volumes tmpfs"));
  return true;
}

// Step 3, the commit: the copy is made under a staging name and renamed.
Status CopyState(const std::string& legacy_root, const std::string& data_root, Env* env) {
  const std::string staging = data_root + kDatabaseStaging;
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) {
    CERTMOUNT_RETURN_IF_ERROR(RemoveIfPresent(env, staging + suffix));
  }
  CERTMOUNT_RETURN_IF_ERROR(CopyDatabase(legacy_root + "/state.db", staging, env));
  CERTMOUNT_RETURN_IF_ERROR(env->Rename(staging, data_root + "/state.db"));
  return env->SyncDir(data_root);
}

}  // namespace

Result<LegacyMigration> MigrateLegacyDataRoot(const std::string& data_root,
                                              const std::string& legacy_root, Env* env) {
  LegacyMigration migration;
  if (!Exists(env, legacy_root + "/state.db")) return migration;
  Result<std::unique_ptr<DataRootLock>> lock = DataRootLock::Acquire(legacy_root, env);
  if (!lock.ok()) return lock.status().WithContext("--legacy-data-root");
  migration.legacy_lock = std::move(*lock);
  // Migrated before, or fresh: the lock is all there is to do.
  if (Exists(env, data_root + "/state.db")) return migration;
  const std::string context = "moving " + legacy_root + " to " + data_root;
  Result<int> copied = CopyCa(legacy_root + "/ca", data_root, env);
  if (!copied.ok()) return copied.status().WithContext(context);
  migration.ca_files_copied = *copied;
  Result<bool> bound = BindLegacyVolumes(legacy_root, data_root, env);
  if (!bound.ok()) return bound.status().WithContext(context);
  migration.volumes_bound = *bound;
  if (Status s = CopyState(legacy_root, data_root, env); !s.ok()) return s.WithContext(context);
  migration.migrated = true;
  return migration;
}

}  // namespace certmount
