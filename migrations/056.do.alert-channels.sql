-- Alert channels of an account (issue 29 item 1), beside e-mail: a Slack-compatible incoming
-- webhook ('slack': Slack, Mattermost, Rocket.Chat, Discord's /slack URL…) and a signed generic
-- alert webhook ('webhook': Standard Webhooks, signed with the channel's own whsec_ secret,
-- encrypted at rest like a watch's, key id kept for rotation: src/common/secrets.ts). At most one
-- of each kind per account; set on the console's Alerts page (admins and owners).
CREATE TABLE alert_channels (
  id                text COLLATE "C" PRIMARY KEY,                    -- ach_…
  account_id        text COLLATE "C" NOT NULL REFERENCES accounts (id),
  kind              text COLLATE "C" NOT NULL CHECK (kind IN ('slack', 'webhook')),
  url               text NOT NULL,
  secret_key_id     text COLLATE "C",
  secret_ciphertext bytea,
  enabled           boolean NOT NULL DEFAULT true,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'webhook') = (secret_ciphertext IS NOT NULL)),
  CHECK ((secret_ciphertext IS NULL) = (secret_key_id IS NULL))
);
CREATE UNIQUE INDEX alert_channels_account_kind ON alert_channels (account_id, kind);
