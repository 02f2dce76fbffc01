/**
 * Issue 36 item 5: no credit on one provider's word. A USDT Transfer log emitted inside another
 * contract's call (the synthetic chain's router swaps and batch sends) rests on receipts, which
 * no header commits to: at quorum 1 it is `proof: provider`. Through the whole path (real replay
 * nodes over HTTP, the verifying node group, the ingest loop, the events and notifications tables,
 * the confirmer (src/ingest/confirm.ts), the delivery worker and a real HTTPS receiver checking
 * real signatures), on both engines:
 *
 * - one provider: the event is stored and listed, its notification held ('single_provider'),
 *   and never delivered while the worker delivers everything else;
 * - a second honest provider: confirmed, proof raised to `quorum`, delivered once with it;
 * - a second provider contradicting the receipt: stays held ('contradicted', naming it);
 * - TRON_DELIVER_PROVIDER_PROOF (the operator's opt-in): delivered at once with `proof: provider`.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
import { buildApp } from '../../src/api/app.js';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import { newWebhookSecret, SecretBox } from '../../src/common/secrets.js';
import { loadConfig } from '../../src/config.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { memorySource, type ReplayNode, startReplayNode } from '../../src/devnet/replay-node.js';
import { syntheticBlock } from '../../src/devnet/synthetic.js';
import { Confirmer } from '../../src/ingest/confirm.js';
import { Ingester } from '../../src/ingest/loop.js';
import { MemoryRateLimiter } from '../../src/rate-limit/limiter.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { extractTransfers } from '../../src/tron/extract.js';
import { NodeClient } from '../../src/tron/node-client.js';
import { NodeGroup } from '../../src/tron/node-group.js';
import type { TransactionInfoJson, Transfer } from '../../src/tron/types.js';
import { json, offlineResolver, openapiDocument, responseChecker } from '../helpers/api.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';

const CHAIN = { seed: 31, firstBlock: 73_000_000, txPerBlock: 80, addresses: 40 };
const COUNT = 6;
const FIRST = CHAIN.firstBlock;
const LAST = FIRST + COUNT - 1;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-held-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const box = new SecretBox([randomBytes(32)]);
const SECRET = newWebhookSecret();

/** The chain, and every transfer with the proof one provider's answer gives it. */
function buildChain() {
  const map = new Map<number, { block: string; infos: string }>();
  const infos = new Map<number, TransactionInfoJson[]>();
  const transfers: Transfer[] = [];
  for (let n = FIRST; n <= LAST; n++) {
    const b = syntheticBlock(CHAIN, n);
    map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
    infos.set(n, b.infos);
    transfers.push(...extractTransfers(b.block, b.infos, { proof: true }));
  }
  // The first transfer that only a receipt shows (a log inside a router's call), and a direct
  // one (signed) to another address: the control that proves the worker runs meanwhile.
  const held = transfers.find((t) => t.proof === 'provider' && t.asset === 'USDT');
  if (!held) throw new Error('the synthetic chain has no provider-proof transfer');
  const signed = transfers.find(
    (t) => t.proof === 'signed' && t.to !== held.to && t.from !== held.to,
  );
  if (!signed) throw new Error('no signed transfer');
  return { map, infos, transfers, held, signed };
}

type Chain = ReturnType<typeof buildChain>;

/** Wait for a state (a bound, not a measurement). */
async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 120_000) {
  await vi.waitFor(
    async () => {
      if (!(await cond())) throw new Error(`timed out waiting for ${what}`);
    },
    { timeout: ms, interval: 20 },
  );
}

interface NtfRow {
  event_id: string;
  tx_id: string;
  event_index: number;
  to_address: string;
  proof: string;
  status: string;
  attempts: number;
  held_since: Date | null;
  held_reason: string | null;
  held_detail: string | null;
}

describe.each(dbEngines)('provider-proof events held on %s', { timeout: 240_000 }, (engine) => {
  let t: TestDb | undefined;
  const closers: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    while (closers.length > 0) await closers.pop()?.();
    await t?.drop();
    t = undefined;
  });

  /**
   * Replay nodes (`lies[i]`: the infos answered for some blocks), two webhook watches (the held
   * transfer's recipient, the signed one's), then ingest + confirmer + worker until every block
   * is committed.
   */
  async function run(
    chain: Chain,
    opts: {
      providers: number;
      deliverProviderProof?: boolean;
      lies?: Array<Map<number, { infos: string }> | undefined>;
    },
  ) {
    t = await migratedDb(engine);
    const db = t.db;
    const source = memorySource(chain.map);
    const nodes: ReplayNode[] = [];
    for (let i = 0; i < opts.providers; i++) {
      const blocks = opts.lies?.[i];
      const node = await startReplayNode({
        source,
        instant: true,
        ...(blocks ? { lies: { blocks } } : {}),
      });
      nodes.push(node);
      closers.push(() => node.close());
    }
    const receiver: Receiver = await startReceiver({ secretFor: SECRET });
    closers.push(() => receiver.close());
    const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, receiver.ca);
    const account = newId('acc');
    await db.query("INSERT INTO accounts (id, email, plan) VALUES ($1, $2, 'pro')", [
      account,
      `${account}@example.test`,
    ]);
    const enc = box.encrypt(SECRET);
    for (const hex of [chain.held.to, chain.signed.to]) {
      await db.query(
        `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter,
                              direction, channel, webhook_url, secret_key_id, secret_ciphertext,
                              active_from_block)
         VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'incoming', 'webhook', $5, $6, $7, $8)`,
        [
          newId('wh'),
          account,
          hexToBase58(hex),
          hex,
          receiver.url,
          enc.keyId,
          enc.ciphertext,
          FIRST - 1,
        ],
      );
    }
    const group = new NodeGroup({
      clients: nodes.map((n) => new NodeClient({ url: n.url, retries: 1, timeoutMs: 5_000 })),
      quorum: 1,
      blockIntervalMs: 50,
      logger: silentLogger,
      asideBaseMs: 0,
    });
    closers.push(() => group.close());
    const worker = new DeliveryWorker({
      db,
      secrets: box,
      config: {
        delivery: {
          timeoutMs: 5_000,
          scheduleScale: 1,
          concurrency: 4,
          pollMs: 10,
          allowCidrs: ['127.0.0.1/32'],
          caFile,
        },
      },
      logger: silentLogger,
    });
    const confirmer = new Confirmer({
      db,
      network: 'mainnet',
      clients: group.clients,
      quorum: 1,
      deliverProviderProof: opts.deliverProviderProof === true,
      blockIntervalMs: 50,
      logger: silentLogger,
      onReleased: () => worker.wake(),
    });
    const ingester = new Ingester({
      db,
      client: group,
      logger: silentLogger,
      config: {
        network: 'mainnet',
        node: { concurrency: 4 },
        ingest: { startBlock: FIRST, blockIntervalMs: 50 },
      },
      permanentRetryMs: 100,
      hooks: { deliverProviderProof: opts.deliverProviderProof === true },
      onEvents: () => {
        worker.wake();
        confirmer.wake();
      },
    });
    const ac = new AbortController();
    const running = [ingester.run(ac.signal), confirmer.run(ac.signal), worker.start(ac.signal)];
    closers.push(async () => {
      ac.abort();
      await Promise.all(running);
    });
    await until('the last block', () => ingester.stats.cursor >= LAST);
    const rows = async () =>
      (
        await db.query<NtfRow>(
          `SELECT e.id AS event_id, e.tx_id, e.event_index, e.to_address, e.proof, n.status,
                  n.attempts, n.held_since, n.held_reason, n.held_detail
             FROM events e JOIN notifications n ON n.event_id = e.id ORDER BY e.created_at`,
        )
      ).rows;
    const isHeld = (r: NtfRow) =>
      r.tx_id === chain.held.txId && r.event_index === chain.held.eventIndex;
    /** GET `url` of the public API as this account, checked against the OpenAPI document. */
    const api = async (url: string) => {
      const app = await buildApp({
        config: loadConfig({}),
        db,
        logger: silentLogger,
        secrets: box,
        rateLimiter: new MemoryRateLimiter(),
        resolver: offlineResolver,
      });
      closers.push(() => app.close());
      const key = await createApiKey(db, account);
      const res = await app.inject({ url, headers: { authorization: `Bearer ${key.key}` } });
      const check = responseChecker(await openapiDocument(app));
      const route = url.split('?')[0]?.replace(/evt_[A-Za-z0-9_]+$/, '{event_id}') ?? url;
      expect(check(route, 'get', res)).toEqual([]);
      return json<Record<string, unknown>>(res);
    };
    return { db, receiver, rows, isHeld, confirmer, api };
  }

  it('one provider: the provider-proof event is stored but held, the worker never sends it', async () => {
    const chain = buildChain();
    const r = await run(chain, { providers: 1 });
    // The worker delivers every other event (it runs), and the confirmer says why the held one waits.
    await until('the others delivered and the hold explained', async () => {
      const all = await r.rows();
      return (
        all.filter((x) => !isProvider(x)).every((x) => x.status === 'DELIVERED') &&
        all.some((x) => r.isHeld(x) && x.held_reason === 'single_provider')
      );
    });
    function isProvider(x: NtfRow) {
      return x.proof === 'provider';
    }
    const all = await r.rows();
    const held = all.filter(r.isHeld);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({
      proof: 'provider',
      status: 'PENDING',
      attempts: 0,
      to_address: hexToBase58(chain.held.to),
      held_reason: 'single_provider',
    });
    expect(held[0]?.held_since).not.toBeNull();
    expect(held[0]?.held_detail).toMatch(/only 1 provider is configured/);
    // Every provider-proof event is held; everything signed went out.
    for (const x of all) {
      if (x.proof === 'provider') expect(x).toMatchObject({ status: 'PENDING', attempts: 0 });
      else expect(x).toMatchObject({ status: 'DELIVERED', held_since: null });
    }
    expect(all.some((x) => x.proof === 'signed')).toBe(true);
    // The API lists it with the hold (additive), status still one of the SPEC's three.
    const page = await r.api('/v1/events?held=true');
    const listed = page.data as Array<Record<string, unknown>>;
    expect(listed.map((e) => e.event_id).sort()).toEqual(
      all
        .filter((x) => x.proof === 'provider')
        .map((x) => x.event_id)
        .sort(),
    );
    const one = listed.find((e) => e.event_id === held[0]?.event_id);
    expect(one).toMatchObject({
      proof: 'provider',
      delivery: { status: 'PENDING', attempts: 0, held: { reason: 'single_provider' } },
    });
    const others = (await r.api('/v1/events?held=false')).data as Array<Record<string, unknown>>;
    expect(others.every((e) => (e.delivery as { held: unknown }).held === null)).toBe(true);
    expect(others.length + listed.length).toBe(all.length);
    // /v1/status warns (this app's config: the one default provider) and counts them.
    expect((await r.api('/v1/status')).provider_proof).toEqual({
      providers: 1,
      needed: 2,
      deliver_unconfirmed: false,
      held_events: listed.length,
      warning: expect.stringMatching(
        /^one node provider is configured: .* its delivery stays held \(listed, never sent\)/,
      ),
    });
    const detail = await r.api(`/v1/events/${held[0]?.event_id}`);
    expect((detail.notifications as unknown[])[0]).toMatchObject({
      status: 'PENDING',
      next_attempt_at: null,
      held: { reason: 'single_provider', detail: expect.stringMatching(/only 1 provider/) },
    });
    // Another round of the confirmer and the worker: still nothing sent for it.
    await r.confirmer.round();
    const sentIds = new Set(r.receiver.received.map((q) => q.eventId));
    for (const x of all) expect(sentIds.has(x.event_id)).toBe(x.proof !== 'provider');
    expect(r.receiver.received.every((q) => q.verified)).toBe(true);
  });

  it('a second honest provider confirms it: proof quorum, delivered once', async () => {
    const chain = buildChain();
    const r = await run(chain, { providers: 2 });
    await until('everything delivered', async () =>
      (await r.rows()).every((x) => x.status === 'DELIVERED'),
    );
    const all = await r.rows();
    const held = all.filter(r.isHeld);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ proof: 'quorum', held_since: null, held_reason: null });
    // Nothing of one provider's word is left, and each event was sent exactly once.
    expect(all.filter((x) => x.proof === 'provider')).toEqual([]);
    for (const x of all) expect(r.receiver.countsByEvent.get(x.event_id)).toBe(1);
    const sent = r.receiver.received.find((q) => q.eventId === held[0]?.event_id);
    expect(sent?.verified).toBe(true);
    expect(((await r.api('/v1/events?held=true')).data as unknown[]).length).toBe(0);
    expect(sent?.event).toMatchObject({
      proof: 'quorum',
      tx_id: chain.held.txId,
      event_index: chain.held.eventIndex,
      amount_raw: chain.held.amountRaw.toString(),
      to: hexToBase58(chain.held.to),
    });
  });

  it('a second provider contradicting the receipt: the event stays held, naming it', async () => {
    const chain = buildChain();
    const n = chain.held.blockNumber;
    const forged = structuredClone(chain.infos.get(n) as TransactionInfoJson[]);
    const info = forged.find((i) => i.id === chain.held.txId) as TransactionInfoJson;
    const log = info.log?.[chain.held.eventIndex] as { data: string };
    log.data = (chain.held.amountRaw + 1n).toString(16).padStart(64, '0');
    const r = await run(chain, {
      providers: 2,
      lies: [undefined, new Map([[n, { infos: JSON.stringify(forged) }]])],
    });
    await until('the contradiction recorded', async () =>
      (await r.rows()).some((x) => r.isHeld(x) && x.held_reason === 'contradicted'),
    );
    await until('the others delivered', async () =>
      (await r.rows()).filter((x) => !r.isHeld(x)).every((x) => x.status === 'DELIVERED'),
    );
    const held = (await r.rows()).filter(r.isHeld);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({
      proof: 'provider',
      status: 'PENDING',
      attempts: 0,
      held_reason: 'contradicted',
    });
    expect(held[0]?.held_detail).toMatch(
      new RegExp(`provider 2 log ${chain.held.eventIndex} says value ${chain.held.amountRaw + 1n}`),
    );
    expect(r.receiver.countsByEvent.get(held[0]?.event_id ?? '')).toBeUndefined();
  });

  it('TRON_DELIVER_PROVIDER_PROOF (opt-in): delivered at once with proof provider', async () => {
    const chain = buildChain();
    const r = await run(chain, { providers: 1, deliverProviderProof: true });
    await until('everything delivered', async () =>
      (await r.rows()).every((x) => x.status === 'DELIVERED'),
    );
    const held = (await r.rows()).filter(r.isHeld);
    expect(held[0]).toMatchObject({ proof: 'provider', held_since: null });
    const sent = r.receiver.received.filter((q) => q.eventId === held[0]?.event_id);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.event).toMatchObject({ proof: 'provider', tx_id: chain.held.txId });
  });
});
