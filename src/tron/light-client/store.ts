/**
 * The light client's state in PostgreSQL (migration 065, `light_client_state`): one row per
 * network holding a LightClientSnapshot (finality.ts) at the last block proven final. Save it in
 * the transaction that advances the cursor (same block), so a restart resumes both together.
 */
import type { Queryable } from '../../db/pool.js';
import type { LightClientSnapshot } from './finality.js';

/** A stored state: the snapshot and when it was written. */
export interface StoredLightClientState {
  snapshot: LightClientSnapshot;
  updatedAt: Date;
}

/**
 * Insert or replace the state of `network`.
 * @param q the cursor's transaction (or the pool).
 */
export async function saveLightClientState(
  q: Queryable,
  network: string,
  snapshot: LightClientSnapshot,
): Promise<void> {
  await q.query(
    `INSERT INTO light_client_state (network, final_number, final_id, checkpoint_id, epoch, snapshot)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb)
     ON CONFLICT (network) DO UPDATE SET final_number = EXCLUDED.final_number,
       final_id = EXCLUDED.final_id, checkpoint_id = EXCLUDED.checkpoint_id,
       epoch = EXCLUDED.epoch, snapshot = EXCLUDED.snapshot, updated_at = now()`,
    [
      network,
      snapshot.final.number,
      snapshot.final.id,
      snapshot.checkpoint.block.id,
      snapshot.final.epoch,
      JSON.stringify(snapshot),
    ],
  );
}

/** The stored state of `network`, or undefined before the first final block was saved. */
export async function loadLightClientState(
  q: Queryable,
  network: string,
): Promise<StoredLightClientState | undefined> {
  const r = await q.query<{ snapshot: LightClientSnapshot | string; updated_at: Date }>(
    'SELECT snapshot, updated_at FROM light_client_state WHERE network = $1',
    [network],
  );
  const row = r.rows[0];
  if (!row) return undefined;
  const snapshot =
    typeof row.snapshot === 'string'
      ? (JSON.parse(row.snapshot) as LightClientSnapshot)
      : row.snapshot;
  return { snapshot, updatedAt: row.updated_at };
}

/** What /v1/status, /healthz and the console show of the stored light client. */
export interface LightClientSummary {
  /** The last block proven final: number, blockID, time (ms since the epoch). */
  final: { number: number; id: string; timestamp: number };
  /** Maintenance epochs followed since the checkpoint (0 = the checkpoint's set). */
  epoch: number;
  /** SRs of the newest epoch whose signatures count toward finality. */
  knownSrs: number;
  /** The checkpoint it follows from, and where that came from (its `source`). */
  checkpoint: { number: number; id: string; source?: string };
  /** When the state was last stored (the commit that reached its final block). */
  updatedAt: Date;
}

/** The stored light client of `network` summarised, or undefined when none was stored. */
export async function readLightClientSummary(
  q: Queryable,
  network: string,
): Promise<LightClientSummary | undefined> {
  const s = await loadLightClientState(q, network);
  if (!s) return undefined;
  const snap = s.snapshot;
  const top = snap.epochs.reduce<(typeof snap.epochs)[number] | undefined>(
    (a, e) => (!a || e.index > a.index ? e : a),
    undefined,
  );
  return {
    final: { number: snap.final.number, id: snap.final.id, timestamp: snap.final.timestamp },
    epoch: top?.index ?? snap.final.epoch,
    knownSrs: top ? top.members.filter((m) => m.known).length : 0,
    checkpoint: {
      number: snap.checkpoint.block.number,
      id: snap.checkpoint.block.id,
      ...(snap.checkpoint.source === undefined ? {} : { source: snap.checkpoint.source }),
    },
    updatedAt: s.updatedAt,
  };
}
