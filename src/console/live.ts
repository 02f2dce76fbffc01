/**
 * Live pages (issue 19 item 6): which of an account's events changed, for the console's
 * server-sent events stream (routes/live.ts). One feed per process, polling the database while
 * at least one stream is open, the same way on PostgreSQL and PGlite (and across processes: the
 * ingester and the delivery workers may run elsewhere; they only write rows).
 *
 * Every change a page shows leaves a trace that grows monotonically:
 * - a delivery attempt landing (delivered, failed, DEAD, throttled, lost) inserts an `attempts`
 *   row, whose identity `id` only grows: `max(attempts.id)` (the primary key's last entry);
 * - a new event (the ingester) moves `chain_cursor.last_event_at` (src/ingest/commit.ts), and the
 *   account's new events are then the ones above it in `events_account_created`;
 * - a redelivery creates a notification whose first attempt follows within the worker's poll.
 * Each tick reads the two watermarks (one tiny statement); only when one moved does it read which
 * events of the subscribed accounts the new rows belong to (index range scans bounded by the old
 * and new watermark). A late outcome filling in a lost attempt's row (rare: complete.ts) is
 * not seen until the next attempt of the account.
 * A feed is of one environment (issue 32: routes/live.ts keeps one for live, one for test): it
 * tells of the events and attempts of its network only, so a live page never hears of a test
 * event, nor a test page of a live one.
 */
import type { Logger } from '../common/logger.js';
import type { Queryable } from '../db/pool.js';

/** What one stream is told: the account's events that changed (new, or a delivery moved). */
export interface LiveChange {
  /** Events whose delivery moved (an attempt landed), at most 200 per message. */
  event_ids: string[];
  /** True when new events were matched (the first page of a list changed). */
  new_events: boolean;
}

type Listener = (c: LiveChange) => void;

/** Poll interval, ms: what a page waits at most, beyond the delivery itself. */
export const LIVE_POLL_MS = 1000;

interface Marks {
  attempt: number;
  /** last_event_at as PostgreSQL's text of the UTC instant (microseconds kept), or ''. */
  event: string;
}

/**
 * The process's feed. `subscribe` starts the polling with the first stream, and the last
 * `unsubscribe` stops it. Database errors are logged and the tick is retried at the next one.
 */
export class LiveFeed {
  private readonly listeners = new Map<string, Set<Listener>>();
  private timer: NodeJS.Timeout | undefined;
  private marks: Marks | undefined;
  private running = false;

  constructor(
    private readonly db: Queryable,
    private readonly network: string,
    private readonly logger: Logger,
    private readonly intervalMs = LIVE_POLL_MS,
  ) {}

  /** Call `fn` with each change of `accountId`'s events. Returns the unsubscribe function. */
  subscribe(accountId: string, fn: Listener): () => void {
    let set = this.listeners.get(accountId);
    if (!set) {
      set = new Set();
      this.listeners.set(accountId, set);
    }
    set.add(fn);
    if (!this.timer) {
      this.timer = setInterval(() => void this.tick(), this.intervalMs);
      // Read the watermarks now: what lands from here on is told, not only from the next tick.
      void this.tick();
    }
    return () => {
      const s = this.listeners.get(accountId);
      s?.delete(fn);
      if (s && s.size === 0) this.listeners.delete(accountId);
      if (this.listeners.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
        this.marks = undefined;
      }
    };
  }

  /** Open streams (for tests and the shutdown). */
  get size(): number {
    let n = 0;
    for (const s of this.listeners.values()) n += s.size;
    return n;
  }

  private async readMarks(): Promise<Marks> {
    const { rows } = await this.db.query<{ a: number | null; e: string | null }>(
      `SELECT (SELECT max(id) FROM attempts) AS a,
              (SELECT (last_event_at AT TIME ZONE 'UTC')::text FROM chain_cursor WHERE network = $1) AS e`,
      [this.network],
      { name: 'console_live_marks' },
    );
    return { attempt: Number(rows[0]?.a ?? 0), event: rows[0]?.e ?? '' };
  }

  /** One poll: read the marks, and tell each account what moved since the previous ones. */
  async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const now = await this.readMarks();
      const was = this.marks;
      this.marks = now;
      if (!was) return;
      const accounts = [...this.listeners.keys()];
      if (accounts.length === 0) return;
      const changes = new Map<string, LiveChange>();
      const of = (a: string) => {
        let c = changes.get(a);
        if (!c) {
          c = { event_ids: [], new_events: false };
          changes.set(a, c);
        }
        return c;
      };
      if (now.attempt > was.attempt) {
        const { rows } = await this.db.query<{ account_id: string; event_id: string }>(
          `SELECT DISTINCT n.account_id, n.event_id
             FROM attempts a JOIN notifications n ON n.id = a.notification_id
            WHERE a.id > $1 AND a.id <= $2 AND n.account_id = ANY($3::text[])
              AND n.network = $4`,
          // This feed's environment only (issue 32): a live page never hears of a test event.
          [was.attempt, now.attempt, accounts, this.network],
        );
        for (const r of rows) {
          const c = of(r.account_id);
          if (c.event_ids.length < 200) c.event_ids.push(r.event_id);
        }
      }
      if (now.event !== '' && now.event !== was.event) {
        const { rows } = await this.db.query<{ account_id: string }>(
          `SELECT DISTINCT e.account_id FROM events e
            WHERE e.account_id = ANY($1::text[]) AND e.network = $2
              AND e.created_at > ($3::text)::timestamp AT TIME ZONE 'UTC'
              AND e.created_at <= ($4::text)::timestamp AT TIME ZONE 'UTC'`,
          [accounts, this.network, was.event === '' ? '-infinity' : was.event, now.event],
        );
        for (const r of rows) of(r.account_id).new_events = true;
      }
      for (const [account, change] of changes) {
        for (const fn of this.listeners.get(account) ?? []) fn(change);
      }
    } catch (err) {
      this.logger.warn({ err }, 'console live feed: poll failed; retried at the next tick');
    } finally {
      this.running = false;
    }
  }

  /** Stop polling (the process is closing); the streams are ended by their route. */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.listeners.clear();
  }
}
