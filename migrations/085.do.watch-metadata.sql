-- A watch's metadata (issue 30 item 2): a small JSON object of string values the account gives a
-- watch (a customer, order or invoice reference), so a receiver credits the right customer from
-- the delivery alone. Checked by the API (src/watches/metadata.ts: at most 20 keys of 1..40
-- characters, string values of at most 500); the CHECKs below are the backstop.
--
-- It is copied onto each event at ingest (src/ingest/commit.ts), in the event's transaction: an
-- event says what the watch said when the transfer was matched, so its payload bytes (and their
-- signature) stay the same on every attempt and redelivery, whatever the watch says later.
-- NULL: none (the event's JSON then has no `metadata` member at all: additive).
ALTER TABLE watches ADD COLUMN metadata jsonb
  CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object');
ALTER TABLE events ADD COLUMN metadata jsonb
  CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object');
