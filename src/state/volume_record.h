// The values the store keeps about a volume. Times are unix seconds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace certmount {

// One row of the `volumes` table (see schema/schema.sql for each column).
// Empty strings stand for SQL NULL in serial and last_error.
struct VolumeRecord {
  std::string volume_id;
  std::string target_path;
  std::string pod_namespace;
  std::string pod_name;
  std::string pod_uid;
  std::string service_account;
  // Group owning the files (fs-group, else kubelet's volume_mount_group).
  std::optional<uint32_t> file_group;
  std::map<std::string, std::string> attributes;  // never a token or other secret
  std::string issuer;
  bool mounted = false;
  int64_t created_at = 0;
  std::optional<int64_t> mounted_at;
  std::string serial;
  std::optional<int64_t> not_before;
  std::optional<int64_t> not_after;
  std::optional<int64_t> next_issuance_at;
  int64_t renewal_attempts = 0;
  std::string last_error;
  int64_t updated_at = 0;
  // The current or pending issuance's number and signer-side name ("" for
  // NULL: the local CA has none).
  int64_t issuance_number = 0;
  std::string request_name;
};

// The part of an existing row that decides what a repeated publish does.
struct RegisteredVolume {
  std::string target_path;
  bool mounted = false;
};

// What the store records about a freshly issued certificate.
struct IssuedCertificateFields {
  std::string serial;  // non-empty
  int64_t not_before = 0;
  int64_t not_after = 0;
  int64_t next_issuance_at = 0;  // when the scheduler should renew it
};

// What kind of issuance a history row records.
enum class IssuanceKind { kPublish, kRenewal };

// How one issuance attempt went, as the caller measured it; the store adds
// the outcome (certificate fields or error) and stamps issued_at.
struct IssuanceAttempt {
  std::string issuer;       // the issuer's Name()
  int64_t duration_ms = 0;  // from start of the attempt to its end
};

// One row of the `issuances` history table (newest rows have the largest id).
// Empty strings stand for SQL NULL in serial and error.
struct IssuanceRecord {
  int64_t id = 0;
  std::string volume_id;
  IssuanceKind kind = IssuanceKind::kRenewal;
  bool ok = false;  // result 'ok' (true) or 'error'
  std::string serial;
  std::optional<int64_t> not_before;
  std::optional<int64_t> not_after;
  int64_t issued_at = 0;
  std::string issuer;
  int64_t duration_ms = 0;
  std::string error;
};

// What the renewal scheduler needs of a mounted row, and no more: at 100k
// volumes, loading whole records (attributes JSON) would dominate startup.
struct ScheduledVolume {
  std::string volume_id;
  std::optional<int64_t> next_issuance_at;
};

// What /metrics reports of a row: no attributes, so a scrape neither parses
// every row's JSON nor holds the store's lock long at 100,000 rows.
struct VolumeSummary {
  std::string volume_id;
  std::string pod_namespace;
  std::string pod_name;
  bool mounted = false;
  std::optional<int64_t> not_after;
  std::optional<int64_t> next_issuance_at;
};

struct DeletedVolume {
  std::string volume_id;
  std::string target_path;
  std::string pod_namespace;
};

struct StartupCleanupResult {
  int64_t kept = 0;                    // mounted rows still mounted
  int64_t unmounted_by_check = 0;      // rows set to mounted=0 because their path was not mounted
  std::vector<DeletedVolume> deleted;  // every row deleted (including those above)
};

}  // namespace certmount
