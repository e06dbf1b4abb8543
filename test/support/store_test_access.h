// What tests and benchmarks do to a Store that certmountd never does: write a
// row without its history, read every row, run the startup cleanup with a
// plain mount-point check, hold a transaction open for the crash test. It
// works through the Store's own connection, lock and row statements
// (state/volume_writes.h, state/volume_rows.h), so a row written here is the
// row production would write; none of it is linked into certmountd.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "state/store.h"
#include "state/volume_record.h"

namespace certmount {

class StoreTestAccess {
 public:
  // `store` must outlive this object.
  explicit StoreTestAccess(Store& store) : store_(store) {}

  // TryRegisterVolume, but ALREADY_EXISTS, naming the existing row's target
  // path, when the id has a row.
  Status RegisterVolume(const VolumeRecord& volume);

  // Records a successful publish in one statement, without a history row:
  // mounted=1, mounted_at=now, the certificate fields, renewal_attempts=0,
  // last_error NULL. NOT_FOUND if no such row; INVALID_ARGUMENT for an empty
  // serial.
  Status MarkMounted(const std::string& volume_id, const IssuedCertificateFields& cert);

  // Records a successful renewal without a history row: the certificate
  // fields, renewal_attempts=0, last_error NULL. NOT_FOUND unless the row
  // exists and is mounted; INVALID_ARGUMENT for an empty serial.
  Status RecordRenewal(const std::string& volume_id, const IssuedCertificateFields& cert);

  // All rows ordered by volume_id.
  Result<std::vector<VolumeRecord>> ListVolumes();

  // Mounted rows ordered by next_issuance_at (then volume_id).
  Result<std::vector<VolumeRecord>> ListMountedByNextIssuance();

  // The volume's history rows, newest first. Empty for an unknown volume.
  Result<std::vector<IssuanceRecord>> ListIssuances(const std::string& volume_id);

  // StartupCleanupProven asking only whether the target is a mount point.
  Result<StartupCleanupResult> StartupCleanup(
      const std::function<bool(const std::string& target_path)>& is_mount_point);

  // The schema version of the file after Open migrated it.
  int schema_version() const;

  // In ONE write transaction: inserts `volume` as RegisterVolume does, then,
  // if `mark_mounted_id` is not empty, applies MarkMounted(mark_mounted_id,
  // cert) to that row; then calls `before_commit` with the transaction still
  // open (the crash test kills the process there) and commits once it
  // returns. Any failure rolls everything back.
  Status WriteInOneTransaction(const VolumeRecord& volume, const std::string& mark_mounted_id,
                               const IssuedCertificateFields& cert,
                               const std::function<void()>& before_commit);

 private:
  Store& store_;
};

}  // namespace certmount
