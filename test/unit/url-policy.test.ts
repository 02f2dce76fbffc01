/**
 * The webhook URL policy (SPEC POST /v1/watches rule 3; DESIGN invariant 7), offline: a stub
 * resolver answers every name. A table of URLs refused and accepted, the boundaries of every
 * special-purpose block, IPv4 embedded in IPv6, numeric host spellings, the allow-list, and a
 * cross-check against ipaddr.js's own classification.
 */
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { ResolveError, resolveBounded, stubResolver } from '../../src/net/dns.js';
import {
  checkWebhookUrl,
  classifyIp,
  IPV4_SPECIAL,
  IPV6_GLOBAL_UNICAST,
  IPV6_SPECIAL,
  ipRefusal,
  MAX_WEBHOOK_URL_LENGTH,
  type SpecialRange,
} from '../../src/net/url-policy.js';

const PUBLIC4 = '93.184.215.14';
const PUBLIC6 = '2606:2800:21f:cb07:6820:80da:af6b:8b2c';

const resolver = stubResolver({
  'hooks.example.com': [PUBLIC4],
  'v6.example.com': [PUBLIC6],
  'dual.example.com': [PUBLIC4, PUBLIC6],
  'nat64.example.com': ['64:ff9b::5db8:d70e'],
  'private.example.com': ['10.0.0.7'],
  'loop.example.com': ['127.0.0.1'],
  'metadata.example.com': ['169.254.169.254'],
  'ula.example.com': ['fd00::1'],
  'mapped.example.com': ['::ffff:192.168.1.1'],
  'mixed.example.com': [PUBLIC4, '10.0.0.7'],
  'mixed6.example.com': [PUBLIC6, 'fe80::1'],
  // A CNAME chain whose final answer is private, and one whose final answer is public.
  'alias.example.com': { cname: 'step.example.net' },
  'step.example.net': { cname: 'internal.example.org' },
  'internal.example.org': ['192.168.10.20'],
  'alias-ok.example.com': { cname: 'hooks.example.com' },
  'loop-a.example.com': { cname: 'loop-b.example.com' },
  'loop-b.example.com': { cname: 'loop-a.example.com' },
  'nx.example.com': { error: 'ENOTFOUND' },
  'servfail.example.com': { error: 'ESERVFAIL' },
  'slow.example.com': { hang: true },
  'empty.example.com': [],
  'garbage.example.com': ['not-an-ip'],
});

const policy = { allowCidrs: [], resolver, resolveTimeoutMs: 100 };

type Expect = 'ok' | RegExp;

/** [url, expected]: 'ok', or a pattern the refusal reason must match. */
const CASES: Array<[string, Expect]> = [
  // Form: scheme, credentials, length, host.
  ['https://hooks.example.com/tron', 'ok'],
  ['HTTPS://hooks.example.com/tron', 'ok'],
  ['hTtPs://HOOKS.EXAMPLE.COM/tron', 'ok'],
  ['https://hooks.example.com:8443/tron?x=1#f', 'ok'],
  ['https://hooks.example.com./tron', 'ok'],
  ['http://hooks.example.com/tron', /scheme must be https/],
  ['HTTP://hooks.example.com/tron', /scheme must be https/],
  ['ftp://hooks.example.com/tron', /scheme must be https/],
  ['javascript:alert(1)', /scheme must be https/],
  ['file:///etc/passwd', /scheme must be https/],
  ['hooks.example.com/tron', /not a valid absolute URL/],
  ['https://', /not a valid absolute URL/],
  ['https://user:pass@hooks.example.com/tron', /credentials/],
  ['https://user@hooks.example.com/tron', /credentials/],
  ['https://:pass@hooks.example.com/tron', /credentials/],
  ['https://localhost/hook', /localhost/],
  ['https://LOCALHOST./hook', /localhost/],
  ['https://api.localhost/hook', /localhost/],
  ['https://intranet/hook', /fully qualified/],
  // Names: resolved, every answer checked.
  ['https://v6.example.com/hook', 'ok'],
  ['https://dual.example.com/hook', 'ok'],
  ['https://nat64.example.com/hook', 'ok'],
  ['https://alias-ok.example.com/hook', 'ok'],
  [
    'https://private.example.com/hook',
    /resolves to a non-public address: .*10\.0\.0\.7.*\(private\)/,
  ],
  ['https://loop.example.com/hook', /\(loopback\)/],
  ['https://metadata.example.com/hook', /169\.254\.169\.254 .*\(link-local\)/],
  ['https://ula.example.com/hook', /\(unique-local\)/],
  ['https://mapped.example.com/hook', /192\.168\.1\.1 .*\(private\)/],
  ['https://mixed.example.com/hook', /10\.0\.0\.7 .*\(private\) \(1 of 2 answers refused\)/],
  ['https://mixed6.example.com/hook', /fe80::1 .*\(link-local\) \(1 of 2 answers refused\)/],
  ['https://alias.example.com/hook', /192\.168\.10\.20 .*\(private\)/],
  ['https://loop-a.example.com/hook', /^host does not resolve$/],
  ['https://nx.example.com/hook', /^host does not resolve$/],
  ['https://unknown.example.com/hook', /^host does not resolve$/],
  ['https://servfail.example.com/hook', /^host does not resolve$/],
  ['https://slow.example.com/hook', /^host does not resolve \(DNS lookup timed out\)$/],
  ['https://empty.example.com/hook', /^host does not resolve$/],
  ['https://garbage.example.com/hook', /^host does not resolve$/],
  // IPv4 literals and their spellings (the URL parser normalises them to dotted quads).
  ['https://8.8.8.8/hook', 'ok'],
  ['https://1.1.1.1:444/hook', 'ok'],
  ['https://127.0.0.1/hook', /127\.0\.0\.1 is in a non-public range \(loopback\)/],
  ['https://127.255.255.255/hook', /\(loopback\)/],
  ['https://2130706433/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://0x7f000001/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://017700000001/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://0177.0.0.1/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://0x7f.1/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://127.1/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://127.0.1/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://0x0a.0.0.7/hook', /10\.0\.0\.7 .*\(private\)/],
  ['https://012.0.0.7/hook', /10\.0\.0\.7 .*\(private\)/],
  ['https://167772167/hook', /10\.0\.0\.7 .*\(private\)/],
  ['https://%31%32%37.0.0.1/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://１２７.０.０.１/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://127.0.0.1./hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://0/hook', /0\.0\.0\.0 .*\(this network\)/],
  ['https://0.0.0.0/hook', /\(this network\)/],
  ['https://134744072/hook', 'ok'], // 8.8.8.8 in decimal: public whatever the spelling
  ['https://0x08080808/hook', 'ok'],
  // IPv4 block boundaries (first and last inside, neighbours outside).
  ['https://9.255.255.255/hook', 'ok'],
  ['https://10.0.0.0/hook', /\(private\)/],
  ['https://10.255.255.255/hook', /\(private\)/],
  ['https://11.0.0.0/hook', 'ok'],
  ['https://100.63.255.255/hook', 'ok'],
  ['https://100.64.0.0/hook', /\(shared address space \(CGNAT\)\)/],
  ['https://100.127.255.255/hook', /CGNAT/],
  ['https://100.128.0.0/hook', 'ok'],
  ['https://169.253.255.255/hook', 'ok'],
  ['https://169.254.0.0/hook', /\(link-local\)/],
  ['https://169.255.0.0/hook', 'ok'],
  ['https://172.15.255.255/hook', 'ok'],
  ['https://172.16.0.0/hook', /\(private\)/],
  ['https://172.31.255.255/hook', /\(private\)/],
  ['https://172.32.0.0/hook', 'ok'],
  ['https://191.255.255.255/hook', 'ok'],
  ['https://192.0.0.9/hook', /\(PCP anycast\)/],
  ['https://192.0.0.255/hook', /\(IETF protocol assignments\)/],
  ['https://192.0.1.0/hook', 'ok'],
  ['https://192.0.2.1/hook', /TEST-NET-1/],
  ['https://192.88.99.1/hook', /6to4 relay anycast/],
  ['https://192.167.255.255/hook', 'ok'],
  ['https://192.168.0.0/hook', /\(private\)/],
  ['https://192.168.255.255/hook', /\(private\)/],
  ['https://192.169.0.0/hook', 'ok'],
  ['https://198.17.255.255/hook', 'ok'],
  ['https://198.18.0.0/hook', /\(benchmarking\)/],
  ['https://198.19.255.255/hook', /\(benchmarking\)/],
  ['https://198.20.0.0/hook', 'ok'],
  ['https://198.51.100.7/hook', /TEST-NET-2/],
  ['https://203.0.113.7/hook', /TEST-NET-3/],
  ['https://223.255.255.255/hook', 'ok'],
  ['https://224.0.0.0/hook', /\(multicast\)/],
  ['https://239.255.255.255/hook', /\(multicast\)/],
  ['https://240.0.0.0/hook', /\(reserved\)/],
  ['https://255.255.255.254/hook', /\(reserved\)/],
  ['https://255.255.255.255/hook', /\(limited broadcast\)/],
  // IPv6 literals.
  [`https://[${PUBLIC6}]/hook`, 'ok'],
  ['https://[2001:4860:4860::8888]/hook', 'ok'],
  ['https://[::1]/hook', /::1 is in a non-public range \(loopback\)/],
  ['https://[0:0:0:0:0:0:0:1]/hook', /\(loopback\)/],
  ['https://[::]/hook', /\(unspecified\)/],
  ['https://[fe80::1]/hook', /\(link-local\)/],
  ['https://[febf:ffff::1]/hook', /\(link-local\)/],
  ['https://[fec0::1]/hook', /\(site-local \(deprecated\)\)/],
  ['https://[fc00::1]/hook', /\(unique-local\)/],
  ['https://[fdff:ffff::1]/hook', /\(unique-local\)/],
  ['https://[ff02::1]/hook', /\(multicast\)/],
  ['https://[100::1]/hook', /\(discard-only\)/],
  ['https://[2001:db8::1]/hook', /\(documentation\)/],
  ['https://[3fff::1]/hook', /\(documentation\)/],
  ['https://[2001:20::1]/hook', /\(ORCHIDv2\)/],
  ['https://[2001:10::1]/hook', /\(ORCHID \(deprecated\)\)/],
  ['https://[2001:2::1]/hook', /\(benchmarking\)/],
  ['https://[5f00::1]/hook', /\(SRv6 SIDs\)/],
  ['https://[4000::1]/hook', /outside global unicast 2000::\/3/],
  ['https://[1fff:ffff::1]/hook', /outside global unicast/],
  // IPv4 embedded in IPv6: unwrapped.
  ['https://[::ffff:127.0.0.1]/hook', /127\.0\.0\.1 is in a non-public range \(loopback\)/],
  ['https://[::ffff:7f00:1]/hook', /127\.0\.0\.1 .*\(loopback\)/],
  ['https://[::ffff:a00:7]/hook', /10\.0\.0\.7 .*\(private\)/],
  ['https://[::ffff:8.8.8.8]/hook', 'ok'],
  ['https://[::127.0.0.1]/hook', /IPv4-compatible.*embedded IPv4 127\.0\.0\.1 is loopback/],
  ['https://[::8.8.8.8]/hook', /\(IPv4-compatible \(deprecated\)\)/],
  ['https://[::ffff:0:10.0.0.7]/hook', /IPv4-translated.*10\.0\.0\.7 is private/],
  ['https://[64:ff9b::10.0.0.7]/hook', /\(private, embedded IPv4 10\.0\.0\.7\)/],
  ['https://[64:ff9b::7f00:1]/hook', /\(loopback, embedded IPv4 127\.0\.0\.1\)/],
  ['https://[64:ff9b::8.8.8.8]/hook', 'ok'],
  ['https://[64:ff9b:1::8.8.8.8]/hook', /\(NAT64 local-use prefix\)/],
  ['https://[2002:a00:7::1]/hook', /\(6to4, embedded IPv4 10\.0\.0\.7 is private\)/],
  ['https://[2002:7f00:1::]/hook', /6to4.*127\.0\.0\.1 is loopback/],
  ['https://[2002:808:808::1]/hook', /\(6to4\)/],
  // Teredo: server 10.0.0.7; client 192.168.1.1 obfuscated (~c0a8:0101 = 3f57:fefe).
  ['https://[2001:0:a00:7::1]/hook', /Teredo.*10\.0\.0\.7 is private/],
  ['https://[2001:0:808:808:0:0:3f57:fefe]/hook', /Teredo.*192\.168\.1\.1 is private/],
  // Length: the contract's 2048 characters, counted on the URL as given.
  [`https://hooks.example.com/${'a'.repeat(2048 - 26)}`, 'ok'],
  [`https://hooks.example.com/${'a'.repeat(2049 - 26)}`, /longer than 2048 characters/],
];

describe('webhook URL policy: the table', () => {
  it('has at least 60 cases, refused and accepted', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(60);
    expect(CASES.filter(([, e]) => e === 'ok').length).toBeGreaterThanOrEqual(20);
    expect(CASES.filter(([, e]) => e !== 'ok').length).toBeGreaterThanOrEqual(60);
    expect(`https://hooks.example.com/${'a'.repeat(2048 - 26)}`).toHaveLength(
      MAX_WEBHOOK_URL_LENGTH,
    );
  });

  it.each(CASES)('%s', async (url, expected) => {
    const check = await checkWebhookUrl(url, policy);
    if (expected === 'ok') {
      expect(check, url).toMatchObject({ ok: true });
    } else {
      expect(check.ok, url).toBe(false);
      expect(check.ok ? '' : check.reason, url).toMatch(expected);
    }
  });
});

describe('allow-list (WEBHOOK_ALLOW_CIDRS)', () => {
  const allow = { ...policy, allowCidrs: ['127.0.0.1/32', '10.0.0.0/8', 'fd00::/8'] };

  it('admits allow-listed literals and names, and nothing next to them', async () => {
    for (const url of [
      'https://127.0.0.1:8443/hook',
      'https://[::ffff:127.0.0.1]/hook', // judged as its IPv4
      'https://10.200.0.1/hook',
      'https://[fd00::1]/hook',
      'https://loop.example.com/hook',
      'https://private.example.com/hook',
      'https://mixed.example.com/hook', // public + allow-listed
      'https://ula.example.com/hook',
    ]) {
      expect(await checkWebhookUrl(url, allow), url).toMatchObject({ ok: true });
    }
    for (const url of [
      'https://127.0.0.2/hook',
      'https://192.168.1.1/hook',
      'https://[::1]/hook',
      'https://metadata.example.com/hook',
      'https://[64:ff9b::7f00:1]/hook', // via NAT64: not the allow-listed host itself
    ]) {
      expect(await checkWebhookUrl(url, allow), url).toMatchObject({ ok: false });
    }
  });

  it('bypasses only the address check: scheme, credentials, length, localhost still refused', async () => {
    for (const [url, reason] of [
      ['ftp://127.0.0.1/hook', /scheme/],
      ['https://u:p@127.0.0.1/hook', /credentials/],
      ['https://localhost/hook', /localhost/],
      [`https://127.0.0.1/${'a'.repeat(2048)}`, /longer/],
      ['https://nx.example.com/hook', /does not resolve/],
    ] as const) {
      const check = await checkWebhookUrl(url, allow);
      expect(check.ok ? '' : check.reason, url).toMatch(reason);
    }
  });

  it('plain http: only to addresses inside the allow-list (public ones refused), never localhost', async () => {
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'http://[::ffff:127.0.0.1]/hook', // judged as its IPv4
      'http://10.200.0.1/hook',
      'http://[fd00::1]/hook',
      'http://loop.example.com/hook',
      'http://private.example.com/hook',
      'http://ula.example.com/hook',
    ]) {
      expect(await checkWebhookUrl(url, allow), url).toMatchObject({ ok: true, plainHttp: true });
    }
    expect(await checkWebhookUrl('https://127.0.0.1/hook', allow)).toMatchObject({
      ok: true,
      plainHttp: false,
    });
    for (const [url, reason] of [
      ['http://8.8.8.8/hook', /^address 8\.8\.8\.8 is outside WEBHOOK_ALLOW_CIDRS: http:\/\//],
      ['http://127.0.0.2/hook', /^address 127\.0\.0\.2 is outside WEBHOOK_ALLOW_CIDRS/],
      ['http://[::1]/hook', /^address ::1 is outside WEBHOOK_ALLOW_CIDRS/],
      [
        'http://hooks.example.com/hook',
        /^host resolves to an address .* outside WEBHOOK_ALLOW_CIDRS/,
      ],
      ['http://mixed.example.com/hook', /outside WEBHOOK_ALLOW_CIDRS \(1 of 2 answers\)/],
      ['http://localhost/hook', /^localhost is not a public host$/],
      ['http://LOCALHOST./hook', /^localhost is not a public host$/],
      ['http://u:p@127.0.0.1/hook', /credentials/],
    ] as const) {
      const check = await checkWebhookUrl(url, allow);
      expect(check.ok ? '' : check.reason, url).toMatch(reason);
    }
    // No allow-list (the default): http is refused outright.
    const none = await checkWebhookUrl('http://127.0.0.1/hook', policy);
    expect(none.ok ? '' : none.reason).toMatch(/^scheme must be https \(http:\/\/ only/);
  });

  it('rejects a malformed CIDR', () => {
    expect(() => ipRefusal('1.2.3.4', [])).not.toThrow();
    return expect(
      checkWebhookUrl('https://8.8.8.8/', { allowCidrs: ['10.0.0.0/33'] }),
    ).rejects.toThrow(/invalid CIDR in WEBHOOK_ALLOW_CIDRS: 10\.0\.0\.0\/33/);
  });
});

// ---- Block boundaries --------------------------------------------------------------------------

function toBig(a: ipaddr.IPv4 | ipaddr.IPv6): bigint {
  let n = 0n;
  for (const b of a.toByteArray()) n = (n << 8n) | BigInt(b);
  return n;
}

function fromBig(n: bigint, v6: boolean): string {
  const len = v6 ? 16 : 4;
  const bytes: number[] = [];
  for (let i = len - 1; i >= 0; i--) bytes.push(Number((n >> BigInt(8 * i)) & 255n));
  return ipaddr.fromByteArray(bytes).toString();
}

function bounds(r: SpecialRange): { first: bigint; last: bigint; v6: boolean } {
  const [net, bits] = ipaddr.parseCIDR(r.cidr);
  const v6 = net.kind() === 'ipv6';
  const size = 1n << BigInt((v6 ? 128 : 32) - bits);
  const first = toBig(net) & ~(size - 1n);
  return { first, last: first + size - 1n, v6 };
}

function insideAny(table: readonly SpecialRange[], n: bigint): boolean {
  return table.some((r) => {
    const b = bounds(r);
    return n >= b.first && n <= b.last;
  });
}

describe('special-purpose tables: every block, first and last address, and the neighbours', () => {
  it('are well-formed: canonical network addresses, an RFC for each', () => {
    for (const r of [...IPV4_SPECIAL, ...IPV6_SPECIAL]) {
      const [net, bits] = ipaddr.parseCIDR(r.cidr);
      expect(fromBig(bounds(r).first, net.kind() === 'ipv6'), r.cidr).toBe(net.toString());
      expect(bits).toBeGreaterThan(0);
      expect(r.rfc).toMatch(/^RFC \d+$/);
      expect(r.name.length).toBeGreaterThan(0);
    }
  });

  const all = [...IPV4_SPECIAL, ...IPV6_SPECIAL];
  it.each(all.map((r) => [r.cidr, r] as const))('%s', (_cidr, r) => {
    const { first, last, v6 } = bounds(r);
    const table = v6 ? IPV6_SPECIAL : IPV4_SPECIAL;
    for (const n of [first, last, (first + last) / 2n]) {
      const ip = fromBig(n, v6);
      const c = classifyIp(ip);
      expect(c.public, `${ip} in ${r.cidr}`).toBe(false);
      expect(ipRefusal(ip, []), ip).toMatch(/is in a non-public range/);
      // Named by this block or by a more specific one nested in it (or, for the two unwrapped
      // IPv6 blocks, by the IPv4 block of the address it carries).
      if (!c.public && !['::ffff:0:0/96', '64:ff9b::/96'].includes(r.cidr)) {
        const named = bounds(c.range);
        expect(named.first >= first && named.last <= last, `${ip}: ${c.range.cidr}`).toBe(true);
      }
    }
    // The neighbours just outside: public unless another block (or, for IPv6, the space outside
    // 2000::/3) holds them.
    const max = v6 ? (1n << 128n) - 1n : (1n << 32n) - 1n;
    const g = bounds(IPV6_GLOBAL_UNICAST);
    for (const n of [first - 1n, last + 1n]) {
      if (n < 0n || n > max) continue;
      const ip = fromBig(n, v6);
      const outsideUnicast = v6 && (n < g.first || n > g.last);
      if (insideAny(table, n) || outsideUnicast) continue;
      expect(classifyIp(ip).public, `${ip} next to ${r.cidr}`).toBe(true);
    }
  });

  it('refuses the whole IPv6 space outside 2000::/3 and nothing of it is a gap', () => {
    for (const ip of [
      '::2',
      '1::',
      '1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
      '4000::',
      'e000::',
    ]) {
      expect(classifyIp(ip), ip).toMatchObject({ public: false });
    }
    expect(classifyIp('2000::').public).toBe(true);
    expect(classifyIp('3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff').public).toBe(true);
    expect(classifyIp('3fff::').public).toBe(false);
  });
});

describe('cross-check with ipaddr.js', () => {
  it('refuses every IPv4 address ipaddr.js does not call unicast', () => {
    fc.assert(
      fc.property(fc.ipV4(), (ip) => {
        const theirs = ipaddr.parse(ip).range();
        if (theirs !== 'unicast') expect(classifyIp(ip).public, `${ip} ${theirs}`).toBe(false);
      }),
      { numRuns: 5_000 },
    );
  });

  it('refuses every IPv6 address ipaddr.js does not call unicast (unwrapped forms aside)', () => {
    fc.assert(
      fc.property(fc.ipV6(), (ip) => {
        const a = ipaddr.parse(ip) as ipaddr.IPv6;
        const theirs = a.range();
        const nat64wkp = a.match(ipaddr.parseCIDR('64:ff9b::/96'));
        if (theirs === 'unicast' || theirs === 'ipv4Mapped' || nat64wkp) return;
        expect(classifyIp(ip).public, `${ip} ${theirs}`).toBe(false);
      }),
      { numRuns: 5_000 },
    );
  });

  it('judges mapped and NAT64 addresses exactly as the IPv4 they carry', () => {
    fc.assert(
      fc.property(fc.ipV4(), (ip) => {
        const expected = classifyIp(ip).public;
        const hex = ipaddr.IPv4.parse(ip).toIPv4MappedAddress().toString();
        expect(classifyIp(hex).public, hex).toBe(expected);
        expect(classifyIp(`64:ff9b::${ip}`).public, ip).toBe(expected);
        expect(classifyIp(`64:ff9b:1::${ip}`).public, ip).toBe(false);
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses what is not an IP address', () => {
    expect(() => classifyIp('0x7f.1')).toThrow(TypeError);
    expect(() => classifyIp('010.0.0.1')).toThrow(TypeError);
    expect(ipRefusal('example.com', [])).toBe('host is not a valid IP address');
    expect(classifyIp('fe80::1%eth0')).toMatchObject({ public: false });
  });
});

describe('resolveBounded and stubResolver', () => {
  it('answers, follows CNAMEs, and fails with ENOTFOUND / ETIMEOUT', async () => {
    expect(await resolveBounded(resolver, 'HOOKS.example.com.', 100)).toEqual([
      { address: PUBLIC4, family: 4 },
    ]);
    expect(await resolveBounded(resolver, 'alias.example.com', 100)).toEqual([
      { address: '192.168.10.20', family: 4 },
    ]);
    for (const [name, code] of [
      ['nx.example.com', 'ENOTFOUND'],
      ['servfail.example.com', 'ESERVFAIL'],
      ['loop-a.example.com', 'ELOOP'],
      ['empty.example.com', 'ENOTFOUND'],
      ['garbage.example.com', 'ENOTFOUND'],
      ['slow.example.com', 'ETIMEOUT'],
    ] as const) {
      const err = await resolveBounded(resolver, name, 50).catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(ResolveError);
      expect((err as ResolveError).code, name).toBe(code);
    }
  });

  it('a function entry answers per call (rebinding)', async () => {
    let n = 0;
    const r = stubResolver({ 'rebind.example.com': () => (n++ === 0 ? [PUBLIC4] : ['127.0.0.1']) });
    expect(
      await checkWebhookUrl('https://rebind.example.com/', { allowCidrs: [], resolver: r }),
    ).toMatchObject({ ok: true });
    const second = await checkWebhookUrl('https://rebind.example.com/', {
      allowCidrs: [],
      resolver: r,
    });
    expect(second.ok ? '' : second.reason).toMatch(/\(loopback\)/);
  });
});
