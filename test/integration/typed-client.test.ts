/**
 * The typed client (clients/typescript, issue 20 item 4) against a started service (api + ingest
 * + worker) on a replay node serving the real mainnet block 79072107, with webhooks delivered to a
 * local HTTPS receiver: its committed generated types equal what openapi-typescript makes of the
 * document this service serves; every call below is compiled against those types (this file is
 * type-checked with the repository) and answered as they say; verifyWebhook accepts a real
 * delivery and refuses a tampered one.
 *
 * Issue 31 item 1: the package installs into an empty project with the one command of its
 * README, the README's example type-checks there (`tsc --noEmit`) and runs against this service;
 * what must not compile (unknown query keys and body members) does not; a `Headers` object's
 * headers are sent; an error's `details` is typed; a webhook watch's `secret` is not optional.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCHEMA_FILE, schemaSource } from '../../clients/typescript/scripts/generate.js';
import {
  API_VERSION,
  createTronwatchClient,
  type TronwatchClient,
  verifyWebhook,
  WebhookVerificationError,
} from '../../clients/typescript/src/index.js';
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

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLIENT_DIR = path.join(ROOT, 'clients', 'typescript');
const run = promisify(execFile);
const BLOCK = 79072107;
const engine = dbEngines.includes('postgres') ? 'postgres' : 'pglite';

/** The first TRX transfer of the block, from its JSON. */
const T1 = (() => {
  const txs = fixtureJson<{
    transactions: Array<{
      txID: string;
      raw_data: {
        contract: Array<{ type: string; parameter: { value: Record<string, unknown> } }>;
      };
    }>;
  }>(`chain/block-${BLOCK}.json`).transactions;
  for (const t of txs) {
    const c = t.raw_data.contract[0];
    const v = c?.parameter.value as { owner_address: string; to_address: string; amount: number };
    if (c?.type === 'TransferContract' && v.amount > 0 && v.owner_address !== v.to_address) {
      return { txId: t.txID, to: hexToBase58(v.to_address) };
    }
  }
  throw new Error('no TRX transfer in the block');
})();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`typed client against a started service (${engine})`, () => {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  let node: ReplayNode;
  let service: Service;
  let receiver: Receiver;
  let tw: TronwatchClient;
  let key = '';
  let secret = '';

  beforeAll(async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-client-'));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    receiver = await startReceiver({ secretFor: () => secret || undefined, respond: () => 200 });
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
    service = await startService(
      loadConfig({
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
      }),
      { roles: ['api', 'ingest', 'worker'], logger: silentLogger },
    );
    cleanups.push(() => service.stop());
    const account = await accountsCreate(service.db, { email: 'client@example.com', plan: 'pro' });
    key = (await keysCreate(service.db, { account: account.id })).key;
    tw = createTronwatchClient({ baseUrl: `${service.url}/`, apiKey: key });
  }, 180_000);

  afterAll(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  }, 60_000);

  it('has generated types equal to what the served OpenAPI document gives', async () => {
    const res = await fetch(`${service.url}/docs/openapi.json`);
    expect(res.status).toBe(200);
    const generated = await schemaSource(await res.json());
    expect(
      fs.readFileSync(SCHEMA_FILE, 'utf8') === generated,
      'clients/typescript/src/schema.ts is out of date: run npx tsx clients/typescript/scripts/generate.ts --url <a running service>',
    ).toBe(true);
  });

  it('sends the headers of a Headers object', async () => {
    const withHeaders = createTronwatchClient({
      baseUrl: service.url as string,
      apiKey: key,
      headers: new Headers({ 'X-Request-Id': 'client-headers-1' }),
    });
    const res = await withHeaders.GET('/v1/status');
    expect(res.response.status).toBe(200);
    expect(res.response.headers.get('x-request-id')).toBe('client-headers-1');
    const pairs = createTronwatchClient({
      baseUrl: service.url as string,
      apiKey: key,
      headers: [['X-Request-Id', 'client-headers-2']],
    });
    const res2 = await pairs.GET('/v1/status');
    expect(res2.response.headers.get('x-request-id')).toBe('client-headers-2');
  });

  it('installs as its README says, and the README example compiles and runs', {
    timeout: 300_000,
  }, async () => {
    const readme = fs.readFileSync(path.join(CLIENT_DIR, 'README.md'), 'utf8');
    const pack = /```sh\n(npm run client:pack)\n```/.exec(readme)?.[1];
    const install = /```sh\n(npm install \/path\/to\/tronwatch\/[^\n]+)\n```/.exec(readme)?.[1];
    const example = /## Example[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    if (!pack || !install || !example) throw new Error('the README has no install line or example');
    expect(example.trim().split('\n')).toHaveLength(5);
    const pkg = JSON.parse(fs.readFileSync(path.join(CLIENT_DIR, 'package.json'), 'utf8')) as {
      version: string;
      private?: boolean;
    };
    // Versioned with the API: 2026-08 is 2026.8.x.
    const [y, m] = API_VERSION.split('-').map(Number);
    expect(pkg.version).toMatch(new RegExp(`^${y}\\.${m}\\.\\d+$`));
    expect(pkg.private).toBeUndefined();

    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-client-project-'));
    cleanups.push(() => fs.rmSync(project, { recursive: true, force: true }));
    fs.writeFileSync(
      path.join(project, 'package.json'),
      JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
    );
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          types: ['node'],
          outDir: 'out',
        },
      }),
    );
    // npm's cache holds what the repository's own install fetched: offline when it can be.
    const npmEnv = { ...process.env, npm_config_prefer_offline: 'true', npm_config_audit: 'false' };
    await run('npm', ['run', 'client:pack'], { cwd: ROOT, env: npmEnv });
    const tarball = install.split(' ')[2]?.replace('/path/to/tronwatch', ROOT) ?? '';
    expect(tarball).toBe(path.join(CLIENT_DIR, `tronwatch-client-${pkg.version}.tgz`));
    await run('npm', ['install', tarball], { cwd: project, env: npmEnv });
    await run('npm', ['install', '-D', 'typescript@5.9', '@types/node@20'], {
      cwd: project,
      env: npmEnv,
    });
    const installed = path.join(project, 'node_modules', '@tronwatch', 'client');
    expect(fs.lstatSync(installed).isSymbolicLink()).toBe(false);
    expect(fs.existsSync(path.join(installed, 'dist', 'index.js'))).toBe(true);
    // The packed package runs nothing at install (issue 40 item 9): no prepare/install scripts.
    const packed = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>;
    };
    for (const hook of ['prepare', 'preinstall', 'install', 'postinstall']) {
      expect(packed.scripts?.[hook], hook).toBeUndefined();
    }

    const tsc = path.join(project, 'node_modules', 'typescript', 'bin', 'tsc');
    fs.writeFileSync(path.join(project, 'example.ts'), example);
    await run(process.execPath, [tsc, '--noEmit', '-p', '.'], { cwd: project });

    // What must not compile: a misspelt query key beside a right one, an extra body member.
    fs.writeFileSync(
      path.join(project, 'wrong.ts'),
      [
        "import { createTronwatchClient } from '@tronwatch/client';",
        "const tw = createTronwatchClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'k' });",
        "await tw.GET('/v1/events', { params: { query: { limit: 5, watch: 'wh_1' } } });",
        "await tw.POST('/v1/watches', { body: { address: 'T', asset_filter: 'USDT', hook: 'x' } });",
        '',
      ].join('\n'),
    );
    const wrong = await run(process.execPath, [tsc, '--noEmit', '-p', '.'], {
      cwd: project,
    }).then(
      () => '',
      (err: { stdout?: string }) => err.stdout ?? '',
    );
    expect(wrong).toMatch(/wrong\.ts\(3,[0-9]+\).*'watch' does not exist/);
    expect(wrong).toMatch(/wrong\.ts\(4,[0-9]+\).*'hook' does not exist/);
    fs.rmSync(path.join(project, 'wrong.ts'));

    // The example, compiled and run against this service.
    await run(process.execPath, [tsc, '-p', '.'], { cwd: project });
    const out = await run(process.execPath, [path.join(project, 'out', 'example.js')], {
      cwd: project,
      env: {
        ...process.env,
        TRONWATCH_URL: service.url as string,
        TRONWATCH_API_KEY: key,
        WEBHOOK_URL: `${receiver.origin}/hook/readme`,
      },
    });
    const [id, printed] = out.stdout.trim().split(' ');
    expect(id).toMatch(/^wh_/);
    expect(printed).toMatch(/^whsec_/);
    const listed = await tw.GET('/v1/watches');
    expect(listed.data?.data.find((w) => w.id === id)).toMatchObject({
      address: 'TTxM1dAjyFzwH23RZwToSDtrJQyfoEREPp',
      asset_filter: 'USDT',
      direction: 'incoming',
    });
    await tw.DELETE('/v1/watches/{id}', { params: { path: { id: id as string } } });
  });

  it('creates, lists, explains, pages and changes watches through typed calls', {
    timeout: 180_000,
  }, async () => {
    const created = await tw.POST('/v1/watches', {
      body: {
        address: T1.to,
        asset_filter: 'TRX',
        direction: 'incoming',
        webhook_url: `${receiver.origin}/hook`,
      },
    });
    expect(created.response.status).toBe(201);
    expect(created.response.headers.get('x-ratelimit-limit')).toBe('300');
    const watch = created.data;
    if (!watch) throw new Error(JSON.stringify(created.error));
    // A watch with its own URL has a secret; one on an endpoint (issue 30) has endpoint_id instead.
    if (watch.channel !== 'webhook' || !('secret' in watch)) {
      throw new Error('a webhook watch with its own secret was expected');
    }
    // Typed as a string (not optional) once the shape says so.
    secret = watch.secret;
    expect(secret).toMatch(/^whsec_/);

    // A contract error comes back typed as the error body.
    const dup = await tw.POST('/v1/watches', {
      body: {
        address: T1.to,
        asset_filter: 'TRX',
        direction: 'incoming',
        webhook_url: `${receiver.origin}/hook`,
      },
    });
    expect(dup.response.status).toBe(409);
    expect(dup.data).toBeUndefined();
    expect(typeof dup.error?.error).toBe('string');

    // `direction` is optional (the API defaults it); a 400's details are typed FieldErrors.
    const invalid = await tw.POST('/v1/watches', {
      body: { address: 'Tnot-an-address', asset_filter: 'USDT', webhook_url: 'http://x.test/' },
    });
    expect(invalid.response.status).toBe(400);
    const details = invalid.error?.details;
    const fields = Array.isArray(details) ? details.map((d) => d.field).sort() : [];
    expect(fields).toEqual(['address', 'webhook_url']);

    const listed = await tw.GET('/v1/watches');
    expect(listed.data?.data.map((w) => w.id)).toEqual([watch.id]);

    // The light client makes BLOCK final once 18 blocks are on top of it (the full-node head).
    node.advanceTo(BLOCK + FINALITY_DEPTH - 2);
    let page = (await tw.GET('/v1/events', { params: { query: { watch_id: watch.id } } })).data;
    for (let i = 0; i < 600 && (page?.scanned_through?.block_number ?? 0) < BLOCK; i++) {
      await sleep(100);
      page = (await tw.GET('/v1/events', { params: { query: { watch_id: watch.id } } })).data;
    }
    expect(page?.scanned_through?.block_number).toBe(BLOCK);
    const event = page?.data[0];
    expect(event).toMatchObject({ tx_id: T1.txId, to: T1.to, asset: 'TRX', block_number: BLOCK });

    const status = await tw.GET('/v1/status');
    expect(status.data?.scanned_through?.block_number).toBe(BLOCK);

    const explained = await tw.GET('/v1/watches/{id}/transactions/{tx_id}', {
      params: { path: { id: watch.id, tx_id: T1.txId } },
    });
    expect(explained.data).toMatchObject({ reason: 'produced', produced_event: true });

    let detail = (
      await tw.GET('/v1/events/{event_id}', {
        params: { path: { event_id: event?.event_id as string } },
      })
    ).data;
    for (let i = 0; i < 300 && detail?.notifications[0]?.status !== 'DELIVERED'; i++) {
      await sleep(100);
      detail = (
        await tw.GET('/v1/events/{event_id}', {
          params: { path: { event_id: event?.event_id as string } },
        })
      ).data;
    }
    expect(detail?.notifications[0]?.attempt_log[0]?.http_status).toBe(200);

    // The delivery the receiver got: verified by the helper, as a receiver would.
    const got = receiver.received.find((r) => r.eventId === event?.event_id);
    if (!got) throw new Error('no delivery received');
    const verified = verifyWebhook(got.body, got.headers, secret);
    expect(verified).toMatchObject({ event_id: event?.event_id, type: 'transfer.confirmed' });
    expect(got.body.toString('utf8')).toBe(detail?.payload);
    const tampered = Buffer.from(got.body.toString('utf8').replace(T1.txId, '0'.repeat(64)));
    expect(() => verifyWebhook(tampered, got.headers, secret)).toThrow(WebhookVerificationError);
    // Without its webhook-* headers (nothing dates it) it is refused unless the receiver opts in
    // (issue 40 item 7; the replay an hour later: test/unit/client-webhooks.test.ts).
    const xOnly = { 'x-signature': got.headers['x-signature'] as string };
    expect(() => verifyWebhook(got.body, xOnly, secret)).toThrow(/signed timestamp is required/);
    expect(verifyWebhook(got.body, xOnly, secret, { allowXSignatureOnly: true })).toMatchObject({
      event_id: event?.event_id,
    });
    expect(() => verifyWebhook(got.body, {}, secret)).toThrow(/no X-Signature/);
    expect(() => verifyWebhook(got.body, got.headers, `whsec_${'A'.repeat(43)}=`)).toThrow(
      WebhookVerificationError,
    );

    const paused = await tw.POST('/v1/watches/{id}/pause', { params: { path: { id: watch.id } } });
    expect(paused.data?.status).toBe('PAUSED');
    const resumed = await tw.POST('/v1/watches/{id}/resume', {
      params: { path: { id: watch.id } },
    });
    expect(resumed.data?.status).toBe('ACTIVE');
    const deleted = await tw.DELETE('/v1/watches/{id}', { params: { path: { id: watch.id } } });
    expect(deleted.response.status).toBe(204);
    const gone = await tw.DELETE('/v1/watches/{id}', { params: { path: { id: watch.id } } });
    expect(gone.response.status).toBe(404);
    expect(gone.error?.error).toBe('watch not found');
  });
});
