-- Endpoint replays (issue 40 item 1): POST /v1/endpoints/{id}/replay queues every failed delivery
-- (an event of a watch on the endpoint whose newest notification is DEAD) created at or after
-- `since` again, as the endpoint's redelivery does (src/endpoints/replay.ts). One row per replay
-- that ran, so that the same request made twice (a client retrying after a lost answer) replays
-- once: a request naming the same endpoint and the same `since` within 24 hours of a replay is
-- answered with that replay's row and queues nothing. The row is also what the audit entry names.
CREATE TABLE endpoint_replays (
  id           text COLLATE "C" PRIMARY KEY,                         -- rpl_…
  account_id   text COLLATE "C" NOT NULL REFERENCES accounts (id),
  network      text COLLATE "C" NOT NULL,
  endpoint_id  text COLLATE "C" NOT NULL REFERENCES endpoints (id),
  since        timestamptz NOT NULL,
  -- Deliveries queued again (at most the bound of one call, 10,000).
  replayed     integer NOT NULL CHECK (replayed >= 0),
  -- When the bound cut the replay short: the creation instant of the last event it took, as
  -- PostgreSQL's text (microseconds); the caller continues with since = this. NULL otherwise.
  next_since   text,
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- The repeat lookup: this endpoint's replays from this instant, newest first.
CREATE INDEX endpoint_replays_endpoint_since ON endpoint_replays (endpoint_id, since, created_at DESC);
