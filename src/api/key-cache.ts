/**
 * Who is calling a `/v1/*` route (AuthContext, src/accounts/callers.ts), and the per-process cache of recently verified
 * API keys (KeyCache). Why the cache can never serve a revoked key: src/api/auth.ts, module doc.
 */
import type { AuthContext } from '../accounts/callers.js';

export type { AuthContext } from '../accounts/callers.js';

/**
 * Callers of keys recently found valid, by key SHA-256: positive entries only (an unknown or
 * revoked key is never cached), each for `ttlMs`, at most `maxEntries` (the oldest goes first).
 * Per process. Read only for routes that re-check the key themselves (module doc).
 */
export class KeyCache {
  private readonly entries = new Map<string, { auth: AuthContext; expiresMs: number }>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;

  /**
   * @param opts.ttlMs how long an entry is used, ms (default 10,000): the longest a change of
   *   plan or limits takes to apply on a route that reads the cache.
   * @param opts.maxEntries entries kept (default 10,000).
   * @param opts.now clock, ms (default Date.now; tests pass their own).
   */
  constructor(opts: { ttlMs?: number; maxEntries?: number; now?: () => number } = {}) {
    this.ttlMs = opts.ttlMs ?? 10_000;
    this.maxEntries = opts.maxEntries ?? 10_000;
    this.now = opts.now ?? Date.now;
  }

  /** The caller of `keyHash`, unverified, if cached and fresh. */
  get(keyHash: string): AuthContext | undefined {
    const e = this.entries.get(keyHash);
    if (!e) return undefined;
    if (e.expiresMs <= this.now()) {
      this.entries.delete(keyHash);
      return undefined;
    }
    return { ...e.auth, verified: false };
  }

  /** Remember a caller just verified in the database. */
  set(keyHash: string, auth: AuthContext): void {
    this.entries.delete(keyHash);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(keyHash, { auth, expiresMs: this.now() + this.ttlMs });
  }

  /** Forget a key (found unknown or revoked). */
  delete(keyHash: string): void {
    this.entries.delete(keyHash);
  }

  /** Entries held (tests). */
  get size(): number {
    return this.entries.size;
  }
}
