/**
 * Retry with exponential backoff and full jitter, for errors that say they are retryable.
 * Retryability is decided where an error is born (habit 5): loops only read `retryable`.
 */

/** An error that carries whether retrying the same operation may succeed. */
export interface RetryableFlag {
  retryable: boolean;
}

export function isRetryable(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    'retryable' in err &&
    (err as RetryableFlag).retryable === true
  );
}

export interface BackoffOptions {
  /** First delay before jitter, ms. Default 250. */
  baseMs?: number;
  /** Upper bound of one delay, ms. Default 10_000. */
  capMs?: number;
}

/**
 * Delay before retry number `attempt` (1-based): uniform in [0, min(cap, base·2^(attempt-1))]
 * ("full jitter"), so many clients retrying at once spread out instead of stampeding.
 */
export function backoffDelay(attempt: number, opts: BackoffOptions = {}): number {
  const base = opts.baseMs ?? 250;
  const cap = opts.capMs ?? 10_000;
  const ceiling = Math.min(cap, base * 2 ** Math.max(0, attempt - 1));
  return Math.floor(Math.random() * ceiling);
}

/** Sleep `ms`, resolving early (without throwing) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Run `fn`, retrying up to `retries` times while the error is retryable.
 * @throws the last error, or the first non-retryable one, or `signal.reason` when aborted.
 */
export async function withRetry<T>(
  fn: (attempt: number) => Promise<T>,
  opts: BackoffOptions & {
    retries: number;
    signal?: AbortSignal;
    onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
  },
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (!isRetryable(err) || attempt > opts.retries || opts.signal?.aborted) throw err;
      const delay = backoffDelay(attempt, opts);
      opts.onRetry?.(err, attempt, delay);
      await sleep(delay, opts.signal);
      if (opts.signal?.aborted) throw err;
    }
  }
}
