/**
 * The Redis client (DESIGN §Redis: rate-limit windows, shared between replicas, may be lost).
 *
 * Redis sits on the request path of every `/v1/*` call, so the client is tuned to FAIL FAST
 * rather than queue: a command that cannot be sent at once (disconnected) is refused at once
 * (`enableOfflineQueue: false`), and one that is sent but not answered gives up after
 * `commandTimeoutMs`. Its callers fall back to in-process state (src/rate-limit/limiter.ts
 * FallbackRateLimiter), so a Redis outage costs at most one timeout now and then, never a hung API.
 * Meanwhile ioredis keeps reconnecting in the background (every ≤ 1 s), so the service returns
 * to Redis by itself.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import type { Logger } from '../common/logger.js';

export type { Redis };

/**
 * Deadline of one command, ms (default). A healthy Redis answers in well under 1 ms on a LAN;
 * 200 ms is far above that and still small next to a request's budget.
 */
export const COMMAND_TIMEOUT_MS = 200;

/** Deadline of the /healthz PING, ms: below the probe deadline of the health route (1 s). */
export const PING_TIMEOUT_MS = 500;

export interface RedisClientOptions {
  /** Deadline of one command, ms. Default COMMAND_TIMEOUT_MS (200). */
  commandTimeoutMs?: number;
  /** Logs connection errors at debug level (transitions are logged by the users). */
  logger?: Logger;
}

/**
 * Open a client on `url` (`redis://[:password@]host:port[/db]`, `rediss://` for TLS). It
 * connects in the background; commands sent before it is ready fail at once (see module doc).
 * The caller closes it with `closeRedis`.
 */
export function createRedis(url: string, opts: RedisClientOptions = {}): Redis {
  const client = new Redis(url, {
    commandTimeout: opts.commandTimeoutMs ?? COMMAND_TIMEOUT_MS,
    // Commands issued in the same event-loop turn (the rate-limit scripts of concurrent requests)
    // go out in one write and come back in one read: fewer system calls and wake-ups per request
    // (measured side by side with the API on 2 cores: ~1,450 → ~1,850 pages/s with the limits in
    // Redis). Each script stays atomic; only the transport is batched.
    enableAutoPipelining: true,
    enableOfflineQueue: false,
    // A command caught by a disconnect is not retried on the next connection: the caller has
    // already fallen back and the answer would be stale.
    maxRetriesPerRequest: 1,
    // A dead host (no RST) must not hold the first connection for ioredis' default 10 s.
    connectTimeout: 2_000,
    // Reconnect after 100 ms, 200 ms, … then every second, forever: back on Redis within ~1 s
    // of it returning.
    retryStrategy: (times) => Math.min(times * 100, 1_000),
    // disconnect() while reconnecting (closeRedis with Redis down) arms a timer of this length
    // to destroy a socket that is already closed, and nothing clears it (ioredis 5.11
    // AbstractConnector): at the default 2 s it held a stopping process past main.ts's 1 s exit
    // grace ('a handle is still open after the stop'). A socket that is open was sent QUIT or
    // end() first and needs no more than this to close on a LAN.
    disconnectTimeout: 200,
  });
  // Without a listener ioredis prints every reconnect failure to the console.
  client.on('error', (err: Error) => {
    opts.logger?.debug({ err: err.message }, 'redis connection error');
  });
  return client;
}

/** Resolve true once `client` is ready, false after `ms` (it keeps connecting). Never rejects. */
export function waitReady(client: Redis, ms: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), ms);
    client.on('ready', onReady);
  });
}

/** PING within `ms` (default PING_TIMEOUT_MS): true when Redis answered PONG. Never rejects. */
export async function pingRedis(client: Redis, ms: number = PING_TIMEOUT_MS): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    const pong = client.ping().then(
      (r) => r === 'PONG',
      () => false,
    );
    return await Promise.race([pong, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Close `client`: QUIT when connected (pending replies arrive first), else drop it. Never rejects. */
export async function closeRedis(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  if (client.status === 'ready') {
    try {
      await client.quit();
      return;
    } catch {
      // fall through: the connection broke while quitting
    }
  }
  client.disconnect();
}

/**
 * The text of a Lua script of src/redis/ (one file per atomic operation, CONVENTIONS). Read
 * from src/redis/ both when running from src/ (tsx) and from dist/ (tsc does not copy .lua
 * files; src/ ships beside dist/, as migrations/ does).
 */
export function luaScript(name: string): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return readFileSync(path.resolve(here, '..', '..', 'src', 'redis', name), 'utf8');
}
