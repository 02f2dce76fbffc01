/**
 * The console's account page (issue 12 item 6): plan, active watches against the quota, requests
 * in the current rate-limit window against the limit, events of the last 24 hours by delivery
 * status, and the chain: the solidified head and the newest block tronwatch has scanned (all its
 * events committed), its time, and the lag (as GET /v1/status), and the light client's last
 * block proven final from the SRs' signatures (`light_client`, null while it is off).
 *
 *   GET /console/api/overview → Overview
 *
 * Requests: each API key has its own sliding window (SPEC §Limits), so `used` is the busiest key's
 * count now (RateLimiter.peek, nothing recorded).
 */

import { findAccountById } from '../../accounts/accounts.js';
import { listApiKeys } from '../../accounts/keys.js';
import { limitsFor } from '../../accounts/plans.js';
import { lightClientStatus } from '../../api/routes/light-client.js';
import type { App, AppDeps } from '../../api/types.js';
import { ApiError } from '../../common/errors.js';
import { WINDOW_MS } from '../../rate-limit/limiter.js';
import { requireSession } from '../guard.js';

const hide = { hide: true } as const;

export function overviewRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/console/api/overview',
    { config: { consoleRole: 'viewer' }, schema: hide },
    async (request) => {
      const ctx = requireSession(request);
      const account = await findAccountById(deps.db, ctx.accountId);
      if (!account) throw ApiError.coded('no_session', 'the account no longer exists');
      const limits = limitsFor(account);
      const [{ rows: w }, { rows: ev }, { rows: chain }, keys] = await Promise.all([
        deps.db.query<{ status: string; n: number }>(
          `SELECT status, count(*)::int8 AS n FROM watches
          WHERE account_id = $1 AND network = $2 AND deleted_at IS NULL GROUP BY status`,
          [ctx.accountId, ctx.network],
        ),
        // The newest notification of each event of the last 24 h (events_account_created).
        deps.db.query<{ status: string | null; n: number }>(
          `SELECT (SELECT n.status FROM notifications n WHERE n.event_id = e.id
                  ORDER BY n.created_at DESC LIMIT 1) AS status, count(*)::int8 AS n
           FROM events e
          WHERE e.account_id = $1 AND e.network = $2 AND e.created_at > now() - interval '24 hours'
          GROUP BY 1`,
          [ctx.accountId, ctx.network],
        ),
        deps.db.query<{
          solidified: number | null;
          scanned: number | null;
          scanned_ts: Date | null;
          behind: number | null;
        }>(
          `SELECT (SELECT solidified_block_number FROM chain_head WHERE network = $1) AS solidified,
                c.block_number AS scanned, c.block_timestamp AS scanned_ts,
                floor(extract(epoch FROM now() - c.block_timestamp))::int8 AS behind
           FROM (SELECT 1) one
           LEFT JOIN chain_cursor c ON c.network = $1 AND c.block_timestamp IS NOT NULL`,
          [ctx.network],
        ),
        listApiKeys(deps.db, ctx.accountId),
      ]);
      const live = keys.filter((k) => k.revoked_at === null && k.network === ctx.network);
      const used = await Promise.all(
        live.map((k) =>
          deps.rateLimiter
            .peek(`key:${k.id}`, limits.requestsPerMinute)
            .then((r) => limits.requestsPerMinute - r.remaining),
        ),
      );
      const count = (rows: { status: string | null; n: number }[], s: string) =>
        Number(rows.find((r) => r.status === s)?.n ?? 0);
      const c = chain[0];
      const solidified =
        c?.solidified === null || c?.solidified === undefined ? null : Number(c.solidified);
      const scanned = c?.scanned === null || c?.scanned === undefined ? null : Number(c.scanned);
      const lagBlocks =
        solidified !== null && scanned !== null ? Math.max(0, solidified - scanned) : null;
      // The environment's own chain: mainnet's light client, or the test network's.
      const lightClient = await lightClientStatus(deps, solidified, ctx.network);
      return {
        account: { email: account.email, plan_name: limits.name },
        watches: {
          active: count(w, 'ACTIVE'),
          paused: count(w, 'PAUSED'),
          quota: limits.activeWatches,
        },
        rate_limit: {
          limit: limits.requestsPerMinute,
          used: Math.max(0, ...used),
          window_seconds: WINDOW_MS / 1000,
        },
        events_24h: {
          PENDING: count(ev, 'PENDING'),
          DELIVERED: count(ev, 'DELIVERED'),
          DEAD: count(ev, 'DEAD'),
        },
        chain: {
          network: ctx.network,
          solidified_head: solidified,
          scanned_block: scanned,
          scanned_block_time: c?.scanned_ts?.toISOString() ?? null,
          lag_blocks: lagBlocks,
          // As GET /v1/status: how far the scanned block's time is behind now (the chain's own
          // ~54 s to solidify included).
          lag_seconds:
            c?.behind === null || c?.behind === undefined ? null : Math.max(0, Number(c.behind)),
          // tronwatch's own finality (issue 28), as GET /v1/status; null while it is off.
          light_client: lightClient,
        },
      };
    },
  );
}
