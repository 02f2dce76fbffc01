/**
 * GET /metrics: the process's Prometheus metrics (src/common/metrics.ts), text exposition format
 * 0.0.4. No authentication and no rate limit: it is for the operator's Prometheus, not for
 * customers, and is not part of the API contract (hidden from the OpenAPI document).
 *
 * Operators should not expose it publicly (serve it on an internal network, or block `/metrics`
 * at the load balancer): it carries no secrets, keys, addresses or URLs, but its counters reveal
 * traffic volumes. Database-backed gauges are read at scrape time within 1 s; a database that is
 * down leaves them without a sample and the answer is still 200.
 *
 * Also here: the request-id rule of the app (X-Request-Id, see {@link requestId}).
 */
import { randomFillSync } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Metrics } from '../../common/metrics.js';
import type { App } from '../types.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The process's metrics, set by buildApp (absent on an app built some other way). */
    metrics?: Metrics;
  }
}

/** A client-supplied request id is used when it is 1-64 characters of [A-Za-z0-9._-]. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Fastify `genReqId`: the caller's `X-Request-Id` when it is sane (so a request can be followed
 * through a proxy that sets one), else a new random id (`req_` + 16 hex digits). An id that is
 * not sane is dropped, not cleaned: it could be an attempt to inject text into the logs.
 */
export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  if (typeof given === 'string' && SANE_REQUEST_ID.test(given)) return given;
  if (idOffset + 8 > idPool.length) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  const id = `req_${idPool.toString('hex', idOffset, idOffset + 8)}`;
  idOffset += 8;
  return id;
}

/**
 * Random bytes for request ids, drawn 4 KiB at a time: one call into the system's generator per
 * 512 ids instead of one per request (it was ~2% of the API's CPU). Ids must be unique, not secret.
 */
const idPool = Buffer.alloc(4096);
let idOffset = idPool.length;

/** Register GET /metrics. */
export function metricsRoutes(app: App, metrics: Metrics): void {
  app.get(
    '/metrics',
    {
      schema: {
        hide: true,
        summary: 'Prometheus metrics',
        description: 'No authentication; for the operator, not to be exposed publicly.',
      },
    },
    async (_request, reply) => {
      const body = await metrics.render();
      return reply.header('Content-Type', metrics.contentType).send(body);
    },
  );
}
