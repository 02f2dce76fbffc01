-- GET /v1/events reads one account's events newest first. Before this migration two indexes could
-- produce that order: the account's (account_id, created_at DESC) and the global UNIQUE
-- (created_at). The second misleads PostgreSQL's generic plans: with one large account it reads
-- every event backwards and filters on the account, so a page for a small account could scan
-- millions of rows. Paging needs created_at unique per account only (invariant 8: pages never
-- cross accounts, and a watch belongs to one account), so the account's index becomes the unique
-- one and the global constraint goes. The ingester still assigns globally increasing values
-- (src/ingest/commit.ts); one index fewer to maintain on every event insert.
ALTER TABLE events DROP CONSTRAINT events_created_at_key;
DROP INDEX events_account_created;
CREATE UNIQUE INDEX events_account_created ON events (account_id, created_at DESC);
