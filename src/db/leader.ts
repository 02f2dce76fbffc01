/**
 * Leadership of a single-process duty (DESIGN §Processes and scale-out): one active ingester per
 * network, standbys take over when it dies; the Telegram bot's update polling holds its own lock
 * the same way (src/telegram/updates.ts). Plumbing of the database, not of either role, so both
 * find it here (issue 40 item 12).
 *
 * PostgreSQL: the leader holds a session-level `pg_try_advisory_lock(key)` (key: the first 8 bytes
 * of sha256("tronwatch:ingest-leader:<network>") as int8) on ONE dedicated connection (a pg.Client,
 * not the pool) for as long as it leads. The lock lives exactly as long as that session:
 * - process killed (kill -9, crash, machine gone): the server ends the session and drops the lock;
 *   a standby, trying every `retryMs` (default 1 s), takes over within about a second.
 * - the lock connection breaks (socket closed or reset): pg.Client reports it at once and the
 *   leader aborts its term (the Ingester's signal): the block in progress commits or rolls back on
 *   the pool, and no new block starts. The server drops the lock when it sees the session end.
 * - the lock connection goes silent (a partition, no RST): a heartbeat (`SELECT 1` every
 *   `retryMs`, deadline `queryTimeoutMs`, default 5 s) ends the term within ~6 s, while the server
 *   needs ~19 s to notice a dead peer (session keepalives set below: idle 10 s, then 3 probes 3 s
 *   apart), so the old leader stops before the lock can pass to a standby.
 * Even if two ingesters ever overlap, the cursor guard in commit.ts (CursorMovedError) makes the
 * second one's commits fail harmlessly: the lock saves wasted work, it is not what keeps events
 * exactly-once.
 *
 * PGlite: one process owns the data folder, so this process is trivially the leader.
 *
 * Logs: 'ingest leader acquired' when a term starts, 'standby' once per stretch of waiting,
 * 'ingest leadership lost' when the lock connection breaks under a running term.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../common/logger.js';
import { sleep } from '../common/retry.js';

export interface LeaderOptions {
  /** PostgreSQL URL; undefined = embedded PGlite (always the leader). */
  url: string | undefined;
  /** The network led (one lock per network), e.g. 'mainnet'. */
  network: string;
  logger: Logger;
  /** Standby retry period and heartbeat period of the lock connection, ms. Default 1_000. */
  retryMs?: number;
  /** Deadline of connecting and of each query on the lock connection, ms. Default 5_000. */
  queryTimeoutMs?: number;
  /**
   * What is led, for another single-process duty on the same pattern (the Telegram bot's update
   * polling, src/telegram/updates.ts): the lock is sha256("tronwatch:<role>:<network>") and the
   * logs say '<role> leader acquired' etc. Default 'ingest-leader' / 'ingest' (the ingester).
   */
  role?: { lock: string; label: string };
}

/** The advisory-lock key of a network's ingest leadership: a decimal int8. */
export function leaderLockKey(network: string, lock = 'ingest-leader'): string {
  return createHash('sha256')
    .update(`tronwatch:${lock}:${network}`)
    .digest()
    .readBigInt64BE(0)
    .toString();
}

/** How long ending a lock connection may take before its socket is destroyed, ms. */
const END_TIMEOUT_MS = 2_000;

/** End a client; if the server does not answer (partition), destroy the socket. Never rejects. */
async function endClient(client: pg.Client): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([
    client.end().then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), END_TIMEOUT_MS);
    }),
  ]);
  clearTimeout(timer);
  if (!ended) {
    // pg.Client exposes no public way to drop a connection that does not answer Terminate.
    const stream = (client as unknown as { connection?: { stream?: { destroy(): void } } })
      .connection?.stream;
    stream?.destroy();
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Run `lead(termSignal)` whenever this process holds the network's ingest leadership, until
 * `signal` aborts. `lead` must resolve soon after `termSignal` aborts (the Ingester does: after the
 * block in progress commits or rolls back). Resolves once `signal` aborted, the term in progress
 * ended and the lock connection closed. Never rejects: database errors are logged and retried.
 */
export async function runWhileLeader(
  opts: LeaderOptions,
  signal: AbortSignal,
  lead: (termSignal: AbortSignal) => Promise<void>,
): Promise<void> {
  const { logger, network } = opts;
  const url = opts.url;
  const label = opts.role?.label ?? 'ingest';
  if (url === undefined) {
    logger.info({ network, database: 'pglite' }, `${label} leader acquired`);
    await lead(signal);
    return;
  }
  const retryMs = opts.retryMs ?? 1_000;
  const timeoutMs = opts.queryTimeoutMs ?? 5_000;
  const key = leaderLockKey(network, opts.role?.lock);
  let standby = false;
  let failures = 0;
  while (!signal.aborted) {
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: 5_000,
      application_name: `tronwatch-${opts.role?.lock ?? 'ingest-leader'}`,
      // Server side: notice a silent peer in ~19 s and drop the lock (see module doc).
      options: '-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=3 -c tcp_keepalives_count=3',
    });
    let broken: Error | undefined;
    let onBroken: ((err: Error) => void) | undefined;
    const breakWith = (err: Error) => {
      broken ??= err;
      onBroken?.(err);
    };
    client.on('error', (err) => breakWith(err));
    client.on('end', () => breakWith(new Error('lock connection ended')));
    try {
      await client.connect();
      let locked = false;
      while (!signal.aborted && !locked) {
        if (broken) throw broken;
        const r = await client.query<{ locked: boolean }>(
          'SELECT pg_try_advisory_lock($1::int8) AS locked',
          [key],
        );
        failures = 0;
        locked = r.rows[0]?.locked === true;
        if (!locked) {
          if (!standby) logger.info({ network }, 'standby');
          standby = true;
          await sleep(retryMs, signal);
        }
      }
      if (locked && !signal.aborted) {
        standby = false;
        logger.info({ network }, `${label} leader acquired`);
        const term = new AbortController();
        const endTerm = () => term.abort();
        signal.addEventListener('abort', endTerm, { once: true });
        onBroken = (err) => {
          if (term.signal.aborted) return;
          logger.error(
            { network, err: err.message },
            `${label} leadership lost: the lock connection broke; stopping ${label}`,
          );
          term.abort(err);
        };
        if (broken) onBroken(broken);
        const heartbeat = (async () => {
          while (!term.signal.aborted) {
            await sleep(retryMs, term.signal);
            if (term.signal.aborted) return;
            try {
              await client.query('SELECT 1');
            } catch (err) {
              breakWith(err instanceof Error ? err : new Error(String(err)));
            }
          }
        })();
        try {
          await lead(term.signal);
          if (!term.signal.aborted)
            logger.warn({ network }, `${label} ended by itself; re-electing`);
        } catch (err) {
          logger.error({ network, err: message(err) }, `${label} failed; re-electing`);
        } finally {
          term.abort();
          signal.removeEventListener('abort', endTerm);
          await heartbeat;
        }
      }
    } catch (err) {
      if (!signal.aborted) {
        failures++;
        logger.warn(
          { network, err: message(err), attempt: failures },
          `${label} leader lock: database unreachable; retrying`,
        );
      }
    } finally {
      onBroken = undefined;
      await endClient(client); // ends the session: the lock, if held, is released
    }
    if (!signal.aborted) await sleep(retryMs, signal);
  }
}
