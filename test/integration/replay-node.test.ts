/**
 * Replay node (src/devnet/replay-node.ts) and recorder (src/devnet/record.ts) over real HTTP, with
 * the real NodeClient. Timing-free: heads are checked on an injected clock, or as relative and
 * monotonic facts while the real clock runs.
 *
 * Real mainnet data (block 79072107, 619 transactions) is read from test/fixtures/tron-mainnet/chain/.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lackingExactBytes } from '../../src/devnet/demo.js';
import { recordBlocks } from '../../src/devnet/record.js';
import {
  dirSource,
  memorySource,
  type ReplayNode,
  type ReplayNodeOptions,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import { parseGrpcTarget } from '../../src/tron/grpc.js';
import { NodeClient, NodeError } from '../../src/tron/node-client.js';
import type { BlockJson } from '../../src/tron/types.js';
import { verifyBlock } from '../../src/tron/verify.js';
import { chainDir } from '../helpers/fixtures.js';

const CHAIN_DIR = chainDir();
const REAL = 79072107;

// ---- resources opened by a test are closed after it -------------------------------------------

const opened: Array<{ close(): Promise<void> }> = [];
const tmpDirs: string[] = [];

afterEach(async () => {
  await Promise.all(opened.splice(0).map((r) => r.close()));
  await Promise.all(tmpDirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function start(opts: ReplayNodeOptions): Promise<ReplayNode> {
  const node = await startReplayNode(opts);
  opened.push(node);
  return node;
}

function client(node: ReplayNode, retries = 6): NodeClient {
  const c = new NodeClient({ url: node.url, retries, timeoutMs: 5_000 });
  opened.push(c);
  return c;
}

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'tronwatch-replay-'));
  tmpDirs.push(d);
  return d;
}

async function until(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** POST (JSON body) or GET (query) and return status and exact bytes. */
async function call(
  node: ReplayNode,
  path: string,
  params: Record<string, unknown> = {},
  method: 'GET' | 'POST' = 'POST',
): Promise<{ status: number; bytes: Buffer; text: string }> {
  let res: Response;
  if (method === 'GET') {
    const q = new URLSearchParams(
      Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]),
    );
    res = await fetch(`${node.url}${path}${q.size ? `?${q}` : ''}`);
  } else {
    res = await fetch(`${node.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(params),
    });
  }
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, bytes, text: bytes.toString('utf8') };
}

interface Hdr {
  blockID: string;
  block_header: { raw_data: { number: number; parentHash: string; timestamp: number } };
  transactions?: unknown[];
}

async function blockJson(node: ReplayNode, n: number, view = '/wallet'): Promise<Hdr> {
  const r = await call(node, `${view}/getblockbynum`, { num: n });
  expect(r.status).toBe(200);
  return JSON.parse(r.text) as Hdr;
}

// ---- a small synthetic chain: blocks 100 and 103 recorded, 101-102 a gap -----------------------

const ID_100 = `${(100).toString(16).padStart(16, '0')}${'aa'.repeat(24)}`;
const PARENT_100 = `${(99).toString(16).padStart(16, '0')}${'bb'.repeat(24)}`;
const ID_103 = `${(103).toString(16).padStart(16, '0')}${'cc'.repeat(24)}`;
const PARENT_103 = `${(102).toString(16).padStart(16, '0')}${'dd'.repeat(24)}`;
const TS_100 = 1_700_000_000_000;
const TS_103 = TS_100 + 9_000;

// Odd spacing and integers above 2^53 on purpose: only a verbatim server returns these bytes.
const BLOCK_100 = `{"blockID":"${ID_100}",  "block_header":{"raw_data":{"number":100,"parentHash":"${PARENT_100}","version":32,"timestamp":${TS_100}},"witness_signature":"00"},
 "transactions":[{"txID":"${'11'.repeat(32)}","ret":[{"contractRet":"SUCCESS"}],"raw_data":{"contract":[{"type":"TransferContract","parameter":{"value":{"amount":12345678901234567890,"owner_address":"41${'01'.repeat(20)}","to_address":"41${'02'.repeat(20)}"}}}]}}]}
`;
const INFOS_100 = `[{"id":"${'11'.repeat(32)}","blockNumber":100,"fee":98765432109876543210,"receipt":{"net_usage":268}}]`;
const BLOCK_103 = `{"blockID":"${ID_103}","block_header":{"raw_data":{"number":103,"parentHash":"${PARENT_103}","version":31,"timestamp":${TS_103}}}}`;

function synthSource() {
  return memorySource(
    new Map([
      [100, { block: BLOCK_100, infos: INFOS_100 }],
      [103, { block: BLOCK_103 }],
    ]),
  );
}

// ---------------------------------------------------------------------------------------------

describe('replay node timeline', () => {
  it('starts startBefore+1 blocks before the first recorded block and advances one block per interval of the clock', async () => {
    let t = 1_000;
    const node = await start({
      source: synthSource(),
      intervalMs: 100,
      lag: 5,
      startBefore: 7,
      now: () => t,
    });
    expect(node.heads()).toEqual({ solidified: 100 - 7 - 1, head: 100 - 7 - 1 + 5 });
    t += 99;
    expect(node.heads().solidified).toBe(92);
    t += 1;
    expect(node.heads().solidified).toBe(93);
    t += 7 * 100; // (startBefore + 1) intervals after start
    expect(node.heads()).toEqual({ solidified: 100, head: 105 });
    t += 1_000_000; // no stopAtEnd: filler blocks go on
    expect(node.heads().solidified).toBe(100 + 10_000);
  });

  it('uses lag + 10 as the default startBefore, 18 as the default lag, and stops at the end when asked', async () => {
    let t = 0;
    const node = await start({
      source: synthSource(),
      intervalMs: 10,
      stopAtEnd: true,
      now: () => t,
    });
    expect(node.heads()).toEqual({ solidified: 100 - 28 - 1, head: 100 - 28 - 1 + 18 });
    t += 10_000;
    expect(node.heads()).toEqual({ solidified: 103, head: 121 });
  });

  it('instant mode solidifies the whole source at once and stays; advanceTo moves the head by hand', async () => {
    let t = 0;
    const node = await start({ source: synthSource(), instant: true, lag: 4, now: () => t });
    expect(node.heads()).toEqual({ solidified: 103, head: 107 });
    t += 1_000_000;
    expect(node.heads()).toEqual({ solidified: 103, head: 107 });
    node.advanceTo(150);
    expect(node.heads()).toEqual({ solidified: 150, head: 154 });
  });

  it('paused mode (intervalMs 0) never advances by itself; advanceTo resumes the pace from the new block', async () => {
    let t = 0;
    const paused = await start({
      source: synthSource(),
      intervalMs: 0,
      lag: 2,
      startBefore: 3,
      now: () => t,
    });
    t += 1_000_000;
    expect(paused.heads().solidified).toBe(96);
    paused.advanceTo(99);
    expect(paused.heads().solidified).toBe(99);

    const running = await start({ source: synthSource(), intervalMs: 50, lag: 2, now: () => t });
    t += 500;
    running.advanceTo(101);
    expect(running.heads().solidified).toBe(101);
    t += 120;
    expect(running.heads().solidified).toBe(103);
  });

  it('advances on the real clock: both heads grow monotonically and stay lag apart (getnodeinfo)', async () => {
    const node = await start({ source: synthSource(), intervalMs: 50, lag: 6, startBefore: 2 });
    const c = client(node);
    const seen: Array<{ solidified: number; head: number }> = [await c.getHeads()];
    const first = seen[0]?.solidified ?? 0;
    while ((seen[seen.length - 1]?.solidified ?? 0) < first + 3) {
      await new Promise((r) => setTimeout(r, 20));
      seen.push(await c.getHeads());
      if (seen.length > 2_000) throw new Error('heads did not advance');
    }
    for (let i = 0; i < seen.length; i++) {
      const h = seen[i];
      expect(h && h.head - h.solidified).toBe(6);
      if (i > 0) expect(h?.solidified).toBeGreaterThanOrEqual(seen[i - 1]?.solidified ?? 0);
    }
    const local = node.heads();
    expect(local.solidified).toBeGreaterThanOrEqual(first + 3);
    expect(c.solidifiedHead).toBe(seen[seen.length - 1]?.solidified);
  });
});

describe('replay node endpoints', () => {
  it('solidity views end at the solidified head, full-node views at the full head', async () => {
    const node = await start({ source: synthSource(), intervalMs: 0, lag: 5 });
    node.advanceTo(99);
    expect((await call(node, '/walletsolidity/getblockbynum', { num: 100 })).text.trim()).toBe(
      '{}',
    );
    expect(
      (await call(node, '/walletsolidity/gettransactioninfobyblocknum', { num: 100 })).text.trim(),
    ).toBe('[]');
    expect((await call(node, '/walletsolidity/getblock', { id_or_num: '100' })).text.trim()).toBe(
      '{}',
    );
    expect((await call(node, '/wallet/getblockbynum', { num: 100 })).text).toBe(BLOCK_100);
    expect((await call(node, '/wallet/gettransactioninfobyblocknum', { num: 100 })).text).toBe(
      INFOS_100,
    );
    expect((await call(node, '/wallet/getblockbynum', { num: 105 })).text.trim()).toBe('{}');
    expect((await blockJson(node, 104)).block_header.raw_data.number).toBe(104);

    const solidNow = JSON.parse((await call(node, '/walletsolidity/getnowblock')).text) as Hdr;
    expect(solidNow.block_header.raw_data.number).toBe(99);
    const fullNow = JSON.parse((await call(node, '/wallet/getnowblock')).text) as Hdr;
    expect(fullNow.block_header.raw_data.number).toBe(104);

    node.advanceTo(100);
    const r = await call(node, '/walletsolidity/getblockbynum', { num: 100 });
    expect(r.status).toBe(200);
    expect(r.text).toBe(BLOCK_100); // verbatim: spacing and 12345678901234567890 intact
    expect((await call(node, '/walletsolidity/getnowblock')).text).toBe(BLOCK_100);
    expect(
      (await call(node, '/walletsolidity/gettransactioninfobyblocknum', { num: 100 })).text,
    ).toBe(INFOS_100);
  });

  it('getblock: detail false drops transactions, absent id_or_num is the newest block, lookup by id', async () => {
    const node = await start({ source: synthSource(), intervalMs: 0, lag: 3 });
    node.advanceTo(100);
    const head = JSON.parse(
      (await call(node, '/walletsolidity/getblock', { detail: false })).text,
    ) as Hdr;
    expect(head.blockID).toBe(ID_100);
    expect(head).not.toHaveProperty('transactions');
    expect((await call(node, '/walletsolidity/getblock', { detail: true })).text).toBe(BLOCK_100);
    const byId = JSON.parse(
      (await call(node, '/walletsolidity/getblock', { id_or_num: ID_100 })).text,
    ) as Hdr;
    expect(byId.block_header.raw_data.number).toBe(100);
    const wrongId = `${ID_100.slice(0, 16)}${'ee'.repeat(24)}`;
    expect((await call(node, '/walletsolidity/getblock', { id_or_num: wrongId })).text.trim()).toBe(
      '{}',
    );
    const full = JSON.parse((await call(node, '/wallet/getblock', {})).text) as Hdr;
    expect(full.block_header.raw_data.number).toBe(103);
    expect(full.blockID).toBe(ID_103);
  });

  it('answers GET with a query string like POST with a body, and malformed params like java-tron', async () => {
    const node = await start({ source: synthSource(), instant: true, lag: 2 });
    const get = await call(node, '/walletsolidity/getblockbynum', { num: 100 }, 'GET');
    expect(get.text).toBe(BLOCK_100);
    const getInfos = await call(
      node,
      '/walletsolidity/gettransactioninfobyblocknum',
      { num: 100, visible: true },
      'GET',
    );
    expect(getInfos.text).toBe(INFOS_100);
    const getBlock = await call(node, '/wallet/getblock', { id_or_num: 100, detail: true }, 'GET');
    expect(getBlock.text).toBe(BLOCK_100);
    expect((await call(node, '/walletsolidity/getblockbynum', { num: '100' })).text).toBe(
      BLOCK_100,
    );

    const bad = await call(node, '/walletsolidity/getblockbynum', { num: 'x' }, 'GET');
    expect(bad.status).toBe(200);
    expect(JSON.parse(bad.text)).toEqual({
      Error: 'class java.lang.NumberFormatException : For input string: "x"',
    });
    const badPost = await call(node, '/walletsolidity/getblockbynum', { num: 'x' });
    expect(JSON.parse(badPost.text)).toEqual({
      Error: 'class java.lang.NumberFormatException : For input string: "x"',
    });
    const missing = await call(node, '/walletsolidity/getblockbynum', {}, 'GET');
    expect(JSON.parse(missing.text)).toEqual({
      Error: 'class java.lang.NumberFormatException : null',
    });
    const badId = await call(node, '/wallet/getblock', { id_or_num: 'zz' });
    expect(JSON.parse(badId.text)).toHaveProperty('Error');
    const notJson = await fetch(`${node.url}/wallet/getblockbynum`, {
      method: 'POST',
      body: '{num:',
    });
    expect(notJson.status).toBe(200);
    expect(JSON.parse(await notJson.text())).toHaveProperty('Error');

    const emptyPost = await fetch(`${node.url}/walletsolidity/getblockbynum`, { method: 'POST' });
    const genesis = JSON.parse(await emptyPost.text()) as Hdr; // protobuf default: num 0
    expect(genesis.block_header.raw_data.number).toBe(0);
    expect((await call(node, '/walletsolidity/getblockbynum', { num: -1 })).text.trim()).toBe('{}');
    expect(
      (await call(node, '/walletsolidity/getblockbynum', { num: '99999999999999999' })).text.trim(),
    ).toBe('{}');
    const unknown = await call(node, '/wallet/getaccountresource', {});
    expect(unknown.status).toBe(404);

    const res = await fetch(`${node.url}/wallet/getnodeinfo`);
    expect(res.headers.get('content-type')).toBe('application/json');
    const info = (await res.json()) as Record<string, unknown>;
    expect(info.block).toBe(`Num:105,ID:${(await blockJson(node, 105)).blockID}`);
    expect(info.solidityBlock).toBe(`Num:103,ID:${ID_103}`);
    expect(info).toHaveProperty('configNodeInfo.codeVersion');
    expect(info).toHaveProperty('machineInfo');
    expect(info).toHaveProperty('activeConnectCount');
    expect(info).toHaveProperty('beginSyncNum');

    expect(node.stats.requests.byPath['/walletsolidity/getblockbynum']).toBeGreaterThanOrEqual(6);
    expect(node.stats.requests.byPath['/wallet/getaccountresource']).toBe(1);
    expect(node.stats.requests.total).toBe(15);
  });

  it('fills gaps and both ends with empty blocks of real hashes, chained to the block before', async () => {
    const node = await start({ source: synthSource(), instant: true, lag: 10 });
    const b = new Map<number, Hdr>();
    for (let n = 95; n <= 110; n++) b.set(n, await blockJson(node, n));
    for (let n = 96; n <= 110; n++) {
      // A recorded block names its own (real) parent: no filler can hash to it (a checkpoint).
      if (n === 100 || n === 103) continue;
      expect(b.get(n)?.block_header.raw_data.parentHash, `parentHash of ${n}`).toBe(
        b.get(n - 1)?.blockID,
      );
    }
    for (let n = 95; n <= 110; n++) {
      expect(b.get(n)?.blockID.slice(0, 16)).toBe(n.toString(16).padStart(16, '0'));
      expect(b.get(n)?.block_header.raw_data.number).toBe(n);
      if (n === 100 || n === 103) continue;
      // Each filler passes the checks every block passes: its id is its header's hash.
      expect(verifyBlock(b.get(n) as BlockJson, []).id, `filler ${n}`).toBe(b.get(n)?.blockID);
    }
    expect(b.get(99)?.blockID).not.toBe(PARENT_100);
    expect(b.get(101)?.block_header.raw_data.parentHash).toBe(ID_100);
    expect(b.get(102)?.blockID).not.toBe(PARENT_103);
    expect(b.get(104)?.block_header.raw_data.parentHash).toBe(ID_103);
    for (const n of [95, 96, 97, 98, 99, 101, 102, 104, 110]) {
      expect(b.get(n), `filler ${n}`).not.toHaveProperty('transactions');
      const infos = await call(node, '/wallet/gettransactioninfobyblocknum', { num: n });
      expect(infos.text.trim()).toBe('[]');
    }
    expect(b.get(99)?.block_header.raw_data.timestamp).toBe(TS_100 - 3_000);
    expect(b.get(95)?.block_header.raw_data.timestamp).toBe(TS_100 - 15_000);
    expect(b.get(101)?.block_header.raw_data.timestamp).toBe(TS_100 + 3_000);
    expect(b.get(102)?.block_header.raw_data.timestamp).toBe(TS_100 + 6_000);
    expect(b.get(104)?.block_header.raw_data.timestamp).toBe(TS_103 + 3_000);
    // Deterministic: a second node serves the same filler bytes.
    const again = await start({ source: synthSource(), instant: true, lag: 10 });
    for (const n of [95, 101, 102, 110]) {
      expect((await call(again, '/wallet/getblockbynum', { num: n })).bytes).toEqual(
        (await call(node, '/wallet/getblockbynum', { num: n })).bytes,
      );
    }
  });
});

describe('NodeClient against the replay node', () => {
  it('reads heads and solidified blocks, and refuses blocks above the solidified head', async () => {
    const node = await start({ source: synthSource(), intervalMs: 0, lag: 18 });
    node.advanceTo(100);
    const c = client(node);
    expect(await c.getHeads()).toEqual({ solidified: 100, head: 118 });
    const head = await c.getSolidifiedHead();
    expect(head).toEqual({ number: 100, id: ID_100, timestamp: TS_100 });
    const b = await c.getSolidifiedBlock(100);
    expect(b.block.transactions).toHaveLength(1);
    expect(b.infos).toHaveLength(1);
    const amount = b.block.transactions?.[0]?.raw_data?.contract?.[0]?.parameter?.value?.amount;
    expect(amount).toBe(12345678901234567890n);
    expect(b.infos[0]?.fee).toBe(98765432109876543210n);
    const filler = await c.getSolidifiedBlock(99);
    expect(verifyBlock(filler.block, filler.infos).id).toBe(filler.ref.id);
    expect(filler.ref.id).not.toBe(PARENT_100); // block 100's real parent: a checkpoint follows
    expect(filler.infos).toEqual([]);

    const refused = await c.getSolidifiedBlock(101).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NodeError);
    expect((refused as NodeError).kind).toBe('beyond_solidified');
    expect(node.stats.requests.byPath['/walletsolidity/getblockbynum']).toBe(2);
  });

  it('recovers from injected empty answers and 503s (retries), then reads the right block', async () => {
    const node = await start({ source: synthSource(), instant: true, faults: { emptyRate: 1 } });
    const c = client(node);
    await c.getSolidifiedHead();
    const p = c.getSolidifiedBlock(100);
    await until(() => node.stats.faults.empty >= 2, 'two empty answers');
    node.setFaults(undefined);
    const b = await p;
    expect(b.ref.id).toBe(ID_100);
    expect(b.infos).toHaveLength(1);

    node.setFaults({ errorRate: 1 });
    const q = c.getSolidifiedBlock(100);
    await until(() => node.stats.faults.error >= 2, 'two 503 answers');
    node.setFaults({});
    expect((await q).ref.number).toBe(100);
  }, 30_000);

  it('mixed seeded faults: every block still arrives; a java-tron error JSON is not retried', async () => {
    const node = await start({
      source: synthSource(),
      instant: true,
      faults: { emptyRate: 0.25, errorRate: 0.2, delayMs: 1, seed: 42 },
    });
    const c = client(node, 10);
    await c.getSolidifiedHead();
    for (let n = 98; n <= 103; n++) expect((await c.getSolidifiedBlock(n)).ref.number).toBe(n);
    expect(node.stats.faults.empty + node.stats.faults.error).toBeGreaterThan(0);
    expect(node.stats.faults.delayed).toBeGreaterThan(0);

    node.setFaults({ errorJsonRate: 1 });
    const err = await c.getSolidifiedBlock(100).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NodeError);
    expect((err as NodeError).kind).toBe('node_error');
    expect((err as NodeError).retryable).toBe(false);
    expect(node.stats.faults.errorJson).toBe(1);
  }, 60_000);

  it('faults are deterministic for a seed', async () => {
    const seq = async () => {
      const node = await start({
        source: synthSource(),
        instant: true,
        faults: { emptyRate: 0.3, errorRate: 0.3, errorJsonRate: 0.1, seed: 7 },
      });
      const out: string[] = [];
      for (let i = 0; i < 30; i++) {
        const r = await call(node, '/walletsolidity/getblockbynum', { num: 100 });
        out.push(`${r.status}:${r.text.length}`);
      }
      return out;
    };
    const a = await seq();
    expect(await seq()).toEqual(a);
    expect(new Set(a).size).toBeGreaterThan(1);
  });
});

describe('record → replay', () => {
  it('records the exact bytes and a second replay node serves them identically', async () => {
    const a = await start({ source: synthSource(), instant: true, lag: 5 });
    const c = client(a);
    const out = await tempDir();
    const progress: number[] = [];
    const res = await recordBlocks({
      client: c,
      from: 97,
      to: 103,
      outDir: out,
      onProgress: (p) => progress.push(p.blockNumber),
    });
    expect(res).toMatchObject({ from: 97, to: 103, blocks: 7, transactions: 1 });
    expect(progress.sort((x, y) => x - y)).toEqual([97, 98, 99, 100, 101, 102, 103]);
    const files = (await readdir(out)).sort();
    expect(files).toHaveLength(14);
    expect(files.some((f) => f.includes('.tmp'))).toBe(false);
    expect(await readFile(join(out, 'block-100.json'), 'utf8')).toBe(BLOCK_100);
    expect(await readFile(join(out, 'txinfo-100.json'), 'utf8')).toBe(INFOS_100);
    expect(await readFile(join(out, 'txinfo-101.json'), 'utf8')).toBe('[]');

    const b = await start({ source: dirSource(out), instant: true, lag: 5 });
    expect([b.first, b.last]).toEqual([97, 103]);
    for (let n = 90; n <= 108; n++) {
      for (const path of ['/wallet/getblockbynum', '/wallet/gettransactioninfobyblocknum']) {
        const [x, y] = await Promise.all([call(a, path, { num: n }), call(b, path, { num: n })]);
        expect(y.bytes.equals(x.bytes), `${path} ${n}`).toBe(true);
      }
    }
  });

  it('refuses a range that ends above the solidified head', async () => {
    const node = await start({ source: synthSource(), intervalMs: 0, lag: 5 });
    node.advanceTo(100);
    const out = await tempDir();
    await expect(
      recordBlocks({ client: client(node), from: 99, to: 101, outDir: out }),
    ).rejects.toThrow(/above the node's solidified head 100/);
    expect(await readdir(out)).toEqual([]);
  });
});

describe('replay node on recorded mainnet block 79072107', () => {
  const blockFile = () => readFile(join(CHAIN_DIR, `block-${REAL}.json`));
  const infosFile = () => readFile(join(CHAIN_DIR, `txinfo-${REAL}.json`));

  it('serves the recorded bytes verbatim on every view', async () => {
    const node = await start({ source: dirSource(CHAIN_DIR), instant: true });
    const [block, infos] = await Promise.all([blockFile(), infosFile()]);
    expect([node.first, node.last]).toEqual([REAL, REAL]);
    expect(
      (await call(node, '/walletsolidity/getblockbynum', { num: REAL })).bytes.equals(block),
    ).toBe(true);
    expect(
      (await call(node, '/wallet/getblockbynum', { num: REAL }, 'GET')).bytes.equals(block),
    ).toBe(true);
    expect((await call(node, '/walletsolidity/getnowblock')).bytes.equals(block)).toBe(true);
    expect(
      (await call(node, '/walletsolidity/getblock', { detail: true })).bytes.equals(block),
    ).toBe(true);
    const txi = await call(node, '/walletsolidity/gettransactioninfobyblocknum', { num: REAL });
    expect(txi.bytes.equals(infos)).toBe(true);
    const hdr = JSON.parse((await call(node, '/walletsolidity/getblock', {})).text) as Hdr;
    const real = JSON.parse(block.toString('utf8')) as Hdr;
    expect(hdr).toEqual({
      blockID: real.blockID,
      block_header: (real as unknown as Record<string, unknown>).block_header,
    });
  });

  it('filler blocks of real hashes before and after the real block, chained after it', async () => {
    const node = await start({ source: dirSource(CHAIN_DIR), instant: true });
    const real = JSON.parse((await blockFile()).toString('utf8')) as Hdr;
    const before = await blockJson(node, REAL - 1, '/walletsolidity');
    const before2 = await blockJson(node, REAL - 2, '/walletsolidity');
    const after = await blockJson(node, REAL + 1, '/wallet');
    const after2 = await blockJson(node, REAL + 2, '/wallet');
    // The real block's real parent is not a filler: readers start at it (a checkpoint).
    expect(before.blockID).not.toBe(real.block_header.raw_data.parentHash);
    expect(before.block_header.raw_data.parentHash).toBe(before2.blockID);
    expect(after.block_header.raw_data.parentHash).toBe(real.blockID);
    expect(after2.block_header.raw_data.parentHash).toBe(after.blockID);
    for (const f of [before, before2, after, after2]) {
      expect(verifyBlock(f as BlockJson, []).id).toBe(f.blockID);
    }
    expect(before.block_header.raw_data.timestamp).toBe(
      real.block_header.raw_data.timestamp - 3_000,
    );
    expect(after.block_header.raw_data.timestamp).toBe(
      real.block_header.raw_data.timestamp + 3_000,
    );
    expect((await call(node, '/walletsolidity/getblockbynum', { num: REAL + 1 })).text.trim()).toBe(
      '{}',
    );
  });

  it('NodeClient reads the real block (619 transactions, 619 infos) and refuses the next one', async () => {
    const node = await start({ source: dirSource(CHAIN_DIR), intervalMs: 0, lag: 18 });
    node.advanceTo(REAL);
    const c = client(node);
    expect(await c.getHeads()).toEqual({ solidified: REAL, head: REAL + 18 });
    const head = await c.getSolidifiedHead();
    expect(head.number).toBe(REAL);
    const b = await c.getSolidifiedBlock(REAL);
    expect(b.ref).toEqual({
      number: REAL,
      id: '0000000004b68b6be6d7223b1ecf2850f00f700292beeead2810c18e9e1548e2',
      timestamp: 1767879414000,
    });
    expect(b.block.transactions).toHaveLength(619);
    expect(b.infos).toHaveLength(619);
    const prev = await c.getSolidifiedBlock(REAL - 1);
    expect(verifyBlock(prev.block, prev.infos).id).toBe(prev.ref.id);
    const err = await c.getSolidifiedBlock(REAL + 1).catch((e: unknown) => e);
    expect((err as NodeError).kind).toBe('beyond_solidified');
  });

  it('NodeClient with gRPC reads the real block once as exact bytes: two requests, no JSON block', async () => {
    const node = await start({
      source: dirSource(CHAIN_DIR),
      intervalMs: 0,
      lag: 18,
      grpc: true,
      logRequests: true,
    });
    node.advanceTo(REAL);
    const c = new NodeClient({
      url: node.url,
      retries: 0,
      grpc: parseGrpcTarget(node.grpcUrl as string),
    });
    try {
      await c.getSolidifiedHead();
      const before = node.requestLog.length;
      const b = await c.getSolidifiedBlock(REAL);
      const paths = node.requestLog.slice(before).map((r) => r.path);
      expect(paths.sort()).toEqual([
        '/walletsolidity/gettransactioninfobyblocknum',
        'grpc GetBlockByNum2',
      ]);
      expect(b.block.transactions).toHaveLength(619);
      expect(b.infos).toHaveLength(619);
      const v = verifyBlock(b.block, b.infos, b.exact);
      expect(v.root).toBe('exact');
      expect(v.transfers).toHaveLength(384);
      // Caught up: the next block is asked for directly; not solidified yet, one empty answer.
      const mark = node.requestLog.length;
      expect(await c.getBlockIfSolidified(REAL + 1)).toBeUndefined();
      expect(node.requestLog.slice(mark).map((r) => r.path)).toEqual(['grpc GetBlockByNum2']);
      // A filler (no transactions) costs one request.
      node.advanceTo(REAL + 1);
      const mark2 = node.requestLog.length;
      const next = await c.getBlockIfSolidified(REAL + 1);
      expect(next?.block.block_header?.raw_data?.parentHash).toBe(b.ref.id);
      expect(node.requestLog.slice(mark2).map((r) => r.path)).toEqual(['grpc GetBlockByNum2']);
    } finally {
      await c.close();
    }
  });

  it('NodeClient recovers from injected empty txinfo answers and 503s on the real block', async () => {
    const node = await start({
      source: dirSource(CHAIN_DIR),
      instant: true,
      faults: { emptyRate: 0.2, errorRate: 0.1, seed: 3 },
    });
    const c = client(node, 10);
    await c.getSolidifiedHead();
    for (let i = 0; i < 3; i++) {
      const b = await c.getSolidifiedBlock(REAL);
      expect(b.infos).toHaveLength(619);
    }
    expect(node.stats.faults.empty + node.stats.faults.error).toBeGreaterThan(0);
  }, 60_000);

  it('record → replay round trip keeps the real bytes', async () => {
    const a = await start({ source: dirSource(CHAIN_DIR), instant: true });
    const out = await tempDir();
    const res = await recordBlocks({
      client: client(a),
      from: REAL - 3,
      to: REAL,
      outDir: out,
      concurrency: 2,
    });
    expect(res).toMatchObject({ blocks: 4, transactions: 619 });
    expect((await readFile(join(out, `block-${REAL}.json`))).equals(await blockFile())).toBe(true);
    expect((await readFile(join(out, `txinfo-${REAL}.json`))).equals(await infosFile())).toBe(true);
    const b = await start({ source: dirSource(out), instant: true });
    for (let n = REAL - 6; n <= REAL + 3; n++) {
      for (const path of ['/wallet/getblockbynum', '/wallet/gettransactioninfobyblocknum']) {
        const [x, y] = await Promise.all([call(a, path, { num: n }), call(b, path, { num: n })]);
        expect(y.bytes.equals(x.bytes), `${path} ${n}`).toBe(true);
      }
    }
    await expect(
      recordBlocks({ client: client(a), from: REAL, to: REAL + 1, outDir: out }),
    ).rejects.toThrow(/solidified head/);
  });

  it('record with gRPC writes each block’s exact bytes: the recorded folder proves the real block over gRPC', async () => {
    const grpcClient = (node: ReplayNode) => {
      const c = new NodeClient({
        url: node.url,
        retries: 2,
        timeoutMs: 5_000,
        grpc: parseGrpcTarget(node.grpcUrl as string),
      });
      opened.push(c);
      return c;
    };
    const a = await start({ source: dirSource(CHAIN_DIR), instant: true, grpc: true });
    const out = await tempDir();
    const res = await recordBlocks({
      client: grpcClient(a),
      from: REAL - 1,
      to: REAL,
      outDir: out,
      concurrency: 2,
    });
    expect(res).toMatchObject({ blocks: 2, transactions: 619, exact: true });
    expect((await readdir(out)).sort()).toEqual([
      `block-${REAL - 1}.json`,
      `block-${REAL}.json`,
      `blockext-${REAL - 1}.bin`,
      `blockext-${REAL}.bin`,
      `txinfo-${REAL - 1}.json`,
      `txinfo-${REAL}.json`,
    ]);
    const recorded = await readFile(join(out, `blockext-${REAL}.bin`));
    expect(recorded.equals(await readFile(join(CHAIN_DIR, `blockext-${REAL}.bin`)))).toBe(true);
    // What the demo checks before it starts (npm run demo -- --blocks DIR).
    expect(lackingExactBytes(out)).toEqual([]);
    // A replay node on the recorded folder serves those bytes, and the real block is proven from
    // them (a folder recorded without them has no gRPC answer for it: NOT_FOUND).
    const b = await start({ source: dirSource(out), instant: true, grpc: true });
    const reader = grpcClient(b);
    await reader.getSolidifiedHead();
    const blk = await reader.getSolidifiedBlock(REAL);
    const v = verifyBlock(blk.block, blk.infos, blk.exact);
    expect(v.root).toBe('exact');
    expect(v.transfers).toHaveLength(384);
    expect(v.transfers.every((t) => t.proof === 'signed')).toBe(true);
  });

  it('record refuses to promise exact bytes without a gRPC address, before any request', async () => {
    const a = await start({ source: dirSource(CHAIN_DIR), instant: true, logRequests: true });
    const out = await tempDir();
    await expect(
      recordBlocks({ client: client(a), from: REAL, to: REAL, outDir: out, exact: true }),
    ).rejects.toThrow(/no gRPC address/);
    expect(a.requestLog).toEqual([]);
    expect(await readdir(out)).toEqual([]);
  });
});
