-- Alerts and automatic pause (issue 19 item 2).
--
-- A watch's alert state: 'failing' from the attempt that crossed WATCH_ALERT_FAILURES consecutive
-- failures (or the first delivery that went DEAD) until a delivery succeeds. alert_mailed_at:
-- when an alert of this watch was last queued for e-mail (at most one per WATCH_ALERT_WINDOW).
ALTER TABLE watches ADD COLUMN alert_state text CHECK (alert_state IN ('failing'));
ALTER TABLE watches ADD COLUMN alert_since timestamptz;
ALTER TABLE watches ADD COLUMN alert_reason text;
ALTER TABLE watches ADD COLUMN alert_mailed_at timestamptz;
-- Why a PAUSED watch was paused by tronwatch (NULL: by its owner, or not paused), and when.
ALTER TABLE watches ADD COLUMN paused_reason text;
ALTER TABLE watches ADD COLUMN auto_paused_at timestamptz;
-- Failures before this instant do not count towards the automatic pause (set on resume).
ALTER TABLE watches ADD COLUMN failures_counted_from timestamptz;

-- Alerts to e-mail to the account's members who opted in: an outbox, one row per alert, sent by
-- src/watches/alert-mail.ts (mailed_at set once sent; NULL: not yet).
CREATE TABLE watch_alerts (
  id          text COLLATE "C" PRIMARY KEY,                    -- alr_…
  watch_id    text COLLATE "C" NOT NULL REFERENCES watches (id),
  account_id  text COLLATE "C" NOT NULL REFERENCES accounts (id),
  kind        text NOT NULL CHECK (kind IN ('failing', 'recovered', 'auto_paused')),
  message     text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  mailed_at   timestamptz
);
CREATE INDEX watch_alerts_unmailed ON watch_alerts (created_at) WHERE mailed_at IS NULL;
CREATE INDEX watch_alerts_watch ON watch_alerts (watch_id, created_at DESC);
