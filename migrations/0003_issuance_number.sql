-- Migration 0003: the issuance number and signer-side request name per volume.
--
-- Forward-only; applied in one transaction with `PRAGMA user_version = 3`.
-- Never edit it once released. schema/schema.sql must equal the result of all
-- migrations (test/migrations_test.cc checks it).

-- The number of the volume's current (or pending) issuance: 0 for the
-- publish, bumped before each renewal that does not resume a pending one.
ALTER TABLE volumes ADD COLUMN issuance_number INTEGER NOT NULL DEFAULT 0
  CHECK (issuance_number >= 0);
-- The signer-side name of that issuance (a CertificateRequest name); NULL for
-- the local CA, which has none.
ALTER TABLE volumes ADD COLUMN request_name TEXT;
