-- Members and roles (issue 18 item 3): an account has several console users, each with their own
-- e-mail, password and sessions, and a role: owner, admin, developer (keys, watches, redelivery),
-- viewer (read-only). Every existing account's login becomes its owner user (same e-mail and
-- password hash; the id keeps the account id's body: acc_X → usr_X).

CREATE TABLE console_users (
  id             text COLLATE "C" PRIMARY KEY,                        -- usr_…
  account_id     text COLLATE "C" NOT NULL REFERENCES accounts (id),
  -- Trimmed, lowercased; one mailbox signs in to one account.
  email          text NOT NULL UNIQUE,
  -- argon2id PHC string (src/console/passwords.ts); NULL while an invitation is not accepted.
  password_hash  text,
  role           text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
  created_at     timestamptz NOT NULL DEFAULT now(),
  -- When the invitation was accepted (the password first set); NULL: invited, not joined yet.
  joined_at      timestamptz
);
CREATE INDEX console_users_account ON console_users (account_id);

INSERT INTO console_users (id, account_id, email, password_hash, role, created_at, joined_at)
SELECT 'usr_' || substr(id, 5), id, email, password_hash, 'owner', created_at,
       CASE WHEN password_hash IS NULL THEN NULL ELSE created_at END
  FROM accounts;

-- Sessions belong to a user (removing a user deletes them: their sessions end at once).
ALTER TABLE console_sessions
  ADD COLUMN user_id text COLLATE "C" REFERENCES console_users (id) ON DELETE CASCADE;
UPDATE console_sessions SET user_id = 'usr_' || substr(account_id, 5);
ALTER TABLE console_sessions ALTER COLUMN user_id SET NOT NULL;
CREATE INDEX console_sessions_user ON console_sessions (user_id) WHERE revoked_at IS NULL;

-- An invitation names the user it lets set a password (a member invited from the console, or
-- the owner of an account made by the CLI).
ALTER TABLE console_invites
  ADD COLUMN user_id text COLLATE "C" REFERENCES console_users (id) ON DELETE CASCADE;
UPDATE console_invites SET user_id = 'usr_' || substr(account_id, 5);
ALTER TABLE console_invites ALTER COLUMN user_id SET NOT NULL;

-- Password reset by e-mail (issue 18 item 2): SHA-256 of the token, single use, 30 minutes.
CREATE TABLE console_password_resets (
  token_hash  text COLLATE "C" PRIMARY KEY,
  user_id     text COLLATE "C" NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX console_password_resets_user ON console_password_resets (user_id);

-- The password lives on the user now.
ALTER TABLE accounts DROP COLUMN password_hash;
