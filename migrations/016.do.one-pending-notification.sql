-- At most one PENDING notification per event (issue "No false deposits" item 5): a redelivery
-- starts a new chain only once the previous one ended (DELIVERED or DEAD), and two redeliveries
-- at the same instant (console and API, single and bulk) make one chain, not two. Enforced here,
-- not only in code: src/events/redeliver.ts inserts with ON CONFLICT DO NOTHING against this
-- index and answers 409 when it inserted nothing.
--
-- Before the index, duplicates that the race could have left are resolved: of several PENDING
-- notifications of one event, the younger ones that were never attempted (no attempt row, no
-- start mark) are removed (nothing was sent for them, nothing is lost). Any other duplicate
-- makes this migration fail loudly rather than guess.
DELETE FROM notifications n
 WHERE n.status = 'PENDING' AND n.attempts = 0 AND n.attempt_started_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.notification_id = n.id)
   AND EXISTS (SELECT 1 FROM notifications o
                WHERE o.event_id = n.event_id AND o.status = 'PENDING' AND o.id <> n.id
                  AND (o.created_at, o.id) < (n.created_at, n.id));

CREATE UNIQUE INDEX notifications_one_pending_per_event
  ON notifications (event_id) WHERE status = 'PENDING';
