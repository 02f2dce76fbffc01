-- Webhook secrets a worker could not decrypt (issue 14 item 3): one row per key id, written by the
-- worker that met it (at most once a minute), deleted when a secret under that key decrypts again.
-- GET /healthz reads the recent rows, so every API replica reports it whichever process delivers.
CREATE TABLE secret_problems (
  key_id      text COLLATE "C" PRIMARY KEY,
  first_seen  timestamptz NOT NULL DEFAULT now(),
  last_seen   timestamptz NOT NULL DEFAULT now(),
  error       text        NOT NULL
);
