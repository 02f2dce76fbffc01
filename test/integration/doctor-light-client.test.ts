/**
 * `tronwatch doctor`'s `service.light_client` (issue 28; src/doctor/service.ts) against a real
 * running service (the api role over HTTP, on its own database) whose /healthz carries the light
 * client's stored state: nothing proven yet is a skip that says so; a checkpoint taken from the
 * providers at the first start (trust on first use) warns with how to pin one; a pinned one
 * passes with the final block; a service that does not answer is a skip.
 */
import fs from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { loadConfig } from '../../src/config.js';
import { runDoctor } from '../../src/doctor/doctor.js';
import { PIN_CHECKPOINT_FIX } from '../../src/doctor/service.js';
import { saveChainHead } from '../../src/ingest/chain-head.js';
import { type Service, startService } from '../../src/service.js';
import { LightClient } from '../../src/tron/light-client/finality.js';
import { parseCheckpoint } from '../../src/tron/light-client/sr-set.js';
import { saveLightClientState } from '../../src/tron/light-client/store.js';
import { dbEngines, emptyDb, type TestDb } from '../helpers/db.js';
import { freePort } from '../helpers/servers.js';

const SHIPPED = path.join(import.meta.dirname, '../../checkpoints/mainnet-78000099.json');
const ID = '0000000004a62fe32f53b49b135166ce13fd718773406c1a367109f7742c88c1';
const engine = dbEngines.includes('postgres') ? 'postgres' : 'pglite';

describe(`doctor: the light client of the running service (${engine})`, () => {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  }, 60_000);

  /** The api role on `env` and its URL, stopped after the test (stop() is idempotent). */
  async function serve(env: Record<string, string>): Promise<{ svc: Service; url: string }> {
    const svc = await startService(loadConfig(env), { roles: ['api'], logger: silentLogger });
    cleanups.push(() => svc.stop());
    if (!svc.url) throw new Error('the api role did not listen');
    return { svc, url: svc.url };
  }

  it('skips until a block is proven, warns a checkpoint taken on first use, passes a pinned one, skips a service that does not answer', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-doctor-lc-'));
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    let t: TestDb | undefined;
    if (engine === 'postgres') {
      t = await emptyDb('postgres');
      const tdb = t;
      cleanups.push(() => tdb.drop());
    }
    const env: Record<string, string> = {
      DATABASE_URL: t?.url ?? '',
      DATA_DIR: dataDir,
      SECRET_ENCRYPTION_KEY: 'c3'.repeat(32),
      // The api role never asks the node; the check reads /healthz only.
      TRON_NODE_URL: 'http://127.0.0.1:9#grpc=grpc://127.0.0.1:9',
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      METRICS_PORT: '0',
      LOG_LEVEL: 'silent',
      REDIS_URL: '',
    };
    const lightClient = async (e: Record<string, string>, url: string) => {
      const r = await runDoctor(e, { only: 'service.light_client', serviceUrl: url });
      expect(r.checks.map((c) => c.check)).toEqual(['service.light_client']);
      return r.checks[0];
    };

    let { svc, url } = await serve(env);
    const none = await lightClient(env, url);
    expect(none).toMatchObject({ status: 'skip', target: url });
    expect(none?.detail).toMatch(/^not proven yet: \/healthz has no light_client/);

    // Taken from the providers at the first start (no TRON_LIGHT_CLIENT_CHECKPOINT).
    const cp = parseCheckpoint(JSON.parse(await readFile(SHIPPED, 'utf8')));
    const shipped = cp.source;
    cp.source =
      'taken by tronwatch at its first start (not pinned) from provider 1, provider 2 at …';
    await saveLightClientState(svc.db, 'mainnet', new LightClient(cp).snapshot());
    await saveChainHead(svc.db, 'mainnet', { solidified: 78_000_117, head: 78_000_135 });
    const tofu = await lightClient(env, url);
    expect(tofu?.status).toBe('warn');
    expect(tofu?.detail).toBe(
      "final block 78000099 (2025-12-02T07:55:54.000Z), proven by 19 of 27 SRs (27 known, epoch 0); the providers' solidified head is 18 block(s) ahead; checkpoint block 78000099 NOT pinned: taken by tronwatch at its first start (not pinned) from provider 1, provider 2 at …",
    );
    expect(tofu?.fix).toBe(PIN_CHECKPOINT_FIX);
    expect(tofu?.fix).toMatch(
      /trust on first use\): review it and pin one with `tronwatch checkpoint` > file, TRON_LIGHT_CLIENT_CHECKPOINT=file$/,
    );
    // --strict makes that warning fail the run.
    const strict = await runDoctor(env, {
      only: 'service.light_client',
      serviceUrl: url,
      strict: true,
    });
    expect(strict.ok).toBe(false);
    await svc.stop();

    // The same state, served by a service whose checkpoint is pinned.
    const pinnedEnv = { ...env, TRON_LIGHT_CLIENT_CHECKPOINT: `78000099:${ID}` };
    ({ svc, url } = await serve(pinnedEnv));
    cp.source = shipped;
    await saveLightClientState(svc.db, 'mainnet', new LightClient(cp).snapshot());
    const pinned = await lightClient(pinnedEnv, url);
    expect(pinned?.status).toBe('pass');
    expect(pinned?.detail).toMatch(
      /^final block 78000099 \(2025-12-02T07:55:54\.000Z\), proven by 19 of 27 SRs \(27 known, epoch 0\); .*checkpoint block 78000099 pinned \(TRON_LIGHT_CLIENT_CHECKPOINT\)$/,
    );
    expect(pinned?.fix).toBeUndefined();
    await svc.stop();

    const gone = await lightClient(pinnedEnv, url);
    expect(gone).toMatchObject({
      status: 'skip',
      detail: 'not checked: the running service did not answer /healthz',
    });
  }, 180_000);
});
