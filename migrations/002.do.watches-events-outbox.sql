-- Accounts, API keys, watches, events and the notification outbox (issue 3).
-- Identifiers are prefixed and time-sortable (src/common/ids.ts); event ids are derived
-- (a pure function of watch, tx_id, event_index), so re-ingesting a block inserts nothing twice.

CREATE TABLE accounts (
  id                 text        PRIMARY KEY,                -- acc_…
  email              text        NOT NULL UNIQUE,
  plan               text        NOT NULL CHECK (plan IN ('free', 'starter', 'pro', 'scale', 'business')),
  -- Business limits are set per account; NULL means the plan's value (src/api/plans.ts).
  rate_limit_per_min integer     CHECK (rate_limit_per_min > 0),
  watch_quota        integer     CHECK (watch_quota >= 0),
  telegram_chat_id   text,                                   -- bound in the console (later)
  created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id          text        PRIMARY KEY,                       -- key_…
  account_id  text        NOT NULL REFERENCES accounts (id),
  -- SHA-256 of the whole key (lowercase hex). The key itself is never stored.
  key_hash    text        NOT NULL UNIQUE,
  -- The first characters of the key, for the operator to recognise it (tw_live_AbCd…).
  key_prefix  text        NOT NULL,
  network     text        NOT NULL,
  name        text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE watches (
  id                text        PRIMARY KEY,                 -- wh_…
  account_id        text        NOT NULL REFERENCES accounts (id),
  network           text        NOT NULL,
  address           text        NOT NULL,                    -- as registered
  address_hex       text        NOT NULL,                    -- 41-hex: identity and match key
  asset_filter      text        NOT NULL CHECK (asset_filter IN ('USDT', 'TRX', 'ALL')),
  direction         text        NOT NULL CHECK (direction IN ('incoming', 'outgoing', 'both')),
  channel           text        NOT NULL CHECK (channel IN ('webhook', 'telegram')),
  webhook_url       text,
  -- AES-256-GCM of the whsec_ secret: key id, then iv ‖ ciphertext ‖ tag (src/common/secrets.ts).
  secret_key_id     text,
  secret_ciphertext bytea,
  status            text        NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'PAUSED')),
  -- The chain head when the watch was created: it matches blocks strictly above (DESIGN inv. 5).
  active_from_block bigint      NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  -- Deleted watches stay for their events and pending notifications; they never match again.
  deleted_at        timestamptz,
  CHECK ((channel = 'webhook') = (webhook_url IS NOT NULL)),
  CHECK ((channel = 'webhook') = (secret_ciphertext IS NOT NULL))
);
-- Duplicate identity (DESIGN decisions): one live watch per account, network, address, filter,
-- direction and channel.
CREATE UNIQUE INDEX watches_identity ON watches (account_id, network, address_hex, asset_filter, direction, channel)
  WHERE deleted_at IS NULL;
-- Matching: one index probe per candidate address of a block, whatever the number of watches.
CREATE INDEX watches_match ON watches (address_hex) WHERE deleted_at IS NULL AND status = 'ACTIVE';
CREATE INDEX watches_account ON watches (account_id) WHERE deleted_at IS NULL;

CREATE TABLE events (
  id               text        PRIMARY KEY,                  -- evt_… = f(watch_id, tx_id, event_index)
  account_id       text        NOT NULL REFERENCES accounts (id),
  watch_id         text        NOT NULL REFERENCES watches (id),
  network          text        NOT NULL,
  direction        text        NOT NULL CHECK (direction IN ('incoming', 'outgoing')),
  asset            text        NOT NULL CHECK (asset IN ('USDT', 'TRX')),
  tx_id            text        NOT NULL,
  event_index      integer     NOT NULL,
  block_number     bigint      NOT NULL,
  block_timestamp  timestamptz NOT NULL,
  from_address     text        NOT NULL,                     -- base58
  to_address       text        NOT NULL,                     -- base58
  amount_raw       numeric(78, 0) NOT NULL CHECK (amount_raw > 0),
  contract         text,                                     -- base58, NULL for TRX
  -- Unique and strictly increasing across all events (assigned by the single ingester), so a
  -- created_at cursor pages without skipping or repeating even inside one block's commit.
  created_at       timestamptz NOT NULL UNIQUE
);
CREATE INDEX events_account_created ON events (account_id, created_at DESC);
CREATE INDEX events_watch_created ON events (watch_id, created_at DESC);

CREATE TABLE notifications (
  id               text        PRIMARY KEY,                  -- ntf_…
  event_id         text        NOT NULL UNIQUE REFERENCES events (id),
  account_id       text        NOT NULL,
  watch_id         text        NOT NULL,
  channel          text        NOT NULL CHECK (channel IN ('webhook', 'telegram')),
  status           text        NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DELIVERED', 'DEAD')),
  attempts         integer     NOT NULL DEFAULT 0,
  -- When the next attempt is due. A claim moves it forward by the lease, so a worker that dies
  -- holding a notification loses it when the lease runs out (DESIGN invariant 3).
  next_attempt_at  timestamptz NOT NULL,
  lease_token      text,
  created_at       timestamptz NOT NULL,
  delivered_at     timestamptz,
  last_status      integer,
  last_error       text
);
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE status = 'PENDING';

-- Every delivery attempt, recorded before the notification's state moves (habit 8).
CREATE TABLE attempts (
  id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  notification_id  text        NOT NULL REFERENCES notifications (id),
  attempt          integer     NOT NULL,                     -- 1..6
  started_at       timestamptz NOT NULL,
  duration_ms      integer     NOT NULL,
  http_status      integer,                                  -- NULL when no HTTP answer
  error            text                                      -- NULL on a 2xx
);
CREATE INDEX attempts_notification ON attempts (notification_id);

-- The created_at of the newest event, so a new ingester (or a clock behind the previous one)
-- keeps created_at strictly increasing.
ALTER TABLE chain_cursor ADD COLUMN last_event_at timestamptz;
