/**
 * The test environment's own chain (issue 32 item 2), on both engines: with TRON_TESTNET_NODE_URL
 * set, the service (api + ingest roles, started as `serve` starts them) follows a Nile-shaped chain
 * served by a real replay node (gRPC exact bytes; USDT = Nile's TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf)
 * beside the mainnet one, with its own cursor and head: a test watch gets a real Nile transfer
 * as a test event (network nile, livemode false, Nile's USDT contract), a live key sees none of
 * it, and GET /v1/status answers per network.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts.js';
import { createApiKey } from '../../src/accounts/keys.js';
import { silentLogger } from '../../src/common/logger.js';
import { loadConfig } from '../../src/config.js';
import { syntheticBlock } from '../../src/devnet/synthetic.js';
import { type Service, startService } from '../../src/service.js';
import {
  hexToBase58,
  NILE_USDT_CONTRACT_BASE58,
  NILE_USDT_CONTRACT_HEX,
} from '../../src/tron/address.js';
import { extractTransfers } from '../../src/tron/extract.js';
import {
  checkpointFile,
  FINALITY_DEPTH,
  nodeEnv,
  type SyntheticChain,
  serveSynthetic,
  tronNodeUrl,
} from '../helpers/chain.js';
import { dbEngines, emptyDb, type TestDb } from '../helpers/db.js';

const INTERVAL = 50;
const MAINNET = { seed: 7, firstBlock: 75_000_000, txPerBlock: 40, addresses: 40, count: 30 };
const NILE = {
  seed: 8,
  firstBlock: 60_000_000,
  txPerBlock: 60,
  addresses: 40,
  count: 40,
  usdtContract: NILE_USDT_CONTRACT_HEX,
};

async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each(dbEngines)('the test network’s ingester (Nile) on %s', (engine) => {
  let t: TestDb | undefined;
  let main: SyntheticChain | undefined;
  let nile: SyntheticChain | undefined;
  let svc: Service | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await svc?.stop();
    await main?.node.close();
    await nile?.node.close();
    await t?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    svc = undefined;
    main = undefined;
    nile = undefined;
    t = undefined;
    dir = undefined;
  });

  it('the Nile-shaped chain’s USDT is not mainnet’s: read only with Nile’s contract', () => {
    const b = syntheticBlock({ ...NILE, firstBlock: NILE.firstBlock }, NILE.firstBlock + 3);
    const usdt = b.transfers.filter((x) => x.asset === 'USDT');
    expect(usdt.length).toBeGreaterThan(0);
    expect(extractTransfers(b.block, b.infos).filter((x) => x.asset === 'USDT')).toEqual([]);
    expect(
      extractTransfers(b.block, b.infos, { usdt: NILE_USDT_CONTRACT_HEX }).filter(
        (x) => x.asset === 'USDT',
      ),
    ).toEqual(usdt);
  });

  it('follows Nile beside mainnet: a test watch gets a Nile transfer as a test event, live sees none, status per network', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-nile-'));
    const env: Record<string, string> = {
      DATA_DIR: dir,
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      TRON_BLOCK_INTERVAL_MS: String(INTERVAL),
    };
    if (engine === 'postgres') {
      t = await emptyDb('postgres');
      env.DATABASE_URL = t.url as string;
    }
    main = await serveSynthetic(MAINNET, { intervalMs: INTERVAL, lag: 2, startBefore: 0 });
    // Nile's full-node head runs FINALITY_DEPTH above its solidified one: its light client
    // (TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT) proves final what the node solidified.
    nile = await serveSynthetic(NILE, {
      intervalMs: INTERVAL,
      lag: FINALITY_DEPTH,
      startBefore: 0,
    });
    const n = nile;
    // Nile halts at first + 8 until the test watch exists.
    n.node.pause();
    n.node.advanceTo(n.first + 8);
    const halted = n.node.heads();
    Object.assign(env, nodeEnv(main.node));
    env.INGEST_START_BLOCK = String(main.first);
    env.TRON_TESTNET_NODE_URL = tronNodeUrl(n.node);
    env.TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT = checkpointFile(n.node);
    svc = await startService(loadConfig(env), { roles: ['api', 'ingest'], logger: silentLogger });
    const s = svc;
    expect(s.testIngester).toBeDefined();
    await until(
      'Nile ingest up to the halt',
      () => (s.testIngester?.stats.cursor ?? 0) >= halted.solidified,
    );
    await until('mainnet ingest', () => (s.ingester?.stats.cursor ?? 0) >= MAINNET.firstBlock + 3);

    // A USDT transfer of Nile's in the first block a watch created now may match.
    const first = n.transfers.find((x) => x.blockNumber === halted.head + 1 && x.asset === 'USDT');
    if (!first) throw new Error(`no USDT transfer in Nile block ${halted.head + 1}`);
    const acc = await createAccount(s.db, { email: 'nile@example.com', plan: 'pro' });
    const testKey = await createApiKey(s.db, acc.id, { network: 'nile' });
    const liveKey = await createApiKey(s.db, acc.id);
    const test = { authorization: `Bearer ${testKey.key}`, 'content-type': 'application/json' };
    const live = { authorization: `Bearer ${liveKey.key}`, 'content-type': 'application/json' };
    const watchBody = JSON.stringify({
      address: hexToBase58(first.to),
      asset_filter: 'USDT',
      direction: 'incoming',
      webhook_url: 'https://93.184.215.14/hook',
    });
    const created = await fetch(`${s.url}/v1/watches`, {
      method: 'POST',
      headers: test,
      body: watchBody,
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const tw = (await created.json()) as { id: string };
    // The same address watched live: Nile's transfer must never reach it.
    const lw = await fetch(`${s.url}/v1/watches`, {
      method: 'POST',
      headers: live,
      body: watchBody,
    });
    expect(lw.status, await lw.clone().text()).toBe(201);
    const { rows } = await s.db.query<{ active_from_block: string; network: string }>(
      'SELECT active_from_block, network FROM watches WHERE id = $1',
      [tw.id],
    );
    // Activated on Nile's own head, not mainnet's.
    expect(rows[0]?.network).toBe('nile');
    expect(Number(rows[0]?.active_from_block)).toBe(halted.head);

    n.node.resume();
    await until(
      'the Nile block after the halt',
      () => (s.testIngester?.stats.cursor ?? 0) >= halted.head + 1,
    );
    const events = (await (
      await fetch(`${s.url}/v1/events?watch_id=${tw.id}`, { headers: test })
    ).json()) as {
      data: Array<Record<string, unknown>>;
    };
    const got = events.data.find((e) => e.tx_id === first.txId);
    expect(got).toMatchObject({
      network: 'nile',
      livemode: false,
      asset: 'USDT',
      block_number: halted.head + 1,
      contract: NILE_USDT_CONTRACT_BASE58,
      to: hexToBase58(first.to),
      amount_raw: first.amountRaw.toString(),
      watch_id: tw.id,
    });
    // Explain reads a test watch's transactions through Nile's node group, never mainnet's: a
    // Nile transfer of another address, in a solidified Nile block, is not involved (mainnet's
    // node does not know it: it would say not_found).
    const other = n.transfers.find(
      (x) => x.blockNumber <= halted.solidified && x.to !== first.to && x.from !== first.to,
    );
    if (!other) throw new Error('no Nile transfer of another address below the halt');
    const explain = async (txId: string) => {
      const res = await fetch(`${s.url}/v1/watches/${tw.id}/transactions/${txId}`, {
        headers: test,
      });
      expect(res.status, await res.clone().text()).toBe(200);
      return (await res.json()) as { reason: string; block_number: number | null };
    };
    expect(await explain(other.txId)).toMatchObject({
      reason: 'address_not_involved',
      block_number: other.blockNumber,
    });
    expect(await explain(first.txId)).toMatchObject({
      reason: 'produced',
      block_number: halted.head + 1,
    });
    const liveEvents = (await (await fetch(`${s.url}/v1/events`, { headers: live })).json()) as {
      data: Array<{ tx_id: string }>;
    };
    expect(liveEvents.data.map((e) => e.tx_id)).not.toContain(first.txId);

    // Status per network: each key sees its own chain's cursor.
    const st = async (h: Record<string, string>) =>
      (await (await fetch(`${s.url}/v1/status`, { headers: h })).json()) as {
        network: string;
        scanned_through: { block_number: number } | null;
        light_client: unknown;
      };
    const [ts, ls] = [await st(test), await st(live)];
    expect(ts.network).toBe('nile');
    // Nile's own light client, from its own checkpoint (the block before its first).
    expect(ts.light_client).toMatchObject({
      checkpoint_block: NILE.firstBlock - 1,
      checkpoint_pinned: true,
      proven_by_srs: 19,
    });
    expect((ts.light_client as { final_block: number }).final_block).toBeGreaterThanOrEqual(
      halted.head + 1,
    );
    expect((ts.light_client as { final_block: number }).final_block).toBeLessThan(
      MAINNET.firstBlock,
    );
    expect(ls.light_client).toMatchObject({ checkpoint_block: MAINNET.firstBlock - 1 });
    expect(ts.scanned_through?.block_number).toBeGreaterThanOrEqual(halted.head + 1);
    // (the two chains' numbers are apart: Nile's start at 60,000,000, mainnet's at 75,000,000)
    expect(ts.scanned_through?.block_number).toBeLessThan(MAINNET.firstBlock);
    expect(ls.network).toBe('mainnet');
    expect(ls.scanned_through?.block_number).toBeGreaterThanOrEqual(MAINNET.firstBlock);
  }, 120_000);
});
