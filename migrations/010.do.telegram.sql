-- Telegram deliveries (issue 13; DESIGN "The console and the chat channel"): the chat bound to an
-- account, the one-time tokens that bind it, and the bot's update offset.

-- The bound chat (accounts.telegram_chat_id, migration 002, is the Bot API chat id as decimal
-- text): what the console shows of it and when it was bound. A chat that migrates to a supergroup
-- is followed: telegram_chat_id is replaced by the new id (src/telegram/binding.ts).
ALTER TABLE accounts ADD COLUMN telegram_chat_title text;
ALTER TABLE accounts ADD COLUMN telegram_chat_type  text
  CHECK (telegram_chat_type IN ('private', 'group', 'supergroup', 'channel'));
ALTER TABLE accounts ADD COLUMN telegram_bound_at   timestamptz;
-- Finding the account of a chat (migration, unbinding from the chat side).
CREATE INDEX accounts_telegram_chat ON accounts (telegram_chat_id) WHERE telegram_chat_id IS NOT NULL;

-- "Connect Telegram" in the console: a random token in the deep link t.me/<bot>?start=<token>;
-- only its SHA-256 is stored; single use, 10 minutes.
CREATE TABLE telegram_link_tokens (
  token_hash  text COLLATE "C" PRIMARY KEY,           -- SHA-256 hex of the token
  account_id  text COLLATE "C" NOT NULL REFERENCES accounts (id),
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz,
  used_chat_id text COLLATE "C"
);
CREATE INDEX telegram_link_tokens_account ON telegram_link_tokens (account_id);

-- Long polling: the next update_id to ask for, per bot (the bot's numeric id), so a standby that
-- takes over does not handle the same updates again.
CREATE TABLE telegram_bot_state (
  bot_id          text COLLATE "C" PRIMARY KEY,
  next_update_id  bigint NOT NULL DEFAULT 0,
  updated_at      timestamptz NOT NULL DEFAULT now()
);
