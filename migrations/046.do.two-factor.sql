-- Two-factor sign-in (issue 18 item 4; RFC 6238 TOTP). A user's TOTP secret is sealed like a
-- webhook secret (AES-256-GCM under the service keyring, key id beside it, re-sealed by
-- `tronwatch secrets rotate-key`). totp_enabled_at NULL with a secret: an enrolment that has not
-- been confirmed with a code yet. totp_last_step: the time step (unix seconds / 30) of the last
-- code accepted, so a code is never accepted twice (RFC 6238 §5.2).
ALTER TABLE console_users
  ADD COLUMN totp_key_id      text COLLATE "C",
  ADD COLUMN totp_ciphertext  bytea,
  ADD COLUMN totp_enabled_at  timestamptz,
  ADD COLUMN totp_last_step   bigint;

-- Ten single-use recovery codes per user with a second factor: SHA-256 of the normalised code.
CREATE TABLE console_recovery_codes (
  user_id     text COLLATE "C" NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  code_hash   text COLLATE "C" NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  used_at     timestamptz,
  PRIMARY KEY (user_id, code_hash)
);

-- The sign-in step between a right password and the code: SHA-256 of a random token handed to
-- the page, valid 5 minutes, used once, dead after 5 wrong codes.
CREATE TABLE console_login_challenges (
  token_hash  text COLLATE "C" PRIMARY KEY,
  user_id     text COLLATE "C" NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  failures    integer NOT NULL DEFAULT 0,
  used_at     timestamptz
);
CREATE INDEX console_login_challenges_expiry ON console_login_challenges (expires_at);

-- An owner can require a second factor of every member: a member without one can then only set
-- one up (the console sends them to its Security page) until they have.
ALTER TABLE accounts ADD COLUMN require_two_factor boolean NOT NULL DEFAULT false;
