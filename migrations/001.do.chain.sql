-- The chain cursor: the last solidified block whose transfers are committed, per network.
-- Advanced in the same transaction as the events of that block (DESIGN invariant 2).
CREATE TABLE chain_cursor (
  network       text        PRIMARY KEY,
  block_number  bigint      NOT NULL CHECK (block_number >= 0),
  block_id      text        NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The chain heads as the ingester last saw them: the solidified head and the full-node head
-- (the newest block produced, solidified or not). A new watch records head_block_number as
-- its activation point (DESIGN invariant 5).
CREATE TABLE chain_head (
  network                text        PRIMARY KEY,
  solidified_block_number bigint     NOT NULL,
  head_block_number      bigint      NOT NULL,
  observed_at            timestamptz NOT NULL DEFAULT now()
);
