/**
 * The audit log for API keys (issue 18 item 5):
 *
 *   GET /v1/audit?limit&cursor&actor&action&since&until → 200 { data: AuditEntry[], next_cursor }
 *
 * The caller's account's entries of the key's environment and those of no environment (sign-ins,
 * members, account settings; issue 32), newest first: the same page as the console's Audit log
 * (src/console/routes/audit.ts auditPage, src/audit/audit.ts listAuditLog). Reading the log is not
 * itself recorded.
 */
import { Type as T } from '@sinclair/typebox';
import { AuditEntrySchema, AuditQuerySchema } from '../../audit/schema.js';
import { refuseNonDecimal } from '../../common/query.js';
import { auditPage } from '../../console/routes/audit.js';
import { requireAuth } from '../auth.js';
import {
  BEARER_SECURITY,
  commonV1Responses,
  NetworkMember,
  NullableString,
  ref,
  v1Response,
} from '../schemas.js';
import type { App, AppDeps } from '../types.js';

export const AuditPageSchema = T.Object(
  {
    data: T.Array(ref(AuditEntrySchema)),
    next_cursor: NullableString({
      description: 'Pass as `cursor` for the next page of older entries; null on the last page.',
    }),
  },
  { $id: 'AuditPage', description: 'One page of the audit log, newest first.' },
);

/** AuditQuerySchema plus the `network` member every /v1 route accepts. */
const V1AuditQuery = T.Object(
  {
    ...AuditQuerySchema.properties,
    network: T.Optional(NetworkMember()),
  },
  { additionalProperties: false },
);

export const auditSchemas = [AuditEntrySchema, AuditPageSchema];

export function auditRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/v1/audit',
    {
      // Admin-only, as in the console (issue 27 item 2): it names every member and address.
      config: { keyRole: 'admin' },
      preValidation: async (request) => refuseNonDecimal(request.query, ['limit']),
      schema: {
        operationId: 'listAuditLog',
        summary: 'List the audit log',
        description:
          'Every change made to your account in the console or through the API (keys, watches, pause and resume, redelivery, test sends, sign-ins and failed sign-ins, sessions, password, Telegram), newest first; the entries of the key’s environment (a `tw_live_` key the live ones, a `tw_test_` key the test ones) and those of no environment (sign-ins, members, account settings: `environment` null): who made it (a user, an API key, or tronwatch itself), what, when and from which client address. Never a key, secret, token or password. Page back with `cursor` = `next_cursor`.',
        tags: ['audit'],
        security: BEARER_SECURITY,
        querystring: V1AuditQuery,
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(AuditPageSchema), 'One page of entries.'),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { network: _network, ...q } = request.query;
      return auditPage(deps, auth.accountId, auth.network, q);
    },
  );
}
