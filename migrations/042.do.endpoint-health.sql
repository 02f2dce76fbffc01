-- Endpoint health per watch (issue 19 item 1): attempts carry their watch, so a watch's success
-- rate and latency over the last hour, day and week are one index range each. Rows written before
-- this migration get it from their notification.
ALTER TABLE attempts ADD COLUMN watch_id text COLLATE "C";
UPDATE attempts AS a SET watch_id = n.watch_id FROM notifications AS n WHERE n.id = a.notification_id;
CREATE INDEX attempts_watch_started ON attempts (watch_id, started_at) WHERE watch_id IS NOT NULL;

-- The watch's current streak, kept by the delivery worker after each recorded batch
-- (src/watches/health.ts refreshWatchHealth): the newest successful attempt, the failed attempts
-- since it, and when the first of those started.
ALTER TABLE watches ADD COLUMN last_success_at timestamptz;
ALTER TABLE watches ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0;
ALTER TABLE watches ADD COLUMN failing_since timestamptz;
