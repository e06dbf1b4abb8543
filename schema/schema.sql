-- certmount node state: the full schema after all migrations (schema version 4).
--
-- This file is documentation for admins and the reference the migrations are
-- tested against: test/migrations_test.cc applies migrations/*.sql to one empty
-- database and this file to another and requires identical sqlite_master rows
-- (SQL compared with comments removed and whitespace collapsed). The migration
-- bookkeeping is `PRAGMA user_version` (the schema version), which lives in the
-- database header and is not part of sqlite_master, so nothing is left out here.
--
-- All times are INTEGER unix seconds (UTC). Read the database while certmountd
-- runs with:
--   sqlite3 /var/lib/certmount/state.db 'select * from volume_status'
-- It is in WAL mode, so a reader never blocks the driver's writes. Do not write
-- to it by hand while certmountd runs.

-- volumes: one row per CSI ephemeral volume this node has been asked to
-- publish. A volume counts only once it is published: `mounted` becomes 1 in
-- the same transaction that records the first certificate. At startup,
-- certmountd first sets mounted = 0 on rows whose target path is no longer a
-- mount point (e.g. after a reboot), then deletes every row with mounted = 0
-- and removes their files. A crash at any moment therefore leaves nothing
-- behind after the next start.
CREATE TABLE volumes (
  -- CSI volume_id chosen by kubelet; unique on the node. The primary key.
  volume_id TEXT PRIMARY KEY NOT NULL,
  -- Directory kubelet asked us to publish the volume at, inside the pod's
  -- kubelet directory (/var/lib/kubelet/pods/<uid>/volumes/...).
  target_path TEXT NOT NULL,
  -- Namespace of the pod using the volume ('' if kubelet did not say).
  pod_namespace TEXT NOT NULL DEFAULT '',
  -- Name of that pod.
  pod_name TEXT NOT NULL DEFAULT '',
  -- UID of that pod.
  pod_uid TEXT NOT NULL DEFAULT '',
  -- Service account the pod runs as.
  service_account TEXT NOT NULL DEFAULT '',
  -- The group the volume's files belong to (the fs-group attribute, else
  -- kubelet's volume_mount_group); NULL: root only.
  file_group INTEGER CHECK (file_group IS NULL OR file_group BETWEEN 0 AND 4294967294),
  -- (The volume attributes were a column here until migration 0004 moved
  -- them to volume_attributes.)
  -- Name of the issuer that signs this volume's certificates.
  issuer TEXT NOT NULL DEFAULT '',
  -- 1 = published (kubelet got OK for NodePublishVolume); 0 = publish in
  -- flight or abandoned. Rows with 0 are deleted at the next start.
  mounted INTEGER NOT NULL DEFAULT 0 CHECK (mounted IN (0, 1)),
  -- When the row was registered (start of the publish).
  created_at INTEGER NOT NULL,
  -- When the publish completed; NULL while mounted = 0.
  mounted_at INTEGER,
  -- Serial number of the current certificate (hex); NULL before the publish.
  serial TEXT,
  -- Validity of the current certificate: notBefore ...
  not_before INTEGER,
  -- ... and notAfter.
  not_after INTEGER,
  -- When the renewal scheduler next issues a certificate for this volume: the
  -- planned renewal time, or the next retry after a failure.
  next_issuance_at INTEGER,
  -- Renewal attempts that failed since the last success (0 when healthy).
  renewal_attempts INTEGER NOT NULL DEFAULT 0 CHECK (renewal_attempts >= 0),
  -- Message of the last failed renewal; NULL after a success.
  last_error TEXT,
  -- When anything in this row last changed.
  updated_at INTEGER NOT NULL,
  -- (Added by migration 0003.) The number of the volume's current or pending
  -- issuance: 0 for the publish's, bumped (before the issuer is asked) for
  -- every renewal that does not resume a pending one. With the volume id it
  -- makes the signer-side name, so a restart resumes the same request.
  issuance_number INTEGER NOT NULL DEFAULT 0
  CHECK (issuance_number >= 0),
  -- The signer-side name of that issuance (the CertificateRequest's
  -- metadata.name); NULL for the local CA, which has no such name.
  request_name TEXT,
  -- A published volume always has a certificate and a renewal time.
  CHECK (mounted = 0 OR (mounted_at IS NOT NULL AND serial IS NOT NULL AND
                         not_after IS NOT NULL AND next_issuance_at IS NOT NULL))
);

-- The renewal scheduler loads published volumes ordered by next_issuance_at.
CREATE INDEX volumes_mounted_by_next_issuance ON volumes (next_issuance_at)
  WHERE mounted = 1;

-- volume_attributes: the volume attributes of each volume (added by
-- migration 0004, which moved them out of `volumes`). Written once, in the
-- transaction that inserts the volume's row, and never updated: renewals
-- change only the small `volumes` row, so large attributes are never
-- rewritten. Deleted with the volume's row by ON DELETE CASCADE (certmountd
-- runs with foreign_keys = ON and refuses to start without it), so the
-- startup cleanup's one DELETE removes a volume completely.
CREATE TABLE volume_attributes (
  -- The volume; exactly one row per volumes row.
  volume_id TEXT PRIMARY KEY NOT NULL
    REFERENCES volumes (volume_id) ON DELETE CASCADE,
  -- The volume attributes from the pod spec as a JSON object of strings,
  -- e.g. {"csi.cert-manager.io/common-name":"web"}. Never holds a token or
  -- other secret: certmountd refuses to store kubelet's service account
  -- tokens.
  attributes TEXT NOT NULL
    CHECK (json_valid(attributes) AND json_type(attributes) = 'object')
);

-- volume_status: a read-only summary for admins. Columns:
--   volume_id        the CSI volume id
--   pod              namespace/name of the pod
--   mounted          'yes' once published, 'no' while in flight
--   created          when the publish started (UTC, 'YYYY-MM-DD HH:MM:SSZ')
--   mounted_at       when the publish completed (UTC)
--   not_after        when the current certificate expires (UTC)
--   expires_in       time left until not_after as '12d 3h', '5h 20m' or
--                    '4m 10s'; 'expired' once past; computed at query time
--   renews_at        when the next issuance (renewal or retry) is due (UTC)
--   renewal_attempts failed renewals since the last success
--   last_error       why the last renewal failed, if it did
--   serial           serial number of the current certificate
--   target_path      where the volume is published
CREATE VIEW volume_status AS
SELECT
  volume_id,
  pod_namespace || '/' || pod_name AS pod,
  CASE mounted WHEN 1 THEN 'yes' ELSE 'no' END AS mounted,
  strftime('%Y-%m-%d %H:%M:%SZ', created_at, 'unixepoch') AS created,
  strftime('%Y-%m-%d %H:%M:%SZ', mounted_at, 'unixepoch') AS mounted_at,
  strftime('%Y-%m-%d %H:%M:%SZ', not_after, 'unixepoch') AS not_after,
  CASE
    WHEN seconds_left IS NULL THEN NULL
    WHEN seconds_left <= 0 THEN 'expired'
    WHEN seconds_left >= 86400
      THEN (seconds_left / 86400) || 'd ' || (seconds_left % 86400 / 3600) || 'h'
    WHEN seconds_left >= 3600
      THEN (seconds_left / 3600) || 'h ' || (seconds_left % 3600 / 60) || 'm'
    ELSE (seconds_left / 60) || 'm ' || (seconds_left % 60) || 's'
  END AS expires_in,
  strftime('%Y-%m-%d %H:%M:%SZ', next_issuance_at, 'unixepoch') AS renews_at,
  renewal_attempts,
  last_error,
  serial,
  target_path
FROM (SELECT *, not_after - unixepoch() AS seconds_left FROM volumes);

-- issuances: the issuance history, one row per attempt to issue a certificate
-- for a volume: the publish's first issuance and every renewal, successful or
-- not (added by migration 0002). certmountd keeps the newest --history-limit
-- rows (default 10) of each volume and prunes older ones in the same
-- transaction that appends a row. The rows belong to their volume: deleting
-- the volume (unpublish, startup cleanup) deletes its history through
-- ON DELETE CASCADE, so the reference never blocks a delete.
CREATE TABLE issuances (
  -- Increasing row id; the newest attempt of a volume has the largest id.
  id INTEGER PRIMARY KEY,
  -- The volume the attempt was for.
  volume_id TEXT NOT NULL REFERENCES volumes (volume_id) ON DELETE CASCADE,
  -- 'publish' (the first certificate, from NodePublishVolume) or 'renewal'.
  kind TEXT NOT NULL CHECK (kind IN ('publish', 'renewal')),
  -- 'ok': a certificate was issued and is now in the volume; 'error': the
  -- attempt failed and the previous certificate stayed in place.
  result TEXT NOT NULL CHECK (result IN ('ok', 'error')),
  -- Serial number (hex) of the certificate issued; NULL for a failure.
  serial TEXT,
  -- Validity of that certificate, unix seconds; NULL for a failure.
  not_before INTEGER,
  not_after INTEGER,
  -- When the attempt ended.
  issued_at INTEGER NOT NULL,
  -- Name of the issuer asked (e.g. 'local-ca').
  issuer TEXT NOT NULL DEFAULT '',
  -- How long the attempt took, milliseconds (key, CSR, issuer, files).
  duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
  -- Why the attempt failed; NULL for a success.
  error TEXT,
  -- A success has a certificate and no error; a failure an error and no
  -- certificate.
  CHECK ((result = 'ok' AND serial IS NOT NULL AND not_after IS NOT NULL AND error IS NULL) OR
         (result = 'error' AND serial IS NULL AND error IS NOT NULL))
);

-- Serves listing and pruning one volume's history, and the cascade on delete.
CREATE INDEX issuances_by_volume ON issuances (volume_id, id);

-- issuance_history: a read-only view of `issuances` for admins, newest first
-- per volume. Times are UTC 'YYYY-MM-DD HH:MM:SSZ'.
CREATE VIEW issuance_history AS
SELECT
  volume_id,
  kind,
  result,
  strftime('%Y-%m-%d %H:%M:%SZ', issued_at, 'unixepoch') AS issued_at,
  duration_ms,
  issuer,
  serial,
  strftime('%Y-%m-%d %H:%M:%SZ', not_after, 'unixepoch') AS not_after,
  error
FROM issuances
ORDER BY volume_id, id DESC;
