-- Per-endpoint operations (issue 30 item 1: "health, failure alerts, auto-pause, redelivery and
-- dead letters work per endpoint as well as per watch").
--
-- Each attempt records the endpoint it went to (NULL: a watch's own URL, or Telegram), so an
-- endpoint's health is one index range on attempts whatever the number of its watches (migration
-- 042's attempts_watch_started would need one range per watch: 100,000 probes for a gateway's
-- endpoint). Rows written before this migration get it from their watch.
ALTER TABLE attempts ADD COLUMN endpoint_id text COLLATE "C";
UPDATE attempts AS a SET endpoint_id = w.endpoint_id
  FROM watches AS w WHERE w.id = a.watch_id AND w.endpoint_id IS NOT NULL;
-- The newest success and the failures since it are one probe and one range each
-- (src/endpoints/health.ts refreshEndpointHealth), also for an endpoint failing for days.
CREATE INDEX attempts_endpoint_ok ON attempts (endpoint_id, started_at)
  WHERE endpoint_id IS NOT NULL AND error IS NULL AND NOT throttled;
CREATE INDEX attempts_endpoint_failed ON attempts (endpoint_id, started_at)
  WHERE endpoint_id IS NOT NULL AND error IS NOT NULL AND NOT throttled;

-- The endpoint's streak, alert and automatic pause, as a watch's (migrations 042, 043), kept by
-- the delivery worker after each recorded batch: last_success_at / last_failure_at (start of the
-- newest 2xx / failed attempt), consecutive_failures (failed attempts since the newest success),
-- failing_since (start of the first of them); alert_state 'failing' from the attempt that crossed
-- WATCH_ALERT_FAILURES (or a delivery gone DEAD) until one succeeds; paused_reason and
-- auto_paused_at when tronwatch switched it off (enabled = false) after WATCH_AUTO_PAUSE_DAYS of
-- failures; failures before failures_counted_from (set when it is enabled again) do not count
-- towards that pause.
ALTER TABLE endpoints ADD COLUMN last_success_at timestamptz;
ALTER TABLE endpoints ADD COLUMN last_failure_at timestamptz;
ALTER TABLE endpoints ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN failing_since timestamptz;
ALTER TABLE endpoints ADD COLUMN alert_state text CHECK (alert_state IN ('failing'));
ALTER TABLE endpoints ADD COLUMN alert_since timestamptz;
ALTER TABLE endpoints ADD COLUMN alert_reason text;
ALTER TABLE endpoints ADD COLUMN paused_reason text;
ALTER TABLE endpoints ADD COLUMN auto_paused_at timestamptz;
ALTER TABLE endpoints ADD COLUMN failures_counted_from timestamptz;

