// Internal to src/state/: the one mapping between result rows and the record
// types, shared by the Store (read-write) and the StateReader (read-only) so
// both read the tables identically. The column lists and the row mappers must
// change together; nothing outside src/state/ includes this.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"
#include "state/volume_record.h"

namespace SQLite {
class Column;
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

// The column's integer, or nullopt for SQL NULL.
std::optional<int64_t> OptionalInt(const SQLite::Column& column);

// The current row of a statement selecting kVolumeSelectColumns. DATA_LOSS,
// naming the volume, when its attributes column does not parse.
Result<VolumeRecord> VolumeFromRow(const SQLite::Statement& row);

// Steps `statement` (selecting kVolumeSelectColumns) to the end, mapping each
// row; stops at the first row that does not map.
Result<std::vector<VolumeRecord>> CollectVolumes(SQLite::Statement& statement);

// The current row of a statement selecting kIssuanceSelectColumns.
IssuanceRecord IssuanceFromRow(const SQLite::Statement& row);

}  // namespace certmount
