/**
 * `light_client` in GET /v1/status and GET /healthz (issue 28, src/api/routes/light-client.ts), on
 * both engines: null / absent while the light client has proven nothing; then the last block proven
 * final as the ingest leader stored it, "proven by 19 of 27 SRs", the SRs known, the epoch, the
 * checkpoint (pinned, or taken from the providers at the first start, with its source) and how far
 * the providers' solidified head is ahead; every answer valid against the OpenAPI document.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { saveChainHead } from '../../src/ingest/chain-head.js';
import { LightClient } from '../../src/tron/light-client/finality.js';
import { parseCheckpoint } from '../../src/tron/light-client/sr-set.js';
import { saveLightClientState } from '../../src/tron/light-client/store.js';
import {
  type ApiHarness,
  apiHarness,
  json,
  openapiDocument,
  responseChecker,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

const SHIPPED = path.join(import.meta.dirname, '../../checkpoints/mainnet-78000099.json');
const ID = '0000000004a62fe32f53b49b135166ce13fd718773406c1a367109f7742c88c1';

describe.each(dbEngines)('light client status on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('is null until a block is proven, then shows the last block proven final and by how many SRs', async () => {
    h = await apiHarness(engine, { env: { TRON_LIGHT_CLIENT_CHECKPOINT: `78000099:${ID}` } });
    const c = await h.caller();
    const check = responseChecker(await openapiDocument(h.app));
    // On, but nothing proven yet.
    let status = await h.app.inject({ url: '/v1/status', headers: c.headers });
    expect(json(status).light_client).toBeNull();
    expect(json(await h.app.inject({ url: '/healthz' }))).not.toHaveProperty('light_client');

    const cp = parseCheckpoint(JSON.parse(await readFile(SHIPPED, 'utf8')));
    await saveLightClientState(h.db, 'mainnet', new LightClient(cp).snapshot());
    await saveChainHead(h.db, 'mainnet', { solidified: 78_000_117, head: 78_000_135 });
    const want = {
      final_block: 78_000_099,
      final_block_id: ID,
      final_block_timestamp: '2025-12-02T07:55:54.000Z',
      proven_by_srs: 19,
      active_srs: 27,
      known_srs: 27,
      epoch: 0,
      checkpoint_block: 78_000_099,
      checkpoint_pinned: true,
      checkpoint_source: cp.source,
      solidified_head_ahead_blocks: 18,
    };
    expect(cp.source).toMatch(/78,000,000–78,000,099/);
    status = await h.app.inject({ url: '/v1/status', headers: c.headers });
    expect(json(status).light_client).toEqual(want);
    expect(check('/v1/status', 'get', status)).toEqual([]);
    const health = await h.app.inject({ url: '/healthz' });
    expect(json(health).light_client).toEqual(want);
    expect(check('/healthz', 'get', health)).toEqual([]);
  });

  it('without a pinned checkpoint, says the checkpoint was taken from the providers', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const check = responseChecker(await openapiDocument(h.app));
    const cp = parseCheckpoint(JSON.parse(await readFile(SHIPPED, 'utf8')));
    cp.source =
      'taken by tronwatch at its first start (not pinned) from provider 1, provider 2 at …';
    await saveLightClientState(h.db, 'mainnet', new LightClient(cp).snapshot());
    const status = await h.app.inject({ url: '/v1/status', headers: c.headers });
    expect(json(status).light_client).toMatchObject({
      final_block: 78_000_099,
      checkpoint_block: 78_000_099,
      checkpoint_pinned: false,
      checkpoint_source: cp.source,
    });
    expect(check('/v1/status', 'get', status)).toEqual([]);
    const health = await h.app.inject({ url: '/healthz' });
    expect(json(health).light_client).toMatchObject({ checkpoint_pinned: false });
    expect(check('/healthz', 'get', health)).toEqual([]);
  });
});
