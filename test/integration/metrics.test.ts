/**
 * GET /metrics (src/api/routes/metrics.ts, src/common/metrics.ts) on the metrics listener's app
 * (src/api/metrics-app.ts; the API app answers 404 for it) and request ids, on both database
 * engines: the exposition parses; request latency is labelled by route pattern; 429s,
 * outbox depth and age, ingest and delivery outcomes are counted from real runs (a replay node, a
 * real HTTPS receiver); a database that is down costs samples, not the scrape; X-Request-Id is
 * echoed and carried as `request_id` by the request's log line; nothing secret is exposed.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createAccount } from '../../src/accounts/accounts.js';
import { createApiKey } from '../../src/accounts/keys.js';
import { buildApp } from '../../src/api/app.js';
import { buildMetricsApp } from '../../src/api/metrics-app.js';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import { METRIC_PREFIX, Metrics } from '../../src/common/metrics.js';
import { newWebhookSecret, SecretBox } from '../../src/common/secrets.js';
import { loadConfig } from '../../src/config.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { startReceiver } from '../../src/devnet/receiver.js';
import { syntheticAddresses } from '../../src/devnet/synthetic.js';
import { saveChainHead } from '../../src/ingest/chain-head.js';
import { Ingester } from '../../src/ingest/loop.js';
import { MemoryRateLimiter } from '../../src/rate-limit/limiter.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { NodeClient } from '../../src/tron/node-client.js';
import { ADDR_B58, offlineResolver, webhookWatch } from '../helpers/api.js';
import { expectedEvents, serveSynthetic, testIngestConfig } from '../helpers/chain.js';
import { dbEngines, type Engine, migratedDb, type TestDb } from '../helpers/db.js';
import {
  insertAccount,
  insertEvents,
  insertWebhookWatch,
  statusCounts,
} from '../helpers/outbox.js';

const P = METRIC_PREFIX;

/** Resources opened by a test, closed after it in reverse order. */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-metrics-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

// ---------------------------------------------------------------------------------------------
// The Prometheus text exposition format 0.0.4, checked line by line.

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const HELP_RE = new RegExp(`^# HELP (${NAME}) \\S.*$`);
const TYPE_RE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
// Go's ParseFloat reads NaN and Inf in any case (prom-client writes `Nan`).
const VALUE = '-?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][+-]?\\d+)?|[+-][Ii]nf|[Nn]a[Nn]';
const SAMPLE_RE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*)?\\})? (${VALUE})$`);
const LABEL_RE = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Parse an exposition; throws on any line that is not HELP, TYPE or a sample. */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# HELP ')) {
      if (!HELP_RE.test(line)) throw new Error(`bad HELP line: ${line}`);
      continue;
    }
    const t = TYPE_RE.exec(line);
    if (t) {
      types.set(t[1] ?? '', t[2] ?? '');
      continue;
    }
    const s = SAMPLE_RE.exec(line);
    if (!s) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const m of (s[2] ?? '').matchAll(LABEL_RE)) labels[m[1] ?? ''] = m[2] ?? '';
    samples.push({ name: s[1] ?? '', labels, value: Number(s[3]) });
  }
  return { samples, types };
}

/** The samples named `name` whose labels include `labels`. */
function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
}

/** The single sample named `name` with `labels`, or undefined when there is none. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}) {
  const found = find(samples, name, labels);
  if (found.length > 1) throw new Error(`${found.length} samples of ${name}`);
  return found[0]?.value;
}

async function scrape(app: FastifyInstance): Promise<{ res: LightMyRequestResponse; s: Sample[] }> {
  const res = await app.inject({ url: '/metrics' });
  expect(res.statusCode).toBe(200);
  return { res, s: parseExposition(res.body).samples };
}

// ---------------------------------------------------------------------------------------------
// An app on a fresh database with its own Metrics and a logger whose lines the test reads.

interface Harness {
  t: TestDb;
  /** The API app. */
  app: FastifyInstance;
  /** The metrics listener's app on the same Metrics (the only one serving /metrics). */
  metricsApp: FastifyInstance;
  metrics: Metrics;
  /** Every log line written so far, parsed. */
  logs(): Record<string, unknown>[];
  logText(): string;
  caller(rateLimitPerMin?: number): Promise<{ key: string; headers: Record<string, string> }>;
}

async function harness(engine: Engine, opts: { db?: TestDb } = {}): Promise<Harness> {
  const t = await migratedDb(engine);
  cleanups.push(() => t.drop());
  await saveChainHead(t.db, 'mainnet', { solidified: 1_000, head: 1_018 });
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const metricsDb = opts.db?.db ?? t.db;
  const metrics = new Metrics({ db: metricsDb, logger });
  const app = await buildApp({
    config: loadConfig({}),
    db: t.db,
    logger,
    secrets: new SecretBox([randomBytes(32)]),
    rateLimiter: new MemoryRateLimiter(),
    resolver: offlineResolver,
    metrics,
  });
  cleanups.push(() => app.close());
  const metricsApp = await buildMetricsApp(metrics, logger);
  cleanups.push(() => metricsApp.close());
  return {
    t,
    app,
    metricsApp,
    metrics,
    logs: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
    logText: () => lines.join(''),
    async caller(rateLimitPerMin?: number) {
      const acc = await createAccount(t.db, {
        email: `m-${randomBytes(4).toString('hex')}@example.com`,
        plan: 'pro',
        rateLimitPerMin,
      });
      const k = await createApiKey(t.db, acc.id);
      return { key: k.key, headers: { authorization: `Bearer ${k.key}` } };
    },
  };
}

describe.each(dbEngines)('metrics and request ids on %s', (engine) => {
  it('serves a parseable Prometheus exposition without authentication, hidden from OpenAPI', async () => {
    const h = await harness(engine);
    const res = await h.metricsApp.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.headers['x-ratelimit-limit']).toBeUndefined(); // not under /v1: no limit
    const { samples, types } = parseExposition(res.body);
    expect(samples.length).toBeGreaterThan(0);
    expect(Object.fromEntries([...types].filter(([n]) => !/_(process|nodejs)_/.test(n)))).toEqual({
      [`${P}chain_solidified_block`]: 'gauge',
      [`${P}chain_cursor_block`]: 'gauge',
      [`${P}chain_lag_blocks`]: 'gauge',
      [`${P}chain_lag_seconds`]: 'gauge',
      [`${P}blocks_ingested_total`]: 'counter',
      [`${P}ingest_stalled_block`]: 'gauge',
      [`${P}ingest_block_failures_total`]: 'counter',
      [`${P}transfers_ingested_total`]: 'counter',
      [`${P}events_matched_total`]: 'counter',
      [`${P}deliveries_total`]: 'counter',
      [`${P}secret_decrypt_failures_total`]: 'counter',
      [`${P}delivery_attempt_duration_seconds`]: 'histogram',
      [`${P}outbox_pending`]: 'gauge',
      [`${P}outbox_oldest_due_seconds`]: 'gauge',
      [`${P}rate_limit_refusals_total`]: 'counter',
      [`${P}http_request_duration_seconds`]: 'histogram',
      [`${P}node_requests_total`]: 'counter',
      [`${P}chain_next_block_overdue_seconds`]: 'gauge',
      [`${P}block_verifications_total`]: 'counter',
      [`${P}node_answers_refused_total`]: 'counter',
      [`${P}node_heads_ignored_total`]: 'counter',
      [`${P}node_quorum_disagreements_total`]: 'counter',
      [`${P}node_provider_up`]: 'gauge',
      // The light client's (issue 28): registered always, sampled only while it runs.
      [`${P}light_client_final_block`]: 'gauge',
      [`${P}light_client_final_age_seconds`]: 'gauge',
      [`${P}light_client_known_srs`]: 'gauge',
      [`${P}light_client_threshold_srs`]: 'gauge',
      [`${P}light_client_epoch`]: 'gauge',
      [`${P}light_client_waiting_blocks`]: 'gauge',
      [`${P}light_client_refused_total`]: 'counter',
      [`${P}pruned_rows_total`]: 'counter',
      [`${P}prune_passes_total`]: 'counter',
    });
    // Every metric of this service, process ones included, carries the prefix.
    for (const name of types.keys()) expect(name.startsWith(P), name).toBe(true);
    // No ingester in this process: the chain gauges have no sample (not a misleading 0).
    for (const g of [
      'chain_solidified_block',
      'chain_cursor_block',
      'chain_lag_blocks',
      'ingest_stalled_block',
    ]) {
      expect(find(samples, `${P}${g}`)).toEqual([]);
    }
    for (const cls of ['transient', 'permanent']) {
      expect(value(samples, `${P}ingest_block_failures_total`, { class: cls })).toBe(0);
    }
    for (const outcome of ['delivered', 'failed', 'dead']) {
      expect(value(samples, `${P}deliveries_total`, { outcome })).toBe(0);
    }
    // The service's own Metrics adds the process metrics, prefixed too.
    const proc = parseExposition(await new Metrics({ processMetrics: true }).render());
    expect(proc.types.get(`${P}process_cpu_user_seconds_total`)).toBe('counter');
    expect(proc.types.get(`${P}nodejs_eventloop_lag_seconds`)).toBe('gauge');
    const doc = await h.app.inject({ url: '/docs/openapi.json' });
    expect(Object.keys(JSON.parse(doc.body).paths)).not.toContain('/metrics');
  });

  it('is not served by the API app, and its listener serves nothing else (issue 17 item 3)', async () => {
    const h = await harness(engine);
    for (const method of ['GET', 'HEAD', 'POST'] as const) {
      const res = await h.app.inject({ method, url: '/metrics' });
      expect(res.statusCode, method).toBe(404);
      if (method !== 'HEAD') expect(JSON.parse(res.body), method).toEqual({ error: 'not found' });
      expect(res.body).not.toContain(P);
    }
    for (const url of ['/metrics/', '/metrics?x=1', '/Metrics', '/%6Detrics']) {
      const res = await h.app.inject({ url });
      expect(res.body, url).not.toContain(P);
    }
    // The metrics listener answers /metrics and 404 for the rest, the API included.
    expect((await h.metricsApp.inject({ url: '/metrics?x=1' })).statusCode).toBe(200);
    for (const url of [
      '/',
      '/healthz',
      '/v1/watches',
      '/console/api/config',
      '/docs/openapi.json',
    ]) {
      const res = await h.metricsApp.inject({ url });
      expect(res.statusCode, url).toBe(404);
      expect(JSON.parse(res.body), url).toEqual({ error: 'not found' });
    }
    expect((await h.metricsApp.inject({ method: 'POST', url: '/metrics' })).statusCode).toBe(404);
  });

  it('records request latency by method, route pattern and status code', async () => {
    const h = await harness(engine);
    const c = await h.caller();
    const ok = await h.app.inject({ url: '/v1/watches', headers: c.headers });
    expect(ok.statusCode).toBe(200);
    const missing = await h.app.inject({
      method: 'DELETE',
      url: `/v1/watches/${newId('wh')}`,
      headers: c.headers,
    });
    expect(missing.statusCode).toBe(404);
    const unrouted = await h.app.inject({ url: '/nowhere/at/all' });
    expect(unrouted.statusCode).toBe(404);

    const { res, s } = await scrape(h.metricsApp);
    const count = `${P}http_request_duration_seconds_count`;
    expect(value(s, count, { method: 'GET', route: '/v1/watches', status_code: '200' })).toBe(1);
    expect(
      value(s, count, { method: 'DELETE', route: '/v1/watches/:id', status_code: '404' }),
    ).toBe(1);
    expect(value(s, count, { method: 'GET', route: 'unmatched', status_code: '404' })).toBe(1);
    // Cumulative buckets end in +Inf = count.
    const inf = value(s, `${P}http_request_duration_seconds_bucket`, {
      route: '/v1/watches',
      le: '+Inf',
    });
    expect(inf).toBe(1);
    // Raw URLs never become labels.
    expect(res.body).not.toContain('/nowhere');
    expect(res.body).not.toMatch(/wh_[0-9A-Za-z]/);
  });

  it('counts 429 refusals, per key and per client IP', async () => {
    const h = await harness(engine);
    const c = await h.caller(1);
    expect((await h.app.inject({ url: '/v1/watches', headers: c.headers })).statusCode).toBe(200);
    expect((await h.app.inject({ url: '/v1/watches', headers: c.headers })).statusCode).toBe(429);
    expect((await h.app.inject({ url: '/v1/watches', headers: c.headers })).statusCode).toBe(429);
    let { s } = await scrape(h.metricsApp);
    expect(value(s, `${P}rate_limit_refusals_total`, { scope: 'key' })).toBe(2);
    expect(value(s, `${P}rate_limit_refusals_total`, { scope: 'ip' })).toBeUndefined();

    // Unauthenticated: 60 per minute per IP at the Free rate, then 429.
    for (let i = 0; i < 60; i++) await h.app.inject({ url: '/v1/events' });
    expect((await h.app.inject({ url: '/v1/events' })).statusCode).toBe(429);
    ({ s } = await scrape(h.metricsApp));
    expect(value(s, `${P}rate_limit_refusals_total`, { scope: 'ip' })).toBe(1);
    expect(value(s, `${P}rate_limit_refusals_total`, { scope: 'key' })).toBe(2);
  });

  it('reads outbox depth and the age of the oldest due notification at scrape', async () => {
    const h = await harness(engine);
    let { s } = await scrape(h.metricsApp);
    expect(value(s, `${P}outbox_pending`)).toBe(0);
    expect(value(s, `${P}outbox_oldest_due_seconds`)).toBe(0);

    const box = new SecretBox([randomBytes(32)]);
    const accountId = await insertAccount(h.t.db);
    const { watchId } = await insertWebhookWatch(h.t.db, box, {
      accountId,
      url: 'https://hooks.example.com/x',
    });
    await insertEvents(h.t.db, {
      accountId,
      watchId,
      count: 3,
      dueAt: new Date(Date.now() - 60_000),
    });
    // Scheduled for later: pending, but not due.
    await insertEvents(h.t.db, {
      accountId,
      watchId,
      count: 2,
      dueAt: new Date(Date.now() + 3_600_000),
    });
    ({ s } = await scrape(h.metricsApp));
    expect(value(s, `${P}outbox_pending`)).toBe(5);
    const age = value(s, `${P}outbox_oldest_due_seconds`) ?? -1;
    expect(age).toBeGreaterThanOrEqual(59); // due a minute ago (1 s of slack for clock rounding)
    expect(age).toBeLessThan(3_600);

    await h.t.db.query("UPDATE notifications SET status = 'DELIVERED', delivered_at = now()");
    ({ s } = await scrape(h.metricsApp));
    expect(value(s, `${P}outbox_pending`)).toBe(0);
    expect(value(s, `${P}outbox_oldest_due_seconds`)).toBe(0);
  });

  it('answers 200 without the database gauges when the database is down, and logs it', async () => {
    const dead = await migratedDb(engine);
    await dead.drop(); // closed: every query fails
    const h = await harness(engine, { db: dead });
    const res = await h.metricsApp.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    const { samples, types } = parseExposition(res.body);
    expect(types.get(`${P}outbox_pending`)).toBe('gauge');
    expect(find(samples, `${P}outbox_pending`)).toEqual([]);
    expect(find(samples, `${P}outbox_oldest_due_seconds`)).toEqual([]);
    // The rest is still there.
    expect(find(samples, `${P}deliveries_total`).length).toBe(3);
    const warned = h.logs().filter((l) => String(l.msg).includes('outbox gauges unavailable'));
    expect(warned.length).toBe(1); // one read per scrape, shared by both gauges
    expect(warned[0]?.level).toBe(40);
  });

  it('echoes a sane X-Request-Id and generates one otherwise', async () => {
    const h = await harness(engine);
    const given = await h.app.inject({ url: '/healthz', headers: { 'x-request-id': 'abc-1.2_Z' } });
    expect(given.headers['x-request-id']).toBe('abc-1.2_Z');
    const max = 'a'.repeat(64);
    expect(
      (await h.app.inject({ url: '/healthz', headers: { 'x-request-id': max } })).headers[
        'x-request-id'
      ],
    ).toBe(max);

    const generated = new Set<string>();
    for (const bad of [undefined, '', 'a'.repeat(65), 'has space', 'x"y', 'line\\nbreak', 'é']) {
      const res = await h.app.inject({
        url: '/healthz',
        headers: bad === undefined ? {} : { 'x-request-id': bad },
      });
      const id = String(res.headers['x-request-id']);
      expect(id, String(bad)).toMatch(/^req_[0-9a-f]{16}$/);
      generated.add(id);
    }
    expect(generated.size).toBe(7);

    // Error answers carry it too: an auth failure (onRequest hook) and an unknown route.
    const unauth = await h.app.inject({ url: '/v1/watches', headers: { 'x-request-id': 'r401' } });
    expect(unauth.statusCode).toBe(401);
    expect(unauth.headers['x-request-id']).toBe('r401');
    const notFound = await h.app.inject({ url: '/nope', headers: { 'x-request-id': 'r404' } });
    expect(notFound.headers['x-request-id']).toBe('r404');
    // Refused before routing (bad %-encoding: Fastify's frameworkErrors).
    const badUrl = await h.app.inject({
      url: '/v1/watches/%E0%A4%A',
      headers: { 'x-request-id': 'r400' },
    });
    expect(badUrl.statusCode).toBe(400);
    expect(badUrl.headers['x-request-id']).toBe('r400');
  });

  it('logs one structured line per request carrying request_id, and no key', async () => {
    const h = await harness(engine);
    const c = await h.caller();
    const res = await h.app.inject({
      url: '/v1/events?limit=5',
      headers: { ...c.headers, 'x-request-id': 'trace-42' },
    });
    expect(res.statusCode).toBe(200);
    const lines = h.logs().filter((l) => l.request_id === 'trace-42');
    expect(lines).toEqual([
      expect.objectContaining({
        msg: 'request completed',
        request_id: 'trace-42',
        method: 'GET',
        route: '/v1/events',
        path: '/v1/events', // without the query string
        status_code: 200,
        duration_ms: expect.any(Number),
        client_ip: expect.any(String),
      }),
    ]);
    // A generated id is logged as well.
    const anon = await h.app.inject({ url: '/healthz' });
    const id = String(anon.headers['x-request-id']);
    expect(
      h.logs().filter((l) => l.request_id === id && l.msg === 'request completed'),
    ).toHaveLength(1);
    expect(h.logText()).not.toContain(c.key);
    expect(h.logText()).not.toContain('authorization');
  });

  it('exposes no key, secret, address or URL', async () => {
    const h = await harness(engine);
    const c = await h.caller();
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch(),
    });
    expect(created.statusCode, created.body).toBe(201);
    const secret = String((JSON.parse(created.body) as { secret?: unknown }).secret);
    expect(secret).toMatch(/^whsec_/);
    await h.app.inject({ url: '/v1/watches', headers: c.headers });
    await h.app.inject({ url: `/v1/events?address=${ADDR_B58}`, headers: c.headers });
    const { res } = await scrape(h.metricsApp);
    for (const needle of [
      c.key,
      c.key.slice('tw_live_'.length),
      'tw_live_',
      secret,
      'whsec_',
      ADDR_B58,
      'hooks.example.com',
      '://',
      'Bearer',
    ]) {
      expect(res.body, needle).not.toContain(needle);
    }
  });

  it('counts ingested blocks, transfers by asset, matched events, chain position and node requests', async () => {
    const t = await migratedDb(engine);
    cleanups.push(() => t.drop());
    const CHAIN = { seed: 11, firstBlock: 70_000_000, txPerBlock: 80, addresses: 40, count: 8 };
    const chain = await serveSynthetic(CHAIN);
    cleanups.push(() => chain.node.close());
    const accountId = await insertAccount(t.db);
    const addressHex = syntheticAddresses(CHAIN)[0] ?? '';
    const watchId = newId('wh');
    await t.db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block)
       VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'both', 'webhook', 'https://example.com/hook',
               'k', '\\x00'::bytea, $5)`,
      [watchId, accountId, hexToBase58(addressHex), addressHex, chain.first - 1],
    );
    const expected = expectedEvents(chain.transfers, [
      { id: watchId, addressHex, asset: 'ALL', direction: 'both', activeFrom: chain.first - 1 },
    ]);
    expect(expected.length).toBeGreaterThan(0);

    const metrics = new Metrics({ db: t.db });
    const client = new NodeClient({ url: chain.node.url, retries: 3 });
    cleanups.push(() => client.close());
    metrics.countNodeRequests(() => client.requestCount);
    const ing = new Ingester({
      db: t.db,
      client,
      logger: silentLogger,
      metrics,
      config: testIngestConfig(chain),
    });
    const ac = new AbortController();
    const done = ing.run(ac.signal);
    await vi.waitFor(
      () => {
        if (ing.stats.cursor < chain.last) throw new Error(`cursor at ${ing.stats.cursor}`);
      },
      { timeout: 30_000, interval: 10 },
    );
    ac.abort();
    await done;

    const s = parseExposition(await metrics.render()).samples;
    expect(value(s, `${P}blocks_ingested_total`)).toBe(ing.stats.blocks);
    expect(ing.stats.blocks).toBe(CHAIN.count);
    for (const asset of ['USDT', 'TRX'] as const) {
      expect(value(s, `${P}transfers_ingested_total`, { asset }), asset).toBe(
        chain.transfers.filter((x) => x.asset === asset).length,
      );
    }
    expect(value(s, `${P}events_matched_total`)).toBe(expected.length);
    expect(value(s, `${P}chain_cursor_block`)).toBe(chain.last);
    expect(value(s, `${P}ingest_stalled_block`)).toBe(0); // ran without a permanent failure
    expect(value(s, `${P}chain_solidified_block`)).toBe(ing.stats.solidified);
    expect(value(s, `${P}chain_lag_blocks`)).toBe(ing.stats.solidified - chain.last);
    expect(value(s, `${P}chain_lag_seconds`)).toBeGreaterThan(0); // a recorded chain is old
    expect(value(s, `${P}node_requests_total`)).toBe(client.requestCount);
    expect(value(s, `${P}outbox_pending`)).toBe(expected.length);
  });

  it('counts deliveries by outcome and observes every attempt', async () => {
    const t = await migratedDb(engine);
    cleanups.push(() => t.drop());
    const SECRET = newWebhookSecret();
    const r = await startReceiver({ secretFor: SECRET });
    cleanups.push(() => r.close());
    const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, r.ca);
    const box = new SecretBox([randomBytes(32)]);
    const accountId = await insertAccount(t.db);
    const good = await insertWebhookWatch(t.db, box, { accountId, url: r.url, secret: SECRET });
    // Signed with another secret: the receiver answers 401 every time, so these go DEAD.
    const bad = await insertWebhookWatch(t.db, box, {
      accountId,
      url: r.url,
      direction: 'outgoing',
    });
    await insertEvents(t.db, { accountId, watchId: good.watchId, count: 3 });
    await insertEvents(t.db, { accountId, watchId: bad.watchId, count: 2 });

    const metrics = new Metrics();
    const worker = new DeliveryWorker({
      db: t.db,
      secrets: box,
      logger: silentLogger,
      metrics,
      config: {
        delivery: {
          timeoutMs: 5_000,
          scheduleScale: 0.00001, // the six-attempt schedule in milliseconds
          concurrency: 4,
          pollMs: 10,
          allowCidrs: ['127.0.0.1/32'],
          caFile,
        },
      },
    });
    const ac = new AbortController();
    const done = worker.start(ac.signal);
    cleanups.push(async () => {
      ac.abort();
      await done;
    });
    await vi.waitFor(
      async () => {
        const n = await statusCounts(t.db);
        if (n.DELIVERED !== 3 || n.DEAD !== 2) throw new Error(JSON.stringify(n));
      },
      { timeout: 30_000, interval: 10 },
    );
    await worker.stop(); // every outcome recorded and counted

    const s = parseExposition(await metrics.render()).samples;
    expect(value(s, `${P}deliveries_total`, { outcome: 'delivered' })).toBe(3);
    expect(value(s, `${P}deliveries_total`, { outcome: 'dead' })).toBe(2);
    expect(value(s, `${P}deliveries_total`, { outcome: 'failed' })).toBe(2 * 5); // rescheduled
    expect(value(s, `${P}delivery_attempt_duration_seconds_count`)).toBe(3 + 2 * 6);
    expect(value(s, `${P}delivery_attempt_duration_seconds_count`)).toBe(worker.attempts);
    expect(value(s, `${P}delivery_attempt_duration_seconds_bucket`, { le: '+Inf' })).toBe(15);
    // Without a database the outbox gauges have no sample.
    expect(find(s, `${P}outbox_pending`)).toEqual([]);
  });
});
