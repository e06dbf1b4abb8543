#include "state/volume_rows.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <utility>

#include "state/attributes_json.h"

namespace certmount {

// LEFT JOIN: a volume whose attributes row is missing (a hand edit) reads as
// DATA_LOSS naming it rather than vanishing from every listing.
const char kVolumeSelectColumns[] =
    "SELECT volume_id, target_path, pod_namespace, pod_name, pod_uid, service_account, "
    "attributes, issuer, mounted, created_at, mounted_at, serial, not_before, not_after, "
    "next_issuance_at, renewal_attempts, last_error, updated_at, file_group, issuance_number, "
    "request_name FROM volumes LEFT JOIN volume_attributes USING (volume_id) ";

const char kVolumeSelectColumnsBeforeV4[] =
    "SELECT volume_id, target_path, pod_namespace, pod_name, pod_uid, service_account, "
    "attributes, issuer, mounted, created_at, mounted_at, serial, not_before, not_after, "
    "next_issuance_at, renewal_attempts, last_error, updated_at, file_group, issuance_number, "
    "request_name FROM volumes ";

const char kVolumeSelectColumnsBeforeV3[] =
    "SELECT volume_id, target_path, pod_namespace, pod_name, pod_uid, service_account, "
    "attributes, issuer, mounted, created_at, mounted_at, serial, not_before, not_after, "
    "next_issuance_at, renewal_attempts, last_error, updated_at, file_group FROM volumes ";

const char kIssuanceSelectColumns[] =
    "SELECT id, volume_id, kind, result, serial, not_before, not_after, "
    "issued_at, issuer, duration_ms, error FROM issuances ";

std::optional<int64_t> OptionalInt(const SQLite::Column& column) {
  if (column.isNull()) return std::nullopt;
  return column.getInt64();
}

Result<VolumeRecord> VolumeFromRow(const SQLite::Statement& row) {
  VolumeRecord volume;
  volume.volume_id = row.getColumn(0).getString();
  volume.target_path = row.getColumn(1).getString();
  volume.pod_namespace = row.getColumn(2).getString();
  volume.pod_name = row.getColumn(3).getString();
  volume.pod_uid = row.getColumn(4).getString();
  volume.service_account = row.getColumn(5).getString();
  CERTMOUNT_ASSIGN_OR_RETURN(volume.attributes,
                             AttributesFromJson(row.getColumn(6).getString(), volume.volume_id));
  volume.issuer = row.getColumn(7).getString();
  volume.mounted = row.getColumn(8).getInt() == 1;
  volume.created_at = row.getColumn(9).getInt64();
  volume.mounted_at = OptionalInt(row.getColumn(10));
  volume.serial = row.getColumn(11).getString();  // "" for NULL
  volume.not_before = OptionalInt(row.getColumn(12));
  volume.not_after = OptionalInt(row.getColumn(13));
  volume.next_issuance_at = OptionalInt(row.getColumn(14));
  volume.renewal_attempts = row.getColumn(15).getInt64();
  volume.last_error = row.getColumn(16).getString();
  volume.updated_at = row.getColumn(17).getInt64();
  volume.file_group = OptionalInt(row.getColumn(18));
  if (row.getColumnCount() > 20) {
    volume.issuance_number = row.getColumn(19).getInt64();
    volume.request_name = row.getColumn(20).getString();  // "" for NULL
  }
  return volume;
}

Result<std::vector<VolumeRecord>> CollectVolumes(SQLite::Statement& statement) {
  std::vector<VolumeRecord> volumes;
  while (statement.executeStep()) {
    CERTMOUNT_ASSIGN_OR_RETURN(VolumeRecord volume, VolumeFromRow(statement));
    volumes.push_back(std::move(volume));
  }
  return volumes;
}

IssuanceRecord IssuanceFromRow(const SQLite::Statement& row) {
  IssuanceRecord record;
  record.id = row.getColumn(0).getInt64();
  record.volume_id = row.getColumn(1).getString();
  record.kind = row.getColumn(2).getString() == IssuanceKindName(IssuanceKind::kPublish)
                    ? IssuanceKind::kPublish
                    : IssuanceKind::kRenewal;
  record.ok = row.getColumn(3).getString() == "ok";
  record.serial = row.getColumn(4).getString();
  record.not_before = OptionalInt(row.getColumn(5));
  record.not_after = OptionalInt(row.getColumn(6));
  record.issued_at = row.getColumn(7).getInt64();
  record.issuer = row.getColumn(8).getString();
  record.duration_ms = row.getColumn(9).getInt64();
  record.error = row.getColumn(10).getString();
  return record;
}

Result<std::vector<VolumeRecord>> SelectVolumes(SQLite::Database& db, int schema_version,
                                                const std::string& clause) {
  const char* columns = schema_version >= 4   ? kVolumeSelectColumns
                        : schema_version == 3 ? kVolumeSelectColumnsBeforeV4
                                              : kVolumeSelectColumnsBeforeV3;
  SQLite::Statement query(db, std::string(columns) + clause);
  return CollectVolumes(query);
}

Result<std::vector<VolumeRecord>> ListVolumes(SQLite::Database& db, int schema_version) {
  return SelectVolumes(db, schema_version, "ORDER BY volume_id");
}

std::vector<IssuanceRecord> ListIssuances(SQLite::Database& db, const std::string& volume_id) {
  SQLite::Statement query(
      db, std::string(kIssuanceSelectColumns) + "WHERE volume_id = ? ORDER BY id DESC");
  query.bind(1, volume_id);
  std::vector<IssuanceRecord> records;
  while (query.executeStep()) records.push_back(IssuanceFromRow(query));
  return records;
}

}  // namespace certmount
