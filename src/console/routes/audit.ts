/**
 * The console's audit log (issue 18 items 5–6): the account's changes, newest first.
 *
 *   GET /console/api/audit?limit&cursor&actor&action&since&until → { data: AuditEntry[], next_cursor }
 *   GET /console/api/audit/actions → { data: [{ name, description }] } (the filter's choices)
 *
 * The page is src/audit/audit.ts listAuditLog, the same function as GET /v1/audit: the entries of
 * the console's environment (its switch, `tw_env`) and those of no environment (issue 32).
 */

import type { App, AppDeps } from '../../api/types.js';
import { AUDIT_ACTIONS, AuditQueryError, listAuditLog } from '../../audit/audit.js';
import { AuditQuerySchema } from '../../audit/schema.js';
import { ApiError } from '../../common/errors.js';
import { refuseNonDecimal } from '../../common/query.js';
import { isDataException } from '../../db/sqlstate.js';
import { requireSession } from '../guard.js';

const hide = { hide: true } as const;

/**
 * An audit page for `accountId` in the environment of `network` (listAuditLog: that
 * environment's entries and those of none), with the query errors as 400s naming the member.
 * @throws ApiError 400 (a malformed actor, action or cursor; a time PostgreSQL cannot hold).
 */
export async function auditPage(
  deps: Pick<AppDeps, 'db'>,
  accountId: string,
  network: string,
  q: {
    limit?: number | undefined;
    cursor?: string | undefined;
    actor?: string | undefined;
    action?: string | undefined;
    since?: string | undefined;
    until?: string | undefined;
  },
) {
  try {
    return await listAuditLog(deps.db, accountId, network, { ...q, limit: q.limit ?? 50 });
  } catch (err) {
    if (err instanceof AuditQueryError) {
      throw new ApiError(400, 'invalid query parameters', undefined, [
        { field: err.field, message: err.message },
      ]);
    }
    if (!isDataException(err)) throw err;
    throw new ApiError(
      400,
      'invalid query parameters',
      undefined,
      (['since', 'until'] as const)
        .filter((f) => q[f] !== undefined)
        .map((field) => ({ field, message: 'not a representable timestamp' })),
    );
  }
}

export function auditRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/console/api/audit',
    {
      config: { consoleRole: 'admin' },
      schema: { ...hide, querystring: AuditQuerySchema },
      preValidation: async (request) => refuseNonDecimal(request.query, ['limit']),
    },
    async (request) => {
      const ctx = requireSession(request);
      // The console's environment switch (issue 32), as its other pages: a test-mode console
      // shows the test entries and those of no environment, the live one the live entries.
      return auditPage(deps, ctx.accountId, ctx.network, request.query);
    },
  );

  app.get(
    '/console/api/audit/actions',
    { config: { consoleRole: 'admin' }, schema: hide },
    async (request) => {
      requireSession(request);
      return {
        data: Object.entries(AUDIT_ACTIONS).map(([name, description]) => ({ name, description })),
      };
    },
  );
}
