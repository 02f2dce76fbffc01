-- Only a started attempt counts when its lease runs out (issue 14 item 4, found by the chaos
-- soak). Migration 008 counted every claim whose lease ran out as a lost attempt, but a worker
-- claims ahead of its free HTTP slots (a queue of up to twice its concurrency), so a worker that
-- was killed took its queued, never-sent claims with it and each counted as a failed attempt: an
-- innocent notification could reach DEAD through other notifications' crashes.
--
-- Set by the worker (src/delivery/claim.ts startClaims) just before the request is sent, under the
-- claim's lease_token; cleared by every claim. A due notification whose lease_token is set is a
-- lost attempt only if this is set too; otherwise its claim was lost before the attempt began, and
-- the next claim simply takes it again (no attempt row, attempts unchanged).
ALTER TABLE notifications ADD COLUMN attempt_started_at timestamptz;

-- Claims held when this migration runs were made by workers that did not set it: count them as
-- before (a lost attempt started when its claim was made).
UPDATE notifications
   SET attempt_started_at = COALESCE(claimed_at, next_attempt_at)
 WHERE lease_token IS NOT NULL AND status = 'PENDING';
