-- An ingest stall: the block after the cursor failed for a reason no retry can fix (a malformed
-- block or transaction-info answer, one that cannot be extracted, a 4xx from the node), so the
-- cursor cannot move. The ingester records it here (src/ingest/stall.ts) and keeps retrying the
-- block slowly; the commit that moves the cursor clears it in the same transaction. Every API
-- replica reads it for GET /healthz, whichever process ingests. NULL = not stalled.
-- (Numbered 007: 006 is taken by another change.)
ALTER TABLE chain_cursor
  ADD COLUMN stalled_block  bigint,
  ADD COLUMN stalled_reason text,
  ADD COLUMN stalled_since  timestamptz;
