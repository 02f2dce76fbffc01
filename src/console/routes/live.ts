/**
 * The console's live stream (issue 19 item 6): server-sent events (the WHATWG HTML "Server-sent
 * events" format, read by the browser's EventSource) telling the signed-in account's pages which
 * events changed, so the events list, an event's page and the dead letters update as deliveries
 * land, without a reload.
 *
 *   GET /console/api/live → 200 text/event-stream (session cookie; 401 no_session without one)
 *     `retry: 3000` (the browser reconnects after 3 s), then per change:
 *     `event: change` / `data: {"event_ids":[…],"new_events":bool}` (src/console/live.ts),
 *     and a `: keep-alive` comment every 15 s (proxies close idle connections).
 *
 * A stream ends after STREAM_MAX_MS; the browser reconnects with its cookie, so a session that
 * was signed out or expired meanwhile is refused then (EventSource stops on a 401, and the page
 * falls back to polling, whose 401 shows the sign-in page). Streams end when the process closes.
 */
import type { App, AppDeps } from '../../api/types.js';
import { requireSession } from '../guard.js';
import { LiveFeed } from '../live.js';

const KEEP_ALIVE_MS = 15_000;
/** A stream's longest life: the session is checked again at each reconnection. */
const STREAM_MAX_MS = 5 * 60_000;

export function consoleLiveRoutes(app: App, deps: AppDeps): void {
  const feed = new LiveFeed(deps.db, deps.config.network, deps.logger);
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of [...open]) end();
    feed.close();
  });

  app.get('/console/api/live', { schema: { hide: true } }, async (request, reply) => {
    const ctx = requireSession(request);
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
    const unsubscribe = feed.subscribe(ctx.accountId, (change) => {
      res.write(`event: change\ndata: ${JSON.stringify(change)}\n\n`);
    });
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
    const maxLife = setTimeout(() => end(), STREAM_MAX_MS);
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      clearInterval(keepAlive);
      clearTimeout(maxLife);
      unsubscribe();
      open.delete(end);
      res.end();
    };
    open.add(end);
    request.raw.on('close', end);
  });
}
