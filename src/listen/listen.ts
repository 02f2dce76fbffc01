/**
 * `tronwatch listen --forward-to <url>` (issue 32 item 6; `stripe listen` is the model): a
 * developer's loop without a public URL. The command opens an outbound stream to a running
 * tronwatch (GET /v1/events/stream with TRONWATCH_API_KEY at TRONWATCH_URL; src/api/routes/
 * event-stream.ts), receives each new event of the key's environment (test events with a
 * `tw_test_` key, live ones with a `tw_live_` key) with the exact request its webhook deliveries
 * send (body bytes, X-Signature and the other signed headers), POSTs it unchanged to the local
 * URL, and prints one line per event:
 *
 *   2026-11-28T09:50:01.204Z  transfer.confirmed  evt_…  test  → 200 (12 ms)
 *   2026-11-28T09:50:07.881Z  transfer.confirmed  evt_…  test  → 500 (3 ms)
 *   2026-11-28T09:50:09.002Z  transfer.confirmed  evt_…  test  → failed: ECONNREFUSED …
 *
 * The receiver verifies X-Signature with the watch's secret (`whsec_…`, shown when the watch was
 * created), exactly as it will in production. The local answer is only printed: it does not
 * change the event's real delivery (to the watch's webhook_url) or its retries.
 *
 * Connection: a dropped stream is opened again after RECONNECT_MS with Last-Event-ID (the `id` of
 * the last event received), so nothing is lost across a reconnection; an event seen twice is
 * forwarded once. A refused key (401/403) ends the command with exit code 2; so does a revoked
 * key's `end` message.
 *
 * Like `tronwatch mcp`, this is a client: it reads TRONWATCH_URL and TRONWATCH_API_KEY (or the
 * --url and --api-key options), opens no database, and never prints the key or a secret.
 */
import { clientSettings } from '../common/client-settings.js';

/** Wait before opening a dropped stream again, ms. */
export const RECONNECT_MS = 3_000;
/** A local receiver's answer is awaited at most this long, ms (SPEC's webhook timeout). */
export const FORWARD_TIMEOUT_MS = 10_000;
/** Event ids remembered to forward each once across reconnections. */
const SEEN_MAX = 10_000;

/** One message of the stream's `delivery` events (src/events/stream.ts StreamedDelivery). */
interface Delivery {
  event_id: string;
  watch_id: string;
  type: string;
  network: string;
  livemode: boolean;
  created_at: string;
  headers: Record<string, string>;
  body: string;
}

export interface ListenOptions {
  /** The local receiver: an http:// or https:// URL. */
  forwardTo: string;
  /** TRONWATCH_URL / TRONWATCH_API_KEY (and --url / --api-key, which win). */
  env: NodeJS.ProcessEnv;
  url?: string | undefined;
  apiKey?: string | undefined;
  /** Stops the command (Ctrl-C). */
  signal: AbortSignal;
  /** One line of output (stdout). */
  out: (line: string) => void;
  /** One line of diagnostics (stderr). */
  err: (line: string) => void;
}

/** The outcome of forwarding one event to the local receiver. */
export interface ForwardResult {
  status?: number;
  error?: string;
  durationMs: number;
}

/**
 * POST `d.body` with `d.headers` to `url`, as the delivery would (no redirect followed).
 * @returns the status, or the error's one-line description; never throws.
 */
export async function forward(url: string, d: Delivery): Promise<ForwardResult> {
  const t0 = performance.now();
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: d.headers,
      body: Buffer.from(d.body, 'utf8'),
      redirect: 'manual',
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    });
    await res.arrayBuffer().catch(() => undefined);
    return { status: res.status, durationMs: Math.round(performance.now() - t0) };
  } catch (e) {
    const cause = e instanceof Error && e.cause instanceof Error ? e.cause : undefined;
    const code = cause ? (cause as NodeJS.ErrnoException).code : undefined;
    const msg =
      e instanceof Error ? (e.name === 'TimeoutError' ? 'timeout' : e.message) : String(e);
    return {
      error: [code, cause?.message ?? msg].filter(Boolean).join(' '),
      durationMs: Math.round(performance.now() - t0),
    };
  }
}

/** One printed line for a forwarded event. */
export function resultLine(d: Delivery, r: ForwardResult, at = new Date()): string {
  const env = d.livemode ? 'live' : 'test';
  const outcome =
    r.status !== undefined ? `→ ${r.status} (${r.durationMs} ms)` : `→ failed: ${r.error ?? '?'}`;
  return `${at.toISOString()}  ${d.type}  ${d.event_id}  ${env}  ${outcome}`;
}

/** Split a server-sent-events text stream into messages (event name, data, id). */
async function* sseMessages(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<{ event: string; data: string; id: string | undefined }> {
  const decoder = new TextDecoder();
  let buf = '';
  let event = 'message';
  let data: string[] = [];
  let id: string | undefined;
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i).replace(/\r$/, '');
      buf = buf.slice(i + 1);
      if (line === '') {
        if (data.length > 0) yield { event, data: data.join('\n'), id };
        event = 'message';
        data = [];
        id = undefined;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}

/**
 * Run the command until `signal` aborts or the key is refused.
 * @returns the exit code: 0 stopped, 2 bad settings or refused key.
 */
export async function runListen(o: ListenOptions): Promise<number> {
  let forwardTo: URL;
  try {
    forwardTo = new URL(o.forwardTo);
    if (forwardTo.protocol !== 'http:' && forwardTo.protocol !== 'https:') throw new Error();
  } catch {
    o.err(`--forward-to must be an http:// or https:// URL, e.g. http://localhost:3000/hook`);
    return 2;
  }
  let settings: { url: string; apiKey: string };
  try {
    settings = clientSettings({
      ...o.env,
      ...(o.url !== undefined ? { TRONWATCH_URL: o.url } : {}),
      ...(o.apiKey !== undefined ? { TRONWATCH_API_KEY: o.apiKey } : {}),
    });
  } catch (e) {
    o.err(e instanceof Error ? e.message : String(e));
    return 2;
  }
  const seen = new Set<string>();
  let lastId: string | undefined;
  let announced = false;
  while (!o.signal.aborted) {
    let res: Response;
    try {
      res = await fetch(`${settings.url}/v1/events/stream`, {
        headers: {
          authorization: `Bearer ${settings.apiKey}`,
          accept: 'text/event-stream',
          ...(lastId ? { 'last-event-id': lastId } : {}),
        },
        signal: o.signal,
      });
    } catch (e) {
      if (o.signal.aborted) break;
      o.err(
        `cannot reach ${settings.url}: ${e instanceof Error ? e.message : String(e)}; retrying`,
      );
      await sleep(RECONNECT_MS, o.signal);
      continue;
    }
    if (res.status !== 200 || !res.body) {
      const text = await res.text().catch(() => '');
      let what = `HTTP ${res.status}`;
      try {
        const b = JSON.parse(text) as { error?: unknown; code?: unknown };
        what = `${String(b.error ?? what)}${b.code ? ` (${String(b.code)})` : ''}`;
      } catch {}
      if (res.status === 401 || res.status === 403 || res.status === 400 || res.status === 404) {
        o.err(`${settings.url} refused the stream: ${what}`);
        return 2;
      }
      o.err(`${settings.url} answered ${res.status}: ${what}; retrying`);
      await sleep(RECONNECT_MS, o.signal);
      continue;
    }
    try {
      for await (const m of sseMessages(res.body)) {
        if (m.event === 'ready') {
          const r = JSON.parse(m.data) as { network: string; livemode: boolean; cursor: string };
          // Resume from here after a drop even when no event has come yet.
          lastId ??= r.cursor;
          if (!announced) {
            const mode = r.livemode ? 'LIVE events' : 'test-mode events';
            o.out(
              `Ready: forwarding ${mode} (${r.network}) from ${settings.url} to ${forwardTo.href}. Ctrl-C stops.`,
            );
            announced = true;
          }
        } else if (m.event === 'delivery') {
          if (m.id) lastId = m.id;
          const d = JSON.parse(m.data) as Delivery;
          if (seen.has(d.event_id)) continue;
          if (seen.size >= SEEN_MAX) seen.clear();
          seen.add(d.event_id);
          o.out(resultLine(d, await forward(forwardTo.href, d)));
        } else if (m.event === 'end') {
          const r = JSON.parse(m.data) as { reason?: string };
          if (r.reason === 'revoked_api_key') {
            o.err(`the API key was revoked: the stream ended`);
            return 2;
          }
        }
      }
    } catch (e) {
      if (o.signal.aborted) break;
      o.err(`stream interrupted: ${e instanceof Error ? e.message : String(e)}; reconnecting`);
    }
    if (!o.signal.aborted) await sleep(RECONNECT_MS, o.signal);
  }
  return 0;
}
