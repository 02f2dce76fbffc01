/**
 * The automatic pause of a failing receiver, one rule for a watch with its own URL and for an
 * endpoint (issue 19 item 2, issue 30 item 1; one helper since issue 40 item 12).
 *
 * A target whose delivery attempts have ALL failed for `policy.autoPauseDays` days is taken out of
 * delivery: a watch is PAUSED (status), an endpoint is switched off (enabled = false). The days
 * are counted from the later of the first failure after the last success and the moment the
 * target was last resumed or enabled (`failures_counted_from`), so a target resumed by its owner
 * gets its full grace again. 0 days: never.
 *
 * The pause is one unit in the caller's transaction (the caller holds the target's row lock and
 * has just recomputed its streak from the attempts, src/watches/health.ts and
 * src/endpoints/health.ts): the row's `paused_reason` and `auto_paused_at`, an audit entry by the
 * system (`watch.paused` / `endpoint.paused`, detail `{automatic: true, failures, days}`, in the
 * target's own environment), and ONE alert queued to the account's targets (queueAlert,
 * src/watches/alert-outbox.ts).
 */
import { recordAudit, SYSTEM_ACTORS } from '../audit/audit.js';
import type { Queryable } from '../db/pool.js';
import { queueAlert } from './alert-outbox.js';

/** What may be paused automatically, and the words and statements of each kind. */
const KINDS = {
  watch: {
    action: 'watch.paused',
    done: 'paused automatically',
    pause: `UPDATE watches SET status = 'PAUSED', paused_reason = $2, auto_paused_at = $3
             WHERE id = $1`,
    message: (reason: string) =>
      `The watch was paused: ${reason}. Fix the endpoint, then resume the watch.`,
  },
  endpoint: {
    action: 'endpoint.paused',
    done: 'switched off automatically',
    pause: `UPDATE endpoints SET enabled = false, paused_reason = $2, auto_paused_at = $3
             WHERE id = $1`,
    message: (reason: string) =>
      `The endpoint was switched off: ${reason}. Fix the receiver, then enable the endpoint: its deliveries wait until then.`,
  },
} as const;

/** A target that may be paused: a watch (`wh_…`) or an endpoint (`ep_…`), as locked by the caller. */
export interface PauseTarget {
  kind: keyof typeof KINDS;
  id: string;
  account_id: string;
  /** The target's environment (issue 32): `mainnet` live, `nile` test. */
  network: string;
  /** When it was last resumed or enabled (its failures count from then); null: never. */
  failures_counted_from: Date | null;
}

/** The failure streak the caller just recomputed from the attempts. */
export interface FailureStreak {
  /** Failed attempts since the last success. */
  failures: number;
  /** Start of the first of them; null: none. */
  firstFailure: Date | null;
  /** The database's now() of the caller's transaction. */
  now: Date;
}

/**
 * Pause `target` when its failures have lasted `policy.autoPauseDays` days (see the file's
 * comment); the caller checks that it is still delivering (an ACTIVE watch, an enabled endpoint)
 * and holds its row lock.
 * @returns true when it was paused now.
 * @throws the database error (the caller's transaction rolls back; its next batch recomputes).
 */
export async function autoPauseIfDue(
  tx: Queryable,
  target: PauseTarget,
  streak: FailureStreak,
  policy: { autoPauseDays: number },
): Promise<boolean> {
  const days = policy.autoPauseDays;
  if (days <= 0 || streak.failures === 0 || !streak.firstFailure) return false;
  const from = Math.max(
    new Date(streak.firstFailure).getTime(),
    target.failures_counted_from ? new Date(target.failures_counted_from).getTime() : 0,
  );
  if (streak.now.getTime() - from < days * 86_400_000) return false;
  const kind = KINDS[target.kind];
  const failures = streak.failures;
  const reason = `every delivery attempt since ${new Date(from).toISOString()} failed (${failures} attempts over ${days} days or more): ${kind.done}`;
  await tx.query(kind.pause, [target.id, reason, streak.now]);
  // In the audit log as the system's act (issue 29 item 2), in the target's own environment
  // (issue 32): a test watch's or endpoint's pause is a test entry.
  await recordAudit(
    tx,
    {
      accountId: target.account_id,
      actor: SYSTEM_ACTORS.watchHealth,
      clientIp: null,
      network: target.network,
    },
    { action: kind.action, targetId: target.id, detail: { automatic: true, failures, days } },
  );
  await queueAlert(tx, target, 'auto_paused', kind.message(reason));
  return true;
}
