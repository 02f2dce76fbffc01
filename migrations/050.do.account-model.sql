-- The team account holds against its own members (issue 27; src/accounts/keys.ts, users.ts,
-- two-factor.ts, credentials.ts; README/docs "Security").

-- 1. Keys have an owner and a role. `created_by_user_id`: the console user who made the key
--    (no foreign key: the key row outlives its maker, revoked, and still names them);
--    NULL: the operator's CLI. `created_by_email`: the maker's e-mail when they made it.
--    `role`: the most the key may do (a role of src/accounts/users.ts); never more than its maker's
--    role, narrowed in the transaction that lowers the maker's role, revoked in the one that
--    removes the maker.
ALTER TABLE api_keys
  ADD COLUMN created_by_user_id text COLLATE "C",
  ADD COLUMN created_by_email   text,
  ADD COLUMN role               text NOT NULL DEFAULT 'owner'
    CHECK (role IN ('owner', 'admin', 'developer', 'viewer'));
CREATE INDEX api_keys_created_by ON api_keys (created_by_user_id) WHERE created_by_user_id IS NOT NULL;

-- Existing keys: the maker is the user its `api_key.created` audit entry names (keys made by the
-- CLI have none and stay the operator's, role owner).
UPDATE api_keys k
   SET created_by_user_id = a.actor_id,
       created_by_email = u.email,
       role = coalesce(u.role, 'viewer')
  FROM audit_log a LEFT JOIN console_users u ON u.id = a.actor_id
 WHERE a.action = 'api_key.created' AND a.actor_type = 'user' AND a.target_id = k.id;
-- A key whose maker was removed before keys had owners is revoked now, with an entry.
INSERT INTO audit_log (id, account_id, actor_type, actor_id, action, target_id, detail)
SELECT 'aud_' || lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
         || substr(md5(k.id), 1, 14),
       k.account_id, 'system', 'migration', 'api_key.revoked', k.id,
       jsonb_build_object('name', k.name, 'prefix', k.key_prefix, 'reason', 'maker_removed')
  FROM api_keys k
 WHERE k.created_by_user_id IS NOT NULL AND k.revoked_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM console_users u WHERE u.id = k.created_by_user_id);
UPDATE api_keys k SET revoked_at = now()
 WHERE k.created_by_user_id IS NOT NULL AND k.revoked_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM console_users u WHERE u.id = k.created_by_user_id);

-- 2. Audit entries keep the actor's name as it was when they acted (issue 29 item 2): the
--    user's e-mail, the key's prefix and name. Filled by recordAudit; existing entries now.
ALTER TABLE audit_log ADD COLUMN actor_label text;
UPDATE audit_log a SET actor_label = u.email FROM console_users u
 WHERE a.actor_type = 'user' AND u.id = a.actor_id;
UPDATE audit_log a SET actor_label = k.key_prefix || coalesce(' · ' || k.name, '') FROM api_keys k
 WHERE a.actor_type = 'api_key' AND k.id = a.actor_id;

-- 3. Second-factor guessing is bounded per user, whatever the client address: wrong codes in the
--    current window (since `code_failures_since`), the end of a lock, and when the user was last
--    e-mailed about one (src/accounts/two-factor.ts CODE_*).
ALTER TABLE console_users
  ADD COLUMN code_failures         integer NOT NULL DEFAULT 0,
  ADD COLUMN code_failures_since   timestamptz,
  ADD COLUMN code_locked_until     timestamptz,
  ADD COLUMN code_lock_notified_at timestamptz;

-- 4. A password reset of a user with a second factor waits for the code: the challenge carries
--    the new password's hash and the reset link's token hash, and nothing changes before the code.
ALTER TABLE console_login_challenges
  ADD COLUMN purpose          text NOT NULL DEFAULT 'login' CHECK (purpose IN ('login', 'reset')),
  ADD COLUMN password_hash    text,
  ADD COLUMN reset_token_hash text COLLATE "C";

-- Links are cancelled (not used): a cancelled link answers like a used one.
ALTER TABLE console_invites ADD COLUMN cancelled_at timestamptz;
ALTER TABLE console_password_resets ADD COLUMN cancelled_at timestamptz;
CREATE INDEX console_invites_user ON console_invites (user_id);
-- The invitation page says who invited you (issue 29): the inviter's e-mail when the link was
-- made; NULL: the operator's CLI.
ALTER TABLE console_invites ADD COLUMN invited_by_email text;

-- Invitations tell nothing about whether an address is registered (issue 27 item 4): inviting an
-- address that already has a user makes a placeholder, listed as an invited member of the inviting
-- account until removed; it never signs in (src/accounts/membership.ts).
CREATE TABLE console_invite_decoys (
  id          text COLLATE "C" PRIMARY KEY,                        -- usr_… (never a real user's)
  account_id  text COLLATE "C" NOT NULL REFERENCES accounts (id),
  email       text NOT NULL,
  role        text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, email)
);
