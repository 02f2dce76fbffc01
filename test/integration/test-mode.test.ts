/**
 * Test mode (issue 32), on both engines: `tw_test_` keys beside `tw_live_` ones in one deployment,
 * test deposits on demand (POST /v1/test/transfers) through the real pipeline (a real delivery
 * worker, a real HTTPS receiver, real signatures, the retry schedule compressed, DEAD,
 * redelivery), and every crossing between the environments tried with each key type: nothing
 * mixes.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { keysCreate, keysRevoke } from '../../src/accounts/cli.js';
import { createApiKey } from '../../src/accounts/keys.js';
import { recordAudit, SYSTEM_ACTORS } from '../../src/audit/audit.js';
import { silentLogger } from '../../src/common/logger.js';
import { Metrics } from '../../src/common/metrics.js';
import { loadConfig } from '../../src/config.js';
import { signBody } from '../../src/delivery/payload.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { dirSource, startReplayNode } from '../../src/devnet/replay-node.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { nodeGroupFor } from '../../src/tron/node-group.js';
import { AlertChannelSender, saveAlertChannel } from '../../src/watches/alert-channels.js';
import { AlertLoop, type AlertMessage } from '../../src/watches/alert-outbox.js';
import {
  type ApiHarness,
  apiHarness,
  type Caller,
  type HarnessOptions,
  insertEvents,
  json,
  webhookWatch,
} from '../helpers/api.js';
import { nodeEnv } from '../helpers/chain.js';
import { Browser } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';
import { chainDir, fixtureJson } from '../helpers/fixtures.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-test-mode-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** The real mainnet block the replay node serves (test/fixtures/tron-mainnet/chain). */
const BLOCK = 79072107;
/** A TRX transfer of that block, picked from its JSON. */
const MAINNET_TRX = (() => {
  const { transactions } = fixtureJson<{
    transactions: Array<{
      txID: string;
      raw_data: {
        contract: Array<{ type: string; parameter: { value: Record<string, unknown> } }>;
      };
    }>;
  }>(`chain/block-${BLOCK}.json`);
  for (const t of transactions) {
    const c = t.raw_data.contract[0];
    const v = c?.parameter.value as { to_address?: string; amount?: number } | undefined;
    if (c?.type === 'TransferContract' && v?.to_address && (v.amount ?? 0) > 0) {
      return { txId: t.txID, to: hexToBase58(v.to_address) };
    }
  }
  throw new Error(`no TRX transfer in block ${BLOCK}`);
})();

/** A second address (the harness's webhookWatch watches ADDR_B58). */
const OTHER_ADDRESS = 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7';

interface EventJson {
  event_id: string;
  type: string;
  network: string;
  proof: string;
  livemode: boolean;
  tx_id: string;
  amount: string;
  amount_raw: string;
  asset: string;
  direction: string;
  from: string;
  to: string;
  watch_id: string;
  contract: string | null;
  delivery: { notification_id: string; status: string; attempts: number } | null;
}

describe.each(dbEngines)('test mode on %s', (engine) => {
  let h: ApiHarness | undefined;
  let r: Receiver | undefined;
  let stopWorker: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stopWorker?.();
    stopWorker = undefined;
    await r?.close();
    r = undefined;
    await h?.close();
    h = undefined;
  });

  /** The harness, an account with a live key and a test key (both owner, full). */
  async function setup(
    env: Record<string, string> = {},
    more: Pick<HarnessOptions, 'chain' | 'testnetChain'> = {},
  ) {
    r = await startReceiver({ respond: () => 200 });
    const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, r.ca);
    h = await apiHarness(engine, {
      ...more,
      env: {
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        WEBHOOK_CA_FILE: caFile,
        DELIVERY_POLL_MS: '20',
        ...env,
      },
    });
    const live = await h.caller();
    const t = await createApiKey(h.db, live.accountId, { network: 'nile' });
    const test: Caller = {
      accountId: live.accountId,
      keyId: t.id,
      key: t.key,
      headers: { authorization: `Bearer ${t.key}` },
    };
    return { h, r, live, test };
  }

  function startWorker(hh: ApiHarness) {
    const worker = new DeliveryWorker({
      db: hh.db,
      secrets: hh.secrets,
      config: hh.config,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const done = worker.start(ac.signal);
    stopWorker = async () => {
      ac.abort();
      await done;
    };
  }

  async function createWatch(hh: ApiHarness, c: Caller, body: Record<string, unknown>) {
    const res = await hh.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: body,
    });
    expect(res.statusCode, res.body).toBe(201);
    return json<{ id: string; secret: string; network?: string }>(res);
  }

  async function trigger(hh: ApiHarness, c: Caller, body: Record<string, unknown>) {
    return hh.app.inject({
      method: 'POST',
      url: '/v1/test/transfers',
      headers: c.headers,
      payload: body,
    });
  }

  it('a test deposit is delivered, signed with the test watch’s secret, marked test in body and header', async () => {
    const { h, r, live, test } = await setup();
    const tw = await createWatch(h, test, webhookWatch({ webhook_url: r.url }));
    const { rows } = await h.db.query<{ network: string }>(
      'SELECT network FROM watches WHERE id = $1',
      [tw.id],
    );
    expect(rows[0]?.network).toBe('nile');

    const res = await trigger(h, test, {
      watch_id: tw.id,
      amount: '25.5',
      counterparty: OTHER_ADDRESS,
    });
    expect(res.statusCode, res.body).toBe(201);
    const e = json<EventJson>(res);
    expect(e).toMatchObject({
      network: 'nile',
      livemode: false,
      asset: 'USDT',
      direction: 'incoming',
      amount: '25.5',
      amount_raw: '25500000',
      from: OTHER_ADDRESS,
      watch_id: tw.id,
      contract: 'TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf',
      delivery: { status: 'PENDING', attempts: 0 },
    });
    expect(e.tx_id).toMatch(/^test_[0-9a-f]{59}$/);
    // Its own proof value (issue 40 item 11): `test`, not `provider` (a real chain's word).
    expect(e.proof).toBe('test');

    startWorker(h);
    const got = await vi.waitFor(
      () => {
        const q = r.received.find((x) => x.eventId === e.event_id);
        if (!q) throw new Error('not delivered yet');
        return q;
      },
      { timeout: 15_000, interval: 50 },
    );
    expect(got.headers['tronwatch-test-mode']).toBe('true');
    expect(got.headers['x-signature']).toBe(signBody(tw.secret, got.body));
    const body = JSON.parse(got.body.toString('utf8')) as EventJson;
    expect(body.livemode).toBe(false);
    expect(body.network).toBe('nile');
    expect(body.type).toBe('transfer.confirmed');
    expect(body.proof).toBe('test');
    const byProof = await h.app.inject({ url: '/v1/events?proof=test', headers: test.headers });
    expect(byProof.statusCode, byProof.body).toBe(200);
    expect(json<{ data: EventJson[] }>(byProof).data.map((x) => x.event_id)).toEqual([e.event_id]);
    const providerOnly = await h.app.inject({
      url: '/v1/events?proof=provider',
      headers: test.headers,
    });
    expect(json<{ data: EventJson[] }>(providerOnly).data).toEqual([]);
    await vi.waitFor(
      async () => {
        const list = await h.app.inject({ url: '/v1/events', headers: test.headers });
        const ev = json<{ data: EventJson[] }>(list).data.find((x) => x.event_id === e.event_id);
        expect(ev?.delivery?.status).toBe('DELIVERED');
        expect(ev?.livemode).toBe(false);
      },
      { timeout: 10_000, interval: 50 },
    );

    // The live key sees none of it: not in its events, not by id, not redeliverable.
    const liveList = await h.app.inject({ url: '/v1/events', headers: live.headers });
    expect(json<{ data: EventJson[] }>(liveList).data).toEqual([]);
    const byId = await h.app.inject({ url: `/v1/events/${e.event_id}`, headers: live.headers });
    expect(byId.statusCode).toBe(404);
    const redeliver = await h.app.inject({
      method: 'POST',
      url: `/v1/events/${e.event_id}/redeliver`,
      headers: live.headers,
    });
    expect(redeliver.statusCode).toBe(404);
  });

  it('a failing receiver sees the retries, then DEAD; a redelivery with the test key delivers', async () => {
    const { h, r: first, test } = await setup({ DELIVERY_SCHEDULE_SCALE: '0.0001' });
    let failing = true;
    await first.close();
    // The signed alert webhook (an on-call tool) at /alerts always accepts.
    const rr = await startReceiver({
      respond: (req) => (req.path === '/alerts' || !failing ? 200 : 500),
    });
    r = rr;
    const caFile = path.join(tmp, `ca2-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, rr.ca);
    // The worker trusts the new receiver's certificate through its own config.
    const config = { ...h.config, delivery: { ...h.config.delivery, caFile } };
    // The account's signed alert webhook (an on-call tool), as a team sets it in the console.
    await saveAlertChannel(
      h.db,
      { secrets: h.secrets, allowCidrs: ['127.0.0.1/32'] },
      { accountId: test.accountId, kind: 'webhook', url: `${rr.origin}/alerts` },
      { accountId: test.accountId, actor: SYSTEM_ACTORS.members, clientIp: null },
    );
    const tw = await createWatch(h, test, webhookWatch({ webhook_url: rr.url }));
    const e = json<EventJson>(await trigger(h, test, { watch_id: tw.id, amount: '1' }));
    const worker = new DeliveryWorker({
      db: h.db,
      secrets: h.secrets,
      config,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const done = worker.start(ac.signal);
    stopWorker = async () => {
      ac.abort();
      await done;
    };
    await vi.waitFor(
      async () => {
        const list = await h.app.inject({ url: '/v1/events', headers: test.headers });
        const ev = json<{ data: EventJson[] }>(list).data[0];
        expect(ev?.delivery).toMatchObject({ status: 'DEAD', attempts: 6 });
      },
      { timeout: 90_000, interval: 100 },
    );
    expect(rr.countsByEvent.get(e.event_id)).toBe(6);

    // The outage queued an alert (e-mail and the account's alert webhook, as a live one): it
    // says TEST MODE everywhere, so the on-call team never takes it for a live outage, and its
    // link opens the console in test mode, where the watch is (issue 32).
    const { rows: queued } = await h.db.query<{ id: string }>(
      `SELECT a.id FROM watch_alerts a WHERE a.watch_id = $1 AND a.kind = 'failing'`,
      [tw.id],
    );
    expect(queued).toHaveLength(1);
    const mails: AlertMessage[] = [];
    const channels = new AlertChannelSender({
      db: h.db,
      secrets: h.secrets,
      timeoutMs: 5_000,
      allowCidrs: ['127.0.0.1/32'],
      caFile,
    });
    const loop = new AlertLoop({
      db: h.db,
      consoleUrl: 'https://tw.example',
      paceMinutes: 0,
      email: async (m) => {
        mails.push(m);
      },
      channels: channels.send,
      logger: silentLogger,
    });
    try {
      expect(await loop.runOnce()).toEqual({ sent: 2, failed: 0 });
    } finally {
      await loop.stop();
    }
    const link = `https://tw.example/console/watches/${tw.id}?env=test`;
    expect(mails).toHaveLength(1);
    expect(mails[0]?.alert).toMatchObject({ livemode: false, link });
    expect(mails[0]?.alert.subject).toBe('[TEST MODE] Deliveries to your webhook are failing');
    expect(mails[0]?.alert.text.split('\n')[0]).toMatch(/^TEST MODE: /);
    const hook = rr.received.find((x) => x.path === '/alerts');
    const body = JSON.parse(hook?.body.toString('utf8') ?? '{}') as {
      type: string;
      data: Record<string, unknown>;
    };
    expect(body.type).toBe('watch.alert');
    expect(body.data).toMatchObject({
      livemode: false,
      environment: 'test',
      subject: '[TEST MODE] Deliveries to your webhook are failing',
      console_url: link,
      watch: { id: tw.id },
    });
    failing = false;
    const again = await h.app.inject({
      method: 'POST',
      url: `/v1/events/${e.event_id}/redeliver`,
      headers: test.headers,
    });
    expect(again.statusCode, again.body).toBe(201);
    await vi.waitFor(
      async () => {
        const list = await h.app.inject({ url: '/v1/events', headers: test.headers });
        expect(json<{ data: EventJson[] }>(list).data[0]?.delivery?.status).toBe('DELIVERED');
      },
      { timeout: 15_000, interval: 50 },
    );
    expect(rr.countsByEvent.get(e.event_id)).toBe(7);
    const { rows } = await h.db.query<{ network: string }>(
      'SELECT DISTINCT network FROM notifications WHERE event_id = $1',
      [e.event_id],
    );
    expect(rows).toEqual([{ network: 'nile' }]);
  }, 180_000);

  it('refuses a live key (403 test_mode_only, nothing written) and a live watch’s id with a test key (404)', async () => {
    const { h, live, test } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    const tw = await createWatch(h, test, webhookWatch());
    for (const watchId of [lw.id, tw.id]) {
      const res = await trigger(h, live, { watch_id: watchId, amount: '10' });
      expect(res.statusCode).toBe(403);
      expect(json(res).code).toBe('test_mode_only');
    }
    const crossing = await trigger(h, test, { watch_id: lw.id, amount: '10' });
    expect(crossing.statusCode).toBe(404);
    const malformed = await trigger(h, test, { watch_id: 'nonsense', amount: '10' });
    expect(malformed.statusCode).toBe(404);
    const { rows } = await h.db.query<{ n: string }>('SELECT count(*)::int8 AS n FROM events');
    expect(Number(rows[0]?.n)).toBe(0);
  });

  it('checks the body: amount, asset and direction the watch takes, counterparty, unknown members', async () => {
    const { h, test } = await setup();
    const trx = await createWatch(h, test, webhookWatch({ asset_filter: 'TRX' }));
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ watch_id: trx.id, amount: '0' }, 'amount'],
      [{ watch_id: trx.id, amount: '1.0000001' }, 'amount'],
      [{ watch_id: trx.id, amount: '-1' }, 'amount'],
      [{ watch_id: trx.id, amount: 1 }, 'amount'],
      [{ watch_id: trx.id, amount: '1', asset: 'USDT' }, 'asset'],
      [{ watch_id: trx.id, amount: '1', direction: 'outgoing' }, 'direction'],
      [{ watch_id: trx.id, amount: '1', counterparty: 'Tnotanaddress' }, 'counterparty'],
      [{ watch_id: trx.id, amount: '1', extra: true }, 'extra'],
    ];
    for (const [body, field] of cases) {
      const res = await trigger(h, test, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.body, JSON.stringify(body)).toContain(field);
    }
    const ok = await trigger(h, test, { watch_id: trx.id, amount: '0.000001' });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(json<EventJson>(ok)).toMatchObject({ asset: 'TRX', amount_raw: '1', contract: null });
  });

  it('limits test transfers per account per minute (429 with Retry-After)', async () => {
    const { h, test } = await setup({ TEST_TRANSFERS_PER_MINUTE: '2' });
    const tw = await createWatch(h, test, webhookWatch());
    for (let i = 0; i < 2; i++) {
      expect((await trigger(h, test, { watch_id: tw.id, amount: '1' })).statusCode).toBe(201);
    }
    const third = await trigger(h, test, { watch_id: tw.id, amount: '1' });
    expect(third.statusCode).toBe(429);
    expect(json(third).code).toBe('rate_limited');
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('each key sees only its environment: lists, ids, changes of the other environment are 404', async () => {
    const { h, live, test } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    const tw = await createWatch(h, test, webhookWatch());
    const cross: Array<[Caller, string]> = [
      [live, tw.id],
      [test, lw.id],
    ];
    for (const [c, other] of cross) {
      const list = await h.app.inject({ url: '/v1/watches', headers: c.headers });
      const ids = json<{ data: { id: string }[] }>(list).data.map((w) => w.id);
      expect(ids).toEqual([c === live ? lw.id : tw.id]);
      for (const [method, url] of [
        ['GET', `/v1/watches/${other}/health`],
        ['POST', `/v1/watches/${other}/pause`],
        ['POST', `/v1/watches/${other}/rotate-secret`],
        ['PATCH', `/v1/watches/${other}`],
        ['DELETE', `/v1/watches/${other}`],
      ] as const) {
        const res = await h.app.inject({
          method,
          url,
          headers: c.headers,
          ...(method === 'PATCH' ? { payload: { label: 'x' } } : {}),
          ...(method === 'POST' && url.endsWith('rotate-secret') ? { payload: {} } : {}),
        });
        expect(res.statusCode, `${method} ${url}`).toBe(404);
      }
    }
    // Endpoints too, and a watch of one environment cannot target the other's endpoint.
    const ep = await h.app.inject({
      method: 'POST',
      url: '/v1/endpoints',
      headers: live.headers,
      payload: { url: 'https://hooks.example.com/live' },
    });
    expect(ep.statusCode, ep.body).toBe(201);
    const epId = json<{ id: string }>(ep).id;
    expect(
      (await h.app.inject({ url: `/v1/endpoints/${epId}`, headers: test.headers })).statusCode,
    ).toBe(404);
    const onLiveEndpoint = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: test.headers,
      payload: { address: OTHER_ADDRESS, asset_filter: 'ALL', endpoint_id: epId },
    });
    expect(onLiveEndpoint.statusCode).toBe(404);
    // Both watch lists still hold exactly one watch each: nothing moved across.
    const { rows } = await h.db.query<{ network: string; n: string }>(
      `SELECT network, count(*)::int8 AS n FROM watches WHERE deleted_at IS NULL
        GROUP BY network ORDER BY network`,
    );
    expect(rows.map((x) => [x.network, Number(x.n)])).toEqual([
      ['mainnet', 1],
      ['nile', 1],
    ]);
  });

  it('redelivers an endpoint’s dead letters only with a key of its environment (audit entry too)', async () => {
    const { h, live, test } = await setup();
    const endpoint = async (c: Caller, name: string) => {
      const res = await h.app.inject({
        method: 'POST',
        url: '/v1/endpoints',
        headers: c.headers,
        payload: { url: `https://hooks.example.com/${name}` },
      });
      expect(res.statusCode, res.body).toBe(201);
      return json<{ id: string }>(res).id;
    };
    const liveEp = await endpoint(live, 'live');
    const testEp = await endpoint(test, 'test');
    const lw = await createWatch(h, live, {
      address: OTHER_ADDRESS,
      asset_filter: 'ALL',
      endpoint_id: liveEp,
    });
    const tw = await createWatch(h, test, {
      address: OTHER_ADDRESS,
      asset_filter: 'ALL',
      endpoint_id: testEp,
    });
    const liveEvents = await insertEvents(h.db, {
      accountId: live.accountId,
      watchId: lw.id,
      tag: 'epdead',
      count: 3,
      start: new Date(Date.now() - 1_000).toISOString(),
    });
    const testEvents: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await trigger(h, test, { watch_id: tw.id, amount: '1' });
      expect(res.statusCode, res.body).toBe(201);
      testEvents.push(json<EventJson>(res).event_id);
    }
    // Every delivery of both environments is a dead letter.
    await h.db.query(`UPDATE notifications SET status = 'DEAD'`);
    const redeliver = (c: Caller, id: string) =>
      h.app.inject({ method: 'POST', url: `/v1/endpoints/${id}/redeliver`, headers: c.headers });
    const pending = async () =>
      (
        await h.db.query<{ event_id: string }>(
          `SELECT event_id FROM notifications WHERE status = 'PENDING' ORDER BY event_id`,
        )
      ).rows.map((x) => x.event_id);

    // Across: 404 with either key, nothing queued, nothing audited.
    expect((await redeliver(test, liveEp)).statusCode).toBe(404);
    expect((await redeliver(live, testEp)).statusCode).toBe(404);
    expect(await pending()).toEqual([]);
    const audited = async () =>
      (
        await h.db.query<{ target_id: string; network: string; detail: { count: number } }>(
          `SELECT target_id, network, detail FROM audit_log WHERE action = 'endpoint.redelivered'
            ORDER BY network`,
        )
      ).rows.map((x) => [x.target_id, x.network, x.detail.count]);
    expect(await audited()).toEqual([]);

    // Each key on its own endpoint: its own dead letters, and only those, queued again.
    const own = await redeliver(test, testEp);
    expect(own.statusCode, own.body).toBe(200);
    expect(json(own)).toEqual({ redelivered: 2 });
    expect(await pending()).toEqual([...testEvents].sort());
    const ownLive = await redeliver(live, liveEp);
    expect(ownLive.statusCode, ownLive.body).toBe(200);
    expect(json(ownLive)).toEqual({ redelivered: 3 });
    expect(await pending()).toEqual([...testEvents, ...liveEvents].sort());
    expect(await audited()).toEqual([
      [liveEp, 'mainnet', 3],
      [testEp, 'nile', 2],
    ]);
  });

  it('explains a test watch’s transaction never through mainnet’s node: stored events, else not_found', async () => {
    // Mainnet's node group on a replay node serving a real mainnet block, solidified.
    const node = await startReplayNode({
      source: dirSource(chainDir()),
      grpc: true,
      instant: true,
    });
    const group = nodeGroupFor(loadConfig(nodeEnv(node)).node, {
      blockIntervalMs: 3_000,
      logger: silentLogger,
    });
    try {
      // This deployment follows no test network (no testnetChain).
      const { h, live, test } = await setup({}, { chain: () => group });
      const body = webhookWatch({ address: MAINNET_TRX.to, asset_filter: 'ALL' });
      const lw = await createWatch(h, live, body);
      const tw = await createWatch(h, test, body);
      type Explained = {
        reason: string;
        produced_event: boolean;
        block_number: number | null;
        message: string;
        event_ids: string[];
      };
      const explain = async (c: Caller, watchId: string, txId: string) => {
        const res = await h.app.inject({
          url: `/v1/watches/${watchId}/transactions/${txId}`,
          headers: c.headers,
        });
        expect(res.statusCode, res.body).toBe(200);
        return json<Explained>(res);
      };
      // The live watch: mainnet's verdict, read from the block (it matches; not scanned yet).
      expect(await explain(live, lw.id, MAINNET_TRX.txId)).toMatchObject({
        reason: 'not_scanned_yet',
        block_number: BLOCK,
      });
      // The test watch on the same address: not mainnet's answer.
      const t = await explain(test, tw.id, MAINNET_TRX.txId);
      expect(t).toMatchObject({ reason: 'not_found', produced_event: false, block_number: null });
      expect(t.message).toMatch(/follows no nile chain.*TRON_TESTNET_NODE_URL/);
      // A test transfer is a stored event: produced, by its `test_…` id.
      const e = json<EventJson>(await trigger(h, test, { watch_id: tw.id, amount: '4' }));
      expect(await explain(test, tw.id, e.tx_id)).toMatchObject({
        reason: 'produced',
        produced_event: true,
        event_ids: [e.event_id],
      });
      // A test transfer's id names no live transaction.
      const onLive = await h.app.inject({
        url: `/v1/watches/${lw.id}/transactions/${e.tx_id}`,
        headers: live.headers,
      });
      expect(onLive.statusCode).toBe(400);
    } finally {
      await group.close();
      await node.close();
    }
  });

  it('live events say livemode true and a live key never lists a test event, nor a test key a live one', async () => {
    const { h, live, test } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    const tw = await createWatch(h, test, webhookWatch());
    const [liveEvent] = await insertEvents(h.db, {
      accountId: live.accountId,
      watchId: lw.id,
      tag: 'live',
      count: 1,
      start: new Date(Date.now() - 1_000).toISOString(),
    });
    const t = json<EventJson>(await trigger(h, test, { watch_id: tw.id, amount: '3' }));
    const liveList = json<{ data: EventJson[] }>(
      await h.app.inject({ url: '/v1/events', headers: live.headers }),
    ).data;
    expect(liveList.map((e) => [e.event_id, e.livemode, e.network])).toEqual([
      [liveEvent, true, 'mainnet'],
    ]);
    const testList = json<{ data: EventJson[] }>(
      await h.app.inject({ url: '/v1/events', headers: test.headers }),
    ).data;
    expect(testList.map((e) => [e.event_id, e.livemode, e.network])).toEqual([
      [t.event_id, false, 'nile'],
    ]);
    // Filtering by the other environment's watch finds nothing either.
    const filtered = await h.app.inject({
      url: `/v1/events?watch_id=${tw.id}`,
      headers: live.headers,
    });
    expect(json<{ data: unknown[] }>(filtered).data).toEqual([]);
    // A request naming the other network is refused, with either key.
    const named = await h.app.inject({ url: '/v1/events?network=nile', headers: live.headers });
    expect(json(named).code).toBe('testnet_unsupported');
    const namedLive = await h.app.inject({
      url: '/v1/events?network=mainnet',
      headers: test.headers,
    });
    expect(json(namedLive).code).toBe('testnet_unsupported');
  });

  it('serves a request naming its key’s own network and refuses the other’s (testnet_unsupported)', async () => {
    const { h, live, test } = await setup();
    const lw = await createWatch(h, live, webhookWatch({ network: 'mainnet' }));
    const tw = await createWatch(h, test, webhookWatch({ network: 'nile' }));
    const { rows } = await h.db.query<{ id: string; network: string }>(
      'SELECT id, network FROM watches ORDER BY network',
    );
    expect(rows).toEqual([
      { id: lw.id, network: 'mainnet' },
      { id: tw.id, network: 'nile' },
    ]);
    const own: Array<[Caller, string, string]> = [
      [live, 'mainnet', lw.id],
      [test, 'nile', tw.id],
    ];
    for (const [c, network, watchId] of own) {
      for (const url of ['/v1/watches', '/v1/events', '/v1/audit', '/v1/endpoints']) {
        const res = await h.app.inject({ url: `${url}?network=${network}`, headers: c.headers });
        expect(res.statusCode, `${network} ${url} ${res.body}`).toBe(200);
      }
      const one = await h.app.inject({
        url: `/v1/watches/${watchId}/health?network=${network}`,
        headers: c.headers,
      });
      expect(one.statusCode, one.body).toBe(200);
      const other = network === 'mainnet' ? 'nile' : 'mainnet';
      for (const url of [
        '/v1/watches',
        '/v1/events',
        '/v1/audit',
        `/v1/watches/${watchId}/health`,
      ]) {
        const res = await h.app.inject({ url: `${url}?network=${other}`, headers: c.headers });
        expect(res.statusCode, `${other} ${url}`).toBe(400);
        expect(json(res).code, `${other} ${url}`).toBe('testnet_unsupported');
      }
      const body = await h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: c.headers,
        payload: webhookWatch({ address: OTHER_ADDRESS, network: other }),
      });
      expect(body.statusCode).toBe(400);
      expect(json(body).code).toBe('testnet_unsupported');
    }
  });

  it('counts quotas per environment', async () => {
    const { h, live, test } = await setup();
    // Free plan: 3 active watches per environment.
    const addresses = [
      'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
      OTHER_ADDRESS,
      'T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb',
    ];
    for (const c of [live, test]) {
      for (const address of addresses) await createWatch(h, c, webhookWatch({ address }));
    }
    for (const c of [live, test]) {
      const fourth = await h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: c.headers,
        payload: webhookWatch({
          address: 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7',
          asset_filter: 'TRX',
        }),
      });
      expect(fourth.statusCode).toBe(402);
      expect(json<{ usage: { active_watches: number } }>(fourth).usage.active_watches).toBe(3);
    }
  });

  it('records the environment of each change in the audit log; each key reads its own and the account’s', async () => {
    const { h, live, test } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    const tw = await createWatch(h, test, webhookWatch());
    await trigger(h, test, { watch_id: tw.id, amount: '2' });
    // An entry of no environment: an account setting (here by the CLI, which knows none).
    await recordAudit(
      h.db,
      { accountId: live.accountId, actor: { type: 'system', id: 'cli' }, clientIp: null },
      { action: 'member.removed', targetId: 'usr_gone' },
    );
    type Entry = { action: string; target_id: string | null; environment: string | null };
    const read = async (c: Caller) => {
      const res = await h.app.inject({ url: '/v1/audit', headers: c.headers });
      expect(res.statusCode, res.body).toBe(200);
      return json<{ data: Entry[] }>(res).data.map((a) => [a.action, a.target_id, a.environment]);
    };
    expect(await read(live)).toEqual([
      ['member.removed', 'usr_gone', null],
      ['watch.created', lw.id, 'live'],
    ]);
    const testPage = await read(test);
    expect(testPage.map(([action, , env]) => [action, env])).toEqual([
      ['member.removed', null],
      ['test_transfer.created', 'test'],
      ['watch.created', 'test'],
    ]);
    expect(testPage[2]?.[1]).toBe(tw.id);
    // The database holds both environments' entries: only the reading is per environment.
    const { rows } = await h.db.query<{ network: string | null; n: string }>(
      `SELECT network, count(*)::int8 AS n FROM audit_log GROUP BY network ORDER BY network`,
    );
    expect(rows.map((x) => [x.network, Number(x.n)])).toEqual([
      ['mainnet', 1],
      ['nile', 2],
      [null, 1],
    ]);
    // The operator's CLI records a key's own environment when it revokes it, as when it makes it:
    // a test key's entries are read with a test key.
    const cliKey = await keysCreate(h.db, { account: live.accountId, name: 'cli', test: true });
    await keysRevoke(h.db, { keyId: cliKey.id });
    const cliEnv = async (c: Caller, action: string) =>
      json<{ data: Entry[] }>(
        await h.app.inject({ url: '/v1/audit', headers: c.headers }),
      ).data.find((x) => x.action === action && x.target_id === cliKey.id)?.environment;
    expect(await cliEnv(test, 'api_key.created')).toBe('test');
    expect(await cliEnv(test, 'api_key.revoked')).toBe('test');
    expect(await cliEnv(live, 'api_key.created')).toBeUndefined();
    expect(await cliEnv(live, 'api_key.revoked')).toBeUndefined();
  });

  it('the console’s audit log follows its environment switch, with the account’s entries in both', async () => {
    const { h } = await setup({ CONSOLE_SIGNUP: 'open' });
    const b = new Browser(h.app);
    expect((await b.signUp('switch@example.com')).statusCode).toBe(201);
    const created = async () => {
      const res = await b.post('/console/api/watches', webhookWatch());
      expect(res.statusCode, res.body).toBe(201);
      return json<{ id: string }>(res).id;
    };
    const liveWatch = await created();
    b.jar.set('tw_env', 'test');
    const testWatch = await created();
    type Entry = { action: string; target_id: string | null; environment: string | null };
    const page = async () => {
      const res = await b.get('/console/api/audit');
      expect(res.statusCode, res.body).toBe(200);
      return json<{ data: Entry[] }>(res).data;
    };
    const inTest = await page();
    b.jar.set('tw_env', 'live');
    const inLive = await page();
    const watches = (p: Entry[]) =>
      p.filter((a) => a.action === 'watch.created').map((a) => [a.target_id, a.environment]);
    expect(watches(inTest)).toEqual([[testWatch, 'test']]);
    expect(watches(inLive)).toEqual([[liveWatch, 'live']]);
    expect(inTest.some((a) => a.environment === 'live')).toBe(false);
    expect(inLive.some((a) => a.environment === 'test')).toBe(false);
    // The sign-up (no environment) is in both.
    const account = (p: Entry[]) => p.filter((a) => a.environment === null).map((a) => a.action);
    expect(account(inTest)).toContain('account.signed_up');
    expect(account(inLive)).toEqual(account(inTest));
  });

  it('keeps test deliveries out of the live metrics (outbox depth)', async () => {
    const { h, live, test } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    const tw = await createWatch(h, test, webhookWatch());
    await insertEvents(h.db, {
      accountId: live.accountId,
      watchId: lw.id,
      tag: 'm',
      count: 2,
      start: new Date(Date.now() - 1_000).toISOString(),
    });
    for (let i = 0; i < 3; i++) await trigger(h, test, { watch_id: tw.id, amount: '1' });
    const m = new Metrics({ db: h.db, logger: silentLogger });
    const text = await m.registry.metrics();
    const line = text.split('\n').find((l) => /^tronwatch_outbox_pending /.test(l));
    expect(line).toBe('tronwatch_outbox_pending 2');
  });

  it('keeps test deliveries out of the live metrics (an attempt lost with its lease)', async () => {
    const { h, live, test } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    const tw = await createWatch(h, test, webhookWatch());
    await insertEvents(h.db, {
      accountId: live.accountId,
      watchId: lw.id,
      tag: 'l',
      count: 1,
      start: new Date(Date.now() - 1_000).toISOString(),
    });
    expect((await trigger(h, test, { watch_id: tw.id, amount: '1' })).statusCode).toBe(201);
    // Both notifications' attempts started under a lease that ran out (a worker died).
    const { rowCount } = await h.db.query(
      `UPDATE notifications SET lease_token = 'gone:1', attempt_started_at = now() - interval '2 minutes',
              next_attempt_at = now() - interval '1 minute'`,
    );
    expect(rowCount).toBe(2);
    const m = new Metrics({ db: h.db, logger: silentLogger });
    const worker = new DeliveryWorker({
      db: h.db,
      secrets: h.secrets,
      config: h.config,
      logger: silentLogger,
      metrics: m,
    });
    const ac = new AbortController();
    const done = worker.start(ac.signal);
    stopWorker = async () => {
      ac.abort();
      await done;
    };
    await vi.waitFor(
      async () => {
        const { rows } = await h.db.query<{ network: string }>(
          `SELECT n.network FROM attempts a JOIN notifications n ON n.id = a.notification_id
            WHERE a.error_class = 'lost' ORDER BY n.network`,
        );
        expect(rows.map((x) => x.network)).toEqual(['mainnet', 'nile']);
      },
      { timeout: 10_000, interval: 50 },
    );
    // Stopped before counting: the worker may already have retried the live notification (its
    // next attempt is due at once after a lost lease), so the metric is compared with the
    // attempts recorded, per environment, once nothing moves.
    await stopWorker();
    stopWorker = undefined;
    const { rows: attempts } = await h.db.query<{ network: string; n: number }>(
      `SELECT n.network, count(*)::int AS n FROM attempts a
         JOIN notifications n ON n.id = a.notification_id GROUP BY n.network ORDER BY n.network`,
    );
    const live_ = attempts.find((r) => r.network === 'mainnet')?.n ?? 0;
    expect(live_).toBeGreaterThanOrEqual(1);
    expect(attempts.find((r) => r.network === 'nile')?.n ?? 0).toBeGreaterThanOrEqual(1);
    const text = await m.registry.metrics();
    const count = (outcome: string) =>
      Number(
        new RegExp(`^tronwatch_deliveries_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(
          text,
        )?.[1] ?? Number.NaN,
      );
    // The live attempts only (the lost one, and any retry of it): the test ones count in no
    // live metric.
    expect(count('delivered') + count('failed') + count('dead')).toBe(live_);
    expect(count('failed')).toBeGreaterThanOrEqual(1);
  });

  it('the schema itself refuses an event of one network on a watch of the other', async () => {
    const { h, live } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    await expect(
      h.db.query(
        `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                             event_index, block_number, block_timestamp, from_address, to_address,
                             amount_raw, created_at)
         VALUES ('evt_crossing', $1, $2, 'nile', 'incoming', 'TRX', 'test_x', 0, 1, now(),
                 'a', 'b', 1, now())`,
        [live.accountId, lw.id],
      ),
    ).rejects.toThrow(/foreign key/);
  });

  it('the schema itself refuses the test proof on a live event', async () => {
    const { h, live } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    await expect(
      h.db.query(
        `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                             event_index, block_number, block_timestamp, from_address, to_address,
                             amount_raw, proof, created_at)
         VALUES ('evt_live_test_proof', $1, $2, 'mainnet', 'incoming', 'TRX', 'test_x', 0, 1,
                 now(), 'a', 'b', 1, 'test', now())`,
        [live.accountId, lw.id],
      ),
    ).rejects.toThrow(/events_test_proof_not_live/);
  });

  it('the schema itself refuses a notification of a test event naming a live watch', async () => {
    const { h, live, test } = await setup();
    const lw = await createWatch(h, live, webhookWatch());
    const tw = await createWatch(h, test, webhookWatch());
    const t = json<EventJson>(await trigger(h, test, { watch_id: tw.id, amount: '1' }));
    await h.db.query(`UPDATE notifications SET status = 'DELIVERED' WHERE event_id = $1`, [
      t.event_id,
    ]);
    // The claim signs with the secret of the watch the notification names (src/delivery/claim.ts):
    // a test notification naming a live watch would be signed with the live secret.
    const crossing = (watchId: string) =>
      h.db.query(
        `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                    next_attempt_at, created_at, network)
         VALUES ('ntf_crossing', $1, $2, $3, 'webhook', 'PENDING', 0, now(), now(), 'nile')`,
        [t.event_id, test.accountId, watchId],
      );
    await expect(crossing(lw.id)).rejects.toThrow(/foreign key/);
    // The same row naming the test watch is accepted: the key is what refused the other.
    await expect(crossing(tw.id)).resolves.toBeDefined();
  });
});
