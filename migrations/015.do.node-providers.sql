-- The node providers as the ingest leader last saw them (src/ingest/providers.ts, written after
-- every head poll and every failed ingest step), so that every API replica reports them in
-- GET /healthz and GET /v1/status whichever process ingests. One row per provider, by its
-- position in TRON_NODE_URL; `name` is the URL's origin (never its path, query or fragment).
CREATE TABLE node_providers (
  network     text        COLLATE "C" NOT NULL,
  idx         integer     NOT NULL CHECK (idx >= 0),
  name        text        NOT NULL,
  state       text        NOT NULL CHECK (state IN ('ok', 'set_aside', 'unhealthy')),
  reason      text,
  since       timestamptz,
  until       timestamptz,
  solidified  bigint      NOT NULL,
  head        bigint      NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (network, idx)
);
