-- Migration 0004: the volume attributes move to a table of their own.
--
-- Forward-only; applied in one transaction with `PRAGMA user_version = 4`.
-- Never edit it once released. schema/schema.sql must equal the result of all
-- migrations (test/migrations_test.cc checks it).
--
-- Why: the attributes are written once, at registration, and never change,
-- but a pod author may make them large (up to the 128 KiB bound). In the
-- volumes row every renewal that changed the row's size rewrote them, overflow
-- pages and all. In their own row no renewal touches them.

-- The volume attributes of one volume, inserted in the transaction that
-- inserts its volumes row and deleted with it (ON DELETE CASCADE, so the
-- startup cleanup's one DELETE FROM volumes removes them too).
CREATE TABLE volume_attributes (
  volume_id TEXT PRIMARY KEY NOT NULL
    REFERENCES volumes (volume_id) ON DELETE CASCADE,
  attributes TEXT NOT NULL
    CHECK (json_valid(attributes) AND json_type(attributes) = 'object')
);

INSERT INTO volume_attributes (volume_id, attributes)
  SELECT volume_id, attributes FROM volumes;

ALTER TABLE volumes DROP COLUMN attributes;
