/**
 * `tronwatch doctor` (issue 20 item 5): each check fails against a real broken thing (a stopped
 * port, a node of another network, a node that is behind, a chain dated in our future, a
 * world-readable key file, a self-signed, expired or expiring certificate, a refused Telegram
 * token, a refusing provider, an invalid configuration) with a fix, and everything passes
 * against real working things (PostgreSQL or PGlite, Redis, the replay node of the recorded
 * mainnet block with gRPC, an HTTPS server whose certificate is trusted, the Bot API stand-in):
 * exit 0, `--json`. Most runs are in process (runDoctor); the exit codes and the trust of a test
 * CA (NODE_EXTRA_CA_CERTS, read at start) go through the real CLI.
 */
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Server as GrpcServer, ServerCredentials } from '@grpc/grpc-js';
import { generate } from 'selfsigned';
import { afterEach, describe, expect, it } from 'vitest';
import { loadOrCreateKeyFile } from '../../src/common/secrets.js';
import { migrate } from '../../src/db/migrate.js';
import { openDb } from '../../src/db/pool.js';
import { startReceiver } from '../../src/devnet/receiver.js';
import {
  dirSource,
  memorySource,
  type ReplayNode,
  type ReplayNodeOptions,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import { startTelegramStandIn } from '../../src/devnet/telegram-stand-in.js';
import { type CheckResult, type DoctorReport, runDoctor } from '../../src/doctor/doctor.js';
import {
  MAINNET_CHECKPOINTS,
  MAINNET_GENESIS_ID,
  SOLIDIFICATION_LAG_BLOCKS,
} from '../../src/doctor/node.js';
import { serveSynthetic } from '../helpers/chain.js';
import { runCli } from '../helpers/cli.js';
import { dbEngines, emptyDb } from '../helpers/db.js';
import { chainDir, fixtureJson } from '../helpers/fixtures.js';
import { freePort } from '../helpers/servers.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const NILE_GENESIS_ID = '0000000000000000d698d4192c56cb6be724a558448e2684802de4d6cd8690dc';

const closers: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

function tmpDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-doctor-'));
  closers.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function replay(
  opts: Omit<ReplayNodeOptions, 'source'> & { source?: ReplayNodeOptions['source'] } = {},
): Promise<ReplayNode> {
  const node = await startReplayNode({ instant: true, source: dirSource(chainDir()), ...opts });
  closers.push(() => node.close());
  return node;
}

/**
 * A node that looks live: block 0 carries mainnet's genesis id (served verbatim, as java-tron
 * answers it: number and timestamp omitted) and its solidified head, block 80,000,000, is dated
 * `headTime` (epoch ms).
 */
function liveLookingNode(headTime: number): Promise<ReplayNode> {
  const genesis = {
    blockID: MAINNET_GENESIS_ID,
    block_header: { raw_data: { txTrieRoot: '0'.repeat(64), parentHash: '0'.repeat(64) } },
  };
  const n = 80_000_000;
  const head = {
    blockID: `${n.toString(16).padStart(16, '0')}${'ab'.repeat(24)}`,
    block_header: {
      raw_data: {
        number: n,
        txTrieRoot: '0'.repeat(64),
        parentHash: '0'.repeat(64),
        timestamp: headTime,
      },
    },
  };
  return replay({
    source: memorySource(
      new Map([
        [0, { block: JSON.stringify(genesis) }],
        [n, { block: JSON.stringify(head) }],
      ]),
    ),
  });
}

/** An HTTPS server on 127.0.0.1 with a self-signed CA certificate valid from..to. */
async function httpsServer(from: Date, to: Date): Promise<{ origin: string; ca: string }> {
  const pems = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: from,
    notAfterDate: to,
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] },
    ],
  });
  const server = https.createServer({ key: pems.private, cert: pems.cert }, (_req, res) => {
    res.end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { origin: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, ca: pems.cert };
}

/**
 * A configuration whose other parts pass: a data folder with a 0600 key, the recorded chain read
 * with its exact bytes (gRPC). A node of made-up blocks (no exact bytes to serve) is read JSON
 * only, with the development opt-out (node.grpc then warns instead of failing).
 */
async function baseEnv(node?: ReplayNode): Promise<Record<string, string>> {
  const dataDir = tmpDir();
  loadOrCreateKeyFile(dataDir);
  const n = node ?? (await replay({ grpc: true }));
  return {
    DATA_DIR: dataDir,
    ...(n.grpcUrl
      ? { TRON_NODE_URL: `${n.url}#grpc=${n.grpcUrl}` }
      : { TRON_NODE_URL: n.url, TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER: '1' }),
    LOG_LEVEL: 'silent',
  };
}

function only(report: DoctorReport, check: string, target?: string): CheckResult {
  const found = report.checks.filter(
    (c) => c.check === check && (target === undefined || c.target === target),
  );
  expect(found, `${check} ${target ?? ''} in ${JSON.stringify(report.checks)}`).toHaveLength(1);
  return found[0] as CheckResult;
}

function failed(report: DoctorReport): string[] {
  return report.checks.filter((c) => c.status === 'fail').map((c) => c.check);
}

describe('tronwatch doctor', () => {
  it("knows mainnet's recorded blocks by the ids the fixtures re-hash to", () => {
    const headers = fixtureJson<
      Array<{ blockID: string; block_header: { raw_data: { number: number } } }>
    >('headers-78000000-78000099.json');
    const block = fixtureJson<{ blockID: string; block_header: { raw_data: { number: number } } }>(
      'chain/block-79072107.json',
    );
    const recorded = new Map(
      [...headers, block].map((b) => [b.block_header.raw_data.number, b.blockID]),
    );
    for (const cp of MAINNET_CHECKPOINTS) expect(recorded.get(cp.number)).toBe(cp.id);
  });

  it('fails an invalid configuration and skips the rest', async () => {
    const env = { ...(await baseEnv()), TRON_NODE_QUORUM: '3' };
    const r = await runDoctor(env);
    expect(r.ok).toBe(false);
    expect(only(r, 'config').status).toBe('fail');
    expect(only(r, 'config').detail).toMatch(/TRON_NODE_QUORUM/);
    expect(only(r, 'config').fix).toMatch(/Configuration/);
    expect(r.checks.slice(1).every((c) => c.status === 'skip')).toBe(true);
  });

  it('fails a stopped PostgreSQL port', async () => {
    const port = await freePort();
    const env = {
      ...(await baseEnv()),
      DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/test`,
    };
    const r = await runDoctor(env, { timeoutMs: 3_000 });
    const c = only(r, 'database');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(/ECONNREFUSED/);
    expect(c.fix).toMatch(/start PostgreSQL/);
    expect(failed(r)).toEqual(['database']);
  });

  it('opens an existing embedded database, and leaves one a running process holds alone', async () => {
    const env = await baseEnv();
    const embeddedDir = path.join(env.DATA_DIR as string, 'pgdata');
    const db = await openDb({ url: undefined, embeddedDir });
    closers.push(() => db.close());
    let c = only(await runDoctor(env), 'database');
    expect(c).toMatchObject({ status: 'pass', target: embeddedDir });
    expect(c.detail).toBe('embedded PGlite, open in a running tronwatch process (not opened here)');
    await db.close();
    c = only(await runDoctor(env), 'database');
    expect(c.status).toBe('pass');
    expect(c.detail).toMatch(
      /^embedded PGlite \(PostgreSQL \d+[.\d]*\); schema at version 0, \d+ migration\(s\) pending/,
    );
  }, 120_000);

  it('fails a stopped Redis port', async () => {
    const port = await freePort();
    const env = { ...(await baseEnv()), REDIS_URL: `redis://127.0.0.1:${port}` };
    const r = await runDoctor(env, { timeoutMs: 1_500 });
    const c = only(r, 'redis');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(/Redis unreachable/);
    expect(c.fix).toMatch(/start Redis/);
    expect(failed(r)).toEqual(['redis']);
  });

  it('fails a node on a stopped port, and checks the others of the list', async () => {
    const good = await replay();
    const port = await freePort();
    const env = { ...(await baseEnv(good)), TRON_NODE_URL: `${good.url},http://127.0.0.1:${port}` };
    const r = await runDoctor(env, { timeoutMs: 2_000 });
    const down = `http://127.0.0.1:${port}`;
    expect(only(r, 'node.reachable', down).status).toBe('fail');
    expect(only(r, 'node.reachable', down).detail).toMatch(/ECONNREFUSED/);
    expect(only(r, 'node.reachable', down).fix).toMatch(/provider 2 of TRON_NODE_URL/);
    expect(only(r, 'node.mainnet', down).status).toBe('skip');
    expect(only(r, 'node.mainnet', good.url).status).toBe('pass');
    expect(failed(r)).toEqual(['node.reachable']);
  });

  it('passes the replay of recorded mainnet blocks and fails a synthetic chain as another network', async () => {
    const chain = await serveSynthetic({ seed: 7, count: 3, txPerBlock: 2, addresses: 10 });
    closers.push(() => chain.node.close());
    const real = await replay();
    const env = { ...(await baseEnv(real)), TRON_NODE_URL: `${real.url},${chain.node.url}` };
    const r = await runDoctor(env);
    expect(only(r, 'node.mainnet', real.url)).toMatchObject({ status: 'pass' });
    expect(only(r, 'node.mainnet', real.url).detail).toMatch(/block 79072107 is mainnet's.*replay/);
    const wrong = only(r, 'node.mainnet', chain.node.url);
    expect(wrong.status).toBe('fail');
    expect(wrong.detail).toMatch(/not TRON mainnet/);
    expect(wrong.fix).toMatch(/provider 2 of TRON_NODE_URL at a mainnet node/);
    expect(failed(r)).toEqual(['node.mainnet']);
  });

  it('names the Nile testnet by its genesis block', async () => {
    const nile = {
      blockID: NILE_GENESIS_ID,
      block_header: { raw_data: { txTrieRoot: '0'.repeat(64), parentHash: '0'.repeat(64) } },
    };
    const head = {
      blockID: `${(50).toString(16).padStart(16, '0')}${'cd'.repeat(24)}`,
      block_header: { raw_data: { number: 50, timestamp: Date.now() - 60_000 } },
    };
    const node = await replay({
      source: memorySource(
        new Map([
          [0, { block: JSON.stringify(nile) }],
          [50, { block: JSON.stringify(head) }],
        ]),
      ),
    });
    const r = await runDoctor(await baseEnv(node));
    expect(only(r, 'node.mainnet').status).toBe('fail');
    expect(only(r, 'node.mainnet').detail).toMatch(/genesis block of the Nile testnet/);
    expect(only(r, 'clock').status).toBe('skip');
  });

  it('passes a live-looking node whose solidified head is as old as the lag, and checks the clock against both', async () => {
    const node = await liveLookingNode(Date.now() - SOLIDIFICATION_LAG_BLOCKS * 3_000);
    const r = await runDoctor(await baseEnv(node));
    expect(only(r, 'node.mainnet').detail).toMatch(/mainnet's genesis/);
    expect(only(r, 'node.solidified_head').status).toBe('pass');
    const clock = only(r, 'clock');
    expect(clock.status).toBe('pass');
    expect(clock.detail).toMatch(/HTTP Date.*chain's block times/);
  });

  it("fails the clock when the chain's solidified head is dated in this machine's future", async () => {
    const node = await liveLookingNode(Date.now() + 10 * 60_000);
    const r = await runDoctor(await baseEnv(node));
    const clock = only(r, 'clock');
    expect(clock.status).toBe('fail');
    expect(clock.detail).toMatch(/in this machine's future: the clock is behind/);
    expect(clock.fix).toMatch(/NTP/);
    expect(failed(r)).toEqual(['clock']);
  });

  it("fails a node that is behind (its head an hour old) and not the clock, which agrees with the node's", async () => {
    const node = await liveLookingNode(Date.now() - 3_600_000);
    const r = await runDoctor(await baseEnv(node));
    const head = only(r, 'node.solidified_head');
    expect(head.status).toBe('fail');
    expect(head.detail).toMatch(/60 min old .*: the node is behind$/);
    expect(head.fix).toMatch(/synced/);
    expect(only(r, 'clock').status).toBe('pass');
    expect(failed(r)).toEqual(['node.solidified_head']);
  });

  it('node.providers: warns that one provider holds provider-proof deliveries, or that the opt-in sends them unconfirmed', async () => {
    const node = await replay({ grpc: true });
    const env = await baseEnv(node);
    const one = only(await runDoctor(env, { only: 'node.providers' }), 'node.providers');
    expect(one.status).toBe('warn');
    expect(one.detail).toMatch(
      /^one provider \(TRON_NODE_URL\): a USDT transfer made inside another contract's call .* its delivery stays held, never sent$/,
    );
    expect(one.fix).toMatch(/add a second provider to TRON_NODE_URL/);
    const two = { ...env, TRON_NODE_URL: `${env.TRON_NODE_URL},${env.TRON_NODE_URL}` };
    expect(only(await runDoctor(two, { only: 'node.providers' }), 'node.providers')).toMatchObject({
      status: 'pass',
      detail: expect.stringMatching(/^2 providers: .* once 2 of them report the same Transfer log/),
    });
    const optIn = only(
      await runDoctor({ ...two, TRON_DELIVER_PROVIDER_PROOF: '1' }, { only: 'node.providers' }),
      'node.providers',
    );
    expect(optIn.status).toBe('warn');
    expect(optIn.detail).toMatch(
      /^TRON_DELIVER_PROVIDER_PROOF=1: .* delivered as it is \(proof: provider\)/,
    );
    expect(optIn.fix).toMatch(/^unset TRON_DELIVER_PROVIDER_PROOF/);
  });

  it('fails one provider without gRPC (the ingest role refuses it), and warns with the opt-out', async () => {
    const node = await replay();
    const env = { ...(await baseEnv()), TRON_NODE_URL: node.url };
    const r = await runDoctor(env);
    const c = only(r, 'node.grpc');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(/the ingest role refuses to start: TRON_NODE_URL has one provider/);
    expect(c.fix).toMatch(/#grpc=grpc:\/\/host:port .* a second provider with TRON_NODE_QUORUM=2/);
    expect(failed(r)).toEqual(['node.grpc']);
    const dev = await runDoctor({ ...env, TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER: '1' });
    expect(only(dev, 'node.grpc').status).toBe('warn');
    expect(only(dev, 'node.grpc').detail).toMatch(
      /^TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1 \(development only\)/,
    );
    expect(failed(dev)).toEqual([]);
  });

  it('fails a gRPC address nobody serves', async () => {
    const node = await replay();
    const port = await freePort();
    const env = {
      ...(await baseEnv(node)),
      TRON_NODE_URL: `${node.url}#grpc=grpc://127.0.0.1:${port}`,
    };
    const r = await runDoctor(env, { timeoutMs: 2_000 });
    const c = only(r, 'node.grpc');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(
      /grpc:\/\/127\.0\.0\.1:\d+: gRPC protocol\.WalletSolidity\/GetBlockByNum2 79072107: UNAVAILABLE/,
    );
    expect(c.fix).toMatch(/#grpc=/);
    expect(failed(r)).toEqual(['node.grpc']);
  });

  it("fails a #grpc_full= that does not serve the full node's service (the light client's reads)", async () => {
    const node = await replay({ grpc: true });
    // A gRPC server serving nothing: protocol.Wallet answers UNIMPLEMENTED.
    const server = new GrpcServer();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    try {
      const env = {
        ...(await baseEnv(node)),
        TRON_NODE_URL: `${node.url}#grpc=${node.grpcUrl}&grpc_full=grpc://127.0.0.1:${port}`,
      };
      const r = await runDoctor(env, { timeoutMs: 2_000 });
      const c = only(r, 'node.grpc');
      expect(c.status).toBe('fail');
      expect(c.detail).toContain(`grpc://127.0.0.1:${port} (the full node's protocol.Wallet`);
      expect(c.detail).toContain('UNIMPLEMENTED');
      expect(c.fix).toMatch(/#grpc_full=grpc:\/\/host:port \(50051 on java-tron/);
      expect(failed(r)).toEqual(['node.grpc']);
      // The same node's own port serves both: it passes.
      const ok = await runDoctor(
        {
          ...(await baseEnv(node)),
          TRON_NODE_URL: `${node.url}#grpc=${node.grpcUrl}&grpc_full=${node.grpcUrl}`,
        },
        { timeoutMs: 2_000 },
      );
      expect(only(ok, 'node.grpc').status).toBe('pass');
    } finally {
      server.forceShutdown();
    }
  });

  it('fails the budget of a provider that refuses our requests (429)', async () => {
    const node = await replay({ rateLimit: { perSecond: 2, retryAfterSeconds: 1 } });
    const r = await runDoctor(await baseEnv(node), { timeoutMs: 5_000 });
    const c = only(r, 'node.budget');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(
      /refused \d+ of our \d+ requests \(HTTP 429\/403\) at max_rps unlimited/,
    );
    expect(c.fix).toMatch(/#max_rps=/);
  });

  it('fails a key file that others can read, and one its group can read', async () => {
    const env = await baseEnv();
    const file = path.join(env.DATA_DIR as string, 'secret.key');
    fs.chmodSync(file, 0o644);
    let r = await runDoctor(env);
    let c = only(r, 'secret_key');
    expect(c).toMatchObject({ status: 'fail', target: file });
    expect(c.detail).toMatch(/^mode 0644: readable by its group/);
    expect(c.fix).toBe(`chmod 600 ${file}`);
    fs.chmodSync(file, 0o604);
    r = await runDoctor(env);
    c = only(r, 'secret_key');
    expect(c.detail).toMatch(/^mode 0604: readable by other users/);
    expect(failed(r)).toEqual(['secret_key']);
    fs.chmodSync(file, 0o600);
    expect(only(await runDoctor(env), 'secret_key').status).toBe('pass');
  });

  it('fails a PUBLIC_URL that is not https, and one with a self-signed certificate', async () => {
    const env = { ...(await baseEnv()), PUBLIC_URL: 'http://tronwatch.example.com' };
    let c = only(await runDoctor(env), 'public_url');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(/not https/);
    const receiver = await startReceiver();
    closers.push(() => receiver.close());
    const r = await runDoctor({ ...env, PUBLIC_URL: receiver.origin });
    c = only(r, 'public_url');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(/self-signed certificate/);
    expect(c.fix).toMatch(/public CA/);
    expect(failed(r)).toEqual(['public_url']);
  });

  it('fails an expired certificate and one expiring within --cert-days, both trusted (CLI, exit 1)', async () => {
    const day = 86_400_000;
    const expired = await httpsServer(new Date(Date.now() - 30 * day), new Date(Date.now() - day));
    const soon = await httpsServer(new Date(Date.now() - day), new Date(Date.now() + 5 * day));
    const caFile = path.join(tmpDir(), 'ca.pem');
    fs.writeFileSync(caFile, `${expired.ca}\n${soon.ca}\n`);
    const env = {
      ...(await baseEnv()),
      PUBLIC_URL: expired.origin,
      TELEGRAM_WEBHOOK_URL: `${soon.origin}/telegram`,
      NODE_EXTRA_CA_CERTS: caFile,
      // The child inherits this process's environment: empty is unset.
      DATABASE_URL: '',
      // A port nothing listens on (the default 8080 may be another test's service).
      PORT: String(await freePort()),
      REDIS_URL: '',
    };
    const out = await runCli(
      ['doctor', '--json', '--cert-days', '14', '--timeout-ms', '30000'],
      env,
    );
    expect(out.code, out.stderr).toBe(1);
    const r = JSON.parse(out.stdout) as DoctorReport;
    expect(r.ok).toBe(false);
    const past = only(r, 'public_url', expired.origin);
    expect(past.status).toBe('fail');
    expect(past.detail).toMatch(/certificate expired \(CERT_HAS_EXPIRED\)/);
    const near = only(r, 'public_url', soon.origin);
    expect(near.status).toBe('fail');
    expect(near.detail).toMatch(/TELEGRAM_WEBHOOK_URL: .*expires in 4 days .*within 14/);
    expect(near.detail).not.toMatch(/not trusted|self-signed/);
    expect(failed(r)).toEqual(['public_url', 'public_url']);
  }, 300_000);

  it('fails a Telegram token the Bot API refuses, without printing it', async () => {
    const standIn = await startTelegramStandIn();
    closers.push(() => standIn.close());
    const wrong = `${standIn.botId}:WRONG-token-0123456789`;
    const env = {
      ...(await baseEnv()),
      TELEGRAM_BOT_TOKEN: wrong,
      TELEGRAM_API_ROOT: standIn.url,
    };
    const r = await runDoctor(env);
    const c = only(r, 'telegram');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(/Bot API 401/);
    expect(c.fix).toMatch(/BotFather/);
    expect(JSON.stringify(r)).not.toContain('WRONG-token');
    expect(failed(r)).toEqual(['telegram']);
    expect(
      only(await runDoctor({ ...env, TELEGRAM_BOT_TOKEN: standIn.token }), 'telegram'),
    ).toMatchObject({
      status: 'pass',
      detail: `getMe: bot @${standIn.username} (id ${standIn.botId})`,
    });
  });
});

describe.each(dbEngines)('tronwatch doctor, all passing, on %s', (engine) => {
  it('passes every check and exits 0 (text and --json)', async () => {
    const node = await replay({ grpc: true });
    const site = await httpsServer(
      new Date(Date.now() - 86_400_000),
      new Date(Date.now() + 90 * 86_400_000),
    );
    const standIn = await startTelegramStandIn();
    closers.push(() => standIn.close());
    const dataDir = tmpDir();
    const caFile = path.join(dataDir, 'ca.pem');
    fs.writeFileSync(caFile, site.ca);
    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      TRON_NODE_URL: `${node.url}#grpc=${node.grpcUrl}`,
      REDIS_URL,
      PUBLIC_URL: site.origin,
      TELEGRAM_BOT_TOKEN: standIn.token,
      TELEGRAM_API_ROOT: standIn.url,
      NODE_EXTRA_CA_CERTS: caFile,
      // The child inherits this process's environment: empty is unset.
      DATABASE_URL: '',
      // A port nothing listens on (the default 8080 may be another test's service).
      PORT: String(await freePort()),
    };
    if (engine === 'postgres') {
      const t = await emptyDb('postgres');
      closers.push(() => t.drop());
      await migrate(t.db);
      env.DATABASE_URL = t.url as string;
      env.SECRET_ENCRYPTION_KEY = 'ab'.repeat(32);
    } else {
      loadOrCreateKeyFile(dataDir);
      const db = await openDb({ url: undefined, embeddedDir: path.join(dataDir, 'pgdata') });
      await migrate(db);
      await db.close();
    }
    // Generous deadlines: a loaded machine is slow, not broken.
    const json = await runCli(['doctor', '--json', '--timeout-ms', '30000'], env);
    expect(json.code, json.stdout + json.stderr).toBe(0);
    const r = JSON.parse(json.stdout) as DoctorReport;
    expect(r.ok).toBe(true);
    // No service runs here (doctor-service.test.ts starts one): nothing listens, nothing ingested.
    expect(r.checks.filter((c) => c.status !== 'pass').map((c) => [c.check, c.status])).toEqual([
      // One provider: provider-proof deliveries can never be confirmed (issue 36 item 5).
      ['node.providers', 'warn'],
      ['service', 'skip'],
      ['service.light_client', 'skip'],
      ['service.ingest', 'skip'],
    ]);
    expect(r.checks.map((c) => c.check)).toEqual([
      'config',
      'database',
      'redis',
      'node.reachable',
      'node.mainnet',
      'node.solidified_head',
      'node.budget',
      'node.grpc',
      'node.providers',
      'testnet',
      'clock',
      'secret_key',
      'stored_secrets',
      'public_url',
      'telegram',
      'service',
      'service.light_client',
      'service.ingest',
      'service.workers',
    ]);
    expect(only(r, 'testnet').detail).toMatch(
      /^TRON_TESTNET_NODE_URL unset: test mode has only POST/,
    );
    expect(only(r, 'service.light_client').detail).toMatch(/did not answer \/healthz/);
    expect(only(r, 'database').detail).toMatch(
      engine === 'postgres'
        ? /^PostgreSQL 1[5-9]\.\d+; schema at version \d+, current$/
        : /^embedded PGlite \(PostgreSQL \d+/,
    );
    expect(only(r, 'redis').detail).toMatch(/^Redis [6-9]\./);
    expect(only(r, 'node.grpc').detail).toMatch(
      /serves block 79072107 with the id the HTTP API gave/,
    );
    // The text report once (a spawn and an embedded database's open cost much on a loaded machine).
    if (engine === 'postgres') {
      const text = await runCli(['doctor', '--timeout-ms', '30000'], env);
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/^tronwatch doctor\n/);
      expect(text.stdout).toMatch(/PASS {2}telegram \(http:\/\/127\.0\.0\.1:\d+\): getMe: bot @/);
      // The one warning: node.providers (one provider holds provider-proof deliveries).
      expect(text.stdout).toMatch(/WARN {2}node\.providers: one provider/);
      expect(text.stdout).toMatch(/\nOK: 15 passed, 1 warning\(s\), 3 skipped\n$/);
      expect(text.stdout).not.toContain(standIn.token);
    }
  }, 300_000);
});
