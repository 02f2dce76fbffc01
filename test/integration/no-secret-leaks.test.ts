/**
 * Secrets and API keys never appear in logs, attempt records, error bodies or metrics (DESIGN
 * invariant 6; issue 5 item 4).
 *
 * A real end-to-end flow in-process: startService (roles api + ingest + worker) on a replay node
 * serving a synthetic chain, a trace-level logger writing to a captured stream (and no redaction:
 * the first line of defence is tested, not pino's redact), a local HTTPS receiver, watches created
 * through the public API, deliveries that succeed, fail and retry, die, hit a redirect, and one
 * whose stored secret does not decrypt; a revoked key, bad requests, /metrics. Then everything the
 * service wrote — captured logs and stdout/stderr, every table's rows (watches without
 * secret_ciphertext), every API answer except the one 201 that hands out each secret, /metrics,
 * the requests the receiver got — is searched for every webhook secret (`whsec_…`), every API key
 * (`tw_live_…`) and the secret encryption key, and for their fragments longer than 12 characters
 * in the plain, hex and base64 spellings. Zero hits.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { base58 } from '@scure/base';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { accountsCreate, keysCreate, keysRevoke } from '../../src/accounts/cli.js';
import { loadConfig } from '../../src/config.js';
import { type Receiver, type Reply, startReceiver } from '../../src/devnet/receiver.js';
import { type Service, startService } from '../../src/service.js';
import { nodeEnv, type SyntheticChain, serveSynthetic } from '../helpers/chain.js';
import { dbEngines, emptyDb, type TestDb } from '../helpers/db.js';

const FRAGMENT = 13; // "fragments longer than 12 characters"
const CHAIN = { seed: 55, firstBlock: 71_000_000, txPerBlock: 150, addresses: 400, count: 6 };
const LAG = 18;

/** Every spelling of `secret` whose 13-character windows must never appear. */
function spellings(secret: string): string[] {
  const out = [secret];
  const utf8 = Buffer.from(secret, 'utf8');
  out.push(utf8.toString('hex'));
  // base64/base64url of the whole string, at the three byte alignments, padding dropped.
  for (let i = 0; i < 3; i++) {
    out.push(utf8.subarray(i).toString('base64').replace(/=+$/, ''));
    out.push(utf8.subarray(i).toString('base64url'));
  }
  let raw: Buffer | undefined;
  if (secret.startsWith('whsec_')) raw = Buffer.from(secret.slice(6), 'base64');
  if (secret.startsWith('tw_live_')) raw = Buffer.from(base58.decode(secret.slice(8)));
  if (/^[0-9a-f]{64}$/.test(secret)) raw = Buffer.from(secret, 'hex');
  if (raw) {
    out.push(raw.toString('hex'), raw.toString('hex').toUpperCase());
    for (let i = 0; i < 3; i++) {
      out.push(raw.subarray(i).toString('base64').replace(/=+$/, ''));
      out.push(raw.subarray(i).toString('base64url'));
    }
  }
  return out;
}

/** The 13-character windows of every spelling of every secret, mapped to a label. */
function needles(secrets: ReadonlyMap<string, string>): Map<string, string> {
  const m = new Map<string, string>();
  for (const [label, secret] of secrets) {
    for (const s of spellings(secret)) {
      for (let i = 0; i + FRAGMENT <= s.length; i++) m.set(s.slice(i, i + FRAGMENT), label);
    }
  }
  return m;
}

interface Hit {
  where: string;
  secret: string;
  context: string;
}

/** Slide a 13-character window over `text`; report each place a needle matches. */
function scan(where: string, text: string, n: ReadonlyMap<string, string>): Hit[] {
  const hits: Hit[] = [];
  let lastEnd = -1;
  for (let i = 0; i + FRAGMENT <= text.length; i++) {
    const label = n.get(text.slice(i, i + FRAGMENT));
    if (label === undefined || i < lastEnd) continue;
    lastEnd = i + FRAGMENT;
    hits.push({ where, secret: label, context: text.slice(Math.max(0, i - 60), i + 80) });
  }
  return hits;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const engine = dbEngines.includes('postgres') ? 'postgres' : 'pglite';

describe(`no secret leaks, end to end (${engine})`, () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  it('writes no webhook secret, API key or encryption key anywhere', {
    timeout: 240_000,
  }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-leaks-'));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));

    // --- Capture everything the process writes: the logger's stream and stdout/stderr.
    const logChunks: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer | string, _enc, cb) {
        logChunks.push(chunk.toString());
        cb();
      },
    });
    const logger = pino({ level: 'trace', base: { pid: process.pid } }, stream);
    const stdio: string[] = [];
    const realOut = process.stdout.write.bind(process.stdout);
    const realErr = process.stderr.write.bind(process.stderr);
    const tee =
      (real: typeof process.stdout.write) =>
      (chunk: Uint8Array | string, ...rest: unknown[]): boolean => {
        stdio.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString());
        return (real as (c: Uint8Array | string, ...r: unknown[]) => boolean)(chunk, ...rest);
      };
    process.stdout.write = tee(realOut) as typeof process.stdout.write;
    process.stderr.write = tee(realErr) as typeof process.stderr.write;
    cleanups.push(() => {
      process.stdout.write = realOut;
      process.stderr.write = realErr;
    });

    // --- The receiver: per-label secrets and behaviours.
    const secrets = new Map<string, string>(); // label → whsec_
    const behaviour: Record<string, (nth: number) => number | Reply> = {
      ok: () => 200,
      flaky: (nth) => (nth < 3 ? 500 : 200),
      dead: () => 503,
      redirect: () => ({ status: 302, headers: { location: 'https://10.0.0.1/elsewhere' } }),
      tampered: () => 200,
    };
    const receiver: Receiver = await startReceiver({
      secretFor: ({ path: p }) => secrets.get(p.split('/').pop() ?? ''),
      respond: (req, { nth }) => {
        const label = req.path.split('/').pop() ?? '';
        if (!req.verified) return 401;
        return behaviour[label]?.(nth) ?? 404;
      },
    });
    cleanups.push(() => receiver.close());
    const caFile = path.join(dataDir, 'receiver-ca.pem');
    fs.writeFileSync(caFile, receiver.ca);

    // --- The chain: produced later, after the watches exist (as on mainnet).
    const chain: SyntheticChain = await serveSynthetic(CHAIN, {
      intervalMs: 250,
      lag: LAG,
      startBefore: LAG + 200,
    });
    cleanups.push(() => chain.node.close());

    // --- The service, on a fresh database, logging everything at trace.
    let t: TestDb | undefined;
    if (engine === 'postgres') {
      t = await emptyDb('postgres');
      const tdb = t;
      cleanups.push(() => tdb.drop());
    }
    const encryptionKey = randomBytes(32).toString('hex');
    const oldEncryptionKey = randomBytes(32).toString('base64');
    const cfg = loadConfig({
      DATABASE_URL: t?.url,
      DATA_DIR: dataDir,
      ...nodeEnv(chain.node),
      INGEST_START_BLOCK: String(chain.first), // the chain's checkpoint
      TRON_BLOCK_INTERVAL_MS: '250',
      // One provider: its USDT logs inside other contracts' calls would be held (issue 36 item 5,
      // tested in held-provider-proof); here every notification must settle, and every payload
      // sent is one more place a secret could leak.
      TRON_DELIVER_PROVIDER_PROOF: '1',
      SECRET_ENCRYPTION_KEY: encryptionKey,
      SECRET_ENCRYPTION_KEYS_OLD: oldEncryptionKey,
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      WEBHOOK_TIMEOUT_MS: '3000',
      DELIVERY_POLL_MS: '50',
      DELIVERY_SCHEDULE_SCALE: '0.0001',
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      LOG_LEVEL: 'trace',
    });
    const service: Service = await startService(cfg, {
      roles: ['api', 'ingest', 'worker'],
      logger,
    });
    let stopped = false;
    cleanups.push(async () => {
      if (!stopped) await service.stop();
    });
    const base = service.url as string;

    // --- Accounts and keys (the operator's CLI functions), one key to be revoked.
    const account = await accountsCreate(service.db, { email: 'leaks@example.com', plan: 'pro' });
    const key = (await keysCreate(service.db, { account: account.id, name: 'main' })).key;
    const doomed = await keysCreate(service.db, { account: account.id, name: 'doomed' });
    const other = await accountsCreate(service.db, { email: 'other@example.com', plan: 'free' });
    const otherKey = (await keysCreate(service.db, { account: other.id })).key;

    /** Every API answer seen, except the 201s that hand out a secret (kept apart). */
    const answers: string[] = [];
    const created: string[] = [];
    const call = async (
      method: string,
      p: string,
      opts: { key?: string | null; body?: string; headers?: Record<string, string> } = {},
    ) => {
      const k = opts.key === undefined ? key : opts.key;
      const res = await fetch(`${base}${p}`, {
        method,
        headers: {
          ...(k ? { authorization: `Bearer ${k}` } : {}),
          ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...opts.headers,
        },
        ...(opts.body !== undefined ? { body: opts.body } : {}),
      });
      const text = await res.text();
      const headers = JSON.stringify([...res.headers.entries()]);
      return { status: res.status, text, headers };
    };
    const record = (r: { status: number; text: string; headers: string }, what: string) => {
      answers.push(`${what} ${r.status} ${r.headers}\n${r.text}`);
      return r;
    };

    // --- Watches through the API, on the busiest addresses of the coming blocks.
    const counts = new Map<string, number>();
    for (const tr of chain.transfers) counts.set(tr.to, (counts.get(tr.to) ?? 0) + 1);
    const busiest = [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([a]) => a);
    const labels = Object.keys(behaviour);
    const watchIds = new Map<string, string>();
    for (const [i, label] of labels.entries()) {
      for (;;) {
        const r = await call('POST', '/v1/watches', {
          body: JSON.stringify({
            address: busiest[i],
            asset_filter: 'ALL',
            direction: 'both',
            webhook_url: `${receiver.origin}/hook/${label}`,
          }),
        });
        if (r.status === 503) {
          record(r, 'POST /v1/watches (no head yet)');
          await sleep(100);
          continue;
        }
        expect(r.status, r.text).toBe(201);
        created.push(r.text);
        const body = JSON.parse(r.text) as { id: string; secret: string };
        expect(body.secret).toMatch(/^whsec_/);
        secrets.set(label, body.secret);
        watchIds.set(label, body.id);
        break;
      }
    }
    // One stored secret that no longer decrypts: its notifications are held, unattempted, with a
    // "secret:" error (issue 14 item 3), and /healthz names the key id.
    await service.db.query(`UPDATE watches SET secret_ciphertext = $2 WHERE id = $1`, [
      watchIds.get('tampered'),
      randomBytes(60),
    ]);

    // --- Bad requests and refusals (their error bodies are searched too).
    await keysRevoke(service.db, { keyId: doomed.id });
    const refusals = [
      record(await call('GET', '/v1/events', { key: doomed.key }), 'revoked key'),
      record(await call('GET', '/v1/watches', { key: null }), 'no key'),
      record(
        await call('GET', '/v1/watches', { key: `${key.slice(0, -3)}zzz` }),
        'unknown key (a near miss of a real one)',
      ),
      record(await call('GET', '/v1/watches', { key: 'tw_live_!!notakey' }), 'malformed key'),
      record(
        await call('GET', '/v1/watches', { headers: { authorization: `Basic ${key}` } }),
        'wrong scheme',
      ),
      record(await call('POST', '/v1/watches', { body: '{"address":' }), 'malformed JSON'),
      record(
        await call('POST', '/v1/watches', {
          body: JSON.stringify({ address: 'Tnope', webhook_url: `${receiver.origin}/hook/x` }),
        }),
        'bad address',
      ),
      record(
        await call('POST', '/v1/watches', {
          body: JSON.stringify({
            address: busiest[0],
            asset_filter: 'ALL',
            direction: 'both',
            webhook_url: `${receiver.origin}/hook/ok`,
          }),
        }),
        'duplicate',
      ),
      record(
        await call('DELETE', `/v1/watches/${watchIds.get('ok')}`, { key: otherKey }),
        "another account's watch",
      ),
      record(await call('GET', '/v1/nope'), 'unknown route'),
      record(await call('GET', '/v1/events?limit=abc'), 'bad query'),
      // A client that puts its key in the query string: refused (unknown parameter), and neither
      // the request log nor the error body may repeat it.
      record(await call('GET', `/v1/events?api_key=${key}`), 'key in the query string'),
    ];
    expect(refusals.map((r) => r.status)).toEqual([
      401, 401, 401, 401, 401, 400, 400, 409, 404, 404, 400, 400,
    ]);

    // --- Let the blocks come; wait for every notification to settle (DELIVERED or DEAD; the
    // tampered watch's held, each at least once).
    chain.node.advanceTo(Math.max(chain.node.heads().solidified, chain.first - 2));
    const deadline = Date.now() + 120_000;
    const tamperedId = watchIds.get('tampered');
    const pending = async () =>
      (
        await service.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM notifications
            WHERE status = 'PENDING' AND (watch_id <> $1 OR last_error IS NULL)`,
          [tamperedId],
        )
      ).rows[0]?.n ?? 0;
    while (Date.now() < deadline) {
      if ((service.ingester?.stats.cursor ?? -1) >= chain.last && (await pending()) === 0) break;
      await sleep(200);
    }
    expect(service.ingester?.stats.cursor).toBeGreaterThanOrEqual(chain.last);
    expect(await pending()).toBe(0);
    const held = await service.db.query<{ status: string; attempts: number; last_error: string }>(
      'SELECT status, attempts, last_error FROM notifications WHERE watch_id = $1',
      [tamperedId],
    );
    expect(held.rows.length).toBeGreaterThan(0);
    for (const n of held.rows) {
      expect(n).toMatchObject({ status: 'PENDING', attempts: 0 });
      expect(n.last_error).toMatch(/^secret: /);
    }

    // The flow did what it should: deliveries, failed attempts of every kind, dead letters.
    const outcome = await service.db.query<{ label: string; status: string; n: number }>(
      `SELECT w.webhook_url AS label, n.status, count(*)::int AS n
         FROM notifications n JOIN watches w ON w.id = n.watch_id GROUP BY 1, 2`,
    );
    const statusOf = (label: string) =>
      outcome.rows
        .filter((r) => r.label.endsWith(`/${label}`))
        .map((r) => r.status)
        .sort();
    expect(statusOf('ok')).toEqual(['DELIVERED']);
    expect(statusOf('flaky')).toEqual(['DELIVERED']);
    expect(statusOf('dead')).toEqual(['DEAD']);
    expect(statusOf('redirect')).toEqual(['DEAD']);
    expect(statusOf('tampered')).toEqual(['PENDING']);
    const errors = await service.db.query<{ error: string }>(
      `SELECT DISTINCT error FROM attempts WHERE error IS NOT NULL
       UNION SELECT DISTINCT last_error FROM notifications WHERE last_error IS NOT NULL
       UNION SELECT error FROM secret_problems`,
    );
    const errorText = errors.rows.map((r) => r.error).join('\n');
    expect(errorText).toMatch(/HTTP 500/);
    expect(errorText).toMatch(/HTTP 503/);
    expect(errorText).toMatch(/redirect/);
    expect(errorText).toMatch(/secret/);
    expect(receiver.received.filter((r) => r.verified).length).toBeGreaterThan(0);

    // --- More reads after the deliveries: listings, health, metrics.
    record(await call('GET', '/v1/watches'), 'list watches');
    record(await call('GET', '/v1/events?limit=200'), 'list events');
    const health = record(await call('GET', '/healthz', { key: null }), 'health');
    const { rows: keyIds } = await service.db.query<{ secret_key_id: string }>(
      'SELECT secret_key_id FROM watches WHERE id = $1',
      [tamperedId],
    );
    expect(health.status, health.text).toBe(503);
    expect(JSON.parse(health.text).secrets.undecryptable_key_ids).toEqual([
      keyIds[0]?.secret_key_id,
    ]);
    // /metrics is served by the metrics listener only; the API port answers 404 for it.
    expect(record(await call('GET', '/metrics', { key: null }), 'API /metrics').status).toBe(404);
    const scraped = await fetch(service.metricsUrl);
    const metrics = { status: scraped.status, text: await scraped.text() };
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('tronwatch_deliveries_total');
    record(await call('DELETE', `/v1/watches/${watchIds.get('ok')}`), 'delete watch');

    // --- Dump every table (watches without the ciphertext column) before stopping.
    const dumpAll = async (db: Service['db']): Promise<string> => {
      const tables = await db.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables
          WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
      );
      expect(tables.rows.map((r) => r.table_name)).toEqual(
        expect.arrayContaining(['accounts', 'api_keys', 'attempts', 'events', 'notifications']),
      );
      const parts: string[] = [];
      for (const { table_name } of tables.rows) {
        const { rows } = await db.query<Record<string, unknown>>(`SELECT * FROM "${table_name}"`);
        for (const row of rows) {
          if (table_name === 'watches') delete row.secret_ciphertext;
          parts.push(
            `${table_name}: ${JSON.stringify(row, (_k, v: unknown) =>
              v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v,
            )}`,
          );
        }
      }
      return parts.join('\n');
    };
    const dump = await dumpAll(service.db);
    expect(dump).toMatch(/^attempts: /m);
    // The audit log recorded the key and the watches (and is searched like every other table).
    expect(dump).toMatch(/^audit_log: .*"api_key\.created"/m);
    expect(dump).toMatch(/^audit_log: .*"watch\.created"/m);

    await service.stop();
    stopped = true;
    process.stdout.write = realOut;
    process.stderr.write = realErr;
    const logs = logChunks.join('');
    expect(logs.length).toBeGreaterThan(1000);
    expect(logs).toMatch(/"level":20/); // debug lines (every attempt) were written

    // --- Search.
    const all = new Map<string, string>();
    for (const [label, s] of secrets) all.set(`webhook secret ${label}`, s);
    all.set('API key main', key);
    all.set('API key revoked', doomed.key);
    all.set('API key other', otherKey);
    all.set('SECRET_ENCRYPTION_KEY', encryptionKey);
    all.set('SECRET_ENCRYPTION_KEYS_OLD', oldEncryptionKey);
    const n = needles(all);

    // The scanner finds what it must: each secret in its own 201, each key in a request header.
    for (const [label, s] of secrets) {
      const hits = scan('201', created.join('\n'), n).filter((h) => h.secret.endsWith(label));
      expect(hits.length, `scanner control ${label}`).toBeGreaterThan(0);
      expect(s.length).toBeGreaterThan(FRAGMENT);
    }
    expect(scan('control', `Bearer ${Buffer.from(key).toString('base64')}`, n)).not.toEqual([]);

    const receiverSaw = receiver.received
      .map((r) => `${r.method} ${r.path} ${JSON.stringify(r.headers)}\n${r.body.toString('utf8')}`)
      .join('\n');
    const haystacks: Array<[string, string]> = [
      ['logs', logs],
      ['stdout/stderr', stdio.join('')],
      ['database', dump],
      ['API answers', answers.join('\n')],
      ['metrics', metrics.text],
      ['requests to the receiver', receiverSaw],
    ];
    const hits = haystacks.flatMap(([where, text]) => scan(where, text, n));
    expect(hits).toEqual([]);

    // The dump covered this run's watches.
    expect(dump).toContain(watchIds.get('dead') ?? 'missing');
  });
});
