/**
 * GET /metrics: the process's Prometheus metrics (src/common/metrics.ts), text exposition format
 * 0.0.4, registered on the metrics listener only (src/api/metrics-app.ts: METRICS_HOST, default
 * 127.0.0.1, and METRICS_PORT, default 9464), never on the public API app, which answers 404 for
 * it (issue 17 item 3: it names encryption key ids and reveals traffic volumes). No authentication
 * and no rate limit: it is for the operator's Prometheus, and it is not part of the API contract.
 * It carries no secrets, keys, addresses or URLs. Database-backed gauges are read at scrape time
 * within 1 s; a database that is down leaves them without a sample and the answer is still 200.
 *
 * Also here: the request-id rule of the API app (X-Request-Id, see {@link requestId}).
 */
import { randomFillSync } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../common/metrics.js';

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

/** Register GET /metrics (on the metrics listener's app, src/api/metrics-app.ts). */
export function metricsRoutes(app: FastifyInstance, metrics: Metrics): void {
  app.get('/metrics', async (_request, reply) => {
    const body = await metrics.render();
    return reply.header('Content-Type', metrics.contentType).send(body);
  });
}
