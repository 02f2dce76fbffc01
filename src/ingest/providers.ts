/**
 * The node providers' states (tron/node-group.ts `ProviderState`) stored for the API: table
 * node_providers (migration 015), one row per provider by its position in TRON_NODE_URL,
 * replaced whole by the ingest leader after each head poll and each failed step; rows of
 * positions no longer configured are removed. GET /healthz and GET /v1/status read it, so every
 * API replica reports the providers whichever process ingests.
 */
import type { Queryable } from '../db/pool.js';
import type { ProviderState } from '../tron/node-group.js';

/** A provider as stored (`updatedAt`: when the ingester last wrote it). */
export interface StoredProviderState extends ProviderState {
  updatedAt: Date;
}

/** Replace the network's provider rows with `states` (one statement). */
export async function saveProviderStates(
  db: Queryable,
  network: string,
  states: readonly ProviderState[],
): Promise<void> {
  const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
  await db.query(
    `WITH input AS (
       SELECT * FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
                            $7::timestamptz[], $8::int8[], $9::int8[])
         AS i(idx, name, state, reason, since, until, solidified, head)
     ),
     gone AS (
       DELETE FROM node_providers p
        WHERE p.network = $1 AND NOT EXISTS (SELECT 1 FROM input i WHERE i.idx = p.idx)
     )
     INSERT INTO node_providers (network, idx, name, state, reason, since, until, solidified, head,
                                 updated_at)
     SELECT $1, idx, name, state, reason, since, until, solidified, head, now() FROM input
     ON CONFLICT (network, idx) DO UPDATE SET
       name = EXCLUDED.name, state = EXCLUDED.state, reason = EXCLUDED.reason,
       since = EXCLUDED.since, until = EXCLUDED.until, solidified = EXCLUDED.solidified,
       head = EXCLUDED.head, updated_at = EXCLUDED.updated_at`,
    [
      network,
      states.map((s) => s.index),
      states.map((s) => s.name),
      states.map((s) => s.state),
      states.map((s) => s.reason ?? null),
      states.map((s) => iso(s.since)),
      states.map((s) => iso(s.until)),
      states.map((s) => s.solidified),
      states.map((s) => s.head),
    ],
  );
}

/** The network's providers as last stored, by position; [] before the ingester wrote any. */
export async function readProviderStates(
  db: Queryable,
  network: string,
): Promise<StoredProviderState[]> {
  const { rows } = await db.query<{
    idx: number;
    name: string;
    state: ProviderState['state'];
    reason: string | null;
    since: Date | string | null;
    until: Date | string | null;
    solidified: string | number;
    head: string | number;
    updated_at: Date | string;
  }>(
    `SELECT idx, name, state, reason, since, until, solidified, head, updated_at
       FROM node_providers WHERE network = $1 ORDER BY idx`,
    [network],
  );
  return rows.map((r) => {
    const s: StoredProviderState = {
      index: Number(r.idx),
      name: r.name,
      state: r.state,
      solidified: Number(r.solidified),
      head: Number(r.head),
      updatedAt: new Date(r.updated_at),
    };
    if (r.reason !== null) s.reason = r.reason;
    if (r.since !== null) s.since = new Date(r.since).getTime();
    if (r.until !== null) s.until = new Date(r.until).getTime();
    return s;
  });
}
