/**
 * Bounded growth (issue 17 item 4: src/retention/prune.ts, lease.ts, migration 024), on both
 * engines:
 * - ended console sessions, invitations and Telegram link tokens are deleted TOKEN_RETENTION_HOURS
 *   after they ended, live and recently ended ones kept, in batches of PRUNE_BATCH_SIZE;
 * - attempt details (request/response headers, response body) are cleared after
 *   ATTEMPT_DETAIL_RETENTION_DAYS, the attempt row kept;
 * - events are kept without EVENT_RETENTION_DAYS; with it, old events whose newest notification
 *   is DELIVERED go with their notifications and attempts, never one whose newest is PENDING or
 *   DEAD;
 * - one pass at a time across processes (the lease), taken over once it expires;
 * - what was pruned is counted in tronwatch_pruned_rows_total{kind};
 * - "Connect Telegram" keeps at most MAX_LIVE_LINK_TOKENS live tokens per account;
 * - the service's worker role runs the job.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureOwnerUser } from '../../src/accounts/users.js';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import { Metrics } from '../../src/common/metrics.js';
import { type Config, loadConfig } from '../../src/config.js';
import type { Db } from '../../src/db/pool.js';
import { PRUNE_LEASE, Pruner } from '../../src/retention/prune.js';
import { type Service, startService } from '../../src/service.js';
import { bindChat, createLinkToken, MAX_LIVE_LINK_TOKENS } from '../../src/telegram/binding.js';
import { dbEngines, emptyDb, migratedDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';
import { insertAccount, USDT_CONTRACT, USDT_CONTRACT_HEX } from '../helpers/outbox.js';

function retention(over: Partial<Config['retention']> = {}): Config['retention'] {
  return { ...loadConfig({}).retention, ...over };
}

/** `now() + <interval>` as SQL, e.g. ago('25 hours') = 25 hours in the past. */
const ago = (i: string) => `now() - interval '${i}'`;
const ahead = (i: string) => `now() + interval '${i}'`;

async function count(db: Db, sql: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${sql}`);
  return Number(rows[0]?.n);
}

/** The token tables with an expiry and a use (TOKEN_RETENTION_HOURS). */
const TOKEN_TABLES = [
  'console_invites',
  'telegram_link_tokens',
  'console_password_resets',
  'console_login_challenges',
];

async function session(db: Db, accountId: string, expires: string, revoked: string | null) {
  const id = newId('ses');
  // Sessions belong to a console user (migration 030): the account's owner.
  const user = await ensureOwnerUser(db, accountId);
  await db.query(
    `INSERT INTO console_sessions (id, token_hash, csrf_hash, account_id, user_id, expires_at,
                                   revoked_at)
     VALUES ($1, $1, $1, $2, $3, ${expires}, ${revoked ?? 'NULL'})`,
    [id, accountId, user.id],
  );
  return id;
}

async function token(db: Db, table: string, accountId: string, expires: string, used: string) {
  const hash = newId('ses');
  // Invitations name the user they are for (migration 030); link tokens only the account; reset
  // links and sign-in challenges (migrations 030, 046) only the user.
  const userOnly = table === 'console_password_resets' || table === 'console_login_challenges';
  const user =
    table === 'console_invites' || userOnly ? (await ensureOwnerUser(db, accountId)).id : null;
  if (userOnly) {
    await db.query(
      `INSERT INTO ${table} (token_hash, user_id, expires_at, used_at)
       VALUES ($1, $2, ${expires}, ${used})`,
      [hash, user],
    );
    return hash;
  }
  await db.query(
    `INSERT INTO ${table} (token_hash, account_id, expires_at, used_at${user ? ', user_id' : ''})
     VALUES ($1, $2, ${expires}, ${used}${user ? ', $3' : ''})`,
    user ? [hash, accountId, user] : [hash, accountId],
  );
  return hash;
}

async function watch(db: Db, accountId: string): Promise<string> {
  const id = newId('wh');
  await db.query(
    `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                          channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block)
     VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'both', 'webhook', 'https://93.184.216.34/h', 'k',
             '\\x00'::bytea, 1)`,
    [id, accountId, USDT_CONTRACT, USDT_CONTRACT_HEX],
  );
  return id;
}

let seq = 0;
/**
 * An event created `age` ago with one notification per status given (oldest first, each with
 * one attempt carrying details), returning its id.
 */
async function event(
  db: Db,
  accountId: string,
  watchId: string,
  age: string,
  statuses: Array<'PENDING' | 'DELIVERED' | 'DEAD'>,
): Promise<string> {
  seq++;
  const id = `evt_prune_${String(seq).padStart(6, '0')}`;
  await db.query(
    `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                         block_number, block_timestamp, from_address, to_address, amount_raw,
                         contract, created_at)
     VALUES ($1, $2, $3, 'mainnet', 'incoming', 'USDT', md5($1), 0, 79000000, now(), $4, $4, 1, $4,
             ${ago(age)} + $5 * interval '1 microsecond')`,
    [id, accountId, watchId, USDT_CONTRACT, seq],
  );
  for (const [k, status] of statuses.entries()) {
    const ntf = `ntf_prune_${seq}_${k}`;
    await db.query(
      `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                  next_attempt_at, created_at)
       VALUES ($1, $2, $3, $4, 'webhook', $5, 1, now(), ${ago(age)} + $6 * interval '1 second')`,
      [ntf, id, accountId, watchId, status, k],
    );
    await db.query(
      `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status,
                             request_headers, response_headers, response_body)
       VALUES ($1, 1, ${ago(age)}, 5, 500, '{"a":"b"}', '{"c":"d"}', 'oops')`,
      [ntf],
    );
  }
  return id;
}

async function prunedSamples(m: Metrics): Promise<Record<string, number>> {
  const text = await m.render();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^tronwatch_pruned_rows_total\{kind="([a-z_]+)"\} (\d+)$/.exec(line);
    if (match) out[match[1] as string] = Number(match[2]);
  }
  return out;
}

describe.each(dbEngines)('pruning on %s', (engine) => {
  // One database for the file's tests on this engine (an embedded one takes long to migrate on a
  // loaded machine), emptied before each.
  let t: TestDb | undefined;
  beforeAll(async () => {
    t = await migratedDb(engine);
  }, 180_000);
  afterAll(async () => {
    await t?.drop();
  });
  beforeEach(async () => {
    await t?.db.query(
      `TRUNCATE attempts, notifications, events, watches, console_sessions, console_invites,
                telegram_link_tokens, console_password_resets, console_login_challenges,
                maintenance_leases, api_keys, console_users, accounts CASCADE`,
    );
  });

  it('deletes ended sessions, invitations, link tokens, reset links and sign-in challenges after TOKEN_RETENTION_HOURS, in batches', async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    const keep: string[] = [];
    const gone: string[] = [];
    // Sessions: expired 25 h ago (gone), revoked 25 h ago (gone), expired 1 h ago (kept, within
    // the 24 h), revoked 1 h ago (kept), live (kept); five of the first kind to need batches.
    for (let i = 0; i < 5; i++) gone.push(await session(db, acc, ago('25 hours'), null));
    gone.push(await session(db, acc, ahead('6 days'), ago('25 hours')));
    keep.push(await session(db, acc, ago('1 hour'), null));
    keep.push(await session(db, acc, ahead('6 days'), ago('1 hour')));
    keep.push(await session(db, acc, ahead('6 days'), null));
    for (const table of TOKEN_TABLES) {
      gone.push(await token(db, table, acc, ago('25 hours'), 'NULL')); // expired unused
      gone.push(await token(db, table, acc, ahead('5 days'), ago('25 hours'))); // used long ago
      keep.push(await token(db, table, acc, ago('1 hour'), 'NULL')); // expired recently
      keep.push(await token(db, table, acc, ahead('5 days'), ago('1 hour'))); // used recently
      keep.push(await token(db, table, acc, ahead('5 days'), 'NULL')); // live
    }
    const metrics = new Metrics();
    const pruner = new Pruner({
      db,
      retention: retention({ batchSize: 2 }),
      logger: silentLogger,
      metrics,
    });
    const r = await pruner.runOnce();
    expect(r?.pruned).toMatchObject({
      console_sessions: 6,
      console_invites: 2,
      telegram_link_tokens: 2,
      console_password_resets: 2,
      console_login_challenges: 2,
      attempt_details: 0,
    });
    expect(r?.steps).toBeGreaterThan(4 + 3); // 6 sessions two at a time, then a short batch
    const left = async () =>
      (
        await db.query<{ k: string }>(
          `SELECT id AS k FROM console_sessions UNION ALL SELECT token_hash FROM console_invites
           UNION ALL SELECT token_hash FROM telegram_link_tokens
           UNION ALL SELECT token_hash FROM console_password_resets
           UNION ALL SELECT token_hash FROM console_login_challenges`,
        )
      ).rows
        .map((x) => x.k)
        .sort();
    expect(await left()).toEqual([...keep].sort());
    expect(await prunedSamples(metrics)).toMatchObject({
      console_sessions: 6,
      console_invites: 2,
      telegram_link_tokens: 2,
      console_password_resets: 2,
      console_login_challenges: 2,
    });
    // TOKEN_RETENTION_HOURS=0: what ended is deleted at the next pass; live ones stay.
    await db.query('DELETE FROM maintenance_leases');
    await new Pruner({
      db,
      retention: retention({ tokenHours: 0 }),
      logger: silentLogger,
    }).runOnce();
    expect(await count(db, 'console_sessions')).toBe(1);
    expect(await count(db, 'console_invites')).toBe(1);
    expect(await count(db, 'telegram_link_tokens')).toBe(1);
    expect(await count(db, 'console_password_resets')).toBe(1);
    expect(await count(db, 'console_login_challenges')).toBe(1);
  });

  it('deletes audit log entries older than AUDIT_RETENTION_DAYS, in batches, and keeps the rest', async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    await db.query('DELETE FROM audit_log');
    for (const [i, age] of ['400 days', '366 days', '366 days', '364 days', '1 hour'].entries()) {
      await db.query(
        `INSERT INTO audit_log (id, account_id, at, actor_type, actor_id, action)
         VALUES ($1, $2, now() - $3::interval, 'user', $2, 'watch.created')`,
        [`aud_test${i}`, acc, age],
      );
    }
    const metrics = new Metrics();
    // Without an audit retention (the job's default tasks without auditDays): nothing deleted.
    expect(
      (await new Pruner({ db, retention: retention(), logger: silentLogger }).runOnce())?.pruned
        .audit_log,
    ).toBeUndefined();
    await db.query('DELETE FROM maintenance_leases');
    const r = await new Pruner({
      db,
      retention: { ...retention({ batchSize: 2 }), auditDays: 365 },
      logger: silentLogger,
      metrics,
    }).runOnce();
    expect(r?.pruned.audit_log).toBe(3);
    const { rows } = await db.query<{ id: string }>(
      "SELECT id FROM audit_log WHERE id LIKE 'aud_test%' ORDER BY id",
    );
    expect(rows.map((x) => x.id)).toEqual(['aud_test3', 'aud_test4']);
    // The pass itself is an entry by the system (issue 29 item 2), the only other one.
    const pass = await db.query<{ actor_type: string; actor_id: string; detail: unknown }>(
      "SELECT actor_type, actor_id, detail FROM audit_log WHERE id NOT LIKE 'aud_test%'",
    );
    expect(pass.rows).toEqual([
      {
        actor_type: 'system',
        actor_id: 'retention',
        detail: expect.objectContaining({ audit_log: 3 }),
      },
    ]);
    expect((await prunedSamples(metrics)).audit_log).toBe(3);
  });

  it('clears attempt details after ATTEMPT_DETAIL_RETENTION_DAYS and keeps the attempts', async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    const w = await watch(db, acc);
    await event(db, acc, w, '31 days', ['DELIVERED']);
    await event(db, acc, w, '31 days', ['DEAD', 'DELIVERED']);
    await event(db, acc, w, '29 days', ['DELIVERED']);
    const metrics = new Metrics();
    const r = await new Pruner({
      db,
      retention: retention(),
      logger: silentLogger,
      metrics,
    }).runOnce();
    expect(r?.pruned.attempt_details).toBe(3);
    const { rows } = await db.query<{ age: string; cleared: boolean }>(
      `SELECT CASE WHEN started_at < now() - interval '30 days' THEN 'old' ELSE 'new' END AS age,
              (request_headers IS NULL AND response_headers IS NULL AND response_body IS NULL) AS cleared
         FROM attempts ORDER BY 1`,
    );
    expect(rows).toEqual([
      { age: 'new', cleared: false },
      { age: 'old', cleared: true },
      { age: 'old', cleared: true },
      { age: 'old', cleared: true },
    ]);
    // The status, error and timing of an attempt stay.
    expect(await count(db, 'attempts WHERE http_status = 500 AND duration_ms = 5')).toBe(4);
    expect(await count(db, 'events')).toBe(3); // no EVENT_RETENTION_DAYS: every event kept
    expect((await prunedSamples(metrics)).attempt_details).toBe(3);
  });

  it('keeps events unless EVENT_RETENTION_DAYS; then deletes old delivered ones, never PENDING or DEAD', async () => {
    const db = (t as TestDb).db;
    const a1 = await insertAccount(db);
    const a2 = await insertAccount(db);
    const w1 = await watch(db, a1);
    const w2 = await watch(db, a2);
    const gone = [
      await event(db, a1, w1, '100 days', ['DELIVERED']),
      await event(db, a1, w1, '100 days', ['DEAD', 'DELIVERED']), // redelivered: done
      await event(db, a1, w1, '95 days', ['DELIVERED']),
      await event(db, a2, w2, '100 days', ['DELIVERED']),
      await event(db, a2, w2, '99 days', ['DELIVERED']),
    ];
    const kept = [
      await event(db, a1, w1, '100 days', ['DEAD']), // a dead letter
      await event(db, a1, w1, '100 days', ['DELIVERED', 'DEAD']), // redelivered and dead again
      await event(db, a1, w1, '100 days', ['PENDING']), // still being delivered
      await event(db, a1, w1, '100 days', ['DEAD', 'PENDING']), // being redelivered
      await event(db, a1, w1, '80 days', ['DELIVERED']), // younger than the retention
      await event(db, a2, w2, '10 days', ['DELIVERED']),
    ];
    const before = {
      notifications: await count(db, 'notifications'),
      attempts: await count(db, 'attempts'),
    };
    // Unset: nothing of the events is touched.
    const unset = await new Pruner({ db, retention: retention(), logger: silentLogger }).runOnce();
    expect(unset?.pruned.events).toBeUndefined();
    expect(await count(db, 'events')).toBe(gone.length + kept.length);
    await db.query('DELETE FROM maintenance_leases');

    const metrics = new Metrics();
    const r = await new Pruner({
      db,
      retention: retention({ eventDays: 90, batchSize: 2 }),
      logger: silentLogger,
      metrics,
    }).runOnce();
    expect(r?.pruned).toMatchObject({ events: 5, notifications: 6, attempts: 6 });
    const { rows } = await db.query<{ id: string }>('SELECT id FROM events ORDER BY id');
    expect(rows.map((x) => x.id)).toEqual([...kept].sort());
    expect(await count(db, 'notifications')).toBe(before.notifications - 6);
    expect(await count(db, 'attempts')).toBe(before.attempts - 6);
    expect(
      await count(
        db,
        'notifications n WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = n.event_id)',
      ),
    ).toBe(0);
    expect(await prunedSamples(metrics)).toMatchObject({
      events: 5,
      notifications: 6,
      attempts: 6,
    });
  });

  it('runs one pass at a time across processes, and another takes over once the lease expires', async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    await session(db, acc, ago('25 hours'), null);
    const r = retention({ intervalSeconds: 3600 });
    const ma = new Metrics();
    const mb = new Metrics();
    const a = new Pruner({ db, retention: r, logger: silentLogger, metrics: ma, holder: 'a' });
    const b = new Pruner({ db, retention: r, logger: silentLogger, metrics: mb, holder: 'b' });
    // At the same instant: exactly one of them runs.
    const both = await Promise.all([a.runOnce(), b.runOnce()]);
    expect(both.filter((x) => x !== null)).toHaveLength(1);
    const ran = both[0] ? 'a' : 'b';
    const other = ran === 'a' ? b : a;
    // The lease is kept until the next interval: the other one keeps skipping.
    expect(await other.runOnce()).toBeNull();
    expect(await count(db, 'console_sessions')).toBe(0);
    const { rows } = await db.query<{ holder: string; left: number }>(
      `SELECT holder, extract(epoch FROM expires_at - now())::float8 AS left
         FROM maintenance_leases WHERE name = $1`,
      [PRUNE_LEASE],
    );
    expect(rows[0]?.holder).toBe(ran);
    expect(rows[0]?.left).toBeGreaterThan(3000);
    // Its holder died: once the lease expires, the other takes over.
    await db.query(`UPDATE maintenance_leases SET expires_at = now() - interval '1 second'`);
    expect(await other.runOnce()).not.toBeNull();
    const text = `${await ma.render()}\n${await mb.render()}`;
    expect(text).toMatch(/^tronwatch_prune_passes_total\{outcome="skipped"\} [1-9]/m);
    expect(text).toMatch(/^tronwatch_prune_passes_total\{outcome="ran"\} 1$/m);
  });

  it('keeps at most MAX_LIVE_LINK_TOKENS live link tokens per account, the newest working', async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    const other = await insertAccount(db);
    const theirs = await createLinkToken(db, other);
    const mine: string[] = [];
    for (let i = 0; i < 12; i++) mine.push((await createLinkToken(db, acc)).token);
    // Concurrent calls do not exceed it either.
    await Promise.all(Array.from({ length: 6 }, () => createLinkToken(db, acc)));
    expect(
      await count(db, `telegram_link_tokens WHERE account_id = '${acc}' AND used_at IS NULL`),
    ).toBe(MAX_LIVE_LINK_TOKENS);
    expect(await count(db, `telegram_link_tokens WHERE account_id = '${other}'`)).toBe(1);
    // The first links were replaced: /start with them binds nothing.
    const chat = { id: '42', type: 'private' as const, title: 'me' };
    expect(await bindChat(db, mine[0] as string, chat)).toBeNull();
    expect(await bindChat(db, theirs.token, chat)).toBe(other);
    const newest = await createLinkToken(db, acc);
    expect(await bindChat(db, newest.token, chat)).toBe(acc);
  });
});

describe('the pruning job in the service', () => {
  let svc: Service | undefined;
  let t: TestDb | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await svc?.stop();
    svc = undefined;
    await t?.drop();
    t = undefined;
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs in the worker role and counts what it pruned on /metrics', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-prune-'));
    // PostgreSQL when there is one: an embedded database takes far longer to start.
    if (POSTGRES_URL) t = await emptyDb('postgres');
    const cfg = loadConfig({
      DATA_DIR: dir,
      ...(t?.url ? { DATABASE_URL: t.url } : {}),
      TRON_NODE_URL: 'http://127.0.0.1:9',
      METRICS_PORT: '0',
      PRUNE_INTERVAL_SECONDS: '1',
    });
    svc = await startService(cfg, { roles: ['worker'], logger: silentLogger });
    expect(svc.pruner).toBeDefined();
    const db = svc.db;
    const acc = await insertAccount(db);
    await session(db, acc, ago('25 hours'), null);
    await session(db, acc, ahead('1 day'), null);
    // The lease of the first pass (at start) expires after the 1 s interval: a later pass runs.
    const deadline = Date.now() + 60_000;
    while ((await count(db, 'console_sessions')) > 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await count(db, 'console_sessions')).toBe(1);
    const text = await (await fetch(svc.metricsUrl)).text();
    expect(text).toMatch(/^tronwatch_pruned_rows_total\{kind="console_sessions"\} 1$/m);
  }, 120_000);
});
