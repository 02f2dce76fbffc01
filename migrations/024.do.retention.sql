-- Bounded growth (issue 17 item 4): the pruning job (src/retention/prune.ts) and what it needs.
--
-- maintenance_leases: one row per periodic job that must run in one process at a time across
-- replicas (the pruning job: name 'prune'). A process runs the job only while it holds the row's
-- lease (holder = its id, expires_at in the future), taken and renewed with one INSERT … ON
-- CONFLICT … WHERE statement; a holder that dies simply lets it expire. A table rather than a
-- session advisory lock: it needs no dedicated connection and works the same on PGlite.
CREATE TABLE maintenance_leases (
  name        text COLLATE "C" PRIMARY KEY,
  holder      text COLLATE "C" NOT NULL,
  expires_at  timestamptz      NOT NULL
);

-- The pruning job finds what has ended through these, oldest first, a batch at a time.
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
CREATE INDEX console_sessions_revoked ON console_sessions (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX console_invites_expires ON console_invites (expires_at);
CREATE INDEX console_invites_used ON console_invites (used_at) WHERE used_at IS NOT NULL;
CREATE INDEX telegram_link_tokens_expires ON telegram_link_tokens (expires_at);
CREATE INDEX telegram_link_tokens_used ON telegram_link_tokens (used_at) WHERE used_at IS NOT NULL;
-- Attempts whose request and response details are still stored (cleared after
-- ATTEMPT_DETAIL_RETENTION_DAYS): a row leaves this index when they are cleared.
CREATE INDEX attempts_details_started ON attempts (started_at)
  WHERE request_headers IS NOT NULL OR response_headers IS NOT NULL OR response_body IS NOT NULL;
