-- The audit log (issue 18 item 5; src/audit/audit.ts): one row per change made through the
-- console or the API (keys, watches, pause/resume, redelivery, test sends, password, sign-ins and
-- failed sign-ins, sign-outs and session revocations, Telegram binding), written in the same
-- transaction as the change it records wherever the change is a database write. Never a secret:
-- `detail` is a small object cleaned by src/audit/audit.ts (no key, token, secret or password).
--
-- Who: `actor_type` 'user' (a console user: today the account's one login, so `actor_id` is the
-- account id; with members it becomes the user id), 'api_key' (`actor_id` = key_…), or 'system'
-- (`actor_id` names the part: 'cli', 'telegram'). `session_id` is the console session a user acted
-- through (ses_…), when there is one. `account_id` NULL: a deployment-wide operation (the CLI's
-- secret rotation), shown in no account's log.
CREATE TABLE audit_log (
  id          text COLLATE "C" PRIMARY KEY,                 -- aud_… (time-sortable)
  account_id  text COLLATE "C" REFERENCES accounts (id),
  at          timestamptz NOT NULL DEFAULT clock_timestamp(),
  actor_type  text COLLATE "C" NOT NULL CHECK (actor_type IN ('user', 'api_key', 'system')),
  actor_id    text COLLATE "C",
  session_id  text COLLATE "C",
  action      text COLLATE "C" NOT NULL,
  target_id   text COLLATE "C",
  detail      jsonb NOT NULL DEFAULT '{}'::jsonb,
  client_ip   text
);
-- The console's page: an account's entries, newest first (keyset paging on (at, id)).
CREATE INDEX audit_log_account_at ON audit_log (account_id, at DESC, id DESC);
-- Retention (pruneAuditLog): the oldest entries first, whatever the account.
CREATE INDEX audit_log_at ON audit_log (at);
