-- One alert per endpoint, not one per watch (issue 30 item 1: "failure alerts ... work per
-- endpoint"). A gateway with 10,000 deposit addresses on one endpoint whose receiver goes down
-- gets one 'failing' message for the endpoint (and one 'recovered', one 'auto_paused'), not
-- 10,000: the watches on an endpoint keep their own streak and alert state but queue no alert
-- message (src/watches/health.ts); the endpoint queues them (src/endpoints/health.ts).
--
-- An alert (watch_alerts, migration 043) and its sends (alert_sends, migration 055) are about
-- exactly one watch or one endpoint. The alert loop paces and sums up per (target, watch) or
-- (target, endpoint) alike (src/watches/alert-outbox.ts).
ALTER TABLE watch_alerts ALTER COLUMN watch_id DROP NOT NULL;
ALTER TABLE watch_alerts ADD COLUMN endpoint_id text COLLATE "C" REFERENCES endpoints (id);
ALTER TABLE watch_alerts ADD CONSTRAINT watch_alerts_one_subject
  CHECK ((watch_id IS NULL) <> (endpoint_id IS NULL));
CREATE INDEX watch_alerts_endpoint ON watch_alerts (endpoint_id, created_at DESC)
  WHERE endpoint_id IS NOT NULL;

ALTER TABLE alert_sends ALTER COLUMN watch_id DROP NOT NULL;
ALTER TABLE alert_sends ADD COLUMN endpoint_id text COLLATE "C" REFERENCES endpoints (id);
ALTER TABLE alert_sends ADD CONSTRAINT alert_sends_one_subject
  CHECK ((watch_id IS NULL) <> (endpoint_id IS NULL));
CREATE INDEX alert_sends_paced_endpoint ON alert_sends (target, endpoint_id, sent_at DESC)
  WHERE sent_at IS NOT NULL AND endpoint_id IS NOT NULL;
