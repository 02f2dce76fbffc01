/**
 * GET /healthz (SPEC §GET /healthz; DESIGN decisions): no authentication, no rate limit.
 *
 *   200 { ok: true,  network, checks: { postgres: true, redis: true } }
 *   503 { ok: false, network, checks: { postgres, redis } }   (same shape)
 *
 * - postgres: `SELECT 1` answers within 1 s (a dead server fails fast: the pool's connect
 *   timeout is longer, so the deadline here is what bounds the probe).
 * - redis: `deps.redisCheck()` (within 1 s) when the app was given one. Without it no Redis is
 *   configured: the rate-limit windows are in process and cannot be down, so the check is true.
 */
import { Type as T } from '@sinclair/typebox';
import { ref } from '../schemas.js';
import type { App, AppDeps } from '../types.js';

/** Deadline of each dependency probe, ms. */
export const HEALTH_TIMEOUT_MS = 1_000;

export const HealthSchema = T.Object(
  {
    ok: T.Boolean({ description: 'True when every check passed.' }),
    network: T.String({ description: 'The network this deployment serves (`mainnet`).' }),
    checks: T.Object({
      postgres: T.Boolean(),
      redis: T.Boolean({ description: 'True when no Redis is configured (in-process windows).' }),
    }),
  },
  { $id: 'Health', description: 'Health of the service and its dependencies.' },
);

export const healthSchemas = [HealthSchema];

/** Resolve to the probe's verdict, false on error or after `ms`. Never rejects. */
async function probe(fn: () => Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([fn().catch(() => false), deadline]);
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
      const [postgres, redis] = await Promise.all([
        probe(async () => {
          await deps.db.query('SELECT 1');
          return true;
        }, HEALTH_TIMEOUT_MS),
        redisCheck ? probe(redisCheck, HEALTH_TIMEOUT_MS) : Promise.resolve(true),
      ]);
      const ok = postgres && redis;
      return reply.code(ok ? 200 : 503).send({
        ok,
        network: deps.config.network,
        checks: { postgres, redis },
      });
    },
  );
}
