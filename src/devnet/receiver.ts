/**
 * A local HTTPS webhook receiver, for the demo, the tests and the benchmark, and the reference
 * logic for receivers ({@link verifySignature}, SPEC §Webhook signature).
 *
 * `startReceiver()` listens on 127.0.0.1 with a fresh self-signed certificate (selfsigned@5;
 * subjectAltName IP 127.0.0.1 and DNS localhost; the PEM to trust is returned as `ca`). For every
 * request it reads the raw body bytes, verifies `X-Signature` over exactly those bytes in
 * constant time before any parsing, then parses the JSON, records the request, and answers as
 * the programmable `respond` says (status, delay, extra headers such as a Location, or a reset of
 * the connection instead of any answer). Accepted TCP connections are counted, so a test can prove
 * that a delivery never connected.
 *
 * Not a production server: no size limit beyond 1 MiB per body, everything kept in memory.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { generate } from 'selfsigned';

const SIGNATURE_RE = /^[0-9a-f]{64}$/;

/**
 * SPEC §Webhook signature, the receiver's side: true when `header` is the lowercase hex
 * HMAC-SHA256 of `rawBody` keyed by `secret` (the whole `whsec_…` string, UTF-8). Compare before
 * parsing the body, on the exact bytes received, in constant time.
 * @param header the X-Signature value (undefined or malformed → false).
 */
export function verifySignature(
  secret: string,
  rawBody: Buffer,
  header: string | readonly string[] | undefined,
): boolean {
  if (typeof header !== 'string' || !SIGNATURE_RE.test(header)) return false;
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  return timingSafeEqual(expected, Buffer.from(header, 'hex'));
}

/** One request as the receiver saw it. */
export interface ReceivedRequest {
  method: string;
  /** Path and query, e.g. `/hook`. */
  path: string;
  /** Lowercased header names (node's IncomingHttpHeaders). */
  headers: Record<string, string | string[] | undefined>;
  /** The raw body bytes, as signed. */
  body: Buffer;
  /** X-Signature matched the secret for this request. False when no secret is known. */
  verified: boolean;
  /** The parsed JSON body (SPEC §Event), or undefined when it does not parse. */
  event: Record<string, unknown> | undefined;
  /** X-Event-Id, as sent. */
  eventId: string | undefined;
  /** When the request was complete (body read). */
  receivedAt: Date;
}

/** How to answer one request. */
export interface Reply {
  /** HTTP status. */
  status: number;
  /** Wait this long before answering, ms (forces client timeouts). Default 0. */
  delayMs?: number;
  /**
   * Extra response headers, e.g. `{ location: '…' }` for a redirect; an array sends the header
   * once per value.
   */
  headers?: Record<string, string | string[]>;
  /** The answer's body. Default `ok` for a 2xx status, `no` otherwise. */
  body?: string | Buffer;
  /**
   * Send the status line, the headers and the first byte of the body at once, but end the body
   * only this long after, ms (a receiver that acknowledges, then holds its answer open).
   * Default 0.
   */
  bodyDelayMs?: number;
  /**
   * Answer nothing: destroy the connection after the request was read (the client sees it closed
   * without an answer, as from a receiver that crashed mid-request), after `delayMs` when given.
   * `status` is then ignored. Default false.
   */
  reset?: boolean;
}

/**
 * Decides the answer to a request. `nth` counts the requests carrying the same X-Event-Id so far,
 * this one included (1 = the first attempt of that event); `index` counts all requests (0-based).
 */
export type Respond = (
  req: ReceivedRequest,
  ctx: { nth: number; index: number },
) => Reply | number | Promise<Reply | number>;

export interface ReceiverOptions {
  /**
   * The secret that signs a request: a function of its X-Event-Id and path (read before the body
   * is parsed), a map keyed by event id (or by the last path segment), or one secret for all.
   * Unknown → `verified: false`.
   */
  secretFor?:
    | string
    | ReadonlyMap<string, string>
    | ((r: { eventId: string | undefined; path: string }) => string | undefined);
  /** The answer; default: 200 when verified, else 401 (SPEC §Webhook signature rule 4). */
  respond?: Respond;
  /** Port on 127.0.0.1; default 0 (any free port). */
  port?: number;
  /** Keep request records (default true; the benchmark turns it off to measure, not store). */
  record?: boolean;
}

export interface Receiver {
  /** `https://127.0.0.1:PORT/hook`: a webhook_url (admit 127.0.0.1/32 in the URL policy). */
  url: string;
  /** Origin `https://127.0.0.1:PORT`, for building other paths (redirect targets). */
  origin: string;
  /** The certificate (PEM) to trust: write it to a file for config.delivery.caFile. */
  ca: string;
  /** Every request, in arrival order (when `record` is on). */
  received: ReceivedRequest[];
  /** Requests per X-Event-Id (always kept, also when `record` is off). */
  countsByEvent: Map<string, number>;
  /** Requests answered in total. */
  requests: number;
  /** Accepted TCP connections (before TLS). */
  readonly connections: number;
  /** Stop listening, drop open connections, cancel pending delayed answers. */
  close(): Promise<void>;
}

/** Statuses answered in order per event id (the nth request of an event gets statuses[n-1], the last repeats). */
export function replySequence(statuses: ReadonlyArray<number | Reply>): Respond {
  return (_req, { nth }) => statuses[Math.min(nth, statuses.length) - 1] ?? 200;
}

const MAX_BODY = 1024 * 1024;

/** Start a receiver (see module doc). Certificate generation takes ~50 ms (EC P-256). */
export async function startReceiver(opts: ReceiverOptions = {}): Promise<Receiver> {
  // Self-signed and marked as a CA, so the very certificate can be the trust anchor a client
  // adds (config.delivery.caFile); EC P-256 keeps generation and handshakes cheap.
  const pems = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 7, ip: '127.0.0.1' },
          { type: 2, value: 'localhost' },
        ],
      },
    ],
  });
  const secretFor = opts.secretFor;
  const lookupSecret = (eventId: string | undefined, path: string): string | undefined => {
    if (secretFor === undefined) return undefined;
    if (typeof secretFor === 'string') return secretFor;
    if (typeof secretFor === 'function') return secretFor({ eventId, path });
    return (
      (eventId === undefined ? undefined : secretFor.get(eventId)) ??
      secretFor.get(path.split('?')[0]?.split('/').pop() ?? '')
    );
  };
  const respond: Respond = opts.respond ?? ((req) => (req.verified ? 200 : 401));
  const record = opts.record ?? true;
  const timers = new Set<NodeJS.Timeout>();
  let connections = 0;

  const receiver: Receiver = {
    url: '',
    origin: '',
    ca: pems.cert,
    received: [],
    countsByEvent: new Map(),
    requests: 0,
    get connections() {
      return connections;
    },
    close: async () => {},
  };

  const server = https.createServer({
    key: pems.private,
    cert: pems.cert,
    keepAliveTimeout: 60_000,
  });
  server.on('connection', () => {
    connections++;
  });
  server.on('request', (req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const eventIdHeader = req.headers['x-event-id'];
      const eventId = typeof eventIdHeader === 'string' ? eventIdHeader : undefined;
      const path = req.url ?? '/';
      const secret = lookupSecret(eventId, path);
      // Verify the exact bytes before parsing anything (SPEC §Webhook signature rule 2).
      const verified =
        secret !== undefined && verifySignature(secret, body, req.headers['x-signature']);
      let event: Record<string, unknown> | undefined;
      try {
        const parsed: unknown = JSON.parse(body.toString('utf8'));
        if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
          event = parsed as Record<string, unknown>;
        }
      } catch {
        event = undefined;
      }
      const seen: ReceivedRequest = {
        method: req.method ?? '',
        path,
        headers: { ...req.headers },
        body,
        verified,
        event,
        eventId,
        receivedAt: new Date(),
      };
      const index = receiver.requests++;
      const key = eventId ?? '';
      const nth = (receiver.countsByEvent.get(key) ?? 0) + 1;
      receiver.countsByEvent.set(key, nth);
      if (record) receiver.received.push(seen);
      Promise.resolve(respond(seen, { nth, index }))
        .then((answer) => {
          const reply: Reply = typeof answer === 'number' ? { status: answer } : answer;
          const send = () => {
            if (res.destroyed || res.writableEnded) return;
            if (reply.reset) return void req.socket.destroy();
            res.writeHead(reply.status, { 'content-type': 'text/plain', ...reply.headers });
            const text = Buffer.from(
              reply.body ?? (reply.status >= 200 && reply.status < 300 ? 'ok' : 'no'),
            );
            if (!reply.bodyDelayMs) return void res.end(text);
            res.write(text.subarray(0, 1));
            const t = setTimeout(() => {
              timers.delete(t);
              if (!res.destroyed && !res.writableEnded) res.end(text.subarray(1));
            }, reply.bodyDelayMs);
            timers.add(t);
          };
          if (reply.delayMs && reply.delayMs > 0) {
            const t = setTimeout(() => {
              timers.delete(t);
              send();
            }, reply.delayMs);
            timers.add(t);
          } else {
            send();
          }
        })
        .catch(() => {
          if (!res.destroyed && !res.writableEnded) {
            res.writeHead(500);
            res.end();
          }
        });
    });
    req.on('error', () => {});
  });
  server.on('clientError', (_err, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  receiver.origin = `https://127.0.0.1:${port}`;
  receiver.url = `${receiver.origin}/hook`;
  receiver.close = async () => {
    for (const t of timers) clearTimeout(t);
    timers.clear();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  };
  return receiver;
}
