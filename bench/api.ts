/**
 * API benchmark (issue 4): `tronwatch api` (its own process) with 1,000,000 stored events, next to
 * a bare route of the same framework (Fastify, own process) in the same run:
 * - throughput: autocannon, 32 connections, as fast as the server answers (closed loop), for
 *   GET /v1/events?limit=50 and POST + DELETE /v1/watches pairs;
 * - latency at 1,000 requests/s: an open-loop generator (bench/open-loop.ts: requests started on
 *   a fixed schedule, latency counted from when each was due), because autocannon's
 *   `overallRate` sends each second's requests in one burst and reports a saturated server's
 *   percentiles.
 * Goals on 2 cores: GET /v1/events ≥ 3,000 requests/s; p99 under 25 ms at 1,000 requests/s.
 * Needs PostgreSQL (DATABASE_URL): a fresh database is seeded. With REDIS_URL set, the events
 * throughput is also measured with the rate limits in Redis (what several replicas share).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { accountsCreate, keysCreate } from '../src/accounts/cli.js';
import { ensureOwnerUser } from '../src/accounts/users.js';
import { openSession } from '../src/console/sessions.js';
import { migrate } from '../src/db/migrate.js';
import { hexToBase58 } from '../src/tron/address.js';
import { emptyDb } from '../test/helpers/db.js';
import { type OpenLoopResult, openLoop } from './open-loop.js';

const md5hex = (s: string) => createHash('md5').update(s).digest('hex');

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function start(
  args: string[],
  env: Record<string, string>,
  readyLine: RegExp | null,
): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = readline.createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const err = readline.createInterface({ input: child.stderr as NodeJS.ReadableStream });
  return new Promise((resolve, reject) => {
    const onLine = (line: string) => {
      if (readyLine && !readyLine.test(line)) return;
      // From now on the output (a log line per request) is read and dropped, not split in lines.
      out.close();
      err.close();
      child.stdout?.resume();
      child.stderr?.resume();
      resolve({ child, line });
    };
    out.on('line', onLine);
    err.on('line', onLine);
    child.once('exit', (code) => reject(new Error(`child exited with ${code}`)));
  });
}

const stop = (c: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (c.exitCode !== null) return resolve();
    c.once('exit', () => resolve());
    c.kill('SIGTERM');
  });

function run(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

const fmt = (r: autocannon.Result) =>
  `${Math.round(r.requests.average)} req/s, latency p50 ${r.latency.p50} ms p99 ${r.latency.p99} ms, non-2xx ${r.non2xx}, errors ${r.errors}`;

const fmtOpen = (r: OpenLoopResult) =>
  `${Math.round(r.achievedRate)} req/s, latency p50 ${r.p50} ms p90 ${r.p90} ms p99 ${r.p99} ms max ${r.max} ms, non-2xx ${r.non2xx}, errors ${r.errors}`;

export async function benchApi(
  opts: { events?: number; seconds?: number } = {},
): Promise<string[]> {
  const n = opts.events ?? 1_000_000;
  const seconds = opts.seconds ?? 8;
  if (!process.env.DATABASE_URL)
    return [
      'api: skipped (needs DATABASE_URL: 1,000,000 events on PGlite is not a meaningful server benchmark)',
    ];
  const t = await emptyDb('postgres');
  const lines: string[] = [];
  const children: ChildProcess[] = [];
  try {
    await migrate(t.db);
    const acc = await accountsCreate(t.db, {
      email: 'bench@example.com',
      plan: 'business',
      rateLimit: 100_000_000,
      watchQuota: 10_000_000,
    });
    const key = (await keysCreate(t.db, { account: acc.id })).key;
    await t.db.query(
      "INSERT INTO chain_head (network, solidified_block_number, head_block_number) VALUES ('mainnet', 79000000, 79000018)",
    );
    await t.db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction, channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block)
       VALUES ('wh_bench', $1, 'mainnet', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', '41a614f803b6fd780986a42c78ec9c7f77e6ded13c', 'ALL', 'both', 'webhook', 'https://93.184.216.34/hook', 'k', '\\x00'::bytea, 1)`,
      [acc.id],
    );
    const seedStart = performance.now();
    // Ids shaped like production's: event ids are hashes (src/common/ids.ts eventId), so random;
    // notification ids start with their creation time. (Sequential ids share long prefixes and
    // make every index comparison of the page's join slower than it is in production.)
    for (let from = 1; from <= n; from += 250_000) {
      const to = Math.min(n, from + 249_999);
      await t.db.query(
        `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index, block_number, block_timestamp,
                             from_address, to_address, amount_raw, contract, created_at)
         SELECT 'evt_' || substr(md5('e' || g), 1, 26), $1, 'wh_bench', 'mainnet', 'incoming', 'USDT', md5(g::text) || md5('t' || g::text), 0,
                79000000 + g / 100, now() - interval '1 day', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
                1000000 + g, 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', timestamptz '2026-01-01' + g * interval '1 microsecond'
           FROM generate_series($2::int, $3::int) g`,
        [acc.id, from, to],
      );
      await t.db.query(
        `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts, next_attempt_at, created_at, delivered_at)
         SELECT 'ntf_' || lpad(to_hex(g / 1000), 10, '0') || substr(md5('n' || g), 1, 16), 'evt_' || substr(md5('e' || g), 1, 26), $1, 'wh_bench', 'webhook', 'DELIVERED', 1,
                now(), timestamptz '2026-01-01' + g * interval '1 microsecond', now()
           FROM generate_series($2::int, $3::int) g`,
        [acc.id, from, to],
      );
    }
    // Leave the database in a steady state: the seeding's 1,000,000-row inserts would otherwise
    // start autovacuum and a checkpoint in the middle of the measurements.
    await t.db.query('VACUUM (ANALYZE)');
    await t.db.query('CHECKPOINT');
    lines.push(
      `database: postgres; ${n.toLocaleString('en-US')} events seeded in ${((performance.now() - seedStart) / 1000).toFixed(0)} s; servers in their own processes; autocannon ${seconds} s per run, 32 connections`,
    );

    const startApi = async (redisUrl: string) => {
      const api = await start(
        ['src/main.ts', 'api'],
        {
          DATABASE_URL: t.url ?? '',
          HOST: '127.0.0.1',
          PORT: '0',
          METRICS_PORT: '0',
          LOG_LEVEL: 'info',
          REDIS_URL: redisUrl,
        },
        /api listening/,
      );
      children.push(api.child);
      return { child: api.child, url: (JSON.parse(api.line) as { url: string }).url };
    };
    const api = await startApi('');
    const apiUrl = api.url;
    const bare = await start(['bench/bare-server.ts'], {}, /"url"/);
    children.push(bare.child);
    const bareUrl = (JSON.parse(bare.line) as { url: string }).url;
    const auth = { authorization: `Bearer ${key}` };
    const page = '/v1/events?limit=50';

    await run({ url: `${apiUrl}${page}`, headers: auth, connections: 32, duration: 2 }); // warm-up
    await run({ url: `${bareUrl}/bare`, connections: 32, duration: 2 });
    const bareRes = await run({ url: `${bareUrl}/bare`, connections: 32, duration: seconds });
    const events = await run({
      url: `${apiUrl}${page}`,
      headers: auth,
      connections: 32,
      duration: seconds,
    });
    const paced = await openLoop({
      origin: apiUrl,
      path: page,
      headers: auth,
      rate: 1000,
      seconds,
    });
    const pacedBare = await openLoop({ origin: bareUrl, path: '/bare', rate: 1000, seconds });
    lines.push(`bare Fastify route:            ${fmt(bareRes)}`);
    lines.push(
      `GET /v1/events?limit=50:       ${fmt(events)}  → ratio ${(events.requests.average / bareRes.requests.average).toFixed(2)} of bare (goal ≥ 3,000 req/s)`,
    );
    lines.push(`GET /v1/events at 1,000 req/s: ${fmtOpen(paced)}  (goal p99 < 25 ms; open loop)`);
    lines.push(`bare route at 1,000 req/s:     ${fmtOpen(pacedBare)}`);
    const redisUrl = process.env.REDIS_URL;
    if (redisUrl) {
      const redisApi = await startApi(redisUrl);
      const u = `${redisApi.url}${page}`;
      await run({ url: u, headers: auth, connections: 32, duration: 2 });
      const withRedis = await run({ url: u, headers: auth, connections: 32, duration: seconds });
      lines.push(`… with the limits in Redis:    ${fmt(withRedis)}`);
      await stop(redisApi.child);
    }

    // The console's pages, server side, on the same 1,000,000 events: its events page (the same
    // page writer, behind a session cookie) and an event's page with six attempts.
    const owner = await ensureOwnerUser(t.db, acc.id);
    const session = await openSession(t.db, { userId: owner.id, ttlSeconds: 3_600 });
    const cookie = { cookie: `tw_session=${session.token}` };
    const { rows: one } = await t.db.query<{ id: string }>(
      "SELECT id FROM notifications WHERE event_id = 'evt_' || substr(md5('e' || 500000), 1, 26)",
    );
    await t.db.query(
      `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, error,
                             error_class, request_headers, response_headers, response_body)
       SELECT $1, g, now(), 40, CASE WHEN g = 6 THEN 200 ELSE 503 END,
              CASE WHEN g = 6 THEN NULL ELSE 'HTTP 503: not a 2xx answer' END,
              CASE WHEN g = 6 THEN NULL ELSE 'http' END,
              '{"content-type":"application/json","x-signature":"00"}'::jsonb,
              '{"content-type":"text/plain"}'::jsonb, repeat('x', 4096)
         FROM generate_series(1, 6) g`,
      [one[0]?.id],
    );
    const consolePage = '/console/api/events?limit=50';
    const eventPage = `/console/api/events/evt_${md5hex('e500000').slice(0, 26)}`;
    await run({ url: `${apiUrl}${consolePage}`, headers: cookie, connections: 32, duration: 2 });
    const consoleEvents = await run({
      url: `${apiUrl}${consolePage}`,
      headers: cookie,
      connections: 32,
      duration: seconds,
    });
    const consoleEvent = await run({
      url: `${apiUrl}${eventPage}`,
      headers: cookie,
      connections: 32,
      duration: seconds,
    });
    const ratio = (r: autocannon.Result) =>
      (events.requests.average / r.requests.average).toFixed(2);
    lines.push(
      `console events page (50):      ${fmt(consoleEvents)}  → GET /v1/events is ${ratio(consoleEvents)}× faster (goal ≤ 1.5)`,
    );
    lines.push(
      `console event page (6 attempts): ${fmt(consoleEvent)}  → GET /v1/events is ${ratio(consoleEvent)}× faster (goal ≤ 1.5)`,
    );

    const watchPairs = await run({
      url: apiUrl,
      connections: 16,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          path: '/v1/watches',
          headers: { ...auth, 'content-type': 'application/json' },
          setupRequest: (req) => ({
            ...req,
            body: JSON.stringify({
              address: hexToBase58(`41${randomBytes(20).toString('hex')}`),
              asset_filter: 'USDT',
              webhook_url: 'https://93.184.216.34/hook',
            }),
          }),
          onResponse: (status, body, context) => {
            if (status === 201)
              (context as { id?: string }).id = (JSON.parse(body) as { id: string }).id;
          },
        },
        {
          method: 'DELETE',
          headers: auth,
          setupRequest: (req, context) => ({
            ...req,
            path: `/v1/watches/${String((context as { id?: string }).id)}`,
          }),
        },
      ],
    });
    lines.push(
      `POST + DELETE /v1/watches:     ${fmt(watchPairs)} (requests, half of each) → ratio ${(watchPairs.requests.average / bareRes.requests.average).toFixed(2)} of bare`,
    );
  } finally {
    await Promise.all(children.map(stop));
    await t.drop();
  }
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const l of await benchApi({
    events: Number(process.env.BENCH_EVENTS ?? 1_000_000),
    seconds: Number(process.env.BENCH_SECONDS ?? 8),
  }))
    console.log(l);
}
