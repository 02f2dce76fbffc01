/**
 * The light client's stored state (migration 065, src/tron/light-client/store.ts) on both engines:
 * a client saved at its final block and loaded back goes on exactly as one that never stopped;
 * the row is replaced, one per network; a malformed id is refused by the table.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { syntheticBlock, syntheticCheckpoint } from '../../src/devnet/synthetic.js';
import { LightClient } from '../../src/tron/light-client/finality.js';
import { signedHeaderFromJson } from '../../src/tron/light-client/header.js';
import { loadLightClientState, saveLightClientState } from '../../src/tron/light-client/store.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';

const CHAIN = { seed: 65, firstBlock: 3000, txPerBlock: 1 };
const header = (n: number) => signedHeaderFromJson(syntheticBlock(CHAIN, n).block);

describe.each(dbEngines)('light client state on %s', (engine) => {
  let t: TestDb | undefined;
  afterEach(async () => {
    await t?.drop();
    t = undefined;
  });

  it('saves at the final block and restores a client that finalises what an uninterrupted one does', async () => {
    t = await migratedDb(engine);
    expect(await loadLightClientState(t.db, 'devnet')).toBeUndefined();
    const straight = new LightClient(syntheticCheckpoint(CHAIN));
    const first = new LightClient(syntheticCheckpoint(CHAIN));
    for (let n = 3000; n < 3060; n++) straight.submit(header(n));
    for (let n = 3000; n < 3030; n++) first.submit(header(n));
    await saveLightClientState(t.db, 'devnet', first.snapshot());
    for (let n = 3030; n < 3040; n++) first.submit(header(n));
    await t.db.transaction((tx) => saveLightClientState(tx, 'devnet', first.snapshot()));
    const count = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM light_client_state',
    );
    expect(count.rows[0]?.n).toBe(1);
    const stored = await loadLightClientState(t.db, 'devnet');
    expect(stored?.snapshot.final.number).toBe(3039 - 18);
    const restored = LightClient.restore(
      stored?.snapshot as NonNullable<typeof stored>['snapshot'],
    );
    for (let n = restored.finalBlock.number + 1; n < 3060; n++) restored.submit(header(n));
    expect(restored.finalBlock).toEqual(straight.finalBlock);
    await expect(
      t.db.query(
        `INSERT INTO light_client_state (network, final_number, final_id, checkpoint_id, epoch, snapshot)
         VALUES ('x', 1, 'NOT-HEX', $1, 0, '{}')`,
        ['0'.repeat(64)],
      ),
    ).rejects.toThrow();
  });
});
