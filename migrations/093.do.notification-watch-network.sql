-- Test mode (issue 32), defence in depth: a notification's watch is of the notification's
-- network. The delivery claim signs a notification with the secret of the watch it names,
-- notifications.watch_id (or of that watch's endpoint: src/delivery/claim.ts), not of its
-- event's watch; migration 090 tied a notification to an event of its network and an event to a
-- watch of its network, but notifications.watch_id had no key at all, so a row naming a test
-- event and a LIVE watch was accepted, and would have been signed with the live watch's secret.
-- Now the schema refuses it:
--
--   a notification's watch is of its network    notifications (watch_id, network) → watches
--
-- watches (id, network) is unique since migration 090 (watches_id_network). watch_id is NOT NULL
-- on every notification (webhook and Telegram alike: a chat watch is a watch, migration 002), and
-- watches are never deleted (soft delete), so every existing row has its watch. Validating reads
-- the table once; it fails, and nothing of this migration is kept, if a row already crossed.
ALTER TABLE notifications ADD CONSTRAINT notifications_watch_network_fkey
  FOREIGN KEY (watch_id, network) REFERENCES watches (id, network);
-- No index on the referencing side: it only serves deletes of a watch or changes of its id or
-- network, which never happen (watches are soft-deleted), and notifications is the hottest
-- table for inserts.
