/**
 * The scanned-through watermark (issue 14 item 1; DESIGN decisions "watermark"), additive:
 *
 *   GET /v1/status → 200 { network, solidified_head, scanned_through, lag_blocks, lag_seconds }
 *
 * `scanned_through` is the newest block whose events are all committed (the ingest cursor, moved
 * in the same transaction as that block's events): a client can state "every matching transfer up
 * to block N is in GET /v1/events", and so that a deposit claimed in a block ≤ N did not happen to
 * a watched address. `lag_blocks` = solidified head − N; `lag_seconds` = how far N's timestamp is
 * behind now (the database's clock), which includes the chain's own ~54 s to solidify.
 * Additive too: `ingest_stall` (the block ingest cannot commit and why: a block that failed
 * verification, providers that disagree, a malformed answer; null when none) and `node_providers`
 * (each TRON_NODE_URL provider's state by position, as the ingest leader last stored it: see
 * src/tron/node-group.ts; no URLs), and `light_client` (issue 28: the last block tronwatch proved
 * final itself from 19 of the 27 SRs' signatures, and how far the providers' solidified head is
 * ahead of it; null until it proved a block final; for test keys the test network's, which runs
 * only with TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT).
 * Rate-limited like every /v1 route.
 */
import { Type as T } from '@sinclair/typebox';
import { isoFromPgTimestamp } from '../../events/event.js';
import { readProviderStates } from '../../ingest/providers.js';
import { readStall } from '../../ingest/stall.js';
import { requireAuth } from '../auth.js';
import { BEARER_SECURITY, commonV1Responses, NullableString, ref, v1Response } from '../schemas.js';
import type { App, AppDeps } from '../types.js';
import { ScannedThroughSchema } from './events.js';
import { NodeProviderHealthSchema, providerHealth } from './health.js';
import {
  type LightClientStatusBody,
  LightClientStatusSchema,
  lightClientStatus,
} from './light-client.js';
import { NetworkQuery } from './watches.js';

const NullableInt = (description: string) =>
  T.Unsafe<number | null>({ type: ['integer', 'null'], description });

export const StatusSchema = T.Object(
  {
    network: NullableString({
      description:
        "The key's network: `mainnet` (a live key) or `nile` (a test key: the test environment's chain, followed when TRON_TESTNET_NODE_URL is set; otherwise its heads are null).",
    }),
    solidified_head: NullableInt(
      'The newest solidified block the ingester last saw; null before it has seen one.',
    ),
    scanned_through: T.Unsafe<{ block_number: number; block_timestamp: string } | null>({
      anyOf: [ref(ScannedThroughSchema), { type: 'null' }],
      description:
        'The newest block whose events are all committed; null before the first block is committed.',
    }),
    lag_blocks: NullableInt('solidified_head − scanned_through.block_number; null if either is.'),
    lag_seconds: NullableInt(
      "Seconds between scanned_through's block timestamp and now; null before the first block.",
    ),
    ingest_stall: T.Unsafe<{ block_number: number; reason: string; since: string } | null>({
      anyOf: [
        {
          type: 'object',
          required: ['block_number', 'reason', 'since'],
          properties: {
            block_number: { type: 'integer', description: 'The block that cannot be committed.' },
            reason: { type: 'string', description: "The last failure's message." },
            since: { type: 'string', format: 'date-time', description: 'First failed.' },
          },
        },
        { type: 'null' },
      ],
      description:
        'Additive: the block ingest is stalled on (it failed verification, providers disagree on it, or the node answered something malformed), retried and never skipped; null when ingest is not stalled.',
    }),
    light_client: T.Unsafe<LightClientStatusBody | null>({
      anyOf: [ref(LightClientStatusSchema), { type: 'null' }],
      description:
        "Additive: tronwatch's own finality, proven from the SRs' signatures (always on for mainnet). null until the first block was proven final; for test keys, the test network's (only with TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT, else null).",
    }),
    provider_proof: T.Object(
      {
        providers: T.Integer({
          minimum: 0,
          description: "The node providers configured for the key's network.",
        }),
        needed: T.Integer({
          minimum: 2,
          description:
            'Providers that must report the same Transfer log before a held delivery is sent: max(2, TRON_NODE_QUORUM).',
        }),
        deliver_unconfirmed: T.Boolean({
          description:
            "TRON_DELIVER_PROVIDER_PROOF=1: `provider`-proof events are delivered at once on one provider's word (true for the test network, whose transfers carry no money).",
        }),
        held_events: T.Integer({
          minimum: 0,
          description:
            "This account's events whose delivery is held now (GET /v1/events?held=true).",
        }),
        warning: NullableString({
          description:
            'Why a single-provider deployment (or the opt-in) matters for these events, in words; null when neither applies.',
        }),
      },
      {
        description:
          "Additive (issue 36): a USDT transfer made inside another contract's call rests on receipts no block header commits to (`proof: provider` when one provider read it); its delivery is held until `needed` providers report the same log.",
      },
    ),
    node_providers: T.Array(
      T.Intersect([
        ref(NodeProviderHealthSchema),
        T.Object({
          solidified_head: T.Integer({
            description: 'Its last accepted solidified head (-1: none).',
          }),
        }),
      ]),
      {
        description:
          'Additive: each TRON node provider (TRON_NODE_URL, by position) as the ingester last saw it; empty before it ran.',
      },
    ),
  },
  { $id: 'Status', description: 'How far tronwatch has looked at the chain.' },
);

export const statusSchemas = [StatusSchema];

/**
 * `provider_proof` of GET /v1/status (issue 36 item 5; docs/trusting-the-node.md#held-events):
 * from the config of this process (the same TRON_NODE_URL as the ingest role's, by deployment)
 * and the account's held notifications (few rows: a scan of the held ones).
 */
async function providerProofStatus(deps: AppDeps, network: string, accountId: string) {
  const node = network === deps.config.network ? deps.config.node : deps.config.testnetNode;
  const providers = node?.providers.length ?? 0;
  const needed = Math.max(2, node?.quorum ?? 1);
  const unconfirmed = node?.deliverProviderProof ?? true;
  const { rows } = await deps.db.query<{ n: string | number }>(
    `SELECT count(DISTINCT event_id) AS n FROM notifications
      WHERE held_since IS NOT NULL AND account_id = $1 AND network = $2`,
    [accountId, network],
  );
  const what =
    "a USDT transfer made inside another contract's call rests on receipts no block header commits to";
  const warning =
    network !== deps.config.network
      ? null
      : unconfirmed
        ? `TRON_DELIVER_PROVIDER_PROOF=1: ${what}, and such an event is delivered on one provider's word (proof: provider)`
        : providers < needed
          ? `one node provider is configured: ${what}; nothing can confirm such an event, so its delivery stays held (listed, never sent) until the operator adds a second provider`
          : null;
  return {
    providers,
    needed,
    deliver_unconfirmed: unconfirmed,
    held_events: Number(rows[0]?.n ?? 0),
    warning,
  };
}

/** Register GET /v1/status. */
export function statusRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/v1/status',
    {
      schema: {
        operationId: 'getStatus',
        summary: 'How far the chain has been scanned',
        description:
          'The scanned-through watermark: every matching transfer in a block up to `scanned_through.block_number` is in GET /v1/events. The same object is in every GET /v1/events answer, read in the page’s snapshot.',
        tags: ['health'],
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        response: { ...commonV1Responses(), 200: v1Response(ref(StatusSchema), 'The watermark.') },
      },
    },
    async (request) => {
      // The key's environment (issue 32): a tw_test_ key reads the test network's watermark.
      const network = requireAuth(request).network;
      const { rows } = await deps.db.query<{
        solidified: string | number | null;
        scanned: string | number | null;
        ts: string | null;
        lag: string | number | null;
      }>(
        `SELECT (SELECT solidified_block_number FROM chain_head WHERE network = $1) AS solidified,
                c.block_number AS scanned, (c.block_timestamp AT TIME ZONE 'UTC')::text AS ts,
                floor(extract(epoch FROM now() - c.block_timestamp)) AS lag
           FROM (SELECT 1) one
           LEFT JOIN chain_cursor c ON c.network = $1 AND c.block_timestamp IS NOT NULL`,
        [network],
      );
      const r = rows[0];
      const num = (v: string | number | null | undefined) =>
        v === null || v === undefined ? null : Number(v);
      const solidified = num(r?.solidified);
      const [stall, providers, lightClient] = await Promise.all([
        readStall(deps.db, network),
        readProviderStates(deps.db, network),
        // Each network's own light client (Nile's only with TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT).
        lightClientStatus(deps, solidified, network),
      ]);
      const scanned = num(r?.scanned);
      const providerProof = await providerProofStatus(
        deps,
        network,
        requireAuth(request).accountId,
      );
      return {
        network,
        solidified_head: solidified,
        scanned_through:
          scanned !== null && r?.ts
            ? { block_number: scanned, block_timestamp: isoFromPgTimestamp(r.ts, 3) }
            : null,
        lag_blocks:
          solidified !== null && scanned !== null ? Math.max(0, solidified - scanned) : null,
        lag_seconds: scanned !== null ? Math.max(0, num(r?.lag) ?? 0) : null,
        ingest_stall: stall
          ? { block_number: stall.block, reason: stall.reason, since: stall.since.toISOString() }
          : null,
        light_client: lightClient,
        provider_proof: providerProof,
        node_providers: providers.map((p) => ({
          ...providerHealth(p),
          solidified_head: p.solidified,
        })),
      };
    },
  );
}
