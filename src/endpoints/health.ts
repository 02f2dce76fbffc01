/**
 * An endpoint's delivery health (issue 30 items 1 and 4): the attempts of every watch that
 * targets it over the last day, from `attempts` (the watch of each attempt is stored with it,
 * migration 042), so the receiver's state is one figure instead of one per deposit address.
 *
 * Cost: one index range (attempts_watch_started) per watch on the endpoint; an endpoint with
 * 100,000 watches reads their day of attempts through 100,000 probes (a console page's request,
 * not a hot path).
 */
import type { Queryable } from '../db/pool.js';

/** The last day of deliveries to one endpoint. */
export interface EndpointHealth {
  /** Attempts started in the last 24 h (all watches on the endpoint). */
  attempts: number;
  /** Of them, answered 2xx. */
  succeeded: number;
  /** Start of the newest 2xx attempt in the window; null: none. */
  last_success_at: string | null;
}

/** Health of each endpoint of `ids` (absent from the map: no attempts in the last day). */
export async function endpointHealth(
  db: Queryable,
  ids: readonly string[],
): Promise<Map<string, EndpointHealth>> {
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<{
    endpoint_id: string;
    attempts: number;
    succeeded: number;
    last_success_at: Date | null;
  }>(
    `SELECT w.endpoint_id, count(*)::int AS attempts,
            count(*) FILTER (WHERE a.http_status BETWEEN 200 AND 299)::int AS succeeded,
            max(a.started_at) FILTER (WHERE a.http_status BETWEEN 200 AND 299) AS last_success_at
       FROM watches AS w
       JOIN attempts AS a ON a.watch_id = w.id AND a.started_at > now() - interval '1 day'
      WHERE w.endpoint_id = ANY($1::text[])
      GROUP BY w.endpoint_id`,
    [ids],
  );
  return new Map(
    rows.map((r) => [
      r.endpoint_id,
      {
        attempts: r.attempts,
        succeeded: r.succeeded,
        last_success_at: r.last_success_at ? new Date(r.last_success_at).toISOString() : null,
      },
    ]),
  );
}
