-- Endpoints (issue 30 item 1; DESIGN decisions "endpoints"): one receiver's URL, secret, pace and
-- on/off, shared by every watch that targets it (`watches.endpoint_id`). A receiver that watches
-- 10,000 deposit addresses keeps one secret and one URL instead of 10,000.
--
-- The secret is sealed like a watch's (AES-256-GCM, key id + iv ‖ ciphertext ‖ tag:
-- src/common/secrets.ts; re-encrypted by `tronwatch secrets rotate-key`), and rotated with the same
-- grace period (migration 040): while previous_secret_expires_at is in the future every delivery
-- of every watch on the endpoint is signed with both secrets.
CREATE TABLE endpoints (
  id                          text COLLATE "C" PRIMARY KEY,           -- ep_…
  account_id                  text COLLATE "C" NOT NULL REFERENCES accounts (id),
  network                     text COLLATE "C" NOT NULL,
  -- Checked against the URL policy at creation and on change, re-checked at delivery (DESIGN
  -- invariant 7), like a watch's webhook_url.
  url                         text NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
  label                       text CHECK (char_length(label) BETWEEN 1 AND 100),
  -- false: deliveries to it wait in the outbox (no attempt used) until it is enabled again.
  enabled                     boolean NOT NULL DEFAULT true,
  -- The receiver's pace (issue 30 item 3), across every worker replica: at most
  -- rate_limit_per_second deliveries started in any second, at most max_concurrency in flight.
  -- NULL: no limit of its own (the worker's concurrency still bounds it).
  rate_limit_per_second       integer CHECK (rate_limit_per_second BETWEEN 1 AND 10000),
  max_concurrency             integer CHECK (max_concurrency BETWEEN 1 AND 1000),
  secret_key_id               text COLLATE "C" NOT NULL,
  secret_ciphertext           bytea NOT NULL,
  previous_secret_key_id      text COLLATE "C",
  previous_secret_ciphertext  bytea,
  previous_secret_expires_at  timestamptz,
  secret_rotated_at           timestamptz,
  created_at                  timestamptz NOT NULL DEFAULT now(),
  -- Deleted endpoints stay (soft delete): notifications of deleted watches created before are
  -- still delivered to them with their secret, as a deleted watch's are.
  deleted_at                  timestamptz,
  CONSTRAINT endpoints_previous_secret_whole
    CHECK ((previous_secret_ciphertext IS NULL) = (previous_secret_key_id IS NULL)
       AND (previous_secret_ciphertext IS NULL) = (previous_secret_expires_at IS NULL))
);
CREATE INDEX endpoints_account ON endpoints (account_id, network) WHERE deleted_at IS NULL;

-- A watch targets exactly one of: its own webhook_url (and secret), the bound chat, or an endpoint.
-- An endpoint watch is on the `webhook` channel (same outbox, same worker, same schedule) with
-- neither URL nor secret of its own: the claim reads the endpoint's.
ALTER TABLE watches ADD COLUMN endpoint_id text COLLATE "C" REFERENCES endpoints (id);
ALTER TABLE watches DROP CONSTRAINT watches_check;
ALTER TABLE watches DROP CONSTRAINT watches_check1;
ALTER TABLE watches ADD CONSTRAINT watches_one_target CHECK (
  CASE
    WHEN channel = 'telegram' THEN webhook_url IS NULL AND secret_ciphertext IS NULL
                                   AND endpoint_id IS NULL
    WHEN endpoint_id IS NOT NULL THEN webhook_url IS NULL AND secret_ciphertext IS NULL
    ELSE webhook_url IS NOT NULL AND secret_ciphertext IS NOT NULL
  END
);
-- "Which watches target this endpoint" (the 409 on delete, the console's list, the count).
CREATE INDEX watches_endpoint ON watches (endpoint_id, created_at)
  WHERE endpoint_id IS NOT NULL AND deleted_at IS NULL;
