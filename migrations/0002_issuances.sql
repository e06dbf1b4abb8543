-- Migration 0002: the issuance history.
--
-- Forward-only; applied in one transaction with `PRAGMA user_version = 2`.
-- Never edit it once released. schema/schema.sql must equal the result of all
-- migrations (test/migrations_test.cc checks it).

-- One row per issuance attempt (the publish's and every renewal's, failed
-- ones too). The store keeps the newest --history-limit rows per volume.
-- Deleting a volume deletes its history: the volume is gone.
CREATE TABLE issuances (
  id INTEGER PRIMARY KEY,
  volume_id TEXT NOT NULL REFERENCES volumes (volume_id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('publish', 'renewal')),
  result TEXT NOT NULL CHECK (result IN ('ok', 'error')),
  serial TEXT,
  not_before INTEGER,
  not_after INTEGER,
  issued_at INTEGER NOT NULL,
  issuer TEXT NOT NULL DEFAULT '',
  duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
  error TEXT,
  CHECK ((result = 'ok' AND serial IS NOT NULL AND not_after IS NOT NULL AND error IS NULL) OR
         (result = 'error' AND serial IS NULL AND error IS NOT NULL))
);

-- Listing and pruning one volume's history; also what ON DELETE CASCADE uses.
CREATE INDEX issuances_by_volume ON issuances (volume_id, id);

-- Human-readable history for admins:
--   sqlite3 /var/lib/certmount/state.db 'select * from issuance_history'
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
