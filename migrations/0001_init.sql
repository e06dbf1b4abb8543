-- Migration 0001: the initial node-state schema.
--
-- Forward-only. certmountd applies this file in one transaction together with
-- `PRAGMA user_version = 1`. Never edit it once released; add 0002_*.sql.
-- schema/schema.sql must always equal the result of all migrations
-- (test/migrations_test.cc checks it).

-- One row per CSI ephemeral volume this node has seen a NodePublishVolume for.
-- A volume counts only once `mounted` = 1; startup deletes every other row.
CREATE TABLE volumes (
  -- CSI volume_id from kubelet; unique per node.
  volume_id TEXT PRIMARY KEY NOT NULL,
  -- Where kubelet asked us to publish the volume (inside the pod's dir).
  target_path TEXT NOT NULL,
  -- The pod the volume belongs to, as kubelet reported it.
  pod_namespace TEXT NOT NULL DEFAULT '',
  pod_name TEXT NOT NULL DEFAULT '',
  pod_uid TEXT NOT NULL DEFAULT '',
  service_account TEXT NOT NULL DEFAULT '',
  -- The group the volume's files belong to (the fs-group attribute, else
  -- kubelet's volume_mount_group); NULL: root only.
  file_group INTEGER CHECK (file_group IS NULL OR file_group BETWEEN 0 AND 4294967294),
  -- JSON object of the volume attributes (string -> string). Never holds a
  -- token or any other secret.
  attributes TEXT NOT NULL
    CHECK (json_valid(attributes) AND json_type(attributes) = 'object'),
  -- Name of the issuer that signs this volume's certificates.
  issuer TEXT NOT NULL DEFAULT '',
  -- 1 once the publish succeeded (set in the same transaction that records
  -- the first certificate); 0 while the publish is in flight.
  mounted INTEGER NOT NULL DEFAULT 0 CHECK (mounted IN (0, 1)),
  -- Unix seconds when the row was registered.
  created_at INTEGER NOT NULL,
  -- Unix seconds when the publish completed; NULL until then.
  mounted_at INTEGER,
  -- The current certificate: serial number (hex) and validity, unix seconds.
  serial TEXT,
  not_before INTEGER,
  not_after INTEGER,
  -- Unix seconds when the renewal scheduler next issues (or retries).
  next_issuance_at INTEGER,
  -- Failed renewal attempts since the last success.
  renewal_attempts INTEGER NOT NULL DEFAULT 0 CHECK (renewal_attempts >= 0),
  -- Message of the last failed renewal; NULL after a success.
  last_error TEXT,
  -- Unix seconds of the last change to this row.
  updated_at INTEGER NOT NULL,
  -- A mounted volume always has a certificate and a renewal time.
  CHECK (mounted = 0 OR (mounted_at IS NOT NULL AND serial IS NOT NULL AND
                         not_after IS NOT NULL AND next_issuance_at IS NOT NULL))
);

-- The renewal scheduler loads mounted volumes in next_issuance_at order.
CREATE INDEX volumes_mounted_by_next_issuance ON volumes (next_issuance_at)
  WHERE mounted = 1;

-- Human-readable summary for admins:
--   sqlite3 /var/lib/certmount/state.db 'select * from volume_status'
-- Times are UTC; expires_in and renews_at are relative to the time of the query.
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
