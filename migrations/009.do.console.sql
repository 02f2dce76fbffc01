-- The console (issue 12): passwords, sessions, invitations, key usage, redelivery, attempt details.

-- argon2id PHC string of the account's console password (src/console/passwords.ts); NULL until
-- set through sign-up or an invitation link.
ALTER TABLE accounts ADD COLUMN password_hash text;

-- Console sessions (SPEC §Authentication, Console: 7-day sliding window). The cookie holds an
-- opaque random id; only its SHA-256 is stored. `csrf_hash` binds the tw_csrf cookie to the session.
CREATE TABLE console_sessions (
  id            text COLLATE "C"        PRIMARY KEY,         -- ses_… (shown in the sessions list)
  token_hash    text COLLATE "C"        NOT NULL UNIQUE,     -- SHA-256 hex of the cookie value
  csrf_hash     text COLLATE "C"        NOT NULL,            -- SHA-256 hex of the csrf token
  account_id    text COLLATE "C"        NOT NULL REFERENCES accounts (id),
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  user_agent    text,
  ip            text,
  revoked_at    timestamptz
);
CREATE INDEX console_sessions_account ON console_sessions (account_id) WHERE revoked_at IS NULL;

-- One-time links that set an account's password (`tronwatch accounts invite`): SHA-256 of the
-- token, single use, short-lived.
CREATE TABLE console_invites (
  token_hash  text COLLATE "C"        PRIMARY KEY,
  account_id  text COLLATE "C"        NOT NULL REFERENCES accounts (id),
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);

-- When a key was last used (refreshed at most once a minute per key and process).
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

-- Redelivery (DESIGN decisions): a new notification for the same event, the history kept. An
-- event may now have several notifications; pages show the newest (index order, no sort).
ALTER TABLE notifications DROP CONSTRAINT notifications_event_id_key;
CREATE INDEX notifications_event_created ON notifications (event_id, created_at DESC);

-- What the console shows of an attempt: the class of its error, the headers sent (signatures,
-- never the secret), and the start of the answer (headers, first 4 KB of the body).
ALTER TABLE attempts ADD COLUMN error_class text;
ALTER TABLE attempts ADD COLUMN request_headers jsonb;
ALTER TABLE attempts ADD COLUMN response_headers jsonb;
ALTER TABLE attempts ADD COLUMN response_body text;
