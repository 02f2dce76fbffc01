/**
 * The MCP server (issue 20 item 3), through the official SDK's client over both transports —
 * `tronwatch mcp` spawned over stdio and `POST /mcp` over streamable HTTP — against a started
 * service (api + ingest + worker) on a replay node serving the real mainnet block 79072107
 * (test/fixtures/tron-mainnet/chain), with webhooks delivered to a local HTTPS receiver.
 *
 * The chain is held still (intervalMs 0) and moved by hand: watches are created while the block
 * is ahead of the full-node head; then the block is in the full-node view but not solidified
 * (explain: unsolidified); then it is solidified and ingested (events, attempts, explain's other
 * reasons). Addresses and transactions are picked from the block's JSON here, not through the
 * service's extraction code.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountsCreate, keysCreate } from '../../src/accounts/cli.js';
import { silentLogger } from '../../src/common/logger.js';
import { loadConfig } from '../../src/config.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { dirSource, type ReplayNode, startReplayNode } from '../../src/devnet/replay-node.js';
import { type Service, startService } from '../../src/service.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { FINALITY_DEPTH, nodeEnv } from '../helpers/chain.js';
import { dbEngines, emptyDb, type TestDb } from '../helpers/db.js';
import { chainDir, fixtureJson } from '../helpers/fixtures.js';
import { freePort } from '../helpers/servers.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const BLOCK = 79072107;
const LAG = 2;

interface TxJson {
  txID: string;
  ret?: Array<{ contractRet?: string }>;
  raw_data: {
    contract: Array<{ type: string; parameter: { value: Record<string, unknown> } }>;
  };
}

/** Transactions of the real block, from its JSON. */
const txs = fixtureJson<{ transactions: TxJson[] }>(`chain/block-${BLOCK}.json`).transactions;
const trxTransfers = txs
  .filter((t) => t.raw_data.contract[0]?.type === 'TransferContract')
  .map((t) => {
    const v = t.raw_data.contract[0]?.parameter.value as {
      owner_address: string;
      to_address: string;
      amount: number;
    };
    return { txId: t.txID, from: v.owner_address, to: v.to_address, amount: v.amount };
  })
  .filter((t) => t.amount > 0 && t.from !== t.to);
/** T1: a TRX transfer; R its receiver, seen in no other transaction of the block. */
const T1 = (() => {
  const seen = (a: string) =>
    txs.filter((t) => JSON.stringify(t.raw_data.contract[0]?.parameter.value).includes(a.slice(2)))
      .length;
  const t = trxTransfers.find((x) => seen(x.to) === 1);
  if (!t) throw new Error('no TRX transfer with a receiver seen once in the block');
  return t;
})();
const R = hexToBase58(T1.to);
/** A TRX transfer that does not involve R. */
const T2 = trxTransfers.find((t) => t.txId !== T1.txId) as (typeof trxTransfers)[number];
/** A TRC-10 transfer (TransferAssetContract): not USDT, not TRX. */
const TRC10 = txs.find((t) => t.raw_data.contract[0]?.type === 'TransferAssetContract') as TxJson;

type ToolResult = {
  isError?: boolean;
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Record<string, unknown>;
};

/** The JSON of a tool result's text. */
function body(r: ToolResult): Record<string, unknown> {
  const text = r.content.find((c) => c.type === 'text')?.text ?? 'null';
  return JSON.parse(text) as Record<string, unknown>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dbEngines)('MCP server over stdio and streamable HTTP (%s)', (engine) => {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  let node: ReplayNode;
  let service: Service;
  let receiver: Receiver;
  let base: string;
  let key: string;
  let accountId = '';
  let otherKey: string;
  let limitedKey: string;
  let http: Client;
  let stdio: Client;
  let otherHttp: Client;
  let otherStdio: Client;
  /** Each transport with this account's client and the other account's. */
  const transports = () =>
    [
      { name: 'http', c: http, other: otherHttp },
      { name: 'stdio', c: stdio, other: otherStdio },
    ] as const;
  const secrets = new Map<string, string>();

  async function httpClient(apiKey: string): Promise<Client> {
    const c = new Client({ name: 'tronwatch-test', version: '1.0.0' });
    await c.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${apiKey}` } },
      }),
    );
    cleanups.push(() => c.close());
    return c;
  }

  /** `tronwatch mcp` spawned over stdio with this API key, connected with the SDK client. */
  async function stdioClient(apiKey: string): Promise<Client> {
    const c = new Client({ name: 'tronwatch-test', version: '1.0.0' });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', path.join(ROOT, 'src', 'main.ts'), 'mcp'],
      cwd: ROOT,
      env: {
        ...(process.env as Record<string, string>),
        TRONWATCH_URL: base,
        TRONWATCH_API_KEY: apiKey,
      },
      stderr: 'pipe',
    });
    // The spawned process transpiles the CLI with tsx first: slow on a loaded machine.
    await c.connect(transport, { timeout: 300_000 });
    cleanups.push(() => c.close());
    return c;
  }

  const tool = async (c: Client, name: string, args: Record<string, unknown> = {}) =>
    (await c.callTool({ name, arguments: args })) as ToolResult;

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-mcp-'));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    receiver = await startReceiver({
      secretFor: ({ path: p }) => secrets.get(p.split('/').pop() ?? ''),
      respond: () => 200,
    });
    cleanups.push(() => receiver.close());
    const caFile = path.join(dataDir, 'ca.pem');
    fs.writeFileSync(caFile, receiver.ca);
    // Held still, the full-node head 9 blocks below the recorded block.
    node = await startReplayNode({
      source: dirSource(chainDir()),
      // The real block's root is proven from its exact gRPC bytes only (docs/trusting-the-node.md).
      grpc: true,
      intervalMs: 0,
      lag: LAG,
      startBefore: 10,
    });
    cleanups.push(() => node.close());
    let t: TestDb | undefined;
    if (engine === 'postgres') {
      t = await emptyDb('postgres');
      const tdb = t;
      cleanups.push(() => tdb.drop());
    }
    const cfg = loadConfig({
      DATABASE_URL: t?.url,
      DATA_DIR: dataDir,
      ...nodeEnv(node),
      INGEST_START_BLOCK: String(BLOCK),
      TRON_BLOCK_INTERVAL_MS: '200',
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      DELIVERY_POLL_MS: '50',
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
    });
    service = await startService(cfg, { roles: ['api', 'ingest', 'worker'], logger: silentLogger });
    cleanups.push(() => service.stop());
    base = service.url as string;
    const a = await accountsCreate(service.db, { email: 'mcp@example.com', plan: 'pro' });
    accountId = a.id;
    key = (await keysCreate(service.db, { account: a.id })).key;
    const b = await accountsCreate(service.db, { email: 'other@example.com', plan: 'free' });
    otherKey = (await keysCreate(service.db, { account: b.id })).key;
    const c = await accountsCreate(service.db, {
      email: 'limited@example.com',
      plan: 'business',
      rateLimit: 20,
      watchQuota: 1,
    });
    limitedKey = (await keysCreate(service.db, { account: c.id })).key;

    http = await httpClient(key);
    // The other account's clients serve the scope checks (404s) over both transports.
    [stdio, otherStdio] = await Promise.all([stdioClient(key), stdioClient(otherKey)]);
    otherHttp = await httpClient(otherKey);
  }, 420_000);

  afterAll(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  }, 60_000);

  it('lists the same tools on both transports', async () => {
    const names = async (c: Client) => (await c.listTools()).tools.map((x) => x.name).sort();
    const expected = [
      'act_on_watches',
      'create_endpoint',
      'create_test_transfer',
      'create_watch',
      'create_watches',
      'delete_endpoint',
      'delete_watch',
      'explain_transaction',
      'get_event',
      'get_status',
      'get_watch_health',
      'list_dead_letters',
      'list_endpoints',
      'list_events',
      'list_watches',
      'pause_watch',
      'redeliver_endpoint',
      'redeliver_event',
      'resume_watch',
      'rotate_endpoint_secret',
      'rotate_watch_secret',
      'update_endpoint',
      'update_watch',
      'validate_address',
      'verify_webhook_signature',
    ];
    expect(await names(http)).toEqual(expected);
    expect(await names(stdio)).toEqual(expected);
    // Every tool declares the shape of its answer.
    for (const t of (await http.listTools()).tools) {
      expect(t.outputSchema?.type, t.name).toBe('object');
    }
  });

  it('manages endpoints and watches in bulk (issue 30), on both transports; another account gets 404', async () => {
    for (const { name, c, other } of transports()) {
      const ep = body(
        await tool(c, 'create_endpoint', {
          url: `${receiver.origin}/hook/endpoint-${name}`,
          label: `deposits ${name}`,
          rate_limit_per_second: 50,
        }),
      ) as { id: string; secret: string };
      expect(ep.id).toMatch(/^ep_/);
      expect(ep.secret).toMatch(/^whsec_/);
      // Two deposit addresses on it with their customer reference; a third item is invalid and
      // gets its own 400 without stopping the others.
      const hexes = [1, 2].map(
        (i) => `41${name === 'http' ? 'e1' : 'e2'}${String(i).padStart(38, '0')}`,
      );
      const batch = await tool(c, 'create_watches', {
        items: [
          ...hexes.map((address, i) => ({
            address,
            asset_filter: 'USDT',
            endpoint_id: ep.id,
            label: `batch-${name}`,
            metadata: { customer_id: `c_${i}` },
          })),
          { address: 'Tnot-an-address', asset_filter: 'USDT', endpoint_id: ep.id },
        ],
      });
      expect(batch.isError, JSON.stringify(batch)).toBeFalsy();
      const made = body(batch) as {
        created: number;
        failed: number;
        results: Array<{ status: number; watch?: { id: string; metadata: unknown } }>;
      };
      expect(made.results.map((r) => r.status)).toEqual([201, 201, 400]);
      expect(made.results[0]?.watch?.metadata).toEqual({ customer_id: 'c_0' });
      const listed = body(await tool(c, 'list_endpoints')) as {
        data: Array<{ id: string; watch_count: number; health: { consecutive_failures: number } }>;
      };
      expect(listed.data.find((e) => e.id === ep.id)).toMatchObject({
        watch_count: 2,
        health: { consecutive_failures: 0 },
      });
      // Another account: the endpoint is not there (404), whatever the tool.
      for (const [t, args] of [
        ['update_endpoint', { endpoint_id: ep.id, enabled: false }],
        ['rotate_endpoint_secret', { endpoint_id: ep.id }],
        ['redeliver_endpoint', { endpoint_id: ep.id }],
        ['delete_endpoint', { endpoint_id: ep.id }],
      ] as const) {
        const r = await tool(other, t, args);
        expect(r.isError, t).toBe(true);
        expect(body(r), t).toMatchObject({ status: 404 });
      }
      expect(body(await tool(c, 'redeliver_endpoint', { endpoint_id: ep.id }))).toEqual({
        redelivered: 0,
      });
      const rotated = body(await tool(c, 'rotate_endpoint_secret', { endpoint_id: ep.id })) as {
        secret: string;
      };
      expect(rotated.secret).not.toBe(ep.secret);
      // Watches on it: deleting it is refused (409) until they are gone.
      const refused = await tool(c, 'delete_endpoint', { endpoint_id: ep.id });
      expect(body(refused)).toMatchObject({ status: 409, code: 'endpoint_watches_active' });
      const paused = body(
        await tool(c, 'act_on_watches', { action: 'pause', label: `batch-${name}` }),
      ) as { succeeded: number };
      expect(paused.succeeded).toBe(2);
      const deleted = body(
        await tool(c, 'act_on_watches', {
          action: 'delete',
          ids: made.results.flatMap((r) => (r.watch ? [r.watch.id] : [])),
        }),
      ) as { succeeded: number };
      expect(deleted.succeeded).toBe(2);
      expect(body(await tool(c, 'delete_endpoint', { endpoint_id: ep.id }))).toEqual({
        deleted: true,
        endpoint_id: ep.id,
      });
    }
  });

  it('validates addresses', async () => {
    for (const c of [http, stdio]) {
      const ok = body(
        await tool(c, 'validate_address', { address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t' }),
      );
      expect(ok).toEqual({
        valid: true,
        base58: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
        hex: '41a614f803b6fd780986a42c78ec9c7f77e6ded13c',
        is_usdt_contract: true,
      });
      const hex = body(await tool(c, 'validate_address', { address: T1.to }));
      expect(hex).toMatchObject({ valid: true, base58: R });
      const bad = body(
        await tool(c, 'validate_address', { address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u' }),
      );
      expect(bad.valid).toBe(false);
      expect(String(bad.error)).toMatch(/checksum|invalid/i);
    }
  });

  const watches: Record<string, string> = {};

  it('creates watches with the contract’s rules and errors, on both transports', async () => {
    const create = async (c: Client, label: string, args: Record<string, unknown>) => {
      const r = await tool(c, 'create_watch', {
        address: R,
        webhook_url: `${receiver.origin}/hook/${label}`,
        ...args,
      });
      expect(r.isError, JSON.stringify(r)).toBeFalsy();
      const w = body(r) as { id: string; secret: string };
      expect(w.secret).toMatch(/^whsec_/);
      secrets.set(label, w.secret);
      watches[label] = w.id;
    };
    await create(http, 'all', { asset_filter: 'ALL', direction: 'both' });
    await create(stdio, 'usdt', { asset_filter: 'USDT', direction: 'both' });
    await create(http, 'out', { asset_filter: 'TRX', direction: 'outgoing' });

    for (const c of [http, stdio]) {
      // The same identity again: 409.
      const dup = await tool(c, 'create_watch', {
        address: T1.to, // the hex spelling of the same address
        asset_filter: 'ALL',
        direction: 'both',
        webhook_url: `${receiver.origin}/hook/all`,
      });
      expect(dup.isError).toBe(true);
      expect(body(dup)).toMatchObject({ status: 409 });
      // A bad address and a non-HTTPS URL: 400 naming each field.
      const bad = await tool(c, 'create_watch', {
        address: 'Tnot-an-address',
        asset_filter: 'USDT',
        webhook_url: 'http://example.com/hook',
      });
      expect(bad.isError).toBe(true);
      const e = body(bad) as { status: number; details: Array<{ field: string }> };
      expect(e.status).toBe(400);
      expect(e.details.map((d) => d.field).sort()).toEqual(['address', 'webhook_url']);
    }
    for (const c of [http, stdio]) {
      // A member the API does not know is refused as the API refuses it, never dropped.
      const unknown = await tool(c, 'create_watch', {
        address: R,
        asset_filter: 'USDT',
        webhook_url: `${receiver.origin}/hook/unknown`,
        lable: 'typo',
      });
      expect(unknown.isError, JSON.stringify(unknown)).toBe(true);
      expect(body(unknown)).toMatchObject({ status: 400 });
      expect(JSON.stringify(body(unknown))).toContain('lable');
    }
    // The label is kept, on both transports (one USDT direction each: a new identity each).
    for (const { name, c } of transports()) {
      const labelled = await tool(c, 'create_watch', {
        address: R,
        asset_filter: 'USDT',
        direction: name === 'http' ? 'incoming' : 'outgoing',
        webhook_url: `${receiver.origin}/hook/labelled-${name}`,
        label: `cold wallet (${name})`,
      });
      expect(labelled.isError, JSON.stringify(labelled)).toBeFalsy();
      expect(body(labelled)).toMatchObject({ label: `cold wallet (${name})` });
      expect(labelled.structuredContent).toMatchObject({
        label: `cold wallet (${name})`,
        channel: 'webhook',
      });
      const id = (body(labelled) as { id: string }).id;
      watches[`labelled-${name}`] = id;
      const read = body(await tool(c, 'list_watches')) as {
        data: Array<{ id: string; label: string | null }>;
      };
      expect(read.data.find((w) => w.id === id)?.label).toBe(`cold wallet (${name})`);
    }
    // Quota: the limited account may hold one active watch.
    const limited = await httpClient(limitedKey);
    const one = await tool(limited, 'create_watch', {
      address: R,
      asset_filter: 'USDT',
      webhook_url: `${receiver.origin}/hook/limited`,
    });
    expect(one.isError).toBeFalsy();
    const two = await tool(limited, 'create_watch', {
      address: R,
      asset_filter: 'TRX',
      webhook_url: `${receiver.origin}/hook/limited`,
    });
    expect(two.isError).toBe(true);
    expect(body(two)).toMatchObject({ status: 402, code: 'quota_exceeded' });

    const listed = body(await tool(stdio, 'list_watches')) as { data: Array<{ id: string }> };
    expect(listed.data.map((w) => w.id).sort()).toEqual(Object.values(watches).sort());
    // Scope: another account sees none of them, and listing their events is a 404 (not an
    // empty page); so is a malformed watch id.
    for (const { name, c, other } of transports()) {
      expect(body(await tool(other, 'list_watches')), name).toEqual({ data: [] });
      // Another account's watch and a malformed id, asked by that account and by the owner.
      for (const [who, watch_id] of [
        [other, watches.all],
        [other, 'wh_not-an-id'],
        [c, 'wh_not-an-id'],
      ] as const) {
        const hidden = await tool(who, 'list_events', { watch_id });
        expect(hidden.isError, `${name} ${watch_id}: ${JSON.stringify(hidden)}`).toBe(true);
        expect(body(hidden)).toMatchObject({ status: 404, error: 'watch not found' });
      }
    }
  });

  it('explains a transaction whose block is not solidified yet', async () => {
    node.advanceTo(BLOCK - 1); // full-node head BLOCK + 1, solidified BLOCK - 1
    for (const c of [http, stdio]) {
      const r = body(
        await tool(c, 'explain_transaction', { watch_id: watches.all, tx_id: T1.txId }),
      );
      expect(r).toMatchObject({
        produced_event: false,
        reason: 'unsolidified',
        block_number: BLOCK,
      });
      expect(r.solidified_head).toBeLessThan(BLOCK);
    }
  });

  it('lists events with scanned_through once the block is solidified and ingested', {
    timeout: 120_000,
  }, async () => {
    // The light client makes BLOCK final once 18 blocks are on top of it (the full-node head).
    node.advanceTo(BLOCK + FINALITY_DEPTH - LAG);
    let page: {
      data: Array<Record<string, unknown>>;
      scanned_through: { block_number: number } | null;
    } = { data: [], scanned_through: null };
    for (let i = 0; i < 600; i++) {
      page = body(await tool(http, 'list_events', { watch_id: watches.all })) as typeof page;
      if ((page.scanned_through?.block_number ?? 0) >= BLOCK) break;
      await sleep(100);
    }
    expect(page.scanned_through?.block_number).toBe(BLOCK);
    expect(page.data.map((e) => e.tx_id)).toEqual([T1.txId]);
    expect(page.data[0]).toMatchObject({ direction: 'incoming', asset: 'TRX', to: R });
    const viaStdio = body(await tool(stdio, 'list_events', { limit: 5 })) as typeof page;
    expect(viaStdio.scanned_through?.block_number).toBe(BLOCK);
    expect(viaStdio.data.map((e) => e.event_id)).toContain(page.data[0]?.event_id);
    const status = body(await tool(stdio, 'get_status'));
    expect(status).toMatchObject({ network: 'mainnet', scanned_through: { block_number: BLOCK } });
  });

  it('shows one event with its attempts, and verifies the delivery’s signatures', {
    timeout: 120_000,
  }, async () => {
    const page = body(await tool(http, 'list_events', { watch_id: watches.all })) as {
      data: Array<{ event_id: string }>;
    };
    const eventId = page.data[0]?.event_id as string;
    let detail: {
      event: { event_id: string };
      payload: string;
      notifications: Array<{ status: string; attempt_log: Array<{ http_status: number | null }> }>;
    } = { event: { event_id: '' }, payload: '', notifications: [] };
    for (let i = 0; i < 300; i++) {
      detail = body(await tool(stdio, 'get_event', { event_id: eventId })) as typeof detail;
      if (detail.notifications[0]?.status === 'DELIVERED') break;
      await sleep(100);
    }
    expect(detail.event.event_id).toBe(eventId);
    expect(detail.notifications[0]?.status).toBe('DELIVERED');
    expect(detail.notifications[0]?.attempt_log[0]?.http_status).toBe(200);
    expect(body(await tool(http, 'get_event', { event_id: eventId }))).toEqual(detail);
    // Another account: 404.
    const other = await httpClient(otherKey);
    const hidden = await tool(other, 'get_event', { event_id: eventId });
    expect(hidden.isError).toBe(true);
    expect(body(hidden)).toMatchObject({ status: 404 });

    // The request the receiver got, verified with the watch's secret.
    const got = receiver.received.find((r) => r.eventId === eventId);
    expect(got).toBeDefined();
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(got?.headers ?? {})) {
      if (typeof v === 'string') headers[k] = v;
    }
    const raw = got?.body.toString('utf8') as string;
    expect(raw).toBe(detail.payload);
    for (const c of [http, stdio]) {
      const ok = body(
        await tool(c, 'verify_webhook_signature', {
          body: raw,
          headers,
          secret: secrets.get('all'),
        }),
      );
      expect(ok).toEqual({ valid: true, x_signature: 'valid', standard_webhooks: 'valid' });
      const tampered = body(
        await tool(c, 'verify_webhook_signature', {
          body: raw.replace('"incoming"', '"outgoing"'),
          headers,
          secret: secrets.get('all'),
        }),
      );
      expect(tampered).toEqual({
        valid: false,
        x_signature: 'invalid',
        standard_webhooks: 'bad_signature',
      });
      const onlyX = body(
        await tool(c, 'verify_webhook_signature', {
          body: raw,
          headers: { 'X-Signature': headers['x-signature'] as string },
          secret: secrets.get('usdt'),
        }),
      );
      expect(onlyX).toEqual({ valid: false, x_signature: 'invalid', standard_webhooks: 'absent' });
      // A malformed secret is said to be one, whatever the timestamp (here a stale one).
      const badSecret = body(
        await tool(c, 'verify_webhook_signature', {
          body: raw,
          headers: { ...headers, 'webhook-timestamp': '1000000000' },
          secret: 'whsec_not-base64!',
        }),
      );
      expect(badSecret).toMatchObject({ valid: false, standard_webhooks: 'bad_secret' });
      expect(String(badSecret.error)).toMatch(/not a tronwatch webhook secret/);
    }
  });

  it('explains why a transaction did or did not produce an event', {
    timeout: 120_000,
  }, async () => {
    const explain = async (c: Client, watch: string, tx: string) =>
      body(await tool(c, 'explain_transaction', { watch_id: watch, tx_id: tx }));
    // The light client proves a block final from the SRs' signatures, possibly before the next
    // head poll sees the providers' solidified head reach it (a CI run caught the answer saying
    // solidified head BLOCK − 1 beside an event in BLOCK): hold the polled head one block behind,
    // as it was then; the answer must still give a head at or above the event's block.
    await service.db.query(
      `UPDATE chain_head SET solidified_block_number = $1 WHERE network = 'mainnet'`,
      [BLOCK - 1],
    );
    for (const c of [http, stdio]) {
      const produced = await explain(c, watches.all as string, T1.txId);
      expect(produced).toMatchObject({
        produced_event: true,
        reason: 'produced',
        block_number: BLOCK,
        transfers: [{ asset: 'TRX', to: R, from: hexToBase58(T1.from), event_index: 0 }],
      });
      expect(produced.solidified_head).toBeGreaterThanOrEqual(BLOCK);
      expect((produced.event_ids as string[]).length).toBe(1);
      expect(await explain(c, watches.usdt as string, T1.txId)).toMatchObject({
        produced_event: false,
        reason: 'asset_filtered',
        block_number: BLOCK,
        transfers: [{ asset: 'TRX', to: R, from: hexToBase58(T1.from), event_index: 0 }],
      });
      expect(await explain(c, watches.out as string, T1.txId)).toMatchObject({
        reason: 'direction_filtered',
      });
      expect(await explain(c, watches.all as string, T2.txId)).toMatchObject({
        reason: 'address_not_involved',
      });
      expect(await explain(c, watches.all as string, TRC10.txID)).toMatchObject({
        reason: 'not_usdt_or_trx',
        transfers: [],
      });
      expect(await explain(c, watches.all as string, 'ab'.repeat(32))).toMatchObject({
        reason: 'not_found',
        block_number: null,
      });
      const bad = await tool(c, 'explain_transaction', {
        watch_id: watches.all,
        tx_id: 'not-a-tx',
      });
      expect(bad.isError).toBe(true);
      expect(body(bad)).toMatchObject({ status: 400, details: [{ field: 'tx_id' }] });
    }
    // A watch created after the block: before its activation.
    const late = body(
      await tool(http, 'create_watch', {
        address: R,
        asset_filter: 'TRX',
        direction: 'incoming',
        webhook_url: `${receiver.origin}/hook/late`,
      }),
    ) as { id: string };
    expect(await explain(stdio, late.id, T1.txId)).toMatchObject({
      reason: 'before_activation',
    });
    // Someone else's watch: 404.
    const other = await httpClient(otherKey);
    const hidden = await tool(other, 'explain_transaction', {
      watch_id: watches.all,
      tx_id: T1.txId,
    });
    expect(body(hidden)).toMatchObject({ status: 404 });
    // A test key's watch on the same address (issue 32): this service follows no test network, so
    // the answer is not mainnet's verdict but not_found, saying so.
    const testClient = await httpClient(
      (await keysCreate(service.db, { account: accountId, test: true })).key,
    );
    const testWatch = body(
      await tool(testClient, 'create_watch', {
        address: R,
        asset_filter: 'TRX',
        direction: 'incoming',
        webhook_url: `${receiver.origin}/hook/test-mode`,
      }),
    ) as { id: string };
    const onTest = await explain(testClient, testWatch.id, T1.txId);
    expect(onTest).toMatchObject({
      reason: 'not_found',
      produced_event: false,
      block_number: null,
    });
    expect(String(onTest.message)).toMatch(/follows no nile chain/);
    expect(body(await tool(testClient, 'delete_watch', { watch_id: testWatch.id }))).toMatchObject({
      deleted: true,
    });
    watches.late = late.id;
  });

  it('pauses, resumes and deletes watches', async () => {
    const paused = body(await tool(stdio, 'pause_watch', { watch_id: watches.late }));
    expect(paused).toMatchObject({ id: watches.late, status: 'PAUSED' });
    const resumed = body(await tool(http, 'resume_watch', { watch_id: watches.late }));
    expect(resumed).toMatchObject({ id: watches.late, status: 'ACTIVE' });
    expect(body(await tool(http, 'delete_watch', { watch_id: watches.late }))).toEqual({
      deleted: true,
      watch_id: watches.late,
    });
    for (const c of [http, stdio]) {
      for (const name of ['delete_watch', 'pause_watch', 'resume_watch']) {
        const gone = await tool(c, name, { watch_id: watches.late });
        expect(gone.isError, name).toBe(true);
        expect(body(gone), name).toMatchObject({ status: 404, error: 'watch not found' });
      }
    }
  });

  it('updates a watch, rotates its secret, reads its health, lists dead letters and redelivers', {
    timeout: 120_000,
  }, async () => {
    const updated = await tool(http, 'update_watch', {
      watch_id: watches.all,
      label: 'deposits',
    });
    expect(updated.isError, JSON.stringify(updated)).toBeFalsy();
    expect(updated.structuredContent).toMatchObject({ id: watches.all, label: 'deposits' });
    const notYours = await tool(await httpClient(otherKey), 'update_watch', {
      watch_id: watches.all,
      label: 'mine',
    });
    expect(body(notYours)).toMatchObject({ status: 404 });

    const rotated = await tool(stdio, 'rotate_watch_secret', {
      watch_id: watches.usdt,
      grace_period_seconds: 0,
    });
    expect(rotated.isError, JSON.stringify(rotated)).toBeFalsy();
    const newSecret = (body(rotated) as { secret: string }).secret;
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(secrets.get('usdt'));
    secrets.set('usdt', newSecret);

    const health = await tool(http, 'get_watch_health', { watch_id: watches.all, window: 'hour' });
    expect(health.isError, JSON.stringify(health)).toBeFalsy();
    expect(health.structuredContent).toMatchObject({ watch: { id: watches.all } });

    // A delivery that gave up (as six failed attempts leave it): listed, then redelivered.
    const page = body(await tool(http, 'list_events', { watch_id: watches.all })) as {
      data: Array<{ event_id: string }>;
    };
    const eventId = page.data[0]?.event_id as string;
    expect(body(await tool(stdio, 'list_dead_letters'))).toMatchObject({ data: [] });
    await service.db.query(`UPDATE notifications SET status = 'DEAD' WHERE event_id = $1`, [
      eventId,
    ]);
    for (const c of [http, stdio]) {
      const dead = body(await tool(c, 'list_dead_letters', { watch_id: watches.all })) as {
        data: Array<{ event_id: string; delivery: { status: string } }>;
        scanned_events: number;
        next_before: string | null;
      };
      expect(dead.data.map((e) => [e.event_id, e.delivery.status])).toEqual([[eventId, 'DEAD']]);
      expect(dead.scanned_events).toBe(1);
      expect(dead.next_before).toBeNull();
    }
    const redelivered = await tool(stdio, 'redeliver_event', { event_id: eventId });
    expect(redelivered.isError, JSON.stringify(redelivered)).toBeFalsy();
    expect((body(redelivered) as { notification_id: string }).notification_id).toMatch(/^ntf_/);
    let chains: Array<{ status: string }> = [];
    for (let i = 0; i < 300; i++) {
      chains = (
        body(await tool(http, 'get_event', { event_id: eventId })) as {
          notifications: Array<{ status: string }>;
        }
      ).notifications;
      if (chains.length === 2 && chains[0]?.status === 'DELIVERED') break;
      await sleep(100);
    }
    expect(chains.map((n) => n.status)).toEqual(['DELIVERED', 'DEAD']);
    expect(body(await tool(http, 'list_dead_letters'))).toMatchObject({ data: [] });
  });

  it('an HTTP session is not charged for its set-up, only for its calls', async () => {
    const d = await accountsCreate(service.db, {
      email: `setup-${engine}@example.com`,
      plan: 'business',
      rateLimit: 30,
    });
    const k = (await keysCreate(service.db, { account: d.id })).key;
    // initialize, notifications/initialized and the client's GET /mcp: nothing counted.
    const c = await httpClient(k);
    const remaining = async () =>
      Number(
        (
          await fetch(`${base}/v1/status`, { headers: { authorization: `Bearer ${k}` } })
        ).headers.get('x-ratelimit-remaining'),
      );
    expect(await remaining()).toBe(29);
    await tool(c, 'get_status');
    expect(await remaining()).toBe(27);
  });

  it('a read-only key: only the read-only tools over HTTP; a write over stdio is refused (403)', {
    timeout: 300_000,
  }, async () => {
    const ro = (await keysCreate(service.db, { account: accountId, scope: 'read' })).key;
    const c = await httpClient(ro);
    const names = (await c.listTools()).tools.map((t) => t.name).sort();
    expect(names).toEqual([
      'explain_transaction',
      'get_event',
      'get_status',
      'get_watch_health',
      'list_dead_letters',
      'list_endpoints',
      'list_events',
      'list_watches',
      'validate_address',
      'verify_webhook_signature',
    ]);
    const listed = body(await tool(c, 'list_watches')) as { data: unknown[] };
    expect(listed.data.length).toBeGreaterThan(0);
    const hidden = await c
      .callTool({ name: 'pause_watch', arguments: { watch_id: watches.all } })
      .then(
        (r) => r as ToolResult,
        (err: unknown) => String(err),
      );
    expect(JSON.stringify(hidden)).toMatch(/not found/i);
    // The stdio server cannot know the key's scope before a call: the API refuses the write.
    const viaStdio = new Client({ name: 'tronwatch-test-ro', version: '1.0.0' });
    await viaStdio.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ['--import', 'tsx', path.join(ROOT, 'src', 'main.ts'), 'mcp'],
        cwd: ROOT,
        env: {
          ...(process.env as Record<string, string>),
          TRONWATCH_URL: base,
          TRONWATCH_API_KEY: ro,
        },
        stderr: 'pipe',
      }),
      { timeout: 300_000 },
    );
    cleanups.push(() => viaStdio.close());
    const refused = await tool(viaStdio, 'pause_watch', { watch_id: watches.all });
    expect(refused.isError).toBe(true);
    expect(body(refused)).toMatchObject({ status: 403, code: 'read_only_key' });
    expect(body(await tool(viaStdio, 'list_watches'))).toMatchObject({ data: expect.any(Array) });
    const after = body(await tool(http, 'list_watches')) as {
      data: Array<{ id: string; status: string }>;
    };
    expect(after.data.find((x) => x.id === watches.all)?.status).toBe('ACTIVE');
  });

  it('POST /mcp is authenticated and rate-limited like /v1: one count per request', {
    timeout: 120_000,
  }, async () => {
    const rpc = (apiKey: string | undefined, message: unknown) =>
      fetch(`${base}/mcp`, {
        method: 'POST',
        headers: {
          ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify(message),
      });
    const call = (id: number) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'list_watches', arguments: {} },
    });
    const anonymous = await rpc(undefined, call(1));
    expect(anonymous.status).toBe(401);
    // Errors of the endpoint are JSON-RPC errors, the API's body in `data`.
    expect(await anonymous.json()).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32001, data: { status: 401, code: 'missing_api_key' } },
    });
    expect(anonymous.headers.get('x-ratelimit-limit')).toBe('60');
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const revokedShape = await rpc('tw_live_nope', call(1));
    expect(revokedShape.status).toBe(401);

    // The limited account: 20 a minute. One tool call = one counted request (its /v1 call is not
    // counted again): Remaining falls by one per call, and a /v1 request after them sees it too.
    const first = await rpc(limitedKey, call(1));
    expect(first.status).toBe(200);
    const r1 = Number(first.headers.get('x-ratelimit-remaining'));
    const answer = (await first.json()) as { result: { content: Array<{ text: string }> } };
    expect(JSON.parse(answer.result.content[0]?.text ?? '{}').data).toHaveLength(1);
    const second = await rpc(limitedKey, call(2));
    expect(Number(second.headers.get('x-ratelimit-remaining'))).toBe(r1 - 1);
    const v1 = await fetch(`${base}/v1/status`, {
      headers: { authorization: `Bearer ${limitedKey}` },
    });
    expect(Number(v1.headers.get('x-ratelimit-remaining'))).toBe(r1 - 2);
    // Batches are refused; GET and DELETE have nothing to serve.
    const batch = await rpc(limitedKey, [call(3), call(4)]);
    expect(batch.status).toBe(400);
    expect(await batch.json()).toMatchObject({
      jsonrpc: '2.0',
      error: { code: -32600, message: expect.stringMatching(/batch/) },
    });
    const get = await fetch(`${base}/mcp`, { headers: { authorization: `Bearer ${limitedKey}` } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(await get.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 } });
    // Spend the rest of the window: 429 rate_limited with Retry-After, through the SDK too.
    let refused = await rpc(limitedKey, call(10));
    for (let i = 0; i < 30 && refused.status === 200; i++)
      refused = await rpc(limitedKey, call(11 + i));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await refused.json()).toMatchObject({
      jsonrpc: '2.0',
      id: expect.any(Number),
      error: { code: -32029, data: { code: 'rate_limited' } },
    });
    const sdk = new Client({ name: 'tronwatch-test', version: '1.0.0' });
    await expect(
      sdk.connect(
        new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${limitedKey}` } },
        }),
      ),
    ).rejects.toThrow(/429|rate limit/i);
  });

  it('tronwatch mcp checks its settings at start: no key, a refused key, no service at the URL', {
    timeout: 300_000,
  }, async () => {
    const run = (env: Record<string, string>) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'mcp'], {
        cwd: ROOT,
        env: { ...process.env, ...env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stderr = '';
      let stdout = '';
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
      });
      return new Promise<{ code: number | null; stdout: string; stderr: string }>((r) =>
        child.once('exit', (code) => r({ code, stdout, stderr })),
      );
    };
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const [noKey, badKey, noService] = await Promise.all([
      run({ TRONWATCH_API_KEY: '', TRONWATCH_URL: base }),
      run({ TRONWATCH_API_KEY: `tw_live_${'x'.repeat(43)}`, TRONWATCH_URL: base }),
      run({ TRONWATCH_API_KEY: key, TRONWATCH_URL: nobody }),
    ]);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/TRONWATCH_API_KEY is unset/);
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toMatch(
      new RegExp(`TRONWATCH_API_KEY was refused by ${base}: .*\\(invalid_api_key\\)`),
    );
    expect(badKey.stderr).not.toContain('x'.repeat(43));
    expect(noService.code).toBe(2);
    expect(noService.stderr).toMatch(`tronwatch unreachable at ${nobody}: ECONNREFUSED`);
    for (const r of [noKey, badKey, noService]) expect(r.stdout).toBe('');
  });

  it('the docs’ client snippets work from this clone: Claude Desktop (stdio), VS Code (HTTP)', {
    timeout: 400_000,
  }, async () => {
    if (engine !== dbEngines[0]) return; // once per run: it builds dist/
    const docs = fs.readFileSync(path.join(ROOT, 'docs', 'integrating.md'), 'utf8');
    const section = docs.slice(docs.indexOf('### Agents (MCP)'));
    const blocks = [...section.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1] as string);
    const fill = (text: string) =>
      text
        .replaceAll('/path/to/tronwatch', ROOT)
        .replaceAll('https://tronwatch.example.com', base)
        .replaceAll('tw_live_…', key);
    const desktop = JSON.parse(fill(blocks[0] ?? '')) as {
      mcpServers: { tronwatch: { command: string; args: string[]; env: Record<string, string> } };
    };
    const vscode = JSON.parse(fill(blocks[1] ?? '')) as {
      servers: { tronwatch: { type: string; url: string; headers: Record<string, string> } };
    };
    // The clone's dist/, as npm ci builds it, from this source.
    await new Promise<void>((ok, fail) =>
      spawn('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore' }).once('exit', (code) =>
        code === 0 ? ok() : fail(new Error(`npm run build: exit ${code}`)),
      ),
    );
    const d = desktop.mcpServers.tronwatch;
    expect(d.command).toBe('node');
    const viaDesktop = new Client({ name: 'claude-desktop-snippet', version: '1.0.0' });
    await viaDesktop.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: d.args,
        env: { ...(process.env as Record<string, string>), ...d.env },
        stderr: 'pipe',
      }),
      { timeout: 120_000 },
    );
    cleanups.push(() => viaDesktop.close());
    const v = vscode.servers.tronwatch;
    expect(v.type).toBe('http');
    const viaVscode = new Client({ name: 'vscode-snippet', version: '1.0.0' });
    await viaVscode.connect(
      new StreamableHTTPClientTransport(new URL(v.url), { requestInit: { headers: v.headers } }),
    );
    cleanups.push(() => viaVscode.close());
    for (const c of [viaDesktop, viaVscode]) {
      expect(body(await tool(c, 'get_status'))).toMatchObject({ network: 'mainnet' });
    }
  });
});
