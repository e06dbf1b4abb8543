// Internal to src/state/ (and the test support that writes through a Store):
// the statements that change one volume row, shared by every Store method
// that writes it so each write validates and stamps the row the same way.
// Each expects the caller to hold the Store's lock; they throw
// SQLite::Exception as the statements do, so call them inside Guarded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "state/volume_record.h"

namespace SQLite {
class Statement;
}

namespace certmount {

class StatementCache;

// Binds `text` at `index`, or SQL NULL when it is empty.
void BindOptional(SQLite::Statement& statement, int index, const std::string& text);

// Inserts `volume`'s identity with mounted=0 and its attributes row, unless
// the id has a row; then returns that row's target path and mounted flag and
// writes nothing. INVALID_ARGUMENT for an empty id or target path, or for
// attributes holding kubelet's service account tokens. Expects an open
// transaction, so the check and the insert agree.
Result<std::optional<RegisteredVolume>> InsertVolume(StatementCache& sql,
                                                     const VolumeRecord& volume, int64_t now);

// ALREADY_EXISTS naming `existing`'s target path.
Status AlreadyRegistered(const std::string& volume_id, const RegisteredVolume& existing);

// mounted=1, mounted_at=now, `cert`'s fields, renewal_attempts=0 and
// last_error NULL. NOT_FOUND if no such row; INVALID_ARGUMENT for an empty
// serial.
Status UpdateMounted(StatementCache& sql, const std::string& volume_id,
                     const IssuedCertificateFields& cert, int64_t now);

// `cert`'s fields on a mounted row, renewal_attempts=0 and last_error NULL.
// NOT_FOUND unless the row exists and is mounted; INVALID_ARGUMENT for an
// empty serial.
Status UpdateRenewed(StatementCache& sql, const std::string& volume_id,
                     const IssuedCertificateFields& cert, int64_t now);

// A failed renewal's attempt count, next attempt and error on a mounted row.
// NOT_FOUND unless the row exists and is mounted.
Status UpdateFailed(StatementCache& sql, const std::string& volume_id, int64_t attempts,
                    int64_t next_attempt_at, const std::string& error, int64_t now);

}  // namespace certmount
