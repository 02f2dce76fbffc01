-- Alerts per outage, on several channels (issue 29 item 1).
--
-- watch_alerts (migration 043) keeps one row per change of a watch's state (an outage starts, it
-- ends, the watch is paused). alert_sends is the outbox of their messages: one row per alert and
-- target, written in the transaction that queues the alert (src/watches/health.ts), sent by the
-- worker role's alert loop (src/watches/alert-outbox.ts). A target is 'email' (the account's
-- members who opted in) or an alert channel's id (ach_…, migration 056). Rows of one watch and
-- target that wait together (the pace, WATCH_ALERT_PACE_MINUTES) are sent as one summary.
CREATE TABLE alert_sends (
  id          text COLLATE "C" PRIMARY KEY,                          -- als_…
  alert_id    text COLLATE "C" NOT NULL REFERENCES watch_alerts (id),
  watch_id    text COLLATE "C" NOT NULL REFERENCES watches (id),
  account_id  text COLLATE "C" NOT NULL REFERENCES accounts (id),
  target      text COLLATE "C" NOT NULL,                             -- 'email' | ach_…
  created_at  timestamptz NOT NULL DEFAULT now(),
  -- Not before this instant (a failed send's backoff, a 429's Retry-After).
  due_at      timestamptz NOT NULL DEFAULT now(),
  -- Failed sends so far (a 429 is not one).
  tries       integer NOT NULL DEFAULT 0,
  -- The last failure, one line, never a URL's path or query.
  last_error  text,
  sent_at     timestamptz,
  -- Set after the last try failed: the row is no longer sent.
  given_up_at timestamptz
);
CREATE INDEX alert_sends_pending ON alert_sends (due_at)
  WHERE sent_at IS NULL AND given_up_at IS NULL;
CREATE INDEX alert_sends_paced ON alert_sends (target, watch_id, sent_at DESC)
  WHERE sent_at IS NOT NULL;
CREATE INDEX alert_sends_alert ON alert_sends (alert_id);

-- The alerts not yet e-mailed move to the new outbox.
INSERT INTO alert_sends (id, alert_id, watch_id, account_id, target, created_at, due_at)
SELECT 'als_' || substr(id, 5), id, watch_id, account_id, 'email', created_at, created_at
  FROM watch_alerts WHERE mailed_at IS NULL;
