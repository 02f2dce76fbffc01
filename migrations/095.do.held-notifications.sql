-- Issue 36 item 5: no credit on one provider's word. A notification of a `provider`-proof event
-- (a USDT Transfer log inside another contract's call, read from ONE provider: no block header
-- commits to receipts) is created HELD: it stays PENDING (the SPEC's three delivery states are
-- unchanged) but no worker may claim it until a second provider confirms the receipt
-- (src/ingest/confirm.ts: the event's proof becomes `quorum` and the notification is released in
-- one transaction), unless the operator opted in with TRON_DELIVER_PROVIDER_PROOF=1.
--
--   held_since          when the hold began; NULL = not held (every row before this migration)
--   held_reason         why: 'awaiting_confirmation' (waiting for a second provider),
--                       'single_provider' (only one provider is configured: nobody can confirm),
--                       'contradicted' (a provider answered a receipt that says otherwise)
--   held_detail         the last check's words (which provider said what), for the console
--   held_checks         confirmation rounds made so far (the backoff's exponent)
--   held_next_check_at  when the confirmer asks the providers again
ALTER TABLE notifications
  ADD COLUMN held_since timestamptz,
  ADD COLUMN held_reason text
    CHECK (held_reason IN ('awaiting_confirmation', 'single_provider', 'contradicted')),
  ADD COLUMN held_detail text,
  ADD COLUMN held_checks integer NOT NULL DEFAULT 0,
  ADD COLUMN held_next_check_at timestamptz;
-- A held row is PENDING and has a reason; a row that is not held has neither.
ALTER TABLE notifications ADD CONSTRAINT notifications_held_shape
  CHECK ((held_since IS NULL) = (held_reason IS NULL)
         AND (held_since IS NULL OR status = 'PENDING'));

-- The claim walks only rows a worker may take: held rows leave the partial index, so a backlog of
-- held notifications is never read by a claim (migration 023's reasoning), and the outbox gauges
-- (src/common/metrics.ts) and `tronwatch doctor`'s overdue count do not see them as due.
CREATE INDEX notifications_due_channel_unheld
  ON notifications (channel, next_attempt_at) WHERE status = 'PENDING' AND held_since IS NULL;
DROP INDEX notifications_due_channel;
ALTER INDEX notifications_due_channel_unheld RENAME TO notifications_due_channel;

-- The confirmer's queue: held rows by their next check (few: only provider-proof deposits).
CREATE INDEX notifications_held_check
  ON notifications (held_next_check_at) WHERE held_since IS NOT NULL;
