#include "support/store_test_access.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <mutex>

#include "state/sqlite_error.h"
#include "state/statement_cache.h"
#include "state/volume_rows.h"
#include "state/volume_writes.h"

namespace certmount {

Status StoreTestAccess::RegisterVolume(const VolumeRecord& volume) {
  CERTMOUNT_ASSIGN_OR_RETURN(std::optional<RegisteredVolume> existing,
                             store_.TryRegisterVolume(volume));
  if (existing.has_value()) return AlreadyRegistered(volume.volume_id, *existing);
  return Status::Ok();
}

Status StoreTestAccess::MarkMounted(const std::string& volume_id,
                                    const IssuedCertificateFields& cert) {
  std::lock_guard lock(store_.mutex_);
  return Guarded(store_.db_path_, "marking volume " + volume_id + " mounted", [&]() {
    return UpdateMounted(*store_.statements_, volume_id, cert, store_.clock_.NowUnix());
  });
}

Status StoreTestAccess::RecordRenewal(const std::string& volume_id,
                                      const IssuedCertificateFields& cert) {
  std::lock_guard lock(store_.mutex_);
  return Guarded(store_.db_path_, "recording renewal of volume " + volume_id, [&]() {
    return UpdateRenewed(*store_.statements_, volume_id, cert, store_.clock_.NowUnix());
  });
}

Result<std::vector<VolumeRecord>> StoreTestAccess::ListVolumes() {
  std::lock_guard lock(store_.mutex_);
  return Guarded(store_.db_path_, "listing volumes",
                 [&]() { return certmount::ListVolumes(*store_.db_, store_.schema_version_); });
}

Result<std::vector<VolumeRecord>> StoreTestAccess::ListMountedByNextIssuance() {
  std::lock_guard lock(store_.mutex_);
  return Guarded(store_.db_path_, "listing mounted volumes", [&]() {
    return SelectVolumes(*store_.db_, store_.schema_version_,
                         "WHERE mounted = 1 ORDER BY next_issuance_at, volume_id");
  });
}

Result<std::vector<IssuanceRecord>> StoreTestAccess::ListIssuances(const std::string& volume_id) {
  std::lock_guard lock(store_.mutex_);
  return Guarded(store_.db_path_, "listing issuances of volume " + volume_id,
                 [&]() -> Result<std::vector<IssuanceRecord>> {
                   return certmount::ListIssuances(*store_.db_, volume_id);
                 });
}

Result<StartupCleanupResult> StoreTestAccess::StartupCleanup(
    const std::function<bool(const std::string& target_path)>& is_mount_point) {
  return store_.StartupCleanupProven(
      [&](const std::string&, const std::string& target) { return is_mount_point(target); });
}

int StoreTestAccess::schema_version() const { return store_.schema_version_; }

Status StoreTestAccess::WriteInOneTransaction(const VolumeRecord& volume,
                                              const std::string& mark_mounted_id,
                                              const IssuedCertificateFields& cert,
                                              const std::function<void()>& before_commit) {
  std::lock_guard lock(store_.mutex_);
  return Guarded(store_.db_path_, "test transaction", [&]() -> Status {
    const int64_t now = store_.clock_.NowUnix();
    CachedTransaction transaction(*store_.statements_);
    CERTMOUNT_ASSIGN_OR_RETURN(std::optional<RegisteredVolume> existing,
                               InsertVolume(*store_.statements_, volume, now));
    if (existing.has_value()) return AlreadyRegistered(volume.volume_id, *existing);
    if (!mark_mounted_id.empty()) {
      CERTMOUNT_RETURN_IF_ERROR(UpdateMounted(*store_.statements_, mark_mounted_id, cert, now));
    }
    before_commit();
    transaction.Commit();
    return Status::Ok();
  });
}

}  // namespace certmount
