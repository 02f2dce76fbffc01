/**
 * Where a webhook may point (SPEC POST /v1/watches rule 3, §Events "re-checked at delivery";
 * DESIGN invariant 7).
 *
 * The form of a URL ({@link checkUrlForm}, synchronous): at most 2048 characters, scheme https
 * (the URL parser lowercases it, so `HTTPS:` is https; plain http only inside the allow-list, below), no user name or password, a host, not
 * `localhost` / `*.localhost`, a dotted name or an IP literal. The WHATWG URL parser normalises
 * every numeric host spelling first (decimal `2130706433`, octal `0177.0.0.1`, hex `0x7f.1`, short
 * `127.1`, percent-encoded and full-width digits all become `127.0.0.1`), so the literal checked
 * is the address a client would connect to.
 *
 * The addresses ({@link checkWebhookUrl} at creation; guardedLookup in send.ts at delivery): an IP
 * literal must be public; a name must resolve (a {@link Resolver}, bounded by a timeout), and
 * every address it resolves to must be public; one non-public answer refuses the whole name.
 *
 * "Public" ({@link classifyIp}) is decided by the explicit tables {@link IPV4_SPECIAL} and
 * {@link IPV6_SPECIAL} (the IANA IPv4 and IPv6 Special-Purpose Address Registries, plus multicast,
 * the reserved 240/4, IPv4-compatible/translated forms and the deprecated site-local and ORCHID
 * blocks) and, for IPv6, by the global-unicast space 2000::/3 (RFC 4291): any IPv6 address
 * outside it is refused. IPv4 embedded in IPv6 is unwrapped: IPv4-mapped (::ffff:0:0/96) and
 * NAT64 well-known-prefix (64:ff9b::/96) addresses are judged as the IPv4 address they carry
 * (a DNS64 network answers every IPv4-only receiver with 64:ff9b::/96); every other embedding
 * (IPv4-compatible, IPv4-translated, NAT64 local-use 64:ff9b:1::/48, 6to4 2002::/16, Teredo
 * 2001::/32) is refused as its range, and the reason names a non-public IPv4 it carries.
 *
 * An explicit allow-list of CIDRs (WEBHOOK_ALLOW_CIDRS, empty by default) admits local receivers
 * for development and tests: it bypasses only the address check, never the form checks.
 *
 * Plain `http://` (issue 29 item 5): allowed when, and only when, the address connected to is
 * inside the allow-list: an IP literal inside it, or a name whose every answer is inside it (at
 * creation here, and again at connect time: send.ts's lookup for http). A public address is not
 * enough for http (the body and its signature would cross the internet in clear), `localhost` by
 * name stays refused, and with an empty allow-list http is refused outright.
 */
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import {
  DEFAULT_RESOLVE_TIMEOUT_MS,
  type ResolvedAddress,
  ResolveError,
  type Resolver,
  resolveBounded,
  systemResolver,
} from './dns.js';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/** One special-purpose block: no webhook may point into it. */
export interface SpecialRange {
  cidr: string;
  /** Short name, used in refusal reasons ("address 10.0.0.7 is in a non-public range (private)"). */
  name: string;
  /** Where the block is defined. */
  rfc: string;
}

/**
 * IPv4 blocks that are not public: the IANA IPv4 Special-Purpose Address Registry (every entry,
 * whatever its "globally reachable" column: none of them hosts a webhook receiver), multicast and
 * the reserved class E block.
 */
export const IPV4_SPECIAL: readonly SpecialRange[] = [
  { cidr: '0.0.0.0/8', name: 'this network', rfc: 'RFC 791' },
  { cidr: '10.0.0.0/8', name: 'private', rfc: 'RFC 1918' },
  { cidr: '100.64.0.0/10', name: 'shared address space (CGNAT)', rfc: 'RFC 6598' },
  { cidr: '127.0.0.0/8', name: 'loopback', rfc: 'RFC 1122' },
  { cidr: '169.254.0.0/16', name: 'link-local', rfc: 'RFC 3927' },
  { cidr: '172.16.0.0/12', name: 'private', rfc: 'RFC 1918' },
  { cidr: '192.0.0.0/24', name: 'IETF protocol assignments', rfc: 'RFC 6890' },
  { cidr: '192.0.0.0/29', name: 'IPv4 service continuity prefix (DS-Lite)', rfc: 'RFC 7335' },
  { cidr: '192.0.0.8/32', name: 'IPv4 dummy address', rfc: 'RFC 7600' },
  { cidr: '192.0.0.9/32', name: 'PCP anycast', rfc: 'RFC 7723' },
  { cidr: '192.0.0.10/32', name: 'TURN anycast', rfc: 'RFC 8155' },
  { cidr: '192.0.0.170/32', name: 'NAT64/DNS64 discovery', rfc: 'RFC 8880' },
  { cidr: '192.0.0.171/32', name: 'NAT64/DNS64 discovery', rfc: 'RFC 8880' },
  { cidr: '192.0.2.0/24', name: 'documentation (TEST-NET-1)', rfc: 'RFC 5737' },
  { cidr: '192.31.196.0/24', name: 'AS112-v4', rfc: 'RFC 7535' },
  { cidr: '192.52.193.0/24', name: 'AMT', rfc: 'RFC 7450' },
  { cidr: '192.88.99.0/24', name: 'deprecated 6to4 relay anycast', rfc: 'RFC 7526' },
  { cidr: '192.168.0.0/16', name: 'private', rfc: 'RFC 1918' },
  { cidr: '192.175.48.0/24', name: 'direct delegation AS112 service', rfc: 'RFC 7534' },
  { cidr: '198.18.0.0/15', name: 'benchmarking', rfc: 'RFC 2544' },
  { cidr: '198.51.100.0/24', name: 'documentation (TEST-NET-2)', rfc: 'RFC 5737' },
  { cidr: '203.0.113.0/24', name: 'documentation (TEST-NET-3)', rfc: 'RFC 5737' },
  { cidr: '224.0.0.0/4', name: 'multicast', rfc: 'RFC 5771' },
  { cidr: '240.0.0.0/4', name: 'reserved', rfc: 'RFC 1112' },
  { cidr: '255.255.255.255/32', name: 'limited broadcast', rfc: 'RFC 919' },
];

/**
 * IPv6 blocks that are not public: the IANA IPv6 Special-Purpose Address Registry (every entry),
 * the IPv4-compatible and IPv4-translated forms, unique-local, link-local, the deprecated
 * site-local and ORCHID blocks and multicast. Anything outside 2000::/3 is refused besides.
 * ::ffff:0:0/96 and 64:ff9b::/96 are listed for completeness but judged by the IPv4 they carry.
 */
export const IPV6_SPECIAL: readonly SpecialRange[] = [
  { cidr: '::/128', name: 'unspecified', rfc: 'RFC 4291' },
  { cidr: '::1/128', name: 'loopback', rfc: 'RFC 4291' },
  { cidr: '::/96', name: 'IPv4-compatible (deprecated)', rfc: 'RFC 4291' },
  { cidr: '::ffff:0:0/96', name: 'IPv4-mapped', rfc: 'RFC 4291' },
  { cidr: '::ffff:0:0:0/96', name: 'IPv4-translated', rfc: 'RFC 2765' },
  { cidr: '64:ff9b::/96', name: 'NAT64 well-known prefix', rfc: 'RFC 6052' },
  { cidr: '64:ff9b:1::/48', name: 'NAT64 local-use prefix', rfc: 'RFC 8215' },
  { cidr: '100::/64', name: 'discard-only', rfc: 'RFC 6666' },
  { cidr: '2001::/23', name: 'IETF protocol assignments', rfc: 'RFC 2928' },
  { cidr: '2001::/32', name: 'Teredo', rfc: 'RFC 4380' },
  { cidr: '2001:1::1/128', name: 'PCP anycast', rfc: 'RFC 7723' },
  { cidr: '2001:1::2/128', name: 'TURN anycast', rfc: 'RFC 8155' },
  { cidr: '2001:1::3/128', name: 'DNS-SD SRP anycast', rfc: 'RFC 9665' },
  { cidr: '2001:2::/48', name: 'benchmarking', rfc: 'RFC 5180' },
  { cidr: '2001:3::/32', name: 'AMT', rfc: 'RFC 7450' },
  { cidr: '2001:4:112::/48', name: 'AS112-v6', rfc: 'RFC 7535' },
  { cidr: '2001:10::/28', name: 'ORCHID (deprecated)', rfc: 'RFC 4843' },
  { cidr: '2001:20::/28', name: 'ORCHIDv2', rfc: 'RFC 7343' },
  { cidr: '2001:30::/28', name: 'drone remote ID tags (DET)', rfc: 'RFC 9374' },
  { cidr: '2001:db8::/32', name: 'documentation', rfc: 'RFC 3849' },
  { cidr: '2002::/16', name: '6to4', rfc: 'RFC 3056' },
  { cidr: '2620:4f:8000::/48', name: 'direct delegation AS112 service', rfc: 'RFC 7534' },
  { cidr: '3fff::/20', name: 'documentation', rfc: 'RFC 9637' },
  { cidr: '5f00::/16', name: 'SRv6 SIDs', rfc: 'RFC 9602' },
  { cidr: 'fc00::/7', name: 'unique-local', rfc: 'RFC 4193' },
  { cidr: 'fe80::/10', name: 'link-local', rfc: 'RFC 4291' },
  { cidr: 'fec0::/10', name: 'site-local (deprecated)', rfc: 'RFC 3879' },
  { cidr: 'ff00::/8', name: 'multicast', rfc: 'RFC 4291' },
];

/** The IPv6 global unicast space; an IPv6 address outside it is not public. */
export const IPV6_GLOBAL_UNICAST: SpecialRange = {
  cidr: '2000::/3',
  name: 'outside global unicast 2000::/3',
  rfc: 'RFC 4291',
};

type Ip = ipaddr.IPv4 | ipaddr.IPv6;

interface Block {
  range: SpecialRange;
  first: bigint;
  last: bigint;
  bits: number;
}

function toBig(addr: Ip): bigint {
  let n = 0n;
  for (const b of addr.toByteArray()) n = (n << 8n) | BigInt(b);
  return n;
}

function block(range: SpecialRange): Block {
  const [net, bits] = ipaddr.parseCIDR(range.cidr);
  const width = net.kind() === 'ipv4' ? 32 : 128;
  const size = 1n << BigInt(width - bits);
  const first = toBig(net) & ~(size - 1n);
  return { range, first, last: first + size - 1n, bits };
}

/** Most specific first, so a nested entry (192.0.0.9/32 in 192.0.0.0/24) names the address. */
const byPrefix = (a: Block, b: Block) => b.bits - a.bits;
const V4_BLOCKS = IPV4_SPECIAL.map(block).sort(byPrefix);
const V6_BLOCKS = IPV6_SPECIAL.map(block).sort(byPrefix);
const GLOBAL_UNICAST = block(IPV6_GLOBAL_UNICAST);
const MAPPED = block({ cidr: '::ffff:0:0/96', name: '', rfc: '' });
const NAT64_WKP = block({ cidr: '64:ff9b::/96', name: '', rfc: '' });

function find(blocks: readonly Block[], n: bigint): Block | undefined {
  return blocks.find((b) => n >= b.first && n <= b.last);
}

function v4(n: bigint): ipaddr.IPv4 {
  const x = Number(n & 0xffff_ffffn);
  return new ipaddr.IPv4([(x >>> 24) & 255, (x >>> 16) & 255, (x >>> 8) & 255, x & 255]);
}

/** IPv4 addresses carried by an IPv6 address of an embedding range (by the range's CIDR). */
function embeddedIPv4(range: SpecialRange, n: bigint): ipaddr.IPv4[] {
  switch (range.cidr) {
    case '::/96':
    case '::ffff:0:0:0/96':
      return [v4(n)];
    case '2002::/16':
      return [v4(n >> 80n)];
    case '2001::/32':
      // Teredo: server IPv4 in bits 32-63, client IPv4 obfuscated (inverted) in bits 96-127.
      return [v4(n >> 64n), v4(~n)];
    default:
      return [];
  }
}

/** The verdict on one address. */
export type IpClass =
  | { public: true; address: string }
  | {
      public: false;
      /** The address as judged (an IPv4-mapped address is judged as its IPv4). */
      address: string;
      /** The block that refuses it. */
      range: SpecialRange;
      /** For an IPv6 address carrying a non-public IPv4: that IPv4 and its block. */
      embedded?: { address: string; range: SpecialRange };
    };

function classifyV4(addr: ipaddr.IPv4): IpClass {
  const hit = find(V4_BLOCKS, toBig(addr));
  return hit
    ? { public: false, address: addr.toString(), range: hit.range }
    : { public: true, address: addr.toString() };
}

function classifyParsed(addr: Ip): IpClass {
  if (addr.kind() === 'ipv4') return classifyV4(addr as ipaddr.IPv4);
  const n = toBig(addr);
  const text = addr.toString();
  if (n >= MAPPED.first && n <= MAPPED.last) return classifyV4(v4(n));
  if (n >= NAT64_WKP.first && n <= NAT64_WKP.last) {
    const inner = classifyV4(v4(n));
    if (inner.public) return { public: true, address: text };
    return { public: false, address: text, range: inner.range, embedded: inner };
  }
  const hit = find(V6_BLOCKS, n);
  if (hit) {
    for (const e of embeddedIPv4(hit.range, n)) {
      const inner = classifyV4(e);
      if (!inner.public) {
        return { public: false, address: text, range: hit.range, embedded: inner };
      }
    }
    return { public: false, address: text, range: hit.range };
  }
  if (n < GLOBAL_UNICAST.first || n > GLOBAL_UNICAST.last) {
    return { public: false, address: text, range: IPV6_GLOBAL_UNICAST };
  }
  return { public: true, address: text };
}

/**
 * Classify a textual IP address (IPv4 dotted quad or IPv6, an IPv6 zone id ignored).
 * @throws TypeError when `ip` is not a valid IP address.
 */
export function classifyIp(ip: string): IpClass {
  if (net.isIP(ip) === 0) throw new TypeError(`not an IP address: ${ip}`);
  return classifyParsed(ipaddr.parse(ip));
}

/** Parsed allow-list entries. @throws Error naming a malformed CIDR. */
export function parseCidrs(cidrs: readonly string[]): Array<[Ip, number]> {
  return cidrs.map((c) => {
    try {
      return ipaddr.parseCIDR(c);
    } catch {
      throw new Error(`invalid CIDR in WEBHOOK_ALLOW_CIDRS: ${c}`);
    }
  });
}

const cidrCache = new WeakMap<readonly string[], Array<[Ip, number]>>();

/** parseCidrs, memoised per allow-list array (the config's list is parsed once). */
function parsedCidrs(cidrs: readonly string[]): Array<[Ip, number]> {
  let parsed = cidrCache.get(cidrs);
  if (!parsed) {
    parsed = parseCidrs(cidrs);
    cidrCache.set(cidrs, parsed);
  }
  return parsed;
}

/** True when `ip` is in one of `allow` (same family only). */
function allowed(ip: Ip, allow: Array<[Ip, number]>): boolean {
  return allow.some(([net, bits]) => net.kind() === ip.kind() && ip.match(net, bits));
}

/**
 * True when `ip` (textual) is inside one of `allow`; an IPv4-mapped IPv6 address is judged as
 * its IPv4 address. The rule for plain http (module doc).
 */
export function insideAllowList(ip: string, allow: Array<[Ip, number]>): boolean {
  if (net.isIP(ip) === 0) return false;
  let addr: Ip = ipaddr.parse(ip);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    addr = (addr as ipaddr.IPv6).toIPv4Address();
  }
  return allowed(addr, allow);
}

/**
 * Why a resolution's answers may not receive plain-http webhooks (the first answer outside the
 * allow-list, and how many were when not all), or null when every answer is inside it.
 */
export function answersOutsideAllowList(
  answers: readonly ResolvedAddress[],
  allow: Array<[Ip, number]>,
): string | null {
  const outside = answers.filter((a) => !insideAllowList(a.address, allow));
  const first = outside[0];
  if (first === undefined) return null;
  const count =
    outside.length === answers.length ? '' : ` (${outside.length} of ${answers.length} answers)`;
  return `address ${first.address} is outside WEBHOOK_ALLOW_CIDRS${count}: http:// is only for allow-listed addresses, use https`;
}

/** One line for a refused address. */
function describeRefusal(c: Exclude<IpClass, { public: true }>): string {
  const base = `address ${c.address} is in a non-public range (${c.range.name})`;
  if (!c.embedded) return base;
  return c.range === c.embedded.range
    ? `${base.slice(0, -1)}, embedded IPv4 ${c.embedded.address})`
    : `${base.slice(0, -1)}, embedded IPv4 ${c.embedded.address} is ${c.embedded.range.name})`;
}

/**
 * Why an IP address may not receive webhooks, or null when it may (public, or allow-listed).
 * An IPv4-mapped IPv6 address is judged, and allow-listed, as its IPv4 address.
 * @param ip textual IPv4 or IPv6 (brackets removed).
 */
export function ipRefusal(ip: string, allow: Array<[Ip, number]>): string | null {
  if (net.isIP(ip) === 0) return 'host is not a valid IP address';
  let addr: Ip = ipaddr.parse(ip);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    addr = (addr as ipaddr.IPv6).toIPv4Address();
  }
  if (allowed(addr, allow)) return null;
  const c = classifyParsed(addr);
  return c.public ? null : describeRefusal(c);
}

/**
 * Why a resolution's answers may not receive webhooks (the first refused answer, and how many of
 * the answers were refused when not all), or null when every answer may.
 */
export function answersRefusal(
  answers: readonly ResolvedAddress[],
  allow: Array<[Ip, number]>,
): string | null {
  const refusals = answers
    .map((a) => ipRefusal(a.address, allow))
    .filter((r): r is string => r !== null);
  const first = refusals[0];
  if (first === undefined) return null;
  return refusals.length === answers.length
    ? first
    : `${first} (${refusals.length} of ${answers.length} answers refused)`;
}

export interface UrlPolicy {
  /** CIDRs admitted although not public (tests, development). */
  allowCidrs: readonly string[];
  /** Resolves host names (default: the system resolver). */
  resolver?: Resolver | undefined;
  /** Bound of one resolution, ms (default DEFAULT_RESOLVE_TIMEOUT_MS). */
  resolveTimeoutMs?: number | undefined;
}

export type UrlCheck =
  | {
      ok: true;
      url: URL;
      /** The host without brackets or a trailing dot. */
      host: string;
      /** The host is an IP literal (already checked); otherwise a name to resolve. */
      literal: boolean;
      /**
       * The scheme is plain http: every address connected to must be inside the allow-list
       * (a literal already is; a name's answers are checked at creation and at connect time).
       */
      plainHttp: boolean;
    }
  | { ok: false; reason: string };

/**
 * The checks that need no DNS: length, scheme, credentials, host form, and the address of an IP
 * literal. A name passes here; its addresses are checked by {@link checkWebhookUrl} (creation) or
 * by the connect-time lookup (delivery).
 */
export function checkUrlForm(raw: string, policy: Pick<UrlPolicy, 'allowCidrs'>): UrlCheck {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) {
    return { ok: false, reason: `longer than ${MAX_WEBHOOK_URL_LENGTH} characters` };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'not a valid absolute URL' };
  }
  const plainHttp = url.protocol === 'http:';
  if (url.protocol !== 'https:' && !plainHttp) return { ok: false, reason: 'scheme must be https' };
  if (plainHttp && policy.allowCidrs.length === 0) {
    return {
      ok: false,
      reason:
        'scheme must be https (http:// only to an address inside WEBHOOK_ALLOW_CIDRS, empty here)',
    };
  }
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'credentials in the URL are not allowed' };
  }
  // One trailing dot names the same host (`localhost.` is localhost).
  const bare = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const host = bare.endsWith('.') ? bare.slice(0, -1) : bare;
  if (host === '') return { ok: false, reason: 'host is missing' };
  if (net.isIP(host) !== 0) {
    const allow = parsedCidrs(policy.allowCidrs);
    if (plainHttp && !insideAllowList(host, allow)) {
      return {
        ok: false,
        reason: `address ${host} is outside WEBHOOK_ALLOW_CIDRS: http:// is only for allow-listed addresses, use https`,
      };
    }
    const refusal = ipRefusal(host, allow);
    return refusal
      ? { ok: false, reason: refusal }
      : { ok: true, url, host, literal: true, plainHttp };
  }
  if (/^localhost$/i.test(host) || /\.localhost$/i.test(host)) {
    return { ok: false, reason: 'localhost is not a public host' };
  }
  if (!host.includes('.')) {
    return { ok: false, reason: 'host must be a fully qualified domain name' };
  }
  return { ok: true, url, host, literal: false, plainHttp };
}

/**
 * Check a webhook URL against the policy, resolving a host name (creation time).
 * @returns `{ ok: true, … }` or `{ ok: false, reason }` with a reason fit for a 400 `details`:
 *   "host does not resolve" (also on a DNS timeout), or "host resolves to a non-public address: …"
 *   when any answer is not public (and not allow-listed); for plain http, "host resolves to an
 *   address … outside WEBHOOK_ALLOW_CIDRS …" when any answer is outside the allow-list.
 */
export async function checkWebhookUrl(raw: string, policy: UrlPolicy): Promise<UrlCheck> {
  const form = checkUrlForm(raw, policy);
  if (!form.ok || form.literal) return form;
  let answers: ResolvedAddress[];
  try {
    answers = await resolveBounded(
      policy.resolver ?? systemResolver,
      form.host,
      policy.resolveTimeoutMs ?? DEFAULT_RESOLVE_TIMEOUT_MS,
    );
  } catch (err) {
    const timedOut = err instanceof ResolveError && err.code === 'ETIMEOUT';
    return {
      ok: false,
      reason: timedOut ? 'host does not resolve (DNS lookup timed out)' : 'host does not resolve',
    };
  }
  const allow = parsedCidrs(policy.allowCidrs);
  if (form.plainHttp) {
    const outside = answersOutsideAllowList(answers, allow);
    if (outside) return { ok: false, reason: `host resolves to an ${outside}` };
    return form;
  }
  const refusal = answersRefusal(answers, allow);
  if (refusal) return { ok: false, reason: `host resolves to a non-public address: ${refusal}` };
  return form;
}
