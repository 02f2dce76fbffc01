/**
 * GET /healthz (SPEC §GET /healthz; DESIGN decisions): no authentication, no rate limit.
 *
 *   200 { ok: true,  network, checks: { postgres: true, redis: true } }
 *   503 { ok: false, network, checks: { postgres, redis } }   (same shape)
 *   503 { ok: false, network, checks: { postgres, redis, started: false } }
 *                                        (additive: the process is still starting)
 *   503 { ok: false, network, checks: { postgres, redis, ingest: false },
 *         ingest: { stalled_block, reason, since } }        (additive: ingest is stalled)
 *   503 { ok: false, network, checks: { …, secrets: false },
 *         secrets: { undecryptable_key_ids, reason, since } } (additive: deliveries held)
 *
 * - postgres: `SELECT 1` answers within 1 s (a dead server fails fast: the pool's connect
 *   timeout is longer, so the deadline here is what bounds the probe).
 * - redis: `deps.redisCheck()` (within 1 s) when the app was given one. Without it no Redis is
 *   configured: the rate-limit windows are in process and cannot be down, so the check is true.
 * - started (additive, present only when false): the process listens before it has reached
 *   PostgreSQL and applied migrations (service.ts, issue 17 item 6); until then every other route
 *   answers 503 and so does this one, whatever the probes say.
 * - ingest (additive to the SPEC's shape, present only when false): the ingester recorded a stall
 *   on the cursor row (src/ingest/stall.ts: a block failed for a reason no retry can fix; it is
 *   retried slowly, never skipped). Read from the database, so every API replica reports it
 *   whichever process ingests; `ingest` then gives the block number (int8), the last failure's
 *   message and when the block first failed (ISO 8601 UTC). An unreadable cursor row (database
 *   down) adds nothing: `postgres` is false then.
 * - secrets (additive, present only when false): a worker met webhook secrets it cannot decrypt
 *   in the last 5 minutes (src/delivery/secret-problems.ts: a key missing from this deployment's
 *   keyring during a rotation); their deliveries are held, not failed, until the key is configured.
 * - node (additive, present only while a node provider is not serving): `checks.node` is false when
 *   none of them serves, true when some still do (200, degraded). None serving answers 503 only once
 *   it has lasted NODE_DOWN_GRACE_MS (every provider unhealthy, or set aside since longer): a
 *   timeout or a 503 from a lone provider is retried within seconds and must not make a load
 *   balancer drop every replica that can still serve the API; `node`
 *   lists every provider by its position in TRON_NODE_URL with its state (ok, set_aside after
 *   failures or a refused answer, unhealthy: 403s past the pause they asked for), the class of the
 *   reason and since when, as the ingest leader last stored them (src/ingest/providers.ts). No
 *   URL or host is shown: this endpoint needs no authentication.
 * - light_client (additive, present once the light client, always on, has proven a block): the
 *   last block tronwatch proved final from 19 of the 27 SRs'
 *   signatures, and how far the providers' solidified head is ahead of it (routes/light-client.ts).
 *   Information only: a block it refuses stalls ingest, which `ingest` reports.
 */
import { type Static, Type as T } from '@sinclair/typebox';
import { recentSecretProblems } from '../../delivery/secret-problems.js';
import { readProviderStates, type StoredProviderState } from '../../ingest/providers.js';
import { readStall } from '../../ingest/stall.js';
import { ref } from '../schemas.js';
import type { App, AppDeps } from '../types.js';
import { LightClientStatusSchema, lightClientStatus } from './light-client.js';

/**
 * How long no node provider may serve before /healthz answers 503 for it, ms: longer than the
 * set-aside backoff's first steps (1 s doubling), so transient node faults only show as
 * `checks.node: false` with status 200.
 */
export const NODE_DOWN_GRACE_MS = 120_000;

/** Deadline of each dependency probe, ms. */
export const HEALTH_TIMEOUT_MS = 1_000;

/** One node provider in /healthz and GET /v1/status (no URL: /healthz needs no authentication). */
export const NodeProviderHealthSchema = T.Object(
  {
    index: T.Integer({ description: 'Position in TRON_NODE_URL, from 0.' }),
    state: T.Union([T.Literal('ok'), T.Literal('set_aside'), T.Literal('unhealthy')], {
      description:
        'ok: serving; set_aside: not asked until `until` after a failure or a refused answer; unhealthy: its 403s outlast the pauses they ask for.',
    }),
    reason: T.Optional(
      T.String({
        description:
          'Class of the last failure: network, timeout, http, rate_limited, empty, verification: <check>, inconsistent, forbidden, …',
      }),
    ),
    since: T.Optional(T.String({ format: 'date-time', description: 'Not ok since.' })),
    until: T.Optional(T.String({ format: 'date-time', description: 'Set aside until.' })),
  },
  { $id: 'NodeProviderHealth', description: 'A TRON node provider as the ingester sees it.' },
);

/** A stored provider state in the shape above. */
export function providerHealth(p: StoredProviderState): Static<typeof NodeProviderHealthSchema> {
  return {
    index: p.index,
    state: p.state,
    ...(p.reason !== undefined ? { reason: p.reason } : {}),
    ...(p.since !== undefined ? { since: new Date(p.since).toISOString() } : {}),
    ...(p.until !== undefined ? { until: new Date(p.until).toISOString() } : {}),
  };
}

export const HealthSchema = T.Object(
  {
    ok: T.Boolean({
      description:
        'True when the process can do its work: every check passed, except a node outage shorter than its grace (checks.node false, 200).',
    }),
    network: T.String({ description: 'The network this deployment serves (`mainnet`).' }),
    checks: T.Object({
      postgres: T.Boolean(),
      redis: T.Boolean({ description: 'True when no Redis is configured (in-process windows).' }),
      started: T.Optional(
        T.Boolean({
          description:
            'Additive; present (false) only while this process is starting: waiting for PostgreSQL or applying migrations. Every other route answers 503 meanwhile.',
        }),
      ),
      ingest: T.Optional(
        T.Boolean({
          description:
            'Additive; present (false) only while ingest is stalled on a block that failed permanently.',
        }),
      ),
      secrets: T.Optional(
        T.Boolean({
          description:
            'Additive; present (false) only while webhook secrets under a key this deployment lacks hold deliveries back.',
        }),
      ),
      node: T.Optional(
        T.Boolean({
          description:
            'Additive; present only while a node provider is not serving: false when none serves, true when some still do.',
        }),
      ),
    }),
    secrets: T.Optional(
      T.Object(
        {
          undecryptable_key_ids: T.Array(T.String(), {
            description: 'Key ids of secrets a worker could not decrypt in the last 5 minutes.',
          }),
          reason: T.String({ description: 'The first such error.' }),
          since: T.String({ format: 'date-time', description: 'When it was first seen.' }),
        },
        {
          description:
            'Additive; present only while deliveries are held because their secrets cannot be decrypted. Configure the key (SECRET_ENCRYPTION_KEY or SECRET_ENCRYPTION_KEYS_OLD) and they resume by themselves.',
        },
      ),
    ),
    node: T.Optional(
      T.Object(
        {
          providers: T.Array(ref(NodeProviderHealthSchema)),
        },
        {
          description:
            'Additive; present only while a node provider (TRON_NODE_URL) is not serving. Ingest goes on while one serves.',
        },
      ),
    ),
    light_client: T.Optional(ref(LightClientStatusSchema)),
    ingest: T.Optional(
      T.Object(
        {
          stalled_block: T.Integer({
            description: 'The block that cannot be committed; the cursor is at the block before.',
          }),
          reason: T.String({ description: "The last failure's message." }),
          since: T.String({
            format: 'date-time',
            description: 'When this block first failed permanently.',
          }),
        },
        {
          description:
            'Additive; present only while ingest is stalled. The block is retried slowly and never skipped.',
        },
      ),
    ),
  },
  { $id: 'Health', description: 'Health of the service and its dependencies.' },
);

export const healthSchemas = [NodeProviderHealthSchema, HealthSchema];

/** Resolve to the probe's answer, `fallback` on error or after `ms`. Never rejects. */
async function probe<T>(fn: () => Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  try {
    return await Promise.race([fn().catch(() => fallback), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Register GET /healthz. */
export function healthRoutes(app: App, deps: AppDeps): void {
  const redisCheck = deps.redisCheck;
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'health',
        summary: 'Health check',
        description:
          'No authentication. 503 when a dependency is down; the body has the same shape.',
        tags: ['health'],
        security: [],
        response: {
          200: ref(HealthSchema, { description: 'Every dependency is up.' }),
          503: ref(HealthSchema, { description: 'A dependency is down (`ok` false).' }),
        },
      },
    },
    async (_request, reply) => {
      const [postgres, redis, stall, secretProblems, providers, lightClient] = await Promise.all([
        probe(
          async () => {
            await deps.db.query('SELECT 1');
            return true;
          },
          HEALTH_TIMEOUT_MS,
          false,
        ),
        redisCheck ? probe(redisCheck, HEALTH_TIMEOUT_MS, false) : Promise.resolve(true),
        probe(() => readStall(deps.db, deps.config.network), HEALTH_TIMEOUT_MS, undefined),
        probe(() => recentSecretProblems(deps.db), HEALTH_TIMEOUT_MS, []),
        probe(() => readProviderStates(deps.db, deps.config.network), HEALTH_TIMEOUT_MS, []),
        probe(() => lightClientStatus(deps), HEALTH_TIMEOUT_MS, null),
      ]);
      const started = deps.started?.() ?? true;
      const degraded = providers.some((p) => p.state !== 'ok');
      const nodeServes = providers.length === 0 || providers.some((p) => p.state === 'ok');
      const now = Date.now();
      const nodeDown =
        !nodeServes &&
        providers.every(
          (p) =>
            p.state === 'unhealthy' ||
            (p.since !== undefined && now - p.since >= NODE_DOWN_GRACE_MS),
        );
      const ok = started && postgres && redis && !stall && secretProblems.length === 0 && !nodeDown;
      const network = deps.config.network;
      const first = secretProblems[0];
      return reply.code(ok ? 200 : 503).send({
        ok,
        network,
        checks: {
          postgres,
          redis,
          ...(started ? {} : { started: false }),
          ...(stall ? { ingest: false } : {}),
          ...(first ? { secrets: false } : {}),
          ...(degraded ? { node: nodeServes } : {}),
        },
        ...(degraded ? { node: { providers: providers.map(providerHealth) } } : {}),
        ...(lightClient ? { light_client: lightClient } : {}),
        ...(stall
          ? {
              ingest: {
                stalled_block: stall.block,
                reason: stall.reason,
                since: stall.since.toISOString(),
              },
            }
          : {}),
        ...(first
          ? {
              secrets: {
                undecryptable_key_ids: secretProblems.map((p) => p.key_id),
                reason: first.error,
                since: first.since.toISOString(),
              },
            }
          : {}),
      });
    },
  );
}
