/**
 * Retryability of database errors, decided where they are born (habit 5; graphile/worker
 * RETRYABLE_ERROR_CODES): connection failures, serialization failures, deadlocks and server
 * shutdowns are worth retrying; constraint violations and syntax errors are not.
 */
const RETRYABLE_SQLSTATE = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '55P03', // lock_not_available
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
]);
const RETRYABLE_NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** True when retrying the same statement later may succeed. */
export function isRetryableDbError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (RETRYABLE_SQLSTATE.has(code) || code.startsWith('08')) return true; // 08xxx: connection exception
    if (RETRYABLE_NODE_CODES.has(code)) return true;
  }
  const msg = err instanceof Error ? err.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error|timeout exceeded when trying to connect|Query read timeout/i.test(
    msg,
  );
}
