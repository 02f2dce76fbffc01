/**
 * The class of a failed attempt, as the console shows it (issue 12 item 5: "HTTP status or error
 * class (timeout, TLS, refused, blocked by the address policy)"), derived from what an attempt row
 * stores (its HTTP status and its one-line error, written by send.ts describeError / claim.ts), so
 * rows recorded before the class existed get one too.
 *
 *   http     an answer that is not a 2xx (the status says which)
 *   timeout  no complete answer within the deadline
 *   blocked  the address policy refused the URL or the address it resolved to (SSRF guard)
 *   dns      the host name did not resolve
 *   refused  the connection was refused (nothing listening)
 *   tls      the TLS handshake or the certificate failed
 *   lost     the worker died or stalled holding the attempt (its lease ran out)
 *   network  any other transport failure (reset, unreachable, …)
 */
export type ErrorClass =
  | 'http'
  | 'timeout'
  | 'blocked'
  | 'dns'
  | 'refused'
  | 'tls'
  | 'lost'
  | 'network';

/** The class of an attempt's failure; null for a success (2xx, no error). */
export function errorClass(
  httpStatus: number | null | undefined,
  error: string | null | undefined,
): ErrorClass | null {
  if (!error)
    return httpStatus !== null &&
      httpStatus !== undefined &&
      (httpStatus < 200 || httpStatus >= 300)
      ? 'http'
      : null;
  if (httpStatus !== null && httpStatus !== undefined) return 'http';
  if (error.startsWith('timeout')) return 'timeout';
  if (error.startsWith('refused') || /not public|private|reserved|not allowed/i.test(error))
    return 'blocked';
  if (error.startsWith('dns')) return 'dns';
  if (error.startsWith('worker_lost')) return 'lost';
  if (/ECONNREFUSED/.test(error)) return 'refused';
  if (/CERT|TLS|SSL|self[- ]signed|UNABLE_TO_VERIFY|altnames|handshake/i.test(error)) return 'tls';
  return 'network';
}
