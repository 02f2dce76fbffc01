-- The scanned-through watermark (issue 14 item 1): the timestamp of the newest block whose events
-- are all committed, written with the cursor in the same transaction (src/ingest/commit.ts), so
-- GET /v1/status and GET /v1/events can state "every matching transfer up to block N is here".
ALTER TABLE chain_cursor ADD COLUMN block_timestamp timestamptz;
