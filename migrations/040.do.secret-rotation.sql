-- Webhook secret rotation without downtime (issue 19 item 3): the secret a rotation replaced is
-- kept, encrypted like the current one (src/common/secrets.ts), until the end of the grace period
-- chosen at the rotation. While `previous_secret_expires_at` is in the future every delivery is
-- signed with both secrets (src/delivery/send.ts); after it, or once the grace is ended early,
-- the columns are cleared (or ignored: the worker reads them only while the period runs).
ALTER TABLE watches ADD COLUMN previous_secret_key_id text COLLATE "C";
ALTER TABLE watches ADD COLUMN previous_secret_ciphertext bytea;
ALTER TABLE watches ADD COLUMN previous_secret_expires_at timestamptz;
-- When the current secret was issued by a rotation (NULL: the secret given at creation).
ALTER TABLE watches ADD COLUMN secret_rotated_at timestamptz;
ALTER TABLE watches ADD CONSTRAINT watches_previous_secret_whole
  CHECK ((previous_secret_ciphertext IS NULL) = (previous_secret_key_id IS NULL)
     AND (previous_secret_ciphertext IS NULL) = (previous_secret_expires_at IS NULL));
