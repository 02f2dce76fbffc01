/**
 * tronwatch's own finality (issue 28) as the API shows it: `light_client` in GET /v1/status and
 * GET /healthz, read from the state the ingest leader stores with its cursor
 * (src/tron/light-client/store.ts), so every process of the deployment answers the same.
 */
import { Type as T } from '@sinclair/typebox';
import { FINALITY_THRESHOLD } from '../../tron/light-client/finality.js';
import { ACTIVE_SR_COUNT } from '../../tron/light-client/sr-set.js';
import { readLightClientSummary } from '../../tron/light-client/store.js';
import type { AppDeps } from '../types.js';

const NullableInt = (description: string) =>
  T.Unsafe<number | null>({ type: ['integer', 'null'], description });

/** The light client as /v1/status and /healthz show it (issue 28). */
export const LightClientStatusSchema = T.Object(
  {
    final_block: T.Integer({
      description:
        'The last block tronwatch proved final itself: 19 distinct SRs of the set signed blocks on top of it, every signature checked. Ingest commits no block above it.',
    }),
    final_block_id: T.String({ description: 'Its blockID (64 hex).' }),
    final_block_timestamp: T.String({ format: 'date-time', description: 'Its block time.' }),
    proven_by_srs: T.Integer({
      description: 'Distinct SRs whose signed blocks on top make a block final (19).',
    }),
    active_srs: T.Integer({ description: 'SRs in the active set (27).' }),
    known_srs: T.Integer({
      description:
        'SRs of the current set whose keys it holds and whose signatures count (27 once every SR new after a maintenance was vouched for).',
    }),
    epoch: T.Integer({
      description: 'Maintenances (every 6 h) followed since the checkpoint; 0 = its SR set.',
    }),
    checkpoint_block: T.Integer({ description: 'The checkpoint it follows from.' }),
    checkpoint_pinned: T.Boolean({
      description:
        'Additive. true: the operator pinned the checkpoint (TRON_LIGHT_CLIENT_CHECKPOINT); false: tronwatch took it from a quorum of the providers at its first start (trust on first use: review it and pin one).',
    }),
    checkpoint_source: T.Unsafe<string | null>({
      type: ['string', 'null'],
      description: 'Additive. Where the checkpoint came from (its `source`), for review.',
    }),
    solidified_head_ahead_blocks: NullableInt(
      "The providers' solidified head minus final_block (about 18 when caught up: the blocks read and waiting for the SRs' signatures); null before a head was seen.",
    ),
  },
  { $id: 'LightClientStatus', description: "tronwatch's own finality (issue 28)." },
);

/** The body of LightClientStatusSchema. */
export interface LightClientStatusBody {
  final_block: number;
  final_block_id: string;
  final_block_timestamp: string;
  proven_by_srs: number;
  active_srs: number;
  known_srs: number;
  epoch: number;
  checkpoint_block: number;
  checkpoint_pinned: boolean;
  checkpoint_source: string | null;
  solidified_head_ahead_blocks: number | null;
}

/**
 * The light client's stored state as LightClientStatusSchema, or null until ingest stored one (the
 * first block it proved final). Mainnet's light client is always on (issue 28); the test
 * network's only with TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT.
 * @param known the providers' solidified head as last stored (null: unknown); read from
 *   chain_head when not given.
 * @param network whose light client: the deployment's (mainnet, default) or the test network's.
 */
export async function lightClientStatus(
  deps: Pick<AppDeps, 'db' | 'config'>,
  known?: number | null,
  network: string = deps.config.network,
): Promise<LightClientStatusBody | null> {
  const live = network === deps.config.network;
  const s = await readLightClientSummary(deps.db, network);
  if (!s) return null;
  let solidified = known;
  if (solidified === undefined) {
    const { rows } = await deps.db.query<{ n: string | number }>(
      'SELECT solidified_block_number AS n FROM chain_head WHERE network = $1',
      [network],
    );
    solidified = rows[0] ? Number(rows[0].n) : null;
  }
  return {
    final_block: s.final.number,
    final_block_id: s.final.id,
    final_block_timestamp: new Date(s.final.timestamp).toISOString(),
    proven_by_srs: FINALITY_THRESHOLD,
    active_srs: ACTIVE_SR_COUNT,
    known_srs: s.knownSrs,
    epoch: s.epoch,
    checkpoint_block: s.checkpoint.number,
    checkpoint_pinned:
      (live
        ? deps.config.ingest.lightClientCheckpoint
        : deps.config.ingest.testnetLightClientCheckpoint) !== undefined,
    checkpoint_source: s.checkpoint.source ?? null,
    solidified_head_ahead_blocks: solidified === null ? null : solidified - s.final.number,
  };
}

export const lightClientSchemas = [LightClientStatusSchema];
