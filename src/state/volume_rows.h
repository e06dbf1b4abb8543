// Internal to src/state/: the one mapping between result rows and the record
// types, shared by the Store (read-write) and the StateReader (read-only) so
// both read the tables identically. The column lists and the row mappers must
// change together; nothing outside src/state/ includes this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "state/volume_record.h"

namespace SQLite {
class Column;
class Database;
class Statement;
}  // namespace SQLite

namespace certmount {

// "SELECT <every volumes column in VolumeFromRow's order> FROM volumes ", ready
// for a WHERE or ORDER BY clause to be appended.
extern const char kVolumeSelectColumns[];

// The same for databases at schema version 3, whose attributes were still a
// column of volumes (read-only tools).
extern const char kVolumeSelectColumnsBeforeV4[];

// The same for databases older than schema version 3 (read-only tools):
// without issuance_number and request_name, which VolumeFromRow then leaves
// at their defaults.
extern const char kVolumeSelectColumnsBeforeV3[];

// "SELECT <every issuances column in IssuanceFromRow's order> FROM issuances ",
// ready for a WHERE clause to be appended.
extern const char kIssuanceSelectColumns[];

// "publish" or "renewal": the kind's name in the issuances table.
constexpr const char* IssuanceKindName(IssuanceKind kind) {
  return kind == IssuanceKind::kPublish ? "publish" : "renewal";
}

// The column's integer, or nullopt for SQL NULL.
std::optional<int64_t> OptionalInt(const SQLite::Column& column);

// The current row of a statement selecting kVolumeSelectColumns (or one of
// the older lists). DATA_LOSS, naming the volume, when its attributes are
// missing or do not parse.
Result<VolumeRecord> VolumeFromRow(const SQLite::Statement& row);

// Steps `statement` (selecting kVolumeSelectColumns) to the end, mapping each
// row; stops at the first row that does not map.
Result<std::vector<VolumeRecord>> CollectVolumes(SQLite::Statement& statement);

// The current row of a statement selecting kIssuanceSelectColumns.
IssuanceRecord IssuanceFromRow(const SQLite::Statement& row);

// The volumes rows `clause` selects and orders (e.g. "ORDER BY volume_id"),
// read from a database at `schema_version` with the column list that version
// has. DATA_LOSS naming the volume if its attributes do not parse. Throws
// SQLite::Exception as the statement does.
Result<std::vector<VolumeRecord>> SelectVolumes(SQLite::Database& db, int schema_version,
                                                const std::string& clause);

// Every volumes row ordered by volume_id: SelectVolumes with that order.
Result<std::vector<VolumeRecord>> ListVolumes(SQLite::Database& db, int schema_version);

// The volume's issuances rows, newest first; empty for an unknown volume.
// Throws SQLite::Exception as the statement does (e.g. with no such table).
std::vector<IssuanceRecord> ListIssuances(SQLite::Database& db, const std::string& volume_id);

}  // namespace certmount
