-- The light client's state (issue 28, src/tron/light-client/store.ts): per network, the last block
-- tronwatch proved final itself (>= 19 of 27 SRs' signed blocks above it) and the SR sets it
-- follows (LightClientSnapshot as JSON: the pinned checkpoint, each epoch's SRs, signing keys and
-- schedule order). Written in the transaction that advances the cursor to that block, so after a
-- restart the two agree; read once at start, then cross-checked against the providers.
CREATE TABLE light_client_state (
  network         text COLLATE "C" PRIMARY KEY,
  final_number    bigint NOT NULL CHECK (final_number >= 0),
  final_id        text COLLATE "C" NOT NULL CHECK (final_id ~ '^[0-9a-f]{64}$'),
  checkpoint_id   text COLLATE "C" NOT NULL CHECK (checkpoint_id ~ '^[0-9a-f]{64}$'),
  epoch           integer NOT NULL CHECK (epoch >= 0),
  snapshot        jsonb NOT NULL,
  updated_at      timestamptz NOT NULL DEFAULT now()
);
