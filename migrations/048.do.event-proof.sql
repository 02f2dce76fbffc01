-- Issue 26: how each event's transfer was established (SPEC §Event `proof`):
--   signed   read from signed bytes under a transaction root proven against the block header;
--   quorum   k >= 2 node providers agreed on it, but no header commits to it;
--   provider one provider's word.
-- Events stored before this migration were not classified: they are marked 'provider', the level
-- that claims nothing (a receiver applying its own check to them loses nothing). The default stays
-- for rows written by hand (tests, restores); the ingester always writes the level it established.
ALTER TABLE events ADD COLUMN proof text NOT NULL DEFAULT 'provider'
  CHECK (proof IN ('signed', 'quorum', 'provider'));
