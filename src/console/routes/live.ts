/**
 * The console's live stream (issue 19 item 6): server-sent events (the WHATWG HTML "Server-sent
 * events" format, read by the browser's EventSource) telling the signed-in account's pages which
 * events changed, so the events list, an event's page and the dead letters update as deliveries
 * land, without a reload.
 *
 *   GET /console/api/live → 200 text/event-stream (session cookie; 401 no_session without one;
 *                           429 too_many_streams beyond STREAMS_PER_SESSION)
 *     `retry: 3000` (the browser reconnects after 3 s), then per change:
 *     `event: change` / `data: {"event_ids":[…],"new_events":bool}` (src/console/live.ts),
 *     a `: keep-alive` comment every 15 s (proxies close idle connections), and, when the stream
 *     is closed by the server because of its session, `event: end` / `data: {"reason":…}` (the
 *     page shows the reason and loads again).
 *
 * Streams follow the session (issue 27 item 5): every open stream's session and role are read
 * again every SESSION_CHECK_MS (one statement for all of the process's streams), and at once after
 * every state-changing console request that succeeds in this process (sign-out, a session
 * revoked, a member removed, a role changed, a password changed…); other processes' changes are
 * seen within SESSION_CHECK_MS. A stream ends with a reason: `signed_out` (its session revoked),
 * `removed` (its user removed: sessions are deleted with the user), `expired`, `role_changed`,
 * `two_factor_required`. A session holds at most STREAMS_PER_SESSION streams (a few tabs); one
 * more is refused (the page then polls). A stream also ends after STREAM_MAX_MS (the browser
 * reconnects with its cookie) and when the process closes.
 */

import type { Role } from '../../accounts/users.js';
import type { App, AppDeps } from '../../api/types.js';
import { TEST_NETWORK } from '../../common/environment.js';
import { ApiError } from '../../common/errors.js';
import { requireSession } from '../guard.js';
import { LiveFeed } from '../live.js';

const KEEP_ALIVE_MS = 15_000;
/** A stream's longest life: the session is checked again at each reconnection. */
const STREAM_MAX_MS = 5 * 60_000;
/** How often every open stream's session and role are read again, ms (at most 15 s: issue 27). */
export const SESSION_CHECK_MS = 5_000;
/** Streams one session may hold open at once. */
export const STREAMS_PER_SESSION = 3;

/** Why the server closed a stream (the page says it). */
export type StreamEndReason =
  | 'signed_out'
  | 'removed'
  | 'expired'
  | 'role_changed'
  | 'two_factor_required';

interface Stream {
  sessionId: string;
  role: Role;
  end: (reason?: StreamEndReason) => void;
}

export function consoleLiveRoutes(app: App, deps: AppDeps): void {
  // One feed per environment (issue 32): a stream follows the events of its page's environment.
  const liveFeed = new LiveFeed(deps.db, deps.config.network, deps.logger);
  const testFeed = new LiveFeed(deps.db, TEST_NETWORK, deps.logger);
  const open = new Set<Stream>();
  let checker: NodeJS.Timeout | undefined;
  let checking: Promise<void> | undefined;
  let again = false;

  /** Read every open stream's session once; end those whose session no longer allows them. */
  async function checkSessions(): Promise<void> {
    if (open.size === 0) return;
    const ids = [...new Set([...open].map((s) => s.sessionId))];
    const { rows } = await deps.db.query<{
      id: string;
      live: boolean;
      expired: boolean;
      role: Role | null;
      missing: boolean | null;
    }>(
      `SELECT s.id, s.revoked_at IS NULL AS live, s.expires_at <= now() AS expired, u.role,
              (a.require_two_factor AND u.totp_enabled_at IS NULL) AS missing
         FROM console_sessions s JOIN console_users u ON u.id = s.user_id
         JOIN accounts a ON a.id = u.account_id
        WHERE s.id = ANY($1::text[])`,
      [ids],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const s of [...open]) {
      const r = byId.get(s.sessionId);
      const reason: StreamEndReason | undefined = !r
        ? 'removed'
        : !r.live
          ? 'signed_out'
          : r.expired
            ? 'expired'
            : r.missing
              ? 'two_factor_required'
              : r.role !== s.role
                ? 'role_changed'
                : undefined;
      if (reason) s.end(reason);
    }
  }

  /** Run a check now (or right after the one running: a change may have landed meanwhile). */
  function checkSoon(): void {
    if (open.size === 0) return;
    if (checking) {
      again = true;
      return;
    }
    checking = checkSessions()
      .catch((err: unknown) => {
        deps.logger.warn({ err }, 'console live: session check failed; retried at the next one');
      })
      .finally(() => {
        checking = undefined;
        if (again) {
          again = false;
          checkSoon();
        }
      });
  }

  app.addHook('onResponse', async (request, reply) => {
    if (
      request.method !== 'GET' &&
      reply.statusCode < 400 &&
      request.routeOptions.url?.startsWith('/console/api/')
    ) {
      checkSoon();
    }
  });
  app.addHook('preClose', async () => {
    for (const s of [...open]) s.end();
    if (checker) clearInterval(checker);
    checker = undefined;
    await checking;
    liveFeed.close();
    testFeed.close();
  });

  app.get(
    '/console/api/live',
    { config: { consoleRole: 'viewer' }, schema: { hide: true } },
    async (request, reply) => {
      const ctx = requireSession(request);
      let mine = 0;
      for (const s of open) if (s.sessionId === ctx.session.id) mine++;
      if (mine >= STREAMS_PER_SESSION) {
        throw ApiError.coded(
          'too_many_streams',
          `this session has ${STREAMS_PER_SESSION} live streams open already: the page refreshes by polling`,
        );
      }
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        connection: 'keep-alive',
        // nginx: pass each message on as it is written.
        'x-accel-buffering': 'no',
      });
      res.write('retry: 3000\n: connected\n\n');
      const feed = ctx.network === TEST_NETWORK ? testFeed : liveFeed;
      const unsubscribe = feed.subscribe(ctx.accountId, (change) => {
        res.write(`event: change\ndata: ${JSON.stringify(change)}\n\n`);
      });
      const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
      const maxLife = setTimeout(() => stream.end(), STREAM_MAX_MS);
      let ended = false;
      const stream: Stream = {
        sessionId: ctx.session.id,
        role: ctx.role,
        end: (reason) => {
          if (ended) return;
          ended = true;
          clearInterval(keepAlive);
          clearTimeout(maxLife);
          unsubscribe();
          open.delete(stream);
          if (open.size === 0 && checker) {
            clearInterval(checker);
            checker = undefined;
          }
          if (reason) res.write(`event: end\ndata: ${JSON.stringify({ reason })}\n\n`);
          res.end();
        },
      };
      open.add(stream);
      if (!checker) checker = setInterval(checkSoon, SESSION_CHECK_MS);
      request.raw.on('close', () => stream.end());
    },
  );
}
