/**
 * The console's API keys (issue 12 item 3): issue (the key shown once), list, revoke.
 *
 *   GET    /console/api/keys[?made_by=usr_…|cli] → { data: KeyInfo[] } (newest first, revoked ones included)
 *   POST   /console/api/keys       {name?, role?, scope?} → 201 { key: KeyInfo, secret: 'tw_live_…' } | 403 insufficient_role
 *          (scope `read`: a read-only key, GET only; KeyInfo.scope says which)
 *   DELETE /console/api/keys/{id}  → 200 KeyInfo (revoked) | 404
 *
 * Each key names its maker (the signed-in member, or `cli`) and its role, at most the maker's
 * (issue 27 item 2, src/accounts/keys.ts); the list filters by maker.
 *
 * Revocation is the domain's (src/accounts/keys.ts): refused from the very next /v1 request on
 * every replica (the key cache never serves a revoked key: src/api/auth.ts).
 */
import {
  type ApiKeyInfo,
  createApiKey,
  KeyRoleError,
  listApiKeys,
  revokeApiKey,
} from '../../accounts/keys.js';
import { findUserById } from '../../accounts/users.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { TEST_NETWORK } from '../../common/environment.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { requireSession } from '../guard.js';
import { IdParams, KeyCreateBody, KeyListQuery } from '../schemas.js';

const hide = { hide: true } as const;

/** A key as the console lists it (never the key, never its hash). */
export function keyView(k: Omit<ApiKeyInfo, 'account_id' | 'network'>) {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    created_at: k.created_at.toISOString(),
    last_used_at: k.last_used_at?.toISOString() ?? null,
    revoked_at: k.revoked_at?.toISOString() ?? null,
    role: k.role,
    /** Who made the key: a member (their e-mail as it was then) or the operator's CLI. */
    created_by:
      k.created_by_user_id === null
        ? { type: 'cli' as const, user_id: null, email: null }
        : { type: 'user' as const, user_id: k.created_by_user_id, email: k.created_by_email },
    scope: k.scope,
  };
}

export function keyRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/console/api/keys',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, querystring: KeyListQuery } },
    async (request) => {
      const ctx = requireSession(request);
      const madeBy = request.query.made_by;
      const keys = await listApiKeys(deps.db, ctx.accountId, madeBy ? { madeBy } : {});
      // The environment's keys only (issue 32): tw_live_ in live mode, tw_test_ in test mode.
      return { data: keys.filter((k) => k.network === ctx.network).map(keyView) };
    },
  );

  app.post(
    '/console/api/keys',
    { config: { consoleRole: 'developer' }, schema: { ...hide, body: KeyCreateBody } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const name = request.body.name?.trim() || undefined;
      const audit = auditContextOf(request);
      const maker = await findUserById(deps.db, ctx.userId);
      if (!maker) throw ApiError.coded('no_session', 'the user no longer exists');
      const created = await deps.db
        .transaction(async (tx) => {
          const k = await createApiKey(tx, ctx.accountId, {
            network: ctx.network === TEST_NETWORK ? 'nile' : 'mainnet',
            maker: { userId: maker.id, email: maker.email, role: ctx.role },
            ...(request.body.role ? { role: request.body.role } : {}),
            scope: request.body.scope ?? 'full',
            ...(name ? { name } : {}),
          });
          await recordAudit(tx, audit, {
            action: 'api_key.created',
            targetId: k.id,
            detail: {
              name: k.name,
              prefix: k.prefix,
              network: k.network,
              role: k.role,
              scope: k.scope,
            },
          });
          return k;
        })
        .catch((err: unknown) => {
          if (err instanceof KeyRoleError) throw ApiError.coded('insufficient_role', err.message);
          throw err;
        });
      request.log.info({ account_id: ctx.accountId, key_id: created.id }, 'api key created');
      return reply.code(201).send({
        key: keyView({ ...created, revoked_at: null, last_used_at: null }),
        secret: created.key,
      });
    },
  );

  app.delete(
    '/console/api/keys/:id',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const mine =
        isId(id, 'key') &&
        (await listApiKeys(deps.db, ctx.accountId)).some(
          (k) => k.id === id && k.network === ctx.network,
        );
      const audit = auditContextOf(request);
      const revoked = mine
        ? await deps.db.transaction(async (tx) => {
            const k = await revokeApiKey(tx, id);
            if (k) {
              await recordAudit(tx, audit, {
                action: 'api_key.revoked',
                targetId: k.id,
                detail: { name: k.name, prefix: k.prefix },
              });
            }
            return k;
          })
        : undefined;
      if (!revoked) throw new ApiError(404, 'key not found');
      request.log.info({ account_id: ctx.accountId, key_id: id }, 'api key revoked');
      return keyView(revoked);
    },
  );
}
