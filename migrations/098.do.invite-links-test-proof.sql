-- An invitation of an address that already has a user (a placeholder, migration 050) gets a link
-- of its own (issue 40 item 8): its preview (GET /console/api/invite?token=) answers as a new
-- member's link would, until it is used; using it is refused as an invalid link and spends it.
-- One live link per placeholder: a new one replaces the hash; removing the placeholder deletes it.
ALTER TABLE console_invite_decoys ADD COLUMN token_hash text COLLATE "C" UNIQUE;
ALTER TABLE console_invite_decoys ADD COLUMN invited_by_email text;
ALTER TABLE console_invite_decoys ADD COLUMN expires_at timestamptz;

-- A test deposit (POST /v1/test/transfers, issue 40 item 11) says so in its own proof value:
-- `test` (on no chain, never money), not `provider` (one provider's word about a real chain).
-- Only a test watch's event can carry it (network 'nile', the test environment, migration 090).
ALTER TABLE events DROP CONSTRAINT events_proof_check;
UPDATE events SET proof = 'test' WHERE tx_id LIKE 'test\_%' AND network <> 'mainnet';
ALTER TABLE events ADD CONSTRAINT events_proof_check
  CHECK (proof IN ('signed', 'quorum', 'provider', 'test'));
ALTER TABLE events ADD CONSTRAINT events_test_proof_not_live
  CHECK (proof <> 'test' OR network <> 'mainnet');
