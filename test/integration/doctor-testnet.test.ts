/**
 * `tronwatch doctor` on the test environment's chain (issue 32; src/doctor/node.ts): with
 * TRON_TESTNET_NODE_URL set, each of its providers gets `testnet.reachable`, `testnet.network`,
 * `testnet.solidified_head`, `testnet.budget` and `testnet.grpc`, each against real replay nodes
 * over HTTP and gRPC: the demo's Nile-shaped synthetic chain (demo --testnet) passes as the
 * devnet's Nile; a node whose block 0 is Nile's genesis passes (and fails when behind); mainnet's
 * genesis and a replay of recorded mainnet blocks fail ("points at mainnet"); Shasta fails; an
 * unknown genesis and a replay node just below the mainnet recordings warn; a stopped port, a
 * gRPC nobody serves, a missing gRPC and a refusing provider fail. Unset: one `testnet` line, a
 * pass. `--check testnet` runs only these (through the real CLI once).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadOrCreateKeyFile } from '../../src/common/secrets.js';
import {
  dirSource,
  memorySource,
  type ReplayNode,
  type ReplayNodeOptions,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import { type CheckResult, type DoctorReport, runDoctor } from '../../src/doctor/doctor.js';
import {
  MAINNET_CHECKPOINTS,
  MAINNET_GENESIS_ID,
  NILE_GENESIS_ID,
  SOLIDIFICATION_LAG_BLOCKS,
} from '../../src/doctor/node.js';
import { NILE_USDT_CONTRACT_HEX } from '../../src/tron/address.js';
import { serveSynthetic, tronNodeUrl } from '../helpers/chain.js';
import { runCli } from '../helpers/cli.js';
import { chainDir } from '../helpers/fixtures.js';
import { freePort } from '../helpers/servers.js';

const SHASTA_GENESIS_ID = '0000000000000000de1aa88295e1fcf982742f773e0419c5a9c134c994a9059e';

const closers: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function replay(
  opts: Omit<ReplayNodeOptions, 'source'> & { source?: ReplayNodeOptions['source'] } = {},
): Promise<ReplayNode> {
  const node = await startReplayNode({ instant: true, source: dirSource(chainDir()), ...opts });
  closers.push(() => node.close());
  return node;
}

/**
 * A node whose block 0 has the id `genesis` (served as java-tron answers it: number and timestamp
 * omitted) and whose solidified head, block `n`, is dated `headTime` (epoch ms).
 */
function genesisNode(genesis: string, headTime: number, n = 40_000_000): Promise<ReplayNode> {
  const zero = {
    blockID: genesis,
    block_header: { raw_data: { txTrieRoot: '0'.repeat(64), parentHash: '0'.repeat(64) } },
  };
  const head = {
    blockID: `${n.toString(16).padStart(16, '0')}${'cd'.repeat(24)}`,
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
        [0, { block: JSON.stringify(zero) }],
        [n, { block: JSON.stringify(head) }],
      ]),
    ),
  });
}

/**
 * A valid configuration whose mainnet side is never asked (`--check testnet` skips it), with
 * TRON_TESTNET_NODE_URL as given.
 */
function env(testnet: string | undefined, extra: Record<string, string> = {}) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-doctor-testnet-'));
  closers.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  loadOrCreateKeyFile(dataDir);
  return {
    DATA_DIR: dataDir,
    TRON_NODE_URL: 'http://127.0.0.1:9#grpc=grpc://127.0.0.1:9',
    ...(testnet === undefined ? {} : { TRON_TESTNET_NODE_URL: testnet }),
    LOG_LEVEL: 'silent',
    ...extra,
  };
}

function only(report: DoctorReport, check: string, target?: string): CheckResult {
  const found = report.checks.filter(
    (c) => c.check === check && (target === undefined || c.target === target),
  );
  expect(found, `${check} ${target ?? ''} in ${JSON.stringify(report.checks)}`).toHaveLength(1);
  return found[0] as CheckResult;
}

const statuses = (r: DoctorReport) => r.checks.map((c) => [c.check, c.status]);

describe('tronwatch doctor: the test network (TRON_TESTNET_NODE_URL)', () => {
  it('unset: one testnet line, a pass, saying test mode has only POST /v1/test/transfers deposits', async () => {
    const r = await runDoctor(env(undefined), { only: 'testnet' });
    expect(r.ok).toBe(true);
    expect(r.checks).toEqual([
      {
        check: 'testnet',
        status: 'pass',
        detail:
          'TRON_TESTNET_NODE_URL unset: test mode has only POST /v1/test/transfers deposits (no test network followed)',
      },
    ]);
  });

  it("passes the demo's Nile-shaped synthetic chain on a replay node, over HTTP and gRPC (--check testnet through the CLI)", async () => {
    // As `npm run demo -- --testnet` serves it (src/devnet/demo.ts): Nile's USDT contract, lag 2,
    // no lead-in, gRPC, halted a few blocks in.
    const first = 50_000_000;
    const chain = await serveSynthetic(
      {
        seed: 2032,
        firstBlock: first,
        count: 10,
        txPerBlock: 20,
        addresses: 50,
        usdtContract: NILE_USDT_CONTRACT_HEX,
      },
      { intervalMs: 250, lag: 2, startBefore: 0, grpc: true },
    );
    closers.push(() => chain.node.close());
    chain.node.pause();
    chain.node.advanceTo(first + 3);
    const e = env(tronNodeUrl(chain.node));
    const r = await runDoctor(e, { only: 'testnet' });
    expect(statuses(r)).toEqual([
      ['testnet.reachable', 'pass'],
      ['testnet.network', 'pass'],
      ['testnet.solidified_head', 'pass'],
      ['testnet.budget', 'pass'],
      ['testnet.grpc', 'pass'],
    ]);
    expect(r.ok).toBe(true);
    expect(only(r, 'testnet.network').target).toBe(chain.node.url);
    expect(only(r, 'testnet.network').detail).toMatch(
      /a tronwatch replay node \(block 0 is its filler block.*standing in for Nile/,
    );
    expect(only(r, 'testnet.solidified_head').detail).toMatch(/^block 50000003 of .*a replay/);
    expect(only(r, 'testnet.grpc').detail).toMatch(
      /^grpc:\/\/127\.0\.0\.1:\d+ serves block 50000003 with the id the HTTP API gave$/,
    );
    // The family through the real CLI: nothing of mainnet is asked, exit 0.
    const cli = await runCli(['doctor', '--json', '--check', 'testnet', '--timeout-ms', '30000'], {
      ...e,
      DATABASE_URL: '',
      REDIS_URL: '',
    });
    expect(cli.code, cli.stdout + cli.stderr).toBe(0);
    const j = JSON.parse(cli.stdout) as DoctorReport;
    expect(j.checks.map((c) => c.check)).toEqual([
      'testnet.reachable',
      'testnet.network',
      'testnet.solidified_head',
      'testnet.budget',
      'testnet.grpc',
    ]);
  }, 120_000);

  it("passes a node whose block 0 is Nile's genesis, and fails it when its head is an hour old", async () => {
    const lag = SOLIDIFICATION_LAG_BLOCKS * 3_000;
    const live = await genesisNode(NILE_GENESIS_ID, Date.now() - lag);
    const behind = await genesisNode(NILE_GENESIS_ID, Date.now() - 3_600_000);
    const r = await runDoctor(
      env(`${live.url},${behind.url}`, { TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER: '1' }),
      { only: 'testnet' },
    );
    expect(only(r, 'testnet.network', live.url)).toMatchObject({
      status: 'pass',
      detail: "block 0 is the Nile testnet's genesis block",
    });
    expect(only(r, 'testnet.solidified_head', live.url).status).toBe('pass');
    expect(only(r, 'testnet.network', behind.url).status).toBe('pass');
    const head = only(r, 'testnet.solidified_head', behind.url);
    expect(head.status).toBe('fail');
    expect(head.detail).toMatch(/60 min old .*: the node is behind/);
    expect(head.fix).toMatch(/another provider first in TRON_TESTNET_NODE_URL/);
    expect(r.checks.filter((c) => c.status === 'fail').map((c) => c.check)).toEqual([
      'testnet.solidified_head',
    ]);
  });

  it("fails a TRON_TESTNET_NODE_URL that points at mainnet: mainnet's genesis, and a replay of recorded mainnet blocks", async () => {
    const live = await genesisNode(MAINNET_GENESIS_ID, Date.now() - 60_000, 80_000_000);
    const recorded = await replay({ grpc: true });
    const r = await runDoctor(env(`${live.url},${tronNodeUrl(recorded)}`), { only: 'testnet' });
    expect(r.ok).toBe(false);
    const genesis = only(r, 'testnet.network', live.url);
    expect(genesis.status).toBe('fail');
    expect(genesis.detail).toMatch(
      /^TRON_TESTNET_NODE_URL points at mainnet: block 0 is mainnet's genesis block/,
    );
    expect(genesis.fix).toMatch(/at a Nile node \(https:\/\/nile\.trongrid\.io/);
    const replayed = only(r, 'testnet.network', recorded.url);
    expect(replayed.status).toBe('fail');
    expect(replayed.detail).toMatch(
      /^TRON_TESTNET_NODE_URL points at mainnet: block 79072107 is mainnet's \(recorded id\)/,
    );
    // Not Nile: its head is not judged, its gRPC is (the replay's serves the real block).
    expect(only(r, 'testnet.solidified_head', live.url).status).toBe('skip');
    expect(only(r, 'testnet.grpc', recorded.url).status).toBe('pass');
  });

  it("fails Shasta; warns an unknown block 0 and a replay node just below mainnet's recorded blocks", async () => {
    const shasta = await genesisNode(SHASTA_GENESIS_ID, Date.now() - 60_000);
    const unknown = await genesisNode('00'.repeat(8) + 'ef'.repeat(24), Date.now() - 60_000);
    const cp = MAINNET_CHECKPOINTS[0]?.number as number;
    const near = await serveSynthetic({
      seed: 9,
      firstBlock: cp - 500,
      count: 3,
      txPerBlock: 2,
      addresses: 10,
      usdtContract: NILE_USDT_CONTRACT_HEX,
    });
    closers.push(() => near.node.close());
    const r = await runDoctor(env(`${shasta.url},${unknown.url},${tronNodeUrl(near.node)}`), {
      only: 'testnet.network',
    });
    expect(r.checks.map((c) => c.check)).toEqual([
      'testnet.network',
      'testnet.network',
      'testnet.network',
    ]);
    const s = only(r, 'testnet.network', shasta.url);
    expect(s.status).toBe('fail');
    expect(s.detail).toMatch(/genesis block of the Shasta testnet, not Nile's/);
    const u = only(r, 'testnet.network', unknown.url);
    expect(u.status).toBe('warn');
    expect(u.detail).toMatch(/neither Nile's genesis .* nor a tronwatch replay node/);
    expect(u.fix).toMatch(/Nile's contract/);
    const n = only(r, 'testnet.network', near.node.url);
    expect(n.status).toBe('warn');
    expect(n.detail).toMatch(
      new RegExp(`just below the recorded mainnet block ${cp}: it may be a replay of mainnet`),
    );
  });

  it('fails a stopped port (the rest skipped), a gRPC nobody serves, and one provider without gRPC (warns with the opt-out)', async () => {
    const down = await freePort();
    const noGrpc = await freePort();
    const node = await replay({ grpc: true });
    const r = await runDoctor(
      env(
        `http://127.0.0.1:${down}#grpc=grpc://127.0.0.1:${down},${node.url}#grpc=grpc://127.0.0.1:${noGrpc}`,
      ),
      { only: 'testnet', timeoutMs: 2_000 },
    );
    const stopped = `http://127.0.0.1:${down}`;
    expect(statuses({ ok: false, checks: r.checks.filter((c) => c.target === stopped) })).toEqual([
      ['testnet.reachable', 'fail'],
      ['testnet.network', 'skip'],
      ['testnet.solidified_head', 'skip'],
      ['testnet.budget', 'skip'],
      ['testnet.grpc', 'skip'],
    ]);
    expect(only(r, 'testnet.reachable', stopped).detail).toMatch(/ECONNREFUSED/);
    expect(only(r, 'testnet.reachable', stopped).fix).toMatch(
      /provider 1 of TRON_TESTNET_NODE_URL/,
    );
    expect(only(r, 'testnet.reachable', node.url).status).toBe('pass');
    const g = only(r, 'testnet.grpc', node.url);
    expect(g.status).toBe('fail');
    expect(g.detail).toMatch(
      /grpc:\/\/127\.0\.0\.1:\d+: gRPC protocol\.WalletSolidity\/GetBlockByNum2 79072107: UNAVAILABLE/,
    );
    expect(g.fix).toMatch(/#grpc= of provider 2 of TRON_TESTNET_NODE_URL/);

    const single = env(node.url);
    const one = only(await runDoctor(single, { only: 'testnet' }), 'testnet.grpc');
    expect(one.status).toBe('fail');
    expect(one.detail).toMatch(
      /^the ingest role refuses to start: TRON_TESTNET_NODE_URL has one provider .* and no gRPC/,
    );
    expect(one.fix).toMatch(/add #grpc=grpc:\/\/host:port to TRON_TESTNET_NODE_URL/);
    const dev = only(
      await runDoctor({ ...single, TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER: '1' }, { only: 'testnet' }),
      'testnet.grpc',
    );
    expect(dev.status).toBe('warn');
  });

  it('fails the budget of a test network provider that refuses our requests (429)', async () => {
    const node = await replay({ grpc: true, rateLimit: { perSecond: 2, retryAfterSeconds: 1 } });
    const r = await runDoctor(env(tronNodeUrl(node)), { only: 'testnet', timeoutMs: 5_000 });
    const c = only(r, 'testnet.budget');
    expect(c.status).toBe('fail');
    expect(c.detail).toMatch(/refused \d+ of our \d+ requests \(HTTP 429\/403\)/);
    expect(c.fix).toMatch(/#max_rps= of provider 1 of TRON_TESTNET_NODE_URL/);
  });
});
