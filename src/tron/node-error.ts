/**
 * A failed node request (HTTP or gRPC), with whether retrying the same request can help. Decided
 * where the failure is understood (CONVENTIONS habit 5): network, timeout, 429/403, 5xx and empty
 * answers are retryable; a 4xx, java-tron's `{"Error"}`, a malformed answer are not.
 */
export type NodeErrorKind =
  | 'network'
  | 'timeout'
  | 'http'
  | 'rate_limited'
  | 'node_error'
  | 'empty'
  | 'inconsistent'
  | 'malformed'
  | 'beyond_solidified'
  /** Fewer providers than the quorum could answer (tron/node-group.ts). */
  | 'quorum';

export class NodeError extends Error {
  constructor(
    readonly kind: NodeErrorKind,
    message: string,
    readonly retryable: boolean,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'NodeError';
  }
}
