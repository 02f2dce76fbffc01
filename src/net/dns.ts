/**
 * Name resolution for webhook hosts (DESIGN invariant 7: resolve, check, pin).
 *
 * A {@link Resolver} turns a host name into every address it resolves to. The same resolver is
 * used when a watch is created (checkWebhookUrl: every answer must be public) and when a delivery
 * connects (guardedLookup in send.ts: every answer is checked again and the socket connects only
 * to a checked one). The default is the system resolver (node:dns/promises `lookup` with
 * `all: true`, so /etc/hosts, search domains and CNAME chains behave as for any other program);
 * tests inject {@link stubResolver} so names resolve offline, and so that a name can answer
 * differently at creation and at delivery (DNS rebinding).
 *
 * Every resolution is bounded ({@link resolveBounded}): a resolver that does not answer within
 * the timeout fails with code ETIMEOUT. getaddrinfo itself cannot be cancelled; its late answer
 * is dropped.
 */
import { lookup } from 'node:dns/promises';
import net from 'node:net';

/** One answer of a resolution. */
export interface ResolvedAddress {
  /** Textual IPv4 or IPv6 address. */
  address: string;
  family: 4 | 6;
}

/** Every address `hostname` resolves to (order as the resolver gives it). Rejects when none. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** Default bound of one resolution at watch creation, ms (delivery uses its own 10 s deadline). */
export const DEFAULT_RESOLVE_TIMEOUT_MS = 5_000;

/** A resolution that failed: no such name, no address, or no answer in time. */
export class ResolveError extends Error {
  /** ENOTFOUND (no such name / no address), ETIMEOUT (no answer in time), or the resolver's code. */
  readonly code: string;
  constructor(hostname: string, code: string, detail?: string) {
    super(
      code === 'ETIMEOUT'
        ? `${hostname}: DNS resolution timed out${detail ? ` (${detail})` : ''}`
        : `${hostname} does not resolve (${detail ?? code})`,
    );
    this.name = 'ResolveError';
    this.code = code;
  }
}

/** The system resolver: dns.lookup with `all: true` and the OS's address order. */
export const systemResolver: Resolver = async (hostname) => {
  const answers = await lookup(hostname, { all: true, order: 'verbatim' });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/**
 * Run `resolver` for `hostname` within `timeoutMs`, and check the shape of its answer.
 * @returns at least one address, each a valid IP (family as `net.isIP` says, not as claimed).
 * @throws ResolveError: ETIMEOUT, ENOTFOUND (no answer, or an empty list), or the resolver's
 *   error code (ENODATA, ESERVFAIL…); an answer that is not an IP address is ENOTFOUND too.
 */
export async function resolveBounded(
  resolver: Resolver,
  hostname: string,
  timeoutMs: number,
): Promise<ResolvedAddress[]> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ResolveError(hostname, 'ETIMEOUT', `${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  let answers: ResolvedAddress[];
  try {
    answers = await Promise.race([resolver(hostname), deadline]);
  } catch (err) {
    if (err instanceof ResolveError) throw err;
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    throw new ResolveError(hostname, typeof code === 'string' ? code : 'ENOTFOUND');
  } finally {
    clearTimeout(timer);
  }
  if (!Array.isArray(answers) || answers.length === 0) {
    throw new ResolveError(hostname, 'ENOTFOUND', 'no address');
  }
  return answers.map((a) => {
    const family = net.isIP(a.address);
    if (family === 0) throw new ResolveError(hostname, 'ENOTFOUND', 'not an IP address');
    return { address: a.address, family: family === 6 ? 6 : 4 };
  });
}

/** What a stub name answers: addresses, an alias (CNAME) to follow, a DNS error code, or silence. */
export type StubAnswer =
  | readonly string[]
  | { cname: string }
  | { error: string }
  | { hang: true }
  | ((hostname: string) => StubAnswer);

/**
 * A resolver answering from a table, offline (tests, the demo). Names are matched
 * case-insensitively without a trailing dot; a `{ cname }` entry is followed (at most 8 hops),
 * like the system resolver follows a CNAME chain; a function entry is asked at each resolution
 * (rebinding: public first, private later); `fallback` answers names not in the table (default:
 * ENOTFOUND).
 */
export function stubResolver(
  table: Readonly<Record<string, StubAnswer>>,
  fallback?: StubAnswer,
): Resolver {
  const entries = new Map(Object.entries(table).map(([k, v]) => [canonical(k), v]));
  const answer = (name: string, hops: number): Promise<ResolvedAddress[]> => {
    let a: StubAnswer | undefined = entries.get(canonical(name)) ?? fallback;
    while (typeof a === 'function') a = a(name);
    if (a === undefined) return Promise.reject(dnsError('ENOTFOUND', name));
    if ('hang' in a) return new Promise<never>(() => {});
    if ('error' in a) return Promise.reject(dnsError(a.error, name));
    if ('cname' in a) {
      if (hops >= 8) return Promise.reject(dnsError('ELOOP', name));
      return answer(a.cname, hops + 1);
    }
    return Promise.resolve(
      a.map((address) => ({ address, family: net.isIP(address) === 6 ? 6 : 4 }) as const),
    );
  };
  return (hostname) => answer(hostname, 0);
}

function canonical(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

function dnsError(code: string, hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`getaddrinfo ${code} ${hostname}`), { code, hostname });
}
