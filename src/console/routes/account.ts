/**
 * The console's account routes (issue 12 items 1–2): configuration, session, sign-up, login,
 * logout, invitation, password change, and the sessions list.
 *
 *   GET    /console/api/config                 → { signup, network, telegram, bot_username } (public)
 *   GET    /console/api/session                → Me | 401 no_session; sets tw_csrf  (public)
 *   POST   /console/api/signup                 → 201 Me | 403 signup_closed | 409 email_taken
 *   POST   /console/api/login                  → Me | 401 invalid_credentials | 429 login_rate_limited
 *   POST   /console/api/logout                 → 204
 *   POST   /console/api/invite/accept          → Me | 400 invalid_invite | 429 login_rate_limited
 *   POST   /console/api/password               → { revoked_sessions } | 401 invalid_credentials | 429
 *   GET    /console/api/sessions               → { data: Session[] }
 *   DELETE /console/api/sessions/{id}          → 204 | 404
 *   POST   /console/api/sessions/revoke-others → { revoked }
 *
 * Unknown e-mail and wrong password answer alike (401 invalid_credentials) and take alike time
 * (a dummy argon2id verification). Attempts are counted before the verification, per client address
 * and e-mail, and per address (login-limits.ts); a password change counts in the same windows, a
 * wrong invitation token per address.
 *
 * Audit log (src/audit/audit.ts): sign-up, sign-in, a failed sign-in of an existing account, sign-out,
 * invitation, password change (and a refused one), session revocations, each with the client
 * address; the session's own changes are written in the same transaction as their entry.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  AccountInputError,
  createAccount,
  findAccountById,
  normaliseEmail,
} from '../../accounts/accounts.js';
import {
  inviteUsable,
  passwordHashByEmail,
  passwordHashById,
  setPasswordHash,
  useInvite,
} from '../../accounts/credentials.js';
import { limitsFor } from '../../accounts/plans.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { type AuditAction, recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import {
  clearSessionCookies,
  ensureCsrfCookie,
  requireSession,
  setSessionCookies,
} from '../guard.js';
import {
  type AttemptInfo,
  countInviteAttempt,
  countLoginAttempt,
  countSignup,
  LOGIN_WINDOW_MS,
} from '../login-limits.js';
import { hashPassword, verifyPassword } from '../passwords.js';
import {
  CredentialsBody,
  IdParams,
  InviteAcceptBody,
  LoginBody,
  type Me,
  PasswordChangeBody,
} from '../schemas.js';
import { listSessions, openSession, revokeOtherSessions, revokeSession } from '../sessions.js';

const hide = { hide: true } as const;

/** The account as the console shows it. @throws ApiError 401 no_session if it vanished. */
export async function me(deps: Pick<AppDeps, 'db'>, accountId: string): Promise<Me> {
  const a = await findAccountById(deps.db, accountId);
  if (!a) throw ApiError.coded('no_session', 'the account no longer exists');
  const limits = limitsFor(a);
  return {
    account: {
      id: a.id,
      email: a.email,
      plan: a.plan,
      plan_name: limits.name,
      created_at: a.created_at.toISOString(),
    },
    limits: {
      requests_per_minute: limits.requestsPerMinute,
      active_watches: limits.activeWatches,
    },
  };
}

/**
 * Open a session for the account, set its cookies, answer Me. The session and the audit entry
 * (`action`, the session opened) are written in one transaction.
 */
async function signIn(
  deps: AppDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  accountId: string,
  status: number,
  action: AuditAction,
): Promise<Me> {
  const opened = await deps.db.transaction(async (tx) => {
    const o = await openSession(tx, {
      accountId,
      ttlSeconds: deps.config.console.sessionTtlSeconds,
      userAgent: request.headers['user-agent'],
      ip: request.ip,
    });
    await recordAudit(tx, auditContextOf(request, { accountId, sessionId: o.session.id }), {
      action,
      targetId: o.session.id,
      detail: { user_agent: o.session.user_agent },
    });
    return o;
  });
  setSessionCookies(request, reply, opened.token, opened.csrf);
  request.log.info({ account_id: accountId, session_id: opened.session.id }, 'console sign-in');
  reply.code(status);
  return me(deps, accountId);
}

/** Register the account routes. */
export function accountRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/console/api/config',
    { config: { consolePublic: true }, schema: hide },
    async (request, reply) => {
      ensureCsrfCookie(request, reply);
      return {
        signup: deps.config.console.signup,
        network: deps.config.network,
        // Configured (a token is set), even while getMe has not answered yet.
        telegram: deps.telegram !== undefined,
        bot_username: deps.telegram?.current()?.identity.username ?? null,
        // Whether the request carries a live session: the page asks for the session only then,
        // so a signed-out page load makes no request that fails (issue 19 item 7).
        signed_in: Boolean(request.console),
      };
    },
  );

  app.get(
    '/console/api/session',
    { config: { consolePublic: true }, schema: hide },
    async (request, reply) => {
      ensureCsrfCookie(request, reply);
      const ctx = requireSession(request);
      return me(deps, ctx.accountId);
    },
  );

  app.post(
    '/console/api/signup',
    { config: { consolePublic: true }, schema: { ...hide, body: CredentialsBody } },
    async (request, reply) => {
      if (deps.config.console.signup !== 'open') {
        throw ApiError.coded(
          'signup_closed',
          'sign-up is closed on this deployment: ask its operator for an invitation',
        );
      }
      const { email, password } = request.body;
      await countSignup(deps.rateLimiter, request.ip);
      const hash = await hashPassword(password);
      let accountId: string;
      try {
        const account = await createAccount(deps.db, { email, plan: 'free' });
        accountId = account.id;
      } catch (err) {
        if (!(err instanceof AccountInputError)) throw err;
        if (/already exists/.test(err.message)) {
          throw ApiError.coded('email_taken', 'an account with this e-mail already exists');
        }
        throw new ApiError(400, 'invalid request body', undefined, [
          { field: 'email', message: err.message },
        ]);
      }
      await setPasswordHash(deps.db, accountId, hash);
      return signIn(deps, request, reply, accountId, 201, 'account.signed_up');
    },
  );

  app.post(
    '/console/api/login',
    { config: { consolePublic: true }, schema: { ...hide, body: LoginBody } },
    async (request, reply) => {
      const email = normaliseEmail(request.body.email);
      let accountId: string | undefined;
      // The account the e-mail names, right password or not: a failed sign-in is recorded in
      // its log (an unknown e-mail has no log to record it in).
      let named: string | undefined;
      const info: AttemptInfo = {};
      // Counted before argon2 runs, given back when right (login-limits.ts).
      const ok = await countLoginAttempt(
        deps.rateLimiter,
        request.ip,
        email,
        async () => {
          const found = await passwordHashByEmail(deps.db, email);
          named = found?.id;
          // Always one argon2id verification, whether the account exists or not (alike time).
          const right = await verifyPassword(found?.password_hash, request.body.password);
          accountId = right ? found?.id : undefined;
          return accountId !== undefined;
        },
        info,
      );
      if (!ok || accountId === undefined) {
        request.log.info({ client_ip: request.ip }, 'console login failed');
        if (named !== undefined) {
          await recordAudit(deps.db, auditContextOf(request, { accountId: named }), {
            action: 'session.sign_in_failed',
            // An attempt refused by the login limit (429) is not recorded: the password was not
            // checked, and a flood of them would only fill the log.
            detail: { reason: 'wrong_password' },
          });
        }
        // Additive: how many more failures this address may make for this e-mail before the
        // 15-minute lock (the sign-in page warns before it).
        throw ApiError.coded(
          'invalid_credentials',
          'wrong e-mail or password',
          undefined,
          info.remaining === undefined
            ? {}
            : { attempts_left: info.remaining, window_seconds: LOGIN_WINDOW_MS / 1000 },
        );
      }
      return signIn(deps, request, reply, accountId, 200, 'session.signed_in');
    },
  );

  app.post('/console/api/logout', { schema: hide }, async (request, reply) => {
    const ctx = requireSession(request);
    const audit = auditContextOf(request);
    await deps.db.transaction(async (tx) => {
      if (await revokeSession(tx, ctx.accountId, ctx.session.id)) {
        await recordAudit(tx, audit, { action: 'session.signed_out', targetId: ctx.session.id });
      }
    });
    clearSessionCookies(request, reply);
    return reply.code(204).send();
  });

  app.post(
    '/console/api/invite/accept',
    { config: { consolePublic: true }, schema: { ...hide, body: InviteAcceptBody } },
    async (request, reply) => {
      // A wrong token counts against the client address (login-limits.ts), and is refused
      // before any hashing.
      const usable = await countInviteAttempt(deps.rateLimiter, request.ip, () =>
        inviteUsable(deps.db, request.body.token),
      );
      if (!usable) {
        throw ApiError.coded(
          'invalid_invite',
          'this invitation link is unknown, already used or expired: ask for a new one',
        );
      }
      const hash = await hashPassword(request.body.password);
      const accountId = await useInvite(deps.db, request.body.token);
      if (!accountId) {
        throw ApiError.coded(
          'invalid_invite',
          'this invitation link is unknown, already used or expired: ask for a new one',
        );
      }
      await setPasswordHash(deps.db, accountId, hash);
      // Whoever held the account's sessions before the password was (re)set loses them.
      await revokeOtherSessions(deps.db, accountId, undefined);
      return signIn(deps, request, reply, accountId, 200, 'account.invite_accepted');
    },
  );

  app.post(
    '/console/api/password',
    { schema: { ...hide, body: PasswordChangeBody } },
    async (request) => {
      const ctx = requireSession(request);
      const account = await findAccountById(deps.db, ctx.accountId);
      if (!account) throw ApiError.coded('no_session', 'the account no longer exists');
      // The login's failure limit, in the same windows (login-limits.ts).
      const right = await countLoginAttempt(deps.rateLimiter, request.ip, account.email, async () =>
        verifyPassword(
          await passwordHashById(deps.db, ctx.accountId),
          request.body.current_password,
        ),
      );
      const audit = auditContextOf(request);
      if (!right) {
        request.log.info({ client_ip: request.ip }, 'console password check failed');
        await recordAudit(deps.db, audit, { action: 'account.password_change_failed' });
        throw ApiError.coded('invalid_credentials', 'the current password is wrong');
      }
      const hash = await hashPassword(request.body.new_password);
      const revoked = await deps.db.transaction(async (tx) => {
        await setPasswordHash(tx, ctx.accountId, hash);
        const n = await revokeOtherSessions(tx, ctx.accountId, ctx.session.id);
        await recordAudit(tx, audit, {
          action: 'account.password_changed',
          detail: { revoked_sessions: n },
        });
        return n;
      });
      request.log.info(
        { account_id: ctx.accountId, revoked_sessions: revoked },
        'password changed',
      );
      return { revoked_sessions: revoked };
    },
  );

  app.get('/console/api/sessions', { schema: hide }, async (request) => {
    const ctx = requireSession(request);
    const rows = await listSessions(deps.db, ctx.accountId);
    return {
      data: rows.map((s) => ({
        id: s.id,
        created_at: s.created_at.toISOString(),
        last_used_at: s.last_used_at.toISOString(),
        expires_at: s.expires_at.toISOString(),
        user_agent: s.user_agent,
        ip: s.ip,
        current: s.id === ctx.session.id,
      })),
    };
  });

  app.delete(
    '/console/api/sessions/:id',
    { schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const audit = auditContextOf(request);
      const revoked =
        isId(id, 'ses') &&
        (await deps.db.transaction(async (tx) => {
          const done = await revokeSession(tx, ctx.accountId, id);
          if (done) {
            await recordAudit(tx, audit, {
              action: id === ctx.session.id ? 'session.signed_out' : 'session.revoked',
              targetId: id,
            });
          }
          return done;
        }));
      if (!revoked) throw new ApiError(404, 'session not found');
      if (id === ctx.session.id) clearSessionCookies(request, reply);
      return reply.code(204).send();
    },
  );

  app.post('/console/api/sessions/revoke-others', { schema: hide }, async (request) => {
    const ctx = requireSession(request);
    const audit = auditContextOf(request);
    const revoked = await deps.db.transaction(async (tx) => {
      const n = await revokeOtherSessions(tx, ctx.accountId, ctx.session.id);
      await recordAudit(tx, audit, { action: 'session.revoked_others', detail: { revoked: n } });
      return n;
    });
    return { revoked };
  });
}
