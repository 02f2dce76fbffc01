/**
 * `tronwatch doctor`'s checks of what breaks deliveries (issue 31 item 4), each against real
 * things: a started service (api + ingest, no worker) on a replay node of the real mainnet block
 * 79072107 with a webhook watch that matched a transfer, its database, a stranger on a port,
 * the replay node before its recording; and the configuration's strict URLs and enum errors,
 * `--check` and `--strict` through the real CLI.
 */

import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountsCreate, keysCreate } from '../../src/accounts/cli.js';
import { silentLogger } from '../../src/common/logger.js';
import { keyId, parseKey } from '../../src/common/secrets.js';
import { loadConfig } from '../../src/config.js';
import { openDb } from '../../src/db/pool.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { dirSource, type ReplayNode, startReplayNode } from '../../src/devnet/replay-node.js';
import { type CheckResult, type DoctorReport, runDoctor } from '../../src/doctor/doctor.js';
import { recordStall } from '../../src/ingest/stall.js';
import { type Service, startService } from '../../src/service.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { FINALITY_DEPTH, nodeEnv } from '../helpers/chain.js';
import { runCli } from '../helpers/cli.js';
import { dbEngines, emptyDb, type TestDb } from '../helpers/db.js';
import { chainDir, fixtureJson } from '../helpers/fixtures.js';
import { freePort } from '../helpers/servers.js';

const BLOCK = 79072107;
const engine = dbEngines.includes('postgres') ? 'postgres' : 'pglite';
const KEY_A = 'a1'.repeat(32);
const KEY_B = 'b2'.repeat(32);

/** The receiver of the first TRX transfer of the block, from its JSON. */
const RECEIVER = (() => {
  const txs = fixtureJson<{
    transactions: Array<{
      raw_data: {
        contract: Array<{ type: string; parameter: { value: Record<string, unknown> } }>;
      };
    }>;
  }>(`chain/block-${BLOCK}.json`).transactions;
  for (const t of txs) {
    const c = t.raw_data.contract[0];
    const v = c?.parameter.value as { owner_address: string; to_address: string; amount: number };
    if (c?.type === 'TransferContract' && v.amount > 0 && v.owner_address !== v.to_address) {
      return hexToBase58(v.to_address);
    }
  }
  throw new Error('no TRX transfer in the block');
})();

function only(report: DoctorReport, check: string): CheckResult {
  const found = report.checks.filter((c) => c.check === check);
  expect(found, `${check} in ${JSON.stringify(report.checks)}`).toHaveLength(1);
  return found[0] as CheckResult;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`doctor: stored secrets, the running service, ingest and workers (${engine})`, () => {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  let node: ReplayNode;
  let service: Service;
  let receiver: Receiver;
  let env: Record<string, string>;
  let stopped = false;

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-doctor-svc-'));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    receiver = await startReceiver({ respond: () => 200 });
    cleanups.push(() => receiver.close());
    const caFile = path.join(dataDir, 'ca.pem');
    fs.writeFileSync(caFile, receiver.ca);
    node = await startReplayNode({
      source: dirSource(chainDir()),
      // The real block's root is proven from its exact gRPC bytes only (docs/trusting-the-node.md).
      grpc: true,
      intervalMs: 0,
      lag: 2,
      startBefore: 10,
    });
    cleanups.push(() => node.close());
    let t: TestDb | undefined;
    if (engine === 'postgres') {
      t = await emptyDb('postgres');
      const tdb = t;
      cleanups.push(() => tdb.drop());
    }
    env = {
      DATABASE_URL: t?.url ?? '',
      DATA_DIR: dataDir,
      SECRET_ENCRYPTION_KEY: KEY_A,
      ...nodeEnv(node),
      INGEST_START_BLOCK: String(BLOCK),
      TRON_BLOCK_INTERVAL_MS: '200',
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      METRICS_PORT: '0',
      LOG_LEVEL: 'silent',
      REDIS_URL: '',
    };
    // No worker: the notification the watch gets stays due.
    service = await startService(loadConfig(env), {
      roles: ['api', 'ingest'],
      logger: silentLogger,
    });
    cleanups.push(() => (stopped ? undefined : service.stop()));
    const account = await accountsCreate(service.db, { email: 'doctor@example.com', plan: 'pro' });
    const { key } = await keysCreate(service.db, { account: account.id });
    const res = await fetch(`${service.url}/v1/watches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        address: RECEIVER,
        asset_filter: 'TRX',
        webhook_url: `${receiver.origin}/hook`,
      }),
    });
    expect(res.status).toBe(201);
    // The light client makes BLOCK final once 18 blocks are on top of it (the full-node head).
    node.advanceTo(BLOCK + FINALITY_DEPTH - 2);
    for (let i = 0; i < 600; i++) {
      const { rows } = await service.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM notifications',
      );
      if (Number(rows[0]?.n) > 0) break;
      await sleep(100);
    }
  }, 300_000);

  afterAll(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  }, 60_000);

  it('service: up, then the stall it reports; a stranger on the port; nothing listening', {
    timeout: 120_000,
  }, async () => {
    let r = await runDoctor(env, { only: 'service', timeoutMs: 10_000 });
    expect(r.checks.map((c) => c.check)).toEqual(['service']);
    expect(only(r, 'service')).toMatchObject({ status: 'pass', target: service.url });
    expect(only(r, 'service').detail).toMatch(/^up \(mainnet\): \/healthz 200, postgres ok/);

    // A stall as ingest records it: /healthz answers 503 and doctor names the block.
    const { rows } = await service.db.query<{ block_number: number }>(
      'SELECT block_number FROM chain_cursor',
    );
    const next = Number(rows[0]?.block_number) + 1;
    await recordStall(service.db, 'mainnet', next, 'test: a block no retry can pass');
    r = await runDoctor(env, { only: 'service', timeoutMs: 10_000 });
    expect(only(r, 'service').status).toBe('fail');
    expect(only(r, 'service').detail).toMatch(
      new RegExp(`^/healthz 503: ingest stalled at block ${next} since .*no retry can pass`),
    );
    r = await runDoctor(env, { only: 'service.ingest', timeoutMs: 10_000 });
    if (engine === 'postgres') {
      expect(only(r, 'service.ingest')).toMatchObject({ status: 'fail' });
      expect(only(r, 'service.ingest').detail).toMatch(new RegExp(`^stalled at block ${next}`));
    } else {
      // The running process holds the embedded database: its /healthz (above) spoke for it.
      expect(only(r, 'service.ingest')).toMatchObject({ status: 'skip' });
      expect(only(r, 'service.ingest').detail).toMatch(/open in the running process/);
    }
    await service.db.query(
      'UPDATE chain_cursor SET stalled_block = NULL, stalled_reason = NULL, stalled_since = NULL',
    );

    // Another program on the port: not tronwatch.
    const stranger = http.createServer((_req, res) => {
      res.statusCode = 404;
      res.end('<html>nginx</html>');
    });
    await new Promise<void>((ok) => stranger.listen(0, '127.0.0.1', ok));
    const port = (stranger.address() as AddressInfo).port;
    try {
      r = await runDoctor({ ...env, PORT: String(port) }, { only: 'service' });
      expect(only(r, 'service')).toMatchObject({ status: 'fail' });
      expect(only(r, 'service').detail).toMatch(
        /port is in use by something that is not tronwatch/,
      );
      expect(only(r, 'service').fix).toMatch(/another PORT/);
    } finally {
      await new Promise((ok) => stranger.close(ok));
    }
    r = await runDoctor({ ...env, PORT: String(await freePort()) }, { only: 'service' });
    expect(only(r, 'service')).toMatchObject({ status: 'skip' });
    expect(only(r, 'service').detail).toMatch(/^not running: nothing listens at http:\/\/127/);
  });

  it('service: a node outage is a warning naming the providers, then a failure once /healthz answers 503', {
    timeout: 120_000,
  }, async () => {
    // The only provider goes away: the ingest leader sets it aside and stores its state, and
    // /healthz says no provider serves (200 during its grace, 503 after it).
    await node.close();
    let health: { ok: boolean; checks: Record<string, unknown>; node?: unknown } | undefined;
    for (let i = 0; i < 600; i++) {
      const res = await fetch(`${service.url}/healthz`);
      health = (await res.json()) as typeof health;
      if (health?.checks.node === false) break;
      await sleep(100);
    }
    expect(health?.checks.node).toBe(false);
    let r = await runDoctor(env, { only: 'service', timeoutMs: 10_000 });
    expect(only(r, 'service').status).toBe('warn');
    expect(only(r, 'service').detail).toMatch(
      /; no node provider serving \(#0 (set_aside|unhealthy)[^)]*\): \/healthz answers 503 if it lasts 2 min$/,
    );
    expect(only(r, 'service').fix).toMatch(/GET \/v1\/status/);

    // After the grace: the same body with ok false and 503 (served as the service's own, so the
    // doctor reads the shape the real route sends, not one written here).
    const failing = http.createServer((_req, res) => {
      res.statusCode = 503;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ...health, ok: false }));
    });
    await new Promise<void>((ok) => failing.listen(0, '127.0.0.1', ok));
    try {
      const port = (failing.address() as AddressInfo).port;
      r = await runDoctor({ ...env, PORT: String(port) }, { only: 'service' });
      expect(only(r, 'service').status).toBe('fail');
      expect(only(r, 'service').detail).toMatch(
        /^\/healthz 503: no node provider serving \(#0 (set_aside|unhealthy)/,
      );
    } finally {
      await new Promise((ok) => failing.close(ok));
    }
  });

  it('service.ingest and service.workers: lag, a silent ingester, an undelivered notification', {
    timeout: 120_000,
  }, async () => {
    await service.stop();
    stopped = true;
    // The database as the stopped service left it, changed between doctor runs (each statement
    // on its own connection: the embedded database takes one opener at a time).
    const sql = async (...statements: Array<[string, unknown[]?]>) => {
      const db = await openDb({
        url: env.DATABASE_URL || undefined,
        embeddedDir: path.join(env.DATA_DIR as string, 'pgdata'),
      });
      try {
        for (const [q, p] of statements) await db.query(q, p ?? []);
      } finally {
        await db.close();
      }
    };
    // Workers: the notification was due and no worker ran; as if 5 minutes had passed.
    await sql(["UPDATE notifications SET next_attempt_at = now() - interval '5 minutes'"]);
    let r = await runDoctor(env, { only: 'service.workers' });
    expect(only(r, 'service.workers')).toMatchObject({ status: 'fail' });
    expect(only(r, 'service.workers').detail).toMatch(
      /^1 notification\(s\) due for more than 2 min and not claimed .*no worker is delivering/,
    );
    // Ingest: the chain head not looked at for 5 minutes (and the delivery made).
    await sql(
      ["UPDATE notifications SET status = 'DELIVERED'"],
      ["UPDATE chain_head SET observed_at = now() - interval '5 minutes'"],
    );
    expect(only(await runDoctor(env, { only: 'service.workers' }), 'service.workers').status).toBe(
      'pass',
    );
    r = await runDoctor(env, { only: 'service.ingest' });
    expect(only(r, 'service.ingest')).toMatchObject({ status: 'fail' });
    expect(only(r, 'service.ingest').detail).toMatch(/^no ingester has looked at the chain since/);
    // Observed now, the cursor 300 blocks behind: fail; 50 behind: warn (fails with strict);
    // level: pass.
    const head = node.heads().solidified;
    const at = (behind: number): Array<[string, unknown[]?]> => [
      ['UPDATE chain_head SET observed_at = now(), solidified_block_number = $1', [head]],
      ['UPDATE chain_cursor SET block_number = $1', [head - behind]],
    ];
    await sql(...at(300));
    r = await runDoctor(env, { only: 'service.ingest' });
    expect(only(r, 'service.ingest')).toMatchObject({ status: 'fail' });
    expect(only(r, 'service.ingest').detail).toMatch(/300 block\(s\) behind the solidified head/);
    await sql(...at(50));
    expect(only(await runDoctor(env, { only: 'service.ingest' }), 'service.ingest').status).toBe(
      'warn',
    );
    expect((await runDoctor(env, { only: 'service.ingest', strict: true })).ok).toBe(false);
    await sql(...at(0));
    expect(only(await runDoctor(env, { only: 'service.ingest' }), 'service.ingest').status).toBe(
      'pass',
    );
  });

  it('stored_secrets: the key that sealed them passes; another key fails naming the missing id', {
    timeout: 120_000,
  }, async () => {
    if (!stopped) {
      await service.stop();
      stopped = true;
    }
    const idA = keyId(parseKey(KEY_A));
    const idB = keyId(parseKey(KEY_B));
    let r = await runDoctor(env, { only: 'stored_secrets' });
    expect(only(r, 'stored_secrets')).toMatchObject({ status: 'pass' });
    expect(only(r, 'stored_secrets').detail).toBe(
      `1 stored secret(s): 1 under key ${idA} (current): 1 of 1 tried decrypt`,
    );
    // A valid key, but not the one the secrets were sealed with: every delivery would be held.
    r = await runDoctor({ ...env, SECRET_ENCRYPTION_KEY: KEY_B }, { only: 'stored_secrets' });
    expect(r.ok).toBe(false);
    expect(only(r, 'stored_secrets')).toMatchObject({ status: 'fail' });
    expect(only(r, 'stored_secrets').detail).toBe(
      `1 stored secret(s): 1 under key ${idA}: no such key configured. Configured key ids: ${idB}`,
    );
    expect(only(r, 'stored_secrets').fix).toMatch(new RegExp(`the key whose id is ${idA}`));
    // Rotated: B current, A kept to read: passes, A named as old.
    r = await runDoctor(
      { ...env, SECRET_ENCRYPTION_KEY: KEY_B, SECRET_ENCRYPTION_KEYS_OLD: KEY_A },
      { only: 'stored_secrets' },
    );
    expect(only(r, 'stored_secrets').detail).toMatch(new RegExp(`under key ${idA} \\(old\\)`));
    expect(r.ok).toBe(true);
    // Secrets never in the report.
    expect(JSON.stringify(r)).not.toContain(KEY_A);
  });

  it('node.mainnet names a replay node before its recording as what it is', async () => {
    const early = await startReplayNode({
      source: dirSource(chainDir()),
      intervalMs: 0,
      lag: 2,
      startBefore: 10,
    });
    cleanups.push(() => early.close());
    const r = await runDoctor({ ...env, TRON_NODE_URL: early.url }, { only: 'node.mainnet' });
    const c = only(r, 'node.mainnet');
    expect(c.status).toBe('warn');
    expect(c.detail).toMatch(
      /^a tronwatch replay node \(block 0 is its filler block, not mainnet's genesis\) whose recorded blocks are not solidified yet: its solidified head \d+ is below the recorded mainnet block 79072107/,
    );
    expect(c.detail).not.toMatch(/not TRON mainnet/);
  });

  it('config: URLs parsed strictly, every enum error lists the allowed values; --check, --strict (CLI)', {
    timeout: 300_000,
  }, async () => {
    const bad = await runCli(['doctor', '--check', 'config'], {
      ...env,
      REDIS_URL: 'redis//nope',
      LOG_LEVEL: 'loud',
      DATABASE_URL: 'postgres:/db',
    });
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/REDIS_URL: not a URL: expected redis:\/\/host/);
    expect(bad.stdout).toMatch(
      /LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent \(got "loud"\)/,
    );
    expect(bad.stdout).toMatch(/DATABASE_URL: no host/);
    expect(bad.stdout).not.toMatch(/Expected union value/);
    const signup = await runDoctor({ ...env, CONSOLE_SIGNUP: 'maybe' }, { only: 'config' });
    expect(only(signup, 'config').detail).toMatch(/CONSOLE_SIGNUP: must be one of open, closed/);

    // One check: only its line; an unknown name is refused with the list.
    const one = await runCli(['doctor', '--check', 'secret_key', '--json'], env);
    expect(one.code).toBe(0);
    expect((JSON.parse(one.stdout) as DoctorReport).checks.map((c) => c.check)).toEqual([
      'secret_key',
    ]);
    const unknown = await runCli(['doctor', '--check', 'nope'], env);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/no check named nope: one of config, database/);
    // --strict: a warning (the replay node before its recording) fails the run.
    const early = await startReplayNode({
      source: dirSource(chainDir()),
      intervalMs: 0,
      lag: 2,
      startBefore: 10,
    });
    cleanups.push(() => early.close());
    const lenient = await runCli(['doctor', '--check', 'node.mainnet'], {
      ...env,
      TRON_NODE_URL: early.url,
    });
    expect(lenient.code).toBe(0);
    const strict = await runCli(['doctor', '--check', 'node.mainnet', '--strict'], {
      ...env,
      TRON_NODE_URL: early.url,
    });
    expect(strict.code).toBe(1);
    expect(strict.stdout).toMatch(/WARN {2}node\.mainnet/);
    expect(strict.stdout).toMatch(/--strict: warnings fail/);
  });
});
