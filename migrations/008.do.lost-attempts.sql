-- A claim whose lease runs out before its attempt is recorded counts as an attempt (DESIGN
-- invariants 3 and 4): a notification whose attempt kills the worker every time (a crash, an OOM
-- kill, a SIGKILL mid-request) goes DEAD after the contract's six attempts instead of being sent
-- again without limit. src/delivery/claim.ts records such a lost attempt when it next finds the
-- notification due with its lease token still set.

-- When the notification's current (or last) claim was made: the lost attempt's started_at.
-- NULL for claims made before this migration (their lost attempt starts at the lease's expiry).
ALTER TABLE notifications ADD COLUMN claimed_at timestamptz;

-- Set on an attempt whose lease ran out before its outcome was recorded: the lease's expiry. The
-- row then reads error = 'worker_lost: …' (no outcome known) until the worker that made the
-- attempt, if it is still alive, records the outcome late (complete.ts fills the row in, keeping
-- this column as the trace of the lost lease).
ALTER TABLE attempts ADD COLUMN lease_expired_at timestamptz;
