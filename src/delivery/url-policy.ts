/**
 * Where a webhook may point (SPEC POST /v1/watches rule 3; DESIGN invariant 7).
 *
 * Checked at creation and again at every delivery: https only (scheme case-insensitive), at most
 * 2048 characters, no credentials in the URL, and a host that is not a private or reserved IP
 * literal. The WHATWG URL parser normalises numeric host spellings first (decimal `2130706433`,
 * octal `0177.0.0.1`, hex `0x7f.1` all become `127.0.0.1`), and IPv4-mapped IPv6 is unwrapped.
 * "Not public" is everything ipaddr.js does not classify as `unicast` (loopback, private,
 * link-local, CGNAT, multicast, reserved, unspecified, unique-local, …).
 *
 * An explicit allow-list of CIDRs (WEBHOOK_ALLOW_CIDRS, empty by default) admits local receivers
 * for development and tests. DNS-level checks (names resolving to private addresses) slot in as
 * `resolve` in a later step; this module already answers asynchronously for that reason.
 */
import ipaddr from 'ipaddr.js';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

export interface UrlPolicy {
  /** CIDRs admitted although not public (tests, development). */
  allowCidrs: readonly string[];
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

/** Parsed allow-list entries. @throws Error naming a malformed CIDR. */
export function parseCidrs(cidrs: readonly string[]): Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> {
  return cidrs.map((c) => {
    try {
      return ipaddr.parseCIDR(c);
    } catch {
      throw new Error(`invalid CIDR in WEBHOOK_ALLOW_CIDRS: ${c}`);
    }
  });
}

const cidrCache = new WeakMap<readonly string[], Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>>();

/** parseCidrs, memoised per allow-list array (the config's list is parsed once). */
function parsedCidrs(cidrs: readonly string[]): Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> {
  let parsed = cidrCache.get(cidrs);
  if (!parsed) {
    parsed = parseCidrs(cidrs);
    cidrCache.set(cidrs, parsed);
  }
  return parsed;
}

/** Unwrap IPv4-mapped IPv6 (::ffff:a.b.c.d) to IPv4. */
function normalise(addr: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (addr as ipaddr.IPv6).toIPv4Address();
  }
  return addr;
}

/** True when `ip` is in one of `allow` (same family only). */
function allowed(
  ip: ipaddr.IPv4 | ipaddr.IPv6,
  allow: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>,
): boolean {
  return allow.some(([net, bits]) => net.kind() === ip.kind() && ip.match(net, bits));
}

/**
 * Why an IP address may not receive webhooks, or null when it may.
 * @param ip textual IPv4 or IPv6 (brackets removed).
 */
export function ipRefusal(
  ip: string,
  allow: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>,
): string | null {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = normalise(ipaddr.parse(ip));
  } catch {
    return 'host is not a valid IP address';
  }
  if (allowed(addr, allow)) return null;
  const range = addr.range();
  return range === 'unicast'
    ? null
    : `address ${addr.toString()} is in a non-public range (${range})`;
}

/**
 * Check a webhook URL against the policy.
 * @returns `{ ok: true, url }` or `{ ok: false, reason }` with a reason fit for a 400 `details`.
 */
export async function checkWebhookUrl(raw: string, policy: UrlPolicy): Promise<UrlCheck> {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) {
    return { ok: false, reason: `longer than ${MAX_WEBHOOK_URL_LENGTH} characters` };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'not a valid absolute URL' };
  }
  if (url.protocol !== 'https:') return { ok: false, reason: 'scheme must be https' };
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'credentials in the URL are not allowed' };
  }
  // One trailing dot names the same host (`localhost.` is localhost).
  const bare = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const host = bare.endsWith('.') ? bare.slice(0, -1) : bare;
  if (host === '') return { ok: false, reason: 'host is missing' };
  const allow = parsedCidrs(policy.allowCidrs);
  if (ipaddr.isValid(host)) {
    const refusal = ipRefusal(host, allow);
    return refusal ? { ok: false, reason: refusal } : { ok: true, url };
  }
  if (/^localhost$/i.test(host) || /\.localhost$/i.test(host)) {
    return { ok: false, reason: 'localhost is not a public host' };
  }
  if (!host.includes('.'))
    return { ok: false, reason: 'host must be a fully qualified domain name' };
  return { ok: true, url };
}
