-- Test mode (issue 32; DESIGN decisions "test mode"): one deployment serves two environments,
-- live (the deployment's network, mainnet, `tw_live_` keys) and test (Nile, `tw_test_` keys).
-- An object's environment is its `network` column: watches, events and endpoints have carried
-- one since migrations 002 and 070 (every existing row is `mainnet`, i.e. live). This migration
-- makes the environment a property of notifications and audit entries too, and makes mixing
-- impossible in the schema itself, not only in code:
--
--   a watch's endpoint is of the watch's network        watches (endpoint_id, network) → endpoints
--   an event's watch is of the event's network          events (watch_id, network)     → watches
--   a notification's event is of its network            notifications (event_id, network) → events
--
-- So a test event can never be delivered to a live watch's or live endpoint's URL, nor signed
-- with its secret (the claim reads the secret of the notification's watch or of that watch's
-- endpoint: src/delivery/claim.ts). Each composite key replaces the single-column key it extends,
-- so an insert checks one key, as before.

CREATE UNIQUE INDEX endpoints_id_network ON endpoints (id, network);
CREATE UNIQUE INDEX watches_id_network ON watches (id, network);
CREATE UNIQUE INDEX events_id_network ON events (id, network);

ALTER TABLE watches DROP CONSTRAINT watches_endpoint_id_fkey;
ALTER TABLE watches ADD CONSTRAINT watches_endpoint_network_fkey
  FOREIGN KEY (endpoint_id, network) REFERENCES endpoints (id, network);

ALTER TABLE events DROP CONSTRAINT events_watch_id_fkey;
ALTER TABLE events ADD CONSTRAINT events_watch_network_fkey
  FOREIGN KEY (watch_id, network) REFERENCES watches (id, network);

-- Existing notifications are live (their events are all mainnet); new ones say their event's.
ALTER TABLE notifications ADD COLUMN network text COLLATE "C" NOT NULL DEFAULT 'mainnet';
ALTER TABLE notifications DROP CONSTRAINT notifications_event_id_fkey;
ALTER TABLE notifications ADD CONSTRAINT notifications_event_network_fkey
  FOREIGN KEY (event_id, network) REFERENCES events (id, network);

-- The audit log records the environment of each change (issue 32 item 4): the caller's (the
-- API key's network, the console's environment switch); NULL for changes that belong to no
-- environment (sign-ins, members, passwords, the operator's deployment-wide commands).
-- Existing entries about environment objects were all live.
ALTER TABLE audit_log ADD COLUMN network text COLLATE "C";
UPDATE audit_log SET network = 'mainnet'
 WHERE account_id IS NOT NULL
   AND (action LIKE 'watch.%' OR action LIKE 'watches.%' OR action LIKE 'event.%'
        OR action LIKE 'events.%' OR action LIKE 'api_key.%' OR action LIKE 'endpoint.%');
