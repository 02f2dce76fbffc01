/**
 * One shutdown registry per process (CONVENTIONS habit 10; after Ponder's internal/shutdown.ts):
 * whatever is opened registers how to close it, right after it is opened, and `kill()` closes
 * everything in reverse order of registration, on every path: a SIGTERM, the end of a command, or
 * a start that failed halfway (what was opened before the failure is closed, nothing else).
 *
 * `signal` is aborted first, before any closer runs, so every loop that takes it (the ingester,
 * the delivery worker, a scan) stops taking new work at once while the closers drain what is in
 * flight. Each closer is awaited before the next one starts; one that throws is logged and the
 * rest still run, so a failing Redis close never leaves the database pool open.
 */
import type { Logger } from './logger.js';

/** How to close one thing: may be async; its errors are logged, never thrown by kill(). */
export type Closer = () => unknown;

export class Shutdown {
  private readonly closers: Array<{ name: string; close: Closer }> = [];
  private readonly ac = new AbortController();
  private killing: Promise<void> | undefined;

  /** @param logger where a closer's failure is logged (error, with the closer's name). */
  constructor(private readonly logger?: Logger) {}

  /** Aborted when kill() starts (reason: the reason given to kill). */
  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** True once kill() has been called. */
  get isKilled(): boolean {
    return this.killing !== undefined;
  }

  /**
   * Register `close` under `name` (for the log). Registered after kill() started, it runs at once
   * (the thing was opened while shutting down: a start racing a SIGTERM).
   */
  add(name: string, close: Closer): void {
    if (this.killing) {
      void this.killing.then(() => this.run(name, close));
      return;
    }
    this.closers.push({ name, close });
  }

  /**
   * Abort `signal`, then run the closers, last registered first, each awaited. Idempotent: a
   * second call returns the first call's promise. Never rejects.
   */
  kill(reason: unknown = new Error('shutdown')): Promise<void> {
    this.killing ??= (async () => {
      this.ac.abort(reason);
      for (const { name, close } of this.closers.splice(0).reverse()) await this.run(name, close);
    })();
    return this.killing;
  }

  private async run(name: string, close: Closer): Promise<void> {
    try {
      await close();
    } catch (err) {
      this.logger?.error(
        { closer: name, err: err instanceof Error ? err.message : String(err) },
        'closing failed during shutdown',
      );
    }
  }
}
