/**
 * Every role serves GET /metrics on its own listener, METRICS_HOST:METRICS_PORT (127.0.0.1:9464
 * unless told; issue 17 item 3), and only there: a process without the api role (here: ingest
 * only) with the chain gauges of its ingester, an api process with its request latencies while
 * its public port answers 404 for /metrics; anything else on the metrics listener is a 404. A
 * start that fails on a taken port closes what it opened (the shutdown registry).
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { loadConfig } from '../../src/config.js';
import { type Service, startService } from '../../src/service.js';
import { nodeEnv, type SyntheticChain, serveSynthetic } from '../helpers/chain.js';
import { emptyDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';

describe('METRICS_PORT', () => {
  let svc: Service | undefined;
  let chain: SyntheticChain | undefined;
  let dir: string | undefined;
  let database: TestDb | undefined;
  afterEach(async () => {
    await svc?.stop();
    await database?.drop();
    database = undefined;
    await chain?.node.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves the ingest role’s metrics on their own port', async () => {
    chain = await serveSynthetic({
      seed: 4,
      firstBlock: 74_000_000,
      txPerBlock: 50,
      addresses: 100,
      count: 3,
    });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-metrics-port-'));
    const cfg = loadConfig({
      DATA_DIR: dir,
      ...nodeEnv(chain.node),
      INGEST_START_BLOCK: String(chain.first),
      TRON_BLOCK_INTERVAL_MS: '50',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
    });
    svc = await startService(cfg, { roles: ['ingest'], logger: silentLogger });
    expect(svc.url).toBeUndefined(); // no API in this process
    expect(svc.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    while ((svc.ingester?.stats.cursor ?? 0) < chain.last)
      await new Promise((r) => setTimeout(r, 20));
    const res = await fetch(svc.metricsUrl as string);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^tronwatch_blocks_ingested_total 3$/m);
    expect(text).toMatch(new RegExp(`^tronwatch_chain_cursor_block ${chain.last}$`, 'm'));
    expect((await fetch((svc.metricsUrl as string).replace('/metrics', '/v1/events'))).status).toBe(
      404,
    );
  });

  it('serves the api role’s metrics on the loopback listener only, and 404 on the public port', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-metrics-port-'));
    // PostgreSQL when there is one: an embedded database takes far longer to start.
    if (POSTGRES_URL) database = await emptyDb('postgres');
    const cfg = loadConfig({
      DATA_DIR: dir,
      ...(database?.url ? { DATABASE_URL: database.url } : {}),
      TRON_NODE_URL: 'http://127.0.0.1:9', // the api role reads no chain
      HOST: '0.0.0.0', // the public port on every interface; METRICS_HOST stays at its default
      PORT: '0',
      METRICS_PORT: '0',
    });
    svc = await startService(cfg, { roles: ['api'], logger: silentLogger });
    const metricsUrl = new URL(svc.metricsUrl);
    expect(metricsUrl.hostname).toBe('127.0.0.1');
    const api = `http://127.0.0.1:${new URL(svc.url as string).port}`;
    expect((await fetch(`${api}/healthz`)).status).toBe(200);
    const publicMetrics = await fetch(`${api}/metrics`);
    expect(publicMetrics.status).toBe(404);
    expect(await publicMetrics.json()).toEqual({ error: 'not found' });
    const res = await fetch(svc.metricsUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toMatch(
      /^tronwatch_http_request_duration_seconds_count\{method="GET",route="\/healthz",status_code="200"\} 1$/m,
    );
    expect(text).toMatch(/^tronwatch_process_cpu_user_seconds_total /m);
    expect((await fetch(svc.metricsUrl.replace('/metrics', '/healthz'))).status).toBe(404);
    // Not reachable on another interface of this machine, where the public port is.
    const external = Object.values(os.networkInterfaces())
      .flat()
      .find((i) => i?.family === 'IPv4' && !i.internal)?.address;
    if (external !== undefined) {
      expect(
        (await fetch(`http://${external}:${new URL(svc.url as string).port}/healthz`)).status,
      ).toBe(200);
      await expect(fetch(`http://${external}:${metricsUrl.port}/metrics`)).rejects.toThrow();
    }
  });
});

describe('a start that fails halfway', () => {
  let dir: string | undefined;
  let blocker: net.Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => (blocker ? blocker.close(() => r()) : r()));
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it.each(['PORT', 'METRICS_PORT'])(
    'closes what it had opened when %s is taken: the same data folder starts again at once',
    async (variable) => {
      blocker = net.createServer();
      const server = blocker;
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      const taken = String((server.address() as net.AddressInfo).port);
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-failed-start-'));
      const env = {
        DATA_DIR: dir,
        // No node is needed: the api and worker roles do not read the chain.
        TRON_NODE_URL: 'http://127.0.0.1:9',
        HOST: '127.0.0.1',
        PORT: '0',
        METRICS_PORT: '0',
      };
      const failing = loadConfig({ ...env, [variable]: taken });
      await expect(
        startService(failing, { roles: ['api', 'worker'], logger: silentLogger }),
      ).rejects.toThrow(/EADDRINUSE/);
      // The embedded database holds its folder (DATA_DIR/pgdata.lock) while open: a second start
      // is refused unless the failed one closed it.
      const svc = await startService(loadConfig(env), {
        roles: ['api', 'worker'],
        logger: silentLogger,
      });
      try {
        expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
      } finally {
        await svc.stop();
      }
    },
  );
});
