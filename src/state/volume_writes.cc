#include "state/volume_writes.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include "state/attributes_json.h"
#include "state/statement_cache.h"

namespace certmount {
namespace {

// kubelet puts the pod's service account tokens into the volume context under
// this key when the CSIDriver asks for them; they must never reach the disk.
constexpr char kServiceAccountTokensKey[] = "csi.storage.k8s.io/serviceAccount.tokens";

Status ValidateCertificate(const std::string& volume_id, const IssuedCertificateFields& cert) {
  if (cert.serial.empty()) {
    return Status::InvalidArgument("volume " + volume_id + ": certificate serial is empty");
  }
  return Status::Ok();
}

// What a successful issuance sets on a volume row, ?1 to ?5 bound by
// UpdateCertificate.
constexpr char kCertificateColumns[] =
    "serial = ?1, not_before = ?2, not_after = ?3, next_issuance_at = ?4, "
    "renewal_attempts = 0, last_error = NULL, updated_at = ?5";

// Runs `update_sql` (kCertificateColumns, then the volume id as ?6) with
// `cert`'s fields. NOT_FOUND with `not_found` when it changes no row;
// INVALID_ARGUMENT for an empty serial.
Status UpdateCertificate(StatementCache& sql, const std::string& update_sql,
                         const std::string& volume_id, const IssuedCertificateFields& cert,
                         int64_t now, const std::string& not_found) {
  CERTMOUNT_RETURN_IF_ERROR(ValidateCertificate(volume_id, cert));
  CachedStatement update = sql.Get(update_sql);
  update->bind(1, cert.serial);
  update->bind(2, cert.not_before);
  update->bind(3, cert.not_after);
  update->bind(4, cert.next_issuance_at);
  update->bind(5, now);
  update->bind(6, volume_id);
  if (update->exec() == 0) return Status::NotFound(not_found);
  return Status::Ok();
}

}  // namespace

void BindOptional(SQLite::Statement& statement, int index, const std::string& text) {
  if (text.empty()) {
    statement.bind(index);
  } else {
    statement.bind(index, text);
  }
}

Result<std::optional<RegisteredVolume>> InsertVolume(StatementCache& sql,
                                                     const VolumeRecord& volume, int64_t now) {
  if (volume.volume_id.empty()) return Status::InvalidArgument("volume id is empty");
  if (volume.target_path.empty()) {
    return Status::InvalidArgument("volume " + volume.volume_id + ": target path is empty");
  }
  if (volume.attributes.contains(kServiceAccountTokensKey)) {
    return Status::InvalidArgument("volume " + volume.volume_id + ": attributes hold " +
                                   kServiceAccountTokensKey +
                                   "; tokens must be removed before storing");
  }
  CERTMOUNT_ASSIGN_OR_RETURN(std::string attributes_json, AttributesToJson(volume.attributes));

  {
    CachedStatement existing =
        sql.Get("SELECT target_path, mounted FROM volumes WHERE volume_id = ?");
    existing->bind(1, volume.volume_id);
    if (existing->executeStep()) {
      return std::optional<RegisteredVolume>(RegisteredVolume{
          existing->getColumn(0).getString(), existing->getColumn(1).getInt() != 0});
    }
  }

  CachedStatement insert = sql.Get(
      "INSERT INTO volumes (volume_id, target_path, pod_namespace, pod_name, "
      "pod_uid, service_account, issuer, mounted, created_at, "
      "updated_at, file_group, request_name) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)");
  insert->bind(1, volume.volume_id);
  insert->bind(2, volume.target_path);
  insert->bind(3, volume.pod_namespace);
  insert->bind(4, volume.pod_name);
  insert->bind(5, volume.pod_uid);
  insert->bind(6, volume.service_account);
  insert->bind(7, volume.issuer);
  insert->bind(8, now);
  insert->bind(9, now);
  if (volume.file_group.has_value()) {
    insert->bind(10, static_cast<int64_t>(*volume.file_group));
  } else {
    insert->bind(10);
  }
  BindOptional(*insert, 11, volume.request_name);
  insert->exec();
  // Their own row, never updated: renewals change only the volumes row.
  // REPLACE: the volumes row is new, so a row found here is an orphan left
  // by a hand delete without foreign keys, never another volume's.
  CachedStatement insert_attributes =
      sql.Get("INSERT OR REPLACE INTO volume_attributes (volume_id, attributes) VALUES (?, ?)");
  insert_attributes->bind(1, volume.volume_id);
  insert_attributes->bind(2, attributes_json);
  insert_attributes->exec();
  return std::optional<RegisteredVolume>();
}

Status AlreadyRegistered(const std::string& volume_id, const RegisteredVolume& existing) {
  return Status::AlreadyExists("volume " + volume_id + " is already registered at " +
                               existing.target_path);
}

Status UpdateMounted(StatementCache& sql, const std::string& volume_id,
                     const IssuedCertificateFields& cert, int64_t now) {
  static const std::string kSql = "UPDATE volumes SET " + std::string(kCertificateColumns) +
                                  ", mounted = 1, mounted_at = ?5 WHERE volume_id = ?6";
  return UpdateCertificate(sql, kSql, volume_id, cert, now,
                           "no volume " + volume_id + " to mark mounted");
}

Status UpdateRenewed(StatementCache& sql, const std::string& volume_id,
                     const IssuedCertificateFields& cert, int64_t now) {
  static const std::string kSql = "UPDATE volumes SET " + std::string(kCertificateColumns) +
                                  " WHERE volume_id = ?6 AND mounted = 1";
  return UpdateCertificate(sql, kSql, volume_id, cert, now, "no mounted volume " + volume_id);
}

Status UpdateFailed(StatementCache& sql, const std::string& volume_id, int64_t attempts,
                    int64_t next_attempt_at, const std::string& error, int64_t now) {
  CachedStatement update = sql.Get(
      "UPDATE volumes SET renewal_attempts = ?, next_issuance_at = ?, "
      "last_error = ?, updated_at = ? WHERE volume_id = ? AND mounted = 1");
  update->bind(1, attempts);
  update->bind(2, next_attempt_at);
  BindOptional(*update, 3, error);
  update->bind(4, now);
  update->bind(5, volume_id);
  if (update->exec() == 0) return Status::NotFound("no mounted volume " + volume_id);
  return Status::Ok();
}

}  // namespace certmount
