/**
 * The metrics listener's app (issue 17 item 3; docs/operating.md "Metrics and logs"): GET /metrics and
 * nothing else, served on METRICS_HOST:METRICS_PORT (127.0.0.1:9464 by default) by every role,
 * api, ingest and worker alike, so one scrape job covers every process the same way. The public
 * API app does not register /metrics (it answers 404 there like any unknown path): its samples
 * name encryption key ids (`secret_decrypt_failures_total{key_id}`) and reveal traffic volumes
 * by route, which belong to the operator's network, not to whoever reaches the API.
 *
 * Built, not started (CONVENTIONS habit 1): service.ts listens, tests inject.
 *   GET /metrics  → 200 text/plain; version=0.0.4 (src/api/routes/metrics.ts)
 *   anything else → 404 {"error":"not found"}
 *   a failure     → logged, 500 {"error":"internal server error"}
 */
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import { INTERNAL_ERROR_BODY } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { Metrics } from '../common/metrics.js';
import { metricsRoutes } from './routes/metrics.js';

/** Build the metrics listener's app on `metrics` (not listening). The caller closes it. */
export async function buildMetricsApp(metrics: Metrics, logger: Logger): Promise<FastifyInstance> {
  const loggerInstance: FastifyBaseLogger = logger;
  const app = Fastify({
    loggerInstance,
    // A scrape every 15 s per process is not worth a log line each.
    logController: new LogController({ disableRequestLogging: true }),
    exposeHeadRoutes: false,
  });
  app.setNotFoundHandler((_request, reply) => {
    void reply.code(404).send({ error: 'not found' });
  });
  app.setErrorHandler((err, request, reply) => {
    request.log.error({ err }, 'metrics scrape failed');
    void reply.code(500).send(INTERNAL_ERROR_BODY);
  });
  metricsRoutes(app, metrics);
  await app.ready();
  return app;
}
