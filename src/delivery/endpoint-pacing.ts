/**
 * The receiver's pace (issue 30 item 3): an endpoint's `rate_limit_per_second` and
 * `max_concurrency` hold across every worker replica, and a slow or limited endpoint never delays
 * deliveries to others.
 *
 * Windows. Each paced endpoint has up to two pacing windows (src/telegram/pacing.ts semantics,
 * shared in Redis by src/redis/pacing.ts when REDIS_URL is set, else in process):
 *
 *   rate         `{ep_…}:rate`  limit = rate_limit_per_second, window 1000 ms
 *   concurrency  `{ep_…}:conc`  limit = max_concurrency,       window 1 ms
 *
 * A slot is taken in both at once (atomically) before the request is sent and released when its
 * answer has been received (or with a linger when none came). A window counts a slot from its
 * grant until its release + the window's length, so:
 * - concurrency: at most max_concurrency requests are between their grant and their answer, so
 *   the receiver never serves more at once (it answered before we released);
 * - rate: the (i + limit)-th delivery is granted at least 1 s after the i-th was answered, so no
 *   1-second span ever sees more than `limit` requests ARRIVE at the receiver, whatever the
 *   network's jitter (the cost: each slot's span, grant to answer, is taken from the limit).
 * The names carry the endpoint id in braces: a Redis Cluster keeps an endpoint's windows on one
 * slot.
 *
 * Waiting. A claimed notification of a paced endpoint waits in that endpoint's lane, in claim
 * order, outside the worker's queue and slots: a lane that cannot get a slot holds nothing that
 * another endpoint's deliveries need. A lane holds at most what its endpoint can start within
 * {@link LANE_SECONDS} (rate × 5 s, or 4 × the concurrency cap); a claim beyond that, or one that
 * waited longer than the worker's queue bound, goes back to the outbox unattempted
 * (throttle.ts deferClaims), due when its turn should come (spaced at the endpoint's rate), so a
 * burst of 10,000 for one endpoint sits in PostgreSQL, not in memory. Waiting for a slot is never
 * an attempt: nothing is marked started before the slot is granted.
 */
import type { Logger } from '../common/logger.js';
import type { Pacer, PacingSlot, PacingWindow } from '../telegram/pacing.js';
import type { ClaimedEndpoint } from './claim.js';

/** Seconds of deliveries a lane holds in memory at its endpoint's pace (the rest waits in the outbox). */
export const LANE_SECONDS = 5;
/** Shortest wait before asking again after a refusal, ms (a concurrency window answers 1 ms). */
export const MIN_RETRY_MS = 10;
/**
 * How long after a send that got no answer its slot still counts, ms: the request may still be
 * arriving or being served.
 */
export const NO_ANSWER_LINGER_MS = 1_000;
/** Assumed span of one delivery when only a concurrency cap paces an endpoint, ms (deferral spacing). */
const ASSUMED_ATTEMPT_MS = 250;

/** The pacing windows of an endpoint; [] when it sets no limit (not paced). */
export function endpointWindows(ep: ClaimedEndpoint): PacingWindow[] {
  const windows: PacingWindow[] = [];
  if (ep.ratePerSecond !== null) {
    windows.push({ id: `{${ep.id}}:rate`, limit: ep.ratePerSecond, windowMs: 1_000 });
  }
  if (ep.maxConcurrency !== null) {
    windows.push({ id: `{${ep.id}}:conc`, limit: ep.maxConcurrency, windowMs: 1 });
  }
  return windows;
}

/** A slot granted to one delivery: release it when its send is over. */
export interface GrantedSlot {
  windows: PacingWindow[];
  token: string;
}

interface Waiting<T> {
  item: T;
  /** performance.now() at the claim. */
  claimedAt: number;
}

interface Lane<T> {
  id: string;
  windows: PacingWindow[];
  /** Most items held in memory. */
  capacity: number;
  /** Spacing of deferred items, ms (1 / rate, or an estimate with a concurrency cap only). */
  spacingMs: number;
  queue: Array<Waiting<T>>;
  /** When the last deferred item of this lane is due, performance.now() ms. */
  deferredUntil: number;
  running: boolean;
  /** Wakes the lane's loop before its retry timer (a local release, room in the worker). */
  wake: (() => void) | null;
}

/** What the lanes need from the worker. */
export interface EndpointPacingOptions<T> {
  pacer: Pacer;
  /** When a granted send will have ended at the latest, ms after the grant (timeout + slack). */
  flightMs: number;
  /** Longest an item may wait after its claim before it must be given back, ms. */
  maxWaitMs: number;
  logger: Logger;
  /** True while the worker has a free slot for one more attempt. */
  canStart: () => boolean;
  /** A slot was granted: start the item now, and release `slot` when its send is over. */
  onGranted: (item: T, slot: GrantedSlot) => void;
  /** Give items back to the outbox unattempted, each due after its delay, ms. */
  onDefer: (items: Array<{ item: T; delayMs: number }>) => void;
}

/** Per-endpoint lanes in front of the worker's slots (see the file's comment). */
export class EndpointPacing<T> {
  private readonly lanes = new Map<string, Lane<T>>();
  private stopped = false;
  /** Items given back for want of room in their lane or of a slot in time. */
  deferred = 0;
  /** Slots granted. */
  granted = 0;

  constructor(private readonly opts: EndpointPacingOptions<T>) {}

  /** Items waiting in every lane. */
  get waiting(): number {
    let n = 0;
    for (const l of this.lanes.values()) n += l.queue.length;
    return n;
  }

  /**
   * Queue `item` for a slot of `endpoint`'s windows (non-empty: see {@link endpointWindows}); it is
   * handed to onGranted when granted, or to onDefer.
   */
  offer(item: T, endpoint: ClaimedEndpoint, windows: PacingWindow[], claimedAt: number): void {
    const lane = this.lane(endpoint, windows);
    if (lane.queue.length >= lane.capacity) {
      this.defer(lane, [item]);
      return;
    }
    lane.queue.push({ item, claimedAt });
    if (!lane.running) void this.run(lane);
  }

  /** The worker has room again: lanes waiting for it try now. */
  poke(): void {
    for (const l of this.lanes.values()) l.wake?.();
  }

  /**
   * The send of a granted slot is over.
   * @param answered an HTTP answer was received (no linger); false: none came (network error,
   *   timeout) or it was never sent, see {@link NO_ANSWER_LINGER_MS}.
   */
  release(slot: GrantedSlot, answered: boolean): void {
    const linger = answered ? 0 : NO_ANSWER_LINGER_MS;
    this.opts.pacer
      .release(slot.windows, slot.token, linger)
      .catch((err: unknown) => {
        // Only stricter: the slot counts until its provisional end.
        this.opts.logger.warn({ err: errorText(err) }, 'endpoint pacing slot not released');
      })
      .finally(() => {
        const id = /^\{([^}]+)\}/.exec(slot.windows[0]?.id ?? '')?.[1];
        if (id !== undefined) this.lanes.get(id)?.wake?.();
      });
  }

  /** Stop: every waiting item is returned (for the worker to give back), lanes end. */
  stop(): T[] {
    this.stopped = true;
    const items: T[] = [];
    for (const l of this.lanes.values()) {
      for (const w of l.queue) items.push(w.item);
      l.queue = [];
      l.wake?.();
    }
    return items;
  }

  private lane(endpoint: ClaimedEndpoint, windows: PacingWindow[]): Lane<T> {
    const spacingMs =
      endpoint.ratePerSecond !== null
        ? 1_000 / endpoint.ratePerSecond
        : ASSUMED_ATTEMPT_MS / (endpoint.maxConcurrency ?? 1);
    const capacity = Math.max(
      1,
      endpoint.ratePerSecond !== null
        ? Math.floor(endpoint.ratePerSecond * LANE_SECONDS)
        : 4 * (endpoint.maxConcurrency ?? 1),
    );
    let lane = this.lanes.get(endpoint.id);
    if (!lane) {
      lane = {
        id: endpoint.id,
        windows,
        capacity,
        spacingMs,
        queue: [],
        deferredUntil: 0,
        running: false,
        wake: null,
      };
      this.lanes.set(endpoint.id, lane);
    } else {
      // The endpoint's limits as the newest claim read them (a PATCH takes effect here).
      lane.windows = windows;
      lane.capacity = capacity;
      lane.spacingMs = spacingMs;
    }
    return lane;
  }

  /** Give items back, each due at the lane's pace after those given back before. */
  private defer(lane: Lane<T>, items: T[]): void {
    if (items.length === 0) return;
    const now = performance.now();
    // Behind the items still in memory, then behind those already deferred.
    let at = Math.max(lane.deferredUntil, now + lane.queue.length * lane.spacingMs);
    const out: Array<{ item: T; delayMs: number }> = [];
    for (const item of items) {
      at += lane.spacingMs;
      out.push({ item, delayMs: Math.max(0, Math.round(at - now)) });
    }
    lane.deferredUntil = at;
    this.deferred += items.length;
    this.opts.onDefer(out);
  }

  /** Wait up to `ms`, or until the lane is woken. */
  private pause(lane: Lane<T>, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      t.unref();
      function done() {
        clearTimeout(t);
        lane.wake = null;
        resolve();
      }
      lane.wake = done;
    });
  }

  /** The lane's loop: one slot at a time, in claim order, while items wait. */
  private async run(lane: Lane<T>): Promise<void> {
    lane.running = true;
    try {
      while (!this.stopped && lane.queue.length > 0) {
        // Items that waited too long to finish within their lease go back to the outbox.
        const now = performance.now();
        const stale = lane.queue.filter((w) => now - w.claimedAt > this.opts.maxWaitMs);
        if (stale.length > 0) {
          lane.queue = lane.queue.filter((w) => now - w.claimedAt <= this.opts.maxWaitMs);
          this.defer(
            lane,
            stale.map((w) => w.item),
          );
          continue;
        }
        if (!this.opts.canStart()) {
          await this.pause(lane, 50);
          continue;
        }
        let slot: PacingSlot;
        try {
          slot = await this.opts.pacer.take(lane.windows, this.opts.flightMs);
        } catch (err) {
          // Only a pacer without fallback throws: nothing was sent; back to the outbox.
          this.opts.logger.warn(
            { err: errorText(err), endpoint_id: lane.id },
            'endpoint pacing unavailable; deliveries deferred',
          );
          const items = lane.queue.map((w) => w.item);
          lane.queue = [];
          this.defer(lane, items);
          break;
        }
        if (this.stopped) {
          if (slot.granted) {
            this.release({ windows: lane.windows, token: slot.token }, true);
          }
          break;
        }
        if (!slot.granted) {
          await this.pause(lane, Math.max(MIN_RETRY_MS, slot.waitMs));
          continue;
        }
        const head = lane.queue.shift();
        if (!head) {
          this.release({ windows: lane.windows, token: slot.token }, true);
          break;
        }
        this.granted++;
        this.opts.onGranted(head.item, { windows: lane.windows, token: slot.token });
      }
    } finally {
      lane.running = false;
      if (lane.queue.length === 0) this.lanes.delete(lane.id);
      else if (!this.stopped) void this.run(lane);
    }
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
