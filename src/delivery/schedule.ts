/**
 * The webhook retry schedule (SPEC §Events "Delivery to a webhook_url"; DESIGN invariant 4), as
 * data (habit 9). An attempt is made at once, then one retry after each failure, delayed by the
 * entry for the number of attempts made so far:
 *
 * ```
 * attempt   1      2       3       4        5       6
 *           │ fail │ fail  │ fail  │ fail   │ fail  │ fail → DEAD
 *           0 ─1m─►+1m ─5m─►+6m ─30m─►+36m ─2h─►+2h36m ─6h─►+8h36m
 * ```
 *
 * Six attempts in total, spread over 8 h 36 min; the sixth failure dead-letters the
 * notification. `scale` (config.delivery.scheduleScale, default 1 = SPEC) multiplies every delay,
 * so tests can run the whole curve in milliseconds without changing its shape.
 */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/**
 * Delay before the next attempt, ms, indexed by attempts already made (1-based: entry 0 follows
 * the first failure). Its length is the number of retries; SPEC: 1m, 5m, 30m, 2h, 6h.
 */
export const RETRY_DELAYS_MS: readonly number[] = [
  1 * MINUTE, //  after attempt 1 fails → attempt 2 at +1 m
  5 * MINUTE, //  after attempt 2 fails → attempt 3 at +6 m
  30 * MINUTE, // after attempt 3 fails → attempt 4 at +36 m
  2 * HOUR, //    after attempt 4 fails → attempt 5 at +2 h 36 m
  6 * HOUR, //    after attempt 5 fails → attempt 6 at +8 h 36 m; its failure → DEAD
];

/** Attempts in total: the immediate one plus one per retry delay (SPEC: 6). */
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/**
 * Delay before the next attempt after a failed one.
 * @param attemptsMade attempts made so far, the failed one included (1..MAX_ATTEMPTS).
 * @param scale multiplier of every delay, > 0 (1 = SPEC; tests use e.g. 0.0002 → 12 ms for 1 m).
 * @returns the delay in whole ms (≥ 0), or null when no attempt is left: the notification is DEAD.
 * @throws RangeError when attemptsMade < 1 or scale is not a positive finite number.
 */
export function nextDelayMs(attemptsMade: number, scale = 1): number | null {
  if (!Number.isInteger(attemptsMade) || attemptsMade < 1) {
    throw new RangeError(`attemptsMade must be an integer ≥ 1 (got ${attemptsMade})`);
  }
  if (!(scale > 0) || !Number.isFinite(scale)) {
    throw new RangeError(`scale must be a positive finite number (got ${scale})`);
  }
  const delay = RETRY_DELAYS_MS[attemptsMade - 1];
  return delay === undefined ? null : Math.ceil(delay * scale);
}
