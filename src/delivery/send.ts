/**
 * One webhook attempt (SPEC §Events "Delivery to a webhook_url", §Webhook signature; DESIGN
 * invariant 7): POST the event's JSON to the watch's URL, signed, within a total deadline, and
 * classify what happened. `send` never throws: every outcome is an {@link AttemptResult}, the
 * row the worker records (habit 8).
 *
 * Request: body = serializeEvent(eventPayload(event)) (the same bytes on every attempt),
 * headers `Content-Type: application/json`, `X-Signature` = signBody(secret, body),
 * `X-Event-Id` = event_id, `User-Agent: tronwatch/<version>`, the Standard Webhooks headers; during
 * a secret rotation's grace period also `X-Signature-Previous` and a second `webhook-signature`
 * entry, signed with the replaced secret (payload.ts signatureHeaders; issue 19 item 3).
 *
 * Outcome: any 2xx status within the deadline → delivered, even while the answer's body is still
 * coming (see "The answer" below): counting such an acknowledgement as a timeout would deliver the
 * event again. Anything else is a failed attempt:
 * 3xx (redirects are never followed: the Location could name a private address, invariant 7), 4xx,
 * 5xx with the status; no answer within the deadline, a network or TLS error, or a refused address
 * without a status. All failures are retried per the schedule (schedule.ts): SPEC makes no
 * exception.
 *
 * Deadline: `timeoutMs` (config.delivery.timeoutMs, SPEC 10 s) covers DNS, connect, TLS, request
 * and the answer's status, and then the draining of its body, through one AbortSignal.timeout (the
 * resolution and undici's connect timer are bounded by the same value as a backstop).
 *
 * Address policy, checked twice: before connecting, the URL's form is re-checked with
 * checkUrlForm (scheme, credentials, length; a literal private or reserved IP is refused without
 * any connection); at connect time a host name is resolved by {@link guardedLookup} through the
 * injected {@link Resolver}, which refuses the connection when any address it resolves to is not
 * public (a mixed answer is refused whole), and the socket connects only to an address that was
 * checked (resolve, check, pin). A plain-http URL (admitted only inside WEBHOOK_ALLOW_CIDRS,
 * url-policy.ts) goes through its own Agent whose lookup is stricter: every answer must be inside
 * the allow-list, a public one included (never http across the internet). The URL's host name is kept for TLS SNI and certificate
 * verification. A name that resolved to a public address when the watch was created and to a
 * private one now (DNS rebinding) is refused here. Proxy environment variables are never
 * honoured: the Agent below connects directly (undici reads no HTTP(S)_PROXY unless an
 * EnvHttpProxyAgent is used).
 *
 * The answer, as the console shows it (issue 12 item 5): its headers ({@link responseHeadersOf}:
 * lower-case names, repeated ones joined, at most {@link RESPONSE_HEADERS_MAX} headers and
 * {@link RESPONSE_HEADERS_MAX_CHARS} characters) and the first {@link RESPONSE_BODY_MAX_BYTES}
 * bytes of its body as text ({@link bodyText}). The body's start is read after the status, for
 * at most {@link BODY_WAIT_2XX_MS} (and never past the deadline) after a 2xx, so reading it can
 * neither delay an acknowledgement past the deadline nor turn it into a failure; for any other
 * status, until the deadline. Whatever was read by then is kept (possibly nothing); the rest is
 * read and dropped in the background within the same deadline, so the connection can be reused,
 * and an answer over 64 KiB or still open at the deadline is cut off with its connection.
 *
 * Nothing here logs; results carry no secret, and the answer's body only in `responseBody` (the
 * attempt row's response_body, never logged).
 */

import type { LookupOptions } from 'node:dns';
import fs from 'node:fs';
import type { LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import { Agent, request } from 'undici';
import { isLivemode, TEST_MODE_HEADER } from '../common/environment.js';
import { type EventRow, eventPayload, serializeEvent } from '../events/event.js';
import { ResolveError, type Resolver, resolveBounded, systemResolver } from '../net/dns.js';
import {
  answersOutsideAllowList,
  answersRefusal,
  checkUrlForm,
  parseCidrs,
  type UrlCheck,
} from '../net/url-policy.js';
import { signatureHeaders } from './payload.js';

/** Distinct webhook URLs whose verdict a sender remembers (~100 B each). */
const VERDICTS_MAX = 10_000;

/** Bytes of an answer's body kept for the attempt row (issue 12: "the first 4 KB"). */
export const RESPONSE_BODY_MAX_BYTES = 4096;
/** Answer headers kept for the attempt row, at most (a receiver controls how many it sends). */
export const RESPONSE_HEADERS_MAX = 50;
/** Characters (names + values) of answer headers kept for the attempt row, at most (8 KB). */
export const RESPONSE_HEADERS_MAX_CHARS = 8 * 1024;
/**
 * How long the start of a 2xx answer's body is waited for after its status, ms, at most (and
 * never past the attempt's deadline): the status is the acknowledgement, the body only shown.
 * 1 s covers a receiver that writes its body right after its status; one that holds it open
 * costs its attempt slot at most this long.
 */
export const BODY_WAIT_2XX_MS = 1_000;
/** The answer's body is read and dropped up to this many bytes, then cut off with its connection. */
const DRAIN_MAX_BYTES = 64 * 1024;

/** The outcome of one attempt: what an `attempts` row holds (migrations 002 and 009). */
export interface AttemptResult {
  /** True on a 2xx answer. */
  ok: boolean;
  /** HTTP status of the answer; absent when there was none (refused, network, timeout). */
  status?: number;
  /** Why the attempt failed, one line, no body and no secret; absent when ok. */
  error?: string;
  /**
   * Wall time of the attempt, ms (integer): from its start to the answer's status (the
   * acknowledgement), or to the failure; the reading of the answer's body is not included.
   */
  durationMs: number;
  /** When the attempt started. */
  startedAt: Date;
  /** The headers sent (signatures included, never the secret); absent when nothing was sent. */
  requestHeaders?: Record<string, string>;
  /**
   * The answer's headers, when there was an answer (any status): lower-case name → value,
   * repeated headers joined with ", "; capped (see {@link responseHeadersOf}).
   */
  responseHeaders?: Record<string, string>;
  /**
   * The start of the answer's body as text, when there was an answer: its first
   * {@link RESPONSE_BODY_MAX_BYTES} bytes, or fewer when the rest had not come within the wait
   * (see the file's comment); "" when none had. Decoded as UTF-8, lossy (see {@link bodyText}).
   */
  responseBody?: string;
}

/** package.json's version, for User-Agent (read once; src/ and dist/ are both one level down). */
function readVersion(): string {
  try {
    const url = new URL('../../package.json', import.meta.url);
    const pkg = JSON.parse(fs.readFileSync(url, 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** `tronwatch/<version>` (SPEC leaves the User-Agent open; receivers may log it). */
export const USER_AGENT = `tronwatch/${readVersion()}`;

/** The headers of a webhook POST (SPEC §Events "Delivery to a webhook_url"). */
export function webhookHeaders(eventId: string, signature: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-signature': signature,
    'x-event-id': eventId,
    'user-agent': USER_AGENT,
  };
}

/**
 * Every header of a webhook POST of `body` (event `eventId`) as an attempt starting at
 * `startedAt` sends it: `extraHeaders`, then SPEC's (Content-Type, X-Signature, X-Event-Id,
 * User-Agent), then the Standard Webhooks headers, all signed with `secret` (and `previousSecret`
 * during a rotation's grace period; payload.ts signatureHeaders). Used by every attempt and by
 * the event stream that `tronwatch listen` forwards (src/events/stream.ts), so both sign alike.
 * @throws RangeError on a malformed secret (the message never contains it).
 */
export function signedRequestHeaders(
  eventId: string,
  body: Buffer,
  secret: string,
  previousSecret: string | null | undefined,
  startedAt: Date,
  extraHeaders: Record<string, string> = {},
): Record<string, string> {
  // X-Signature (SPEC) and, additively, the Standard Webhooks headers (replay-safe); both
  // also with the previous secret during a rotation's grace period.
  const signed = signatureHeaders(secret, previousSecret, eventId, body, startedAt);
  return {
    ...extraHeaders,
    ...webhookHeaders(eventId, signed['x-signature'] as string),
    ...signed,
  };
}

/**
 * The headers that mark an event's environment on its deliveries: `Tronwatch-Test-Mode: true`
 * for a test event (issue 32), none for a live one.
 * @param network the event's network (`mainnet` live, `nile` test).
 */
export function environmentHeaders(network: string): Record<string, string> {
  return isLivemode(network) ? {} : { [TEST_MODE_HEADER]: 'true' };
}

/** The connection was refused because the address is not public (DESIGN invariant 7). */
export class AddressRefusedError extends Error {
  readonly code = 'ERR_ADDRESS_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'AddressRefusedError';
  }
}

/** The family a LookupOptions asks for: 4, 6, or 0 (any). */
function wantedFamily(family: LookupOptions['family']): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
}

/**
 * A `lookup` for net/tls.connect: resolves `hostname` with `resolver` (bounded by `timeoutMs`)
 * and fails with AddressRefusedError when any resolved address is not public (ipRefusal,
 * allow-list applied). Refusing on any (not only the first) address means the socket cannot be
 * steered to a private one by address ordering or family selection; the socket connects to one
 * of the addresses returned, all checked. Not called for IP-literal hosts (checked before).
 * A name that does not resolve (or not in time) fails with ResolveError (ENOTFOUND, ETIMEOUT…).
 * @param rule 'public' (https: public or allow-listed) or 'allow-list' (plain http: every answer
 *   inside the allow-list, a public one refused too). Default 'public'.
 */
export function guardedLookup(
  allowCidrs: readonly string[],
  resolver: Resolver = systemResolver,
  timeoutMs = 10_000,
  rule: 'public' | 'allow-list' = 'public',
): LookupFunction {
  const allow = parseCidrs(allowCidrs);
  return (hostname, options, callback) => {
    resolveBounded(resolver, hostname, timeoutMs).then(
      (answers) => {
        const refusal =
          rule === 'allow-list'
            ? answersOutsideAllowList(answers, allow)
            : answersRefusal(answers, allow);
        if (refusal) {
          callback(new AddressRefusedError(`refused: ${hostname} resolves to ${refusal}`), '', 0);
          return;
        }
        const family = wantedFamily(options.family);
        const usable = answers.filter((a) => family === 0 || a.family === family);
        const first = usable[0];
        if (!first) {
          callback(new ResolveError(hostname, 'ENOTFOUND', `no IPv${family} address`), '', 0);
        } else if (options.all) {
          callback(null, usable);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (err: unknown) => {
        const e =
          err instanceof ResolveError ? err : new ResolveError(hostname, 'ENOTFOUND', String(err));
        callback(e, '', 0);
      },
    );
  };
}

export interface WebhookSenderOptions {
  /** Total deadline of one attempt, ms (config.delivery.timeoutMs; SPEC 10 000). */
  timeoutMs: number;
  /** CIDRs admitted although not public (config.delivery.allowCidrs; default none). */
  allowCidrs: readonly string[];
  /**
   * Extra CA certificate (PEM file) trusted besides Node's bundled roots
   * (config.delivery.caFile; default none: the bundled roots only).
   */
  caFile?: string | undefined;
  /** Keep-alive connections per receiver origin. Default 64 (config.delivery.concurrency). */
  connections?: number;
  /**
   * Resolves webhook host names at connect time (default: the system resolver, node:dns
   * lookup with `all: true`). Tests inject a stub (DNS rebinding, mixed answers, timeouts).
   */
  resolver?: Resolver | undefined;
}

/**
 * The Agent webhook attempts go through: keep-alive connections per receiver origin, the address
 * guard on every connect, the extra CA when configured, no proxy. Exported so the benchmark's
 * baseline POST loop uses exactly the same connection settings.
 * @param rule the lookup's rule (guardedLookup): 'public' for https (default), 'allow-list' for
 *   the plain-http Agent.
 * @throws Error when caFile cannot be read.
 */
export function webhookAgent(
  opts: WebhookSenderOptions,
  rule: 'public' | 'allow-list' = 'public',
): Agent {
  const extraCa = opts.caFile ? fs.readFileSync(opts.caFile, 'utf8') : undefined;
  // One secure context for every connection: built from ~150 PEM roots it costs milliseconds,
  // which tls.connect would otherwise pay again on each new connection.
  const secureContext = extraCa
    ? tls.createSecureContext({ ca: [...tls.rootCertificates, extraCa] })
    : undefined;
  return new Agent({
    // Keep-alive: a busy receiver gets its deliveries over reused TLS connections.
    connections: opts.connections ?? 64,
    keepAliveTimeout: 30_000,
    // The attempt's AbortSignal is the deadline; undici's own timers only back it up.
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    connect: {
      timeout: opts.timeoutMs,
      lookup: guardedLookup(opts.allowCidrs, opts.resolver, opts.timeoutMs, rule),
      ...(secureContext ? { secureContext } : {}),
    },
  });
}

/** A failed attempt that never reached the network (refused URL, undecryptable secret…). */
export function failedAttempt(
  error: string,
  startedAt: Date,
  t0 = performance.now(),
): AttemptResult {
  return { ok: false, error, durationMs: Math.round(performance.now() - t0), startedAt };
}

/** One line for a transport error: code and message, never a body. */
function describeError(err: unknown): string {
  if (err instanceof AddressRefusedError) return err.message;
  if (err instanceof ResolveError) return `dns: ${err.message}`.slice(0, 500);
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    // undici wraps socket errors; the cause carries the system code (ECONNREFUSED, TLS…).
    const cause = err.cause instanceof Error ? err.cause : undefined;
    if (cause instanceof AddressRefusedError) return cause.message;
    if (cause instanceof ResolveError) return `dns: ${cause.message}`.slice(0, 500);
    const causeCode = cause ? (cause as NodeJS.ErrnoException).code : undefined;
    const parts = [code, causeCode, err.message, cause?.message].filter(
      (p, i, all): p is string => typeof p === 'string' && p !== '' && all.indexOf(p) === i,
    );
    return `network: ${parts.join(': ')}`.slice(0, 500);
  }
  return `network: ${String(err)}`.slice(0, 500);
}

/** U+0000, which PostgreSQL's text and jsonb cannot hold, and U+FFFD, which replaces it. */
const NUL = '\u0000';
const REPLACEMENT = '\uFFFD';

/**
 * An answer's body bytes as storable text: decoded as UTF-8, lossy (an invalid or cut sequence,
 * such as a character split by the 4 KB cut, becomes U+FFFD), and U+0000 replaced by U+FFFD too,
 * since PostgreSQL's text cannot hold it: an attempt row that fails to insert would stall the
 * recording of every outcome of its batch.
 */
export function bodyText(bytes: Buffer): string {
  return bytes.toString('utf8').replaceAll(NUL, REPLACEMENT);
}

/**
 * An answer's headers as the attempt row stores them: lower-case name → value, a repeated
 * header's values joined with ", " (set-cookie included), in the order received. At most
 * {@link RESPONSE_HEADERS_MAX} headers and {@link RESPONSE_HEADERS_MAX_CHARS} characters of names
 * and values: the header that crosses the limit has its value cut, the ones after it are dropped.
 * @param headers undici's `res.headers` (names already lower-case; arrays for repeated ones).
 */
export function responseHeadersOf(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const out: Record<string, string> = {};
  let count = 0;
  let room = RESPONSE_HEADERS_MAX_CHARS;
  for (const [rawName, raw] of Object.entries(headers)) {
    if (raw === undefined) continue;
    if (count >= RESPONSE_HEADERS_MAX || room <= rawName.length) break;
    const name = rawName.toLowerCase().replaceAll(NUL, REPLACEMENT);
    const value = (Array.isArray(raw) ? raw.join(', ') : raw).replaceAll(NUL, REPLACEMENT);
    const kept = value.slice(0, room - name.length);
    out[name] = kept;
    count++;
    room -= name.length + kept.length;
  }
  return out;
}

/**
 * Read the start of an answer's body: resolves with its first `maxBytes` bytes, or with what came
 * before the body ended, failed, or `waitMs` passed (never rejects, never waits longer). Then
 * hands the stream on to undici's dump (read and drop up to {@link DRAIN_MAX_BYTES} in all,
 * destroyed when `signal` aborts), as before the body was read, so the connection is reused when
 * the answer ends in time and cut off otherwise.
 * @param waitMs how long to wait, ms (≤ 0: only what is already there, one timer tick).
 */
function readBodyStart(
  body: Readable & { dump(opts: { limit: number; signal: AbortSignal }): Promise<unknown> },
  maxBytes: number,
  waitMs: number,
  signal: AbortSignal,
): Promise<Buffer> {
  // An error with no listener would be thrown: the body's errors are outcomes here, not crashes.
  body.on('error', () => {});
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = () => {
      clearTimeout(timer);
      body.off('data', onData).off('end', finish).off('close', finish).off('error', finish);
      // Synchronously, so that no chunk goes by unlistened-for between the two readers.
      if (signal.aborted) body.destroy();
      else body.dump({ limit: DRAIN_MAX_BYTES, signal }).catch(() => {});
      resolve(Buffer.concat(chunks, Math.min(size, maxBytes)));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= maxBytes) finish();
    };
    const timer = setTimeout(finish, Math.max(0, waitMs));
    if (body.destroyed || body.readableEnded) {
      finish();
      return;
    }
    body.on('data', onData).on('end', finish).on('close', finish).on('error', finish);
  });
}

/**
 * Sends webhook attempts over one keep-alive Agent. Create one per worker and `close()` it when
 * the worker stops.
 */
export class WebhookSender {
  readonly timeoutMs: number;
  private readonly agent: Agent;
  /** Plain-http URLs (inside the allow-list only) go through this one: its lookup is stricter. */
  private readonly httpAgent: Agent;
  private readonly allowCidrs: readonly string[];
  /**
   * checkUrlForm's verdicts by URL string. Exact, not a cache that can go stale: the check is a
   * pure function of the URL and this sender's fixed policy (no DNS: host names are resolved and
   * checked at connect time by guardedLookup, never memoised). It costs ~50 µs of URL and IP
   * parsing per call, ~7 % of the worker's CPU in the benchmark.
   */
  private readonly verdicts = new Map<string, UrlCheck>();

  /** @throws Error when caFile cannot be read, or RangeError on a malformed allow-list CIDR. */
  constructor(opts: WebhookSenderOptions) {
    this.timeoutMs = opts.timeoutMs;
    this.allowCidrs = opts.allowCidrs;
    this.agent = webhookAgent(opts);
    this.httpAgent = webhookAgent(opts, 'allow-list');
  }

  /**
   * Make one attempt to deliver `event` to `url`, signed with `secret` (whsec_…).
   * @param signal optional: aborts the attempt early (the worker does not use it; stop waits).
   * @param extraHeaders optional headers sent beside the signed ones (the console's test event:
   *   `X-Tronwatch-Test: 1`). A test-mode event (network not mainnet) also gets
   *   `Tronwatch-Test-Mode: true` (src/common/environment.ts).
   * @param previousSecret during a rotation's grace period, the replaced secret: the request is
   *   signed with both (payload.ts signatureHeaders); null or absent otherwise.
   * @returns the classified outcome; never throws.
   */
  async send(
    url: string,
    event: EventRow,
    secret: string,
    signal?: AbortSignal,
    extraHeaders: Record<string, string> = {},
    previousSecret?: string | null,
  ): Promise<AttemptResult> {
    // A test event (issue 32) says so in a header too, beside `livemode: false` in its body.
    const headers = { ...environmentHeaders(event.network), ...extraHeaders };
    return this.sendBody(
      url,
      event.id,
      serializeEvent(eventPayload(event)),
      secret,
      signal,
      headers,
      previousSecret,
    );
  }

  /**
   * Make one attempt to POST `body` (an event's bytes, id `eventId`) to `url`, signed with
   * `secret`, exactly as `send` does (the test delivery's own body goes through here).
   * @returns the classified outcome; never throws.
   */
  async sendBody(
    url: string,
    eventId: string,
    body: Buffer,
    secret: string,
    signal?: AbortSignal,
    extraHeaders: Record<string, string> = {},
    previousSecret?: string | null,
  ): Promise<AttemptResult> {
    const startedAt = new Date();
    const t0 = performance.now();
    const check = this.check(url);
    if (!check.ok) return failedAttempt(`refused: ${check.reason}`, startedAt, t0);
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const sig = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const requestHeaders = signedRequestHeaders(
      eventId,
      body,
      secret,
      previousSecret,
      startedAt,
      extraHeaders,
    );
    try {
      const res = await request(check.url, {
        method: 'POST',
        dispatcher: check.plainHttp ? this.httpAgent : this.agent,
        signal: sig,
        headers: requestHeaders,
        body,
      });
      const status = res.statusCode;
      const atStatus = performance.now();
      const durationMs = Math.round(atStatus - t0);
      const ok = status >= 200 && status < 300;
      // The status is the answer (SPEC §Delivery: acknowledgement = any 2xx, within the timeout):
      // a 2xx whose body is still coming is delivered, not a timeout that would send it again.
      // So the body's start is waited for briefly after a 2xx, never past the deadline, and
      // whatever came is kept; the rest is read and dropped in the background (readBodyStart).
      const untilDeadline = t0 + this.timeoutMs - atStatus;
      const waitMs = ok ? Math.min(untilDeadline, BODY_WAIT_2XX_MS) : untilDeadline;
      const responseHeaders = responseHeadersOf(res.headers);
      const head = await readBodyStart(res.body, RESPONSE_BODY_MAX_BYTES, waitMs, sig);
      const responseBody = bodyText(head);
      const answer = {
        status,
        durationMs,
        startedAt,
        requestHeaders,
        responseHeaders,
        responseBody,
      };
      if (ok) return { ok: true, ...answer };
      const error =
        status >= 300 && status < 400
          ? `HTTP ${status}: redirect not followed`
          : `HTTP ${status}: not a 2xx answer`;
      return { ok: false, error, ...answer };
    } catch (err) {
      const durationMs = Math.round(performance.now() - t0);
      // No status within the deadline (DNS, connect, TLS, request body or the answer's head).
      if (timeout.aborted) {
        const error = `timeout: no complete answer within ${this.timeoutMs} ms`;
        return { ok: false, error, durationMs, startedAt, requestHeaders };
      }
      if (signal?.aborted) {
        return {
          ok: false,
          error: 'aborted: worker stopping',
          durationMs,
          startedAt,
          requestHeaders,
        };
      }
      return { ok: false, error: describeError(err), durationMs, startedAt, requestHeaders };
    }
  }

  private check(url: string): UrlCheck {
    const known = this.verdicts.get(url);
    if (known) return known;
    const verdict = checkUrlForm(url, { allowCidrs: this.allowCidrs });
    // Bounded: at most VERDICTS_MAX distinct URLs are remembered, then the memo starts over.
    if (this.verdicts.size >= VERDICTS_MAX) this.verdicts.clear();
    this.verdicts.set(url, verdict);
    return verdict;
  }

  /** Close the Agents' connections (idempotent). */
  async close(): Promise<void> {
    if (!this.agent.closed) await this.agent.close();
    if (!this.httpAgent.closed) await this.httpAgent.close();
  }
}
