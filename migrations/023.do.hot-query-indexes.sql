-- Indexes for the hot queries at scale (issue 17 item 5).
--
-- The claim (src/delivery/claim.ts) takes the oldest due PENDING notifications of ONE channel:
-- the webhook worker 'webhook', the chat worker 'telegram'. notifications_due (migration 002) was
-- ordered by next_attempt_at alone, so a backlog of due chat notifications (paced at one message
-- per second per chat, or waiting forever on workers without a bot token) sat in front of every
-- webhook claim, which read and discarded all of it (262 ms per 64-row claim with 300,000 due chat
-- rows on PostgreSQL 15). Keyed by channel first, each worker walks its own channel's due rows
-- only. It replaces notifications_due: the outbox gauges (src/common/metrics.ts) read PENDING
-- rows through it just as well.
CREATE INDEX notifications_due_channel
  ON notifications (channel, next_attempt_at) WHERE status = 'PENDING';
DROP INDEX notifications_due;

-- The dead letters (the console's events page filtered on DEAD, and bulk redelivery,
-- src/events/list.ts and src/events/redeliver.ts) are the events whose newest notification is
-- DEAD. They were found by walking every event of the account and asking each for its newest
-- notification; they now start from the account's DEAD notifications, which this index lists
-- (DEAD rows only: small, and written only when a notification dies).
CREATE INDEX notifications_dead_account
  ON notifications (account_id, event_id) WHERE status = 'DEAD';
