/**
 * The console's account routes (issue 12 items 1–2): configuration, session, sign-up, login,
 * logout, invitation, password change, and the sessions list.
 *
 *   GET    /console/api/config                 → { signup, network, telegram, bot_username, signed_in, email, dev_mailbox } (public)
 *   GET    /console/api/session                → Me | 401 no_session; sets tw_csrf  (public)
 *   POST   /console/api/signup                 → 201 Me | 403 signup_closed | 409 email_taken
 *   POST   /console/api/login                  → Me | SecondFactorChallenge | 401 invalid_credentials | 429 login_rate_limited
 *   POST   /console/api/login/second-factor    → Me | 401 invalid_code | 400 invalid_challenge | 429
 *   POST   /console/api/logout                 → 204
 *   POST   /console/api/invite/accept          → Me | 400 invalid_invite | 429 login_rate_limited
 *   POST   /console/api/password               → { revoked_sessions } | 401 invalid_credentials | 429
 *   GET    /console/api/sessions               → { data: Session[] }
 *   DELETE /console/api/sessions/{id}          → 204 | 404
 *   POST   /console/api/sessions/revoke-others → { revoked }
 *   POST   /console/api/password-reset         → 202 (same answer for any e-mail) | 429 | 503 email_unavailable
 *   POST   /console/api/password-reset/confirm → Me | 400 invalid_reset | 429 login_rate_limited
 *
 * Issue 18: a session belongs to a user (src/accounts/users.ts), so the password, the sessions
 * and the sign-in are the user's; Me names the user and its role. Sign-up makes the account and
 * its owner user. A password reset (by e-mail only, src/mail/) is limited per e-mail address and
 * per client address (login-limits.ts), answers alike whether the address is a user's, and ends
 * every session of the user once a new password is set.
 *
 * Unknown e-mail and wrong password answer alike (401 invalid_credentials) and take alike time
 * (a dummy argon2id verification). Attempts are counted before the verification, per client address
 * and e-mail, and per address (login-limits.ts); a password change counts in the same windows, a
 * wrong invitation token per address.
 *
 * Second factor (issue 18 item 4, src/accounts/two-factor.ts): when the user has one, a right
 * password (at login, after an invitation or a reset) opens no session but a 5-minute challenge;
 * the page posts it with a TOTP or recovery code to /login/second-factor. Each wrong code counts in
 * the login's windows like a wrong password and against the challenge (5 at most).
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
  createPasswordReset,
  inviteInfo,
  inviteUsable,
  linkTokenHash,
  passwordHashByEmail,
  passwordHashById,
  RESET_TTL_SECONDS,
  resetUsable,
  resetUser,
  setFirstPassword,
  setPasswordHash,
  spendDecoyInvite,
  useInvite,
  useResetByHash,
} from '../../accounts/credentials.js';
import { limitsFor } from '../../accounts/plans.js';
import {
  CHALLENGE_TTL_SECONDS,
  clearCodeFailures,
  codeLockedUntil,
  failLoginChallenge,
  findLoginChallenge,
  openLoginChallenge,
  type PendingReset,
  type SecondFactorInfo,
  twoFactorEnabled,
  twoFactorState,
  useLoginChallenge,
  verifySecondFactor,
} from '../../accounts/two-factor.js';
import {
  ensureOwnerUser,
  findUserByEmail,
  findUserById,
  MemberError,
} from '../../accounts/users.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { type AuditAction, recordAudit } from '../../audit/audit.js';
import { environmentOf, TEST_NETWORK } from '../../common/environment.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import type { Queryable } from '../../db/pool.js';
import { passwordResetMessage } from '../../mail/messages.js';
import {
  clearSessionCookies,
  consoleNetwork,
  ensureCsrfCookie,
  requireSession,
  setSessionCookies,
} from '../guard.js';
import {
  type AttemptInfo,
  countInviteAttempt,
  countLoginAttempt,
  countResetAttempt,
  countResetRequest,
  countSignup,
  LOGIN_WINDOW_MS,
} from '../login-limits.js';
import { hashPassword, verifyPassword } from '../passwords.js';
import {
  CredentialsBody,
  IdParams,
  InviteAcceptBody,
  InviteQuery,
  LoginBody,
  type Me,
  PasswordChangeBody,
  ResetConfirmBody,
  ResetRequestBody,
  SecondFactorBody,
  type SecondFactorChallenge,
} from '../schemas.js';
import { listSessions, openSession, revokeOtherSessions, revokeSession } from '../sessions.js';
import { codeLockedError, noteCodeFailure, sendSecurityNotice } from './security.js';

const hide = { hide: true } as const;

/** The user and its account as the console shows them. @throws ApiError 401 no_session if gone. */
export async function me(deps: Pick<AppDeps, 'db'>, userId: string): Promise<Me> {
  const u = await findUserById(deps.db, userId);
  const a = u && (await findAccountById(deps.db, u.account_id));
  if (!u || !a) throw ApiError.coded('no_session', 'the user no longer exists');
  const limits = limitsFor(a);
  const tf = await twoFactorState(deps.db, u.id);
  return {
    user: {
      id: u.id,
      email: u.email,
      role: u.role,
      two_factor: tf?.enabled ?? false,
      // The account requires a second factor and this user has none yet: the page sends them to
      // the Security page, and the server answers nothing else (guard.ts).
      two_factor_setup_required: (tf?.required ?? false) && !(tf?.enabled ?? false),
    },
    account: {
      id: a.id,
      email: a.email,
      require_two_factor: tf?.required ?? false,
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
 * Open a session for the user, set its cookies, answer Me. The session and the audit entry
 * (`action`, the session opened) are written in one transaction.
 */
async function signIn(
  deps: AppDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  userId: string,
  status: number,
  action: AuditAction,
  detail: Record<string, unknown> = {},
  change?: (tx: Queryable) => Promise<Record<string, unknown>>,
): Promise<Me> {
  const opened = await deps.db.transaction(async (tx) => {
    // The change the sign-in completes (an invitation's password, a reset) commits with it.
    const more = change ? await change(tx) : {};
    const o = await openSession(tx, {
      userId,
      ttlSeconds: deps.config.console.sessionTtlSeconds,
      userAgent: request.headers['user-agent'],
      ip: request.ip,
    });
    await recordAudit(
      tx,
      auditContextOf(request, {
        accountId: o.session.account_id,
        userId,
        sessionId: o.session.id,
      }),
      {
        action,
        targetId: o.session.id,
        detail: { user_agent: o.session.user_agent, ...detail, ...more },
      },
    );
    return o;
  });
  setSessionCookies(request, reply, opened.token, opened.csrf);
  request.log.info(
    { account_id: opened.session.account_id, user_id: userId, session_id: opened.session.id },
    'console sign-in',
  );
  reply.code(status);
  return me(deps, userId);
}

/**
 * After a right password (login) or a reset link: sign in, or, when the user has a second factor,
 * open the code step instead (two-factor.ts): the page then posts the code with the challenge to
 * POST /console/api/login/second-factor. No session exists before the code, and a reset changes
 * nothing before it either (`reset`: the password and sessions change only with the code).
 */
async function signInOrChallenge(
  deps: AppDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  userId: string,
  reset?: PendingReset,
): Promise<Me | SecondFactorChallenge> {
  if (await twoFactorEnabled(deps.db, userId)) {
    const challenge = await openLoginChallenge(deps.db, userId, reset);
    reply.code(200);
    return {
      second_factor_required: true,
      challenge,
      expires_in_seconds: CHALLENGE_TTL_SECONDS,
    };
  }
  if (reset) return completeReset(deps, request, reply, userId, reset, {});
  return signIn(deps, request, reply, userId, 200, 'session.signed_in');
}

/**
 * A password reset, done: in one transaction the reset link is used up (refused when it was
 * used, cancelled or expired meanwhile: 400 invalid_reset), the password set (which cancels every
 * other link), every session of the user revoked, and a new one opened with its audit entry. The
 * user is e-mailed that their password changed.
 */
async function completeReset(
  deps: AppDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  userId: string,
  reset: PendingReset,
  detail: Record<string, unknown>,
): Promise<Me> {
  const out = await signIn(
    deps,
    request,
    reply,
    userId,
    200,
    'account.password_reset',
    detail,
    async (tx) => {
      if ((await useResetByHash(tx, reset.resetTokenHash)) !== userId) throw invalidReset();
      await setPasswordHash(tx, userId, reset.passwordHash);
      // Every session of the user ends: whoever knew the old password is out.
      const revoked = await revokeOtherSessions(tx, userId, undefined);
      request.log.info({ user_id: userId, revoked_sessions: revoked }, 'password reset');
      return { revoked_sessions: revoked };
    },
  );
  sendSecurityNotice(deps, out.user.email, 'password_reset', request.ip);
  return out;
}

const invalidReset = () =>
  ApiError.coded(
    'invalid_reset',
    'this reset link is unknown, already used or expired: ask for a new one',
  );

const invalidInvite = () =>
  ApiError.coded(
    'invalid_invite',
    'this invitation link is unknown, already used or expired: ask for a new one',
  );

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
        // The environment switch's position (issue 32; the tw_env cookie): live or test.
        environment: environmentOf(consoleNetwork(request, deps.config.network)),
        test_network: TEST_NETWORK,
        // Configured (a token is set), even while getMe has not answered yet.
        telegram: deps.telegram !== undefined,
        bot_username: deps.telegram?.current()?.identity.username ?? null,
        // Whether the request carries a live session: the page asks for the session only then,
        // so a signed-out page load makes no request that fails (issue 19 item 7).
        signed_in: Boolean(request.console),
        // E-mail is on (SMTP_URL): invitations and password resets go by e-mail.
        email: deps.mailer !== undefined,
        // Plain http:// webhooks are admitted, inside WEBHOOK_ALLOW_CIDRS only (url-policy.ts).
        local_http: deps.config.delivery.allowCidrs.length > 0,
        // `tronwatch dev`: the local mailbox page where those e-mails are captured (else null).
        dev_mailbox: deps.devMailboxUrl ?? null,
      };
    },
  );

  app.get(
    '/console/api/session',
    { config: { consolePublic: true }, schema: hide },
    async (request, reply) => {
      ensureCsrfCookie(request, reply);
      const ctx = requireSession(request);
      return me(deps, ctx.userId);
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
      let userId: string;
      try {
        // The account and its owner user together: a taken e-mail leaves neither.
        userId = await deps.db.transaction(async (tx) => {
          const account = await createAccount(tx, { email, plan: 'free' });
          const owner = await ensureOwnerUser(tx, account.id);
          await setPasswordHash(tx, owner.id, hash);
          return owner.id;
        });
      } catch (err) {
        if (err instanceof MemberError) {
          throw ApiError.coded('email_taken', 'an account with this e-mail already exists');
        }
        if (!(err instanceof AccountInputError)) throw err;
        if (/already exists/.test(err.message)) {
          throw ApiError.coded('email_taken', 'an account with this e-mail already exists');
        }
        throw new ApiError(400, 'invalid request body', undefined, [
          { field: 'email', message: err.message },
        ]);
      }
      return signIn(deps, request, reply, userId, 201, 'account.signed_up');
    },
  );

  app.post(
    '/console/api/login',
    { config: { consolePublic: true }, schema: { ...hide, body: LoginBody } },
    async (request, reply) => {
      const email = normaliseEmail(request.body.email);
      let userId: string | undefined;
      // The user the e-mail names, right password or not: a failed sign-in is recorded in its
      // account's log (an unknown e-mail has no log to record it in).
      let named: { userId: string; accountId: string } | undefined;
      const info: AttemptInfo = {};
      // Counted before argon2 runs, given back when right (login-limits.ts).
      const ok = await countLoginAttempt(
        deps.rateLimiter,
        request.ip,
        email,
        async () => {
          const found = await passwordHashByEmail(deps.db, email);
          named = found && { userId: found.id, accountId: found.account_id };
          // Always one argon2id verification, whether the user exists or not (alike time).
          const right = await verifyPassword(found?.password_hash, request.body.password);
          userId = right ? found?.id : undefined;
          return userId !== undefined;
        },
        info,
      );
      if (!ok || userId === undefined) {
        request.log.info({ client_ip: request.ip }, 'console login failed');
        if (named !== undefined) {
          await recordAudit(deps.db, auditContextOf(request, named), {
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
      return signInOrChallenge(deps, request, reply, userId);
    },
  );

  app.post(
    '/console/api/login/second-factor',
    { config: { consolePublic: true }, schema: { ...hide, body: SecondFactorBody } },
    async (request, reply) => {
      const { challenge, code } = request.body;
      const found = await findLoginChallenge(deps.db, challenge);
      if (!found) {
        throw ApiError.coded(
          'invalid_challenge',
          'this sign-in step expired or took too many wrong codes: sign in again',
        );
      }
      // The user's code step is locked after too many wrong codes from any address (issue 27
      // item 3): every code is refused until the lock ends, a right one included.
      const lockedUntil = await codeLockedUntil(deps.db, found.userId);
      if (lockedUntil) throw codeLockedError(lockedUntil);
      const info: AttemptInfo = {};
      const sf: SecondFactorInfo = {};
      let kind: 'totp' | 'recovery_code' | false = false;
      // A wrong code counts as a failed sign-in in the login's windows (login-limits.ts), under
      // the user's e-mail, before it is checked.
      await countLoginAttempt(
        deps.rateLimiter,
        request.ip,
        found.email,
        async () => {
          kind = await verifySecondFactor(deps.db, deps.secrets, found.userId, code, undefined, sf);
          return kind !== false;
        },
        info,
      );
      const audit = auditContextOf(request, { accountId: found.accountId, userId: found.userId });
      if (kind === false) {
        const left = await failLoginChallenge(deps.db, challenge);
        request.log.info({ client_ip: request.ip }, 'console second factor failed');
        await recordAudit(deps.db, audit, {
          action: 'session.sign_in_failed',
          detail: { reason: sf.reused ? 'code_already_used' : 'wrong_code' },
        });
        const failure = await noteCodeFailure(deps, request, found);
        const attemptsLeft = Math.min(left, info.remaining ?? left, failure.left);
        throw ApiError.coded(
          'invalid_code',
          sf.reused
            ? 'this code was already used: wait for the next code your authenticator app shows'
            : attemptsLeft === 0
              ? 'wrong code, and no tries are left for this sign-in: sign in again'
              : 'wrong code: type the 6 digits your authenticator app shows now, or a recovery code',
          undefined,
          {
            attempts_left: attemptsLeft,
            window_seconds: LOGIN_WINDOW_MS / 1000,
            ...(sf.reused ? { reason: 'code_already_used' } : {}),
          },
        );
      }
      if (!(await useLoginChallenge(deps.db, challenge))) {
        throw ApiError.coded(
          'invalid_challenge',
          'this sign-in step was already used: sign in again',
        );
      }
      await clearCodeFailures(deps.db, found.userId);
      if (kind === 'recovery_code') {
        await recordAudit(deps.db, audit, { action: 'two_factor.recovery_code_used' });
        sendSecurityNotice(deps, found.email, 'recovery_code_used', request.ip);
      }
      if (found.reset) {
        return completeReset(deps, request, reply, found.userId, found.reset, {
          second_factor: kind,
        });
      }
      return signIn(deps, request, reply, found.userId, 200, 'session.signed_in', {
        second_factor: kind,
      });
    },
  );

  app.post(
    '/console/api/logout',
    { config: { consoleRole: 'viewer', consoleBeforeSecondFactor: true }, schema: hide },
    async (request, reply) => {
      const ctx = requireSession(request);
      const audit = auditContextOf(request);
      await deps.db.transaction(async (tx) => {
        if (await revokeSession(tx, ctx.userId, ctx.session.id)) {
          await recordAudit(tx, audit, { action: 'session.signed_out', targetId: ctx.session.id });
        }
      });
      clearSessionCookies(request, reply);
      return reply.code(204).send();
    },
  );

  app.post(
    '/console/api/invite/accept',
    { config: { consolePublic: true }, schema: { ...hide, body: InviteAcceptBody } },
    async (request, reply) => {
      // A wrong token counts against the client address (login-limits.ts), and is refused
      // before any hashing.
      const usable = await countInviteAttempt(deps.rateLimiter, request.ip, () =>
        inviteUsable(deps.db, request.body.token),
      );
      if (!usable) throw invalidInvite();
      const info = await inviteInfo(deps.db, request.body.token);
      if (info?.decoy) {
        // A placeholder's link (the address had a user, issue 40 item 8): the same work as a
        // real acceptance, then refused as an invalid link, and spent (it reads as used).
        await hashPassword(request.body.password);
        await spendDecoyInvite(deps.db, request.body.token);
        throw invalidInvite();
      }
      const invited = info && (await findUserByEmail(deps.db, info.email));
      if (!invited) throw invalidInvite();
      const hash = await hashPassword(request.body.password);
      // The link is used and the password set in one transaction with the session, and only for
      // a user who has not joined (credentials.ts): an invitation never sets a joined user's
      // password, so an old link cannot take a login over (issue 27 item 1).
      return signIn(
        deps,
        request,
        reply,
        invited.id,
        200,
        'account.invite_accepted',
        {},
        async (tx) => {
          const userId = await useInvite(tx, request.body.token);
          if (userId !== invited.id || !(await setFirstPassword(tx, userId, hash))) {
            throw invalidInvite();
          }
          return {};
        },
      );
    },
  );

  app.get(
    '/console/api/invite',
    { config: { consolePublic: true }, schema: { ...hide, querystring: InviteQuery } },
    async (request) => {
      // What the invitation page shows before the password is chosen (issue 29): who invited
      // whom, to which account, with which role. Counted like a wrong token when unknown.
      const token = request.query.token;
      let info: Awaited<ReturnType<typeof inviteInfo>>;
      await countInviteAttempt(deps.rateLimiter, request.ip, async () => {
        info = await inviteInfo(deps.db, token);
        return info !== undefined;
      });
      const found = info;
      if (!found) throw invalidInvite();
      return {
        email: found.email,
        role: found.role,
        account_email: found.account_email,
        invited_by: found.invited_by,
        expires_at: found.expires_at.toISOString(),
      };
    },
  );

  app.post(
    '/console/api/password',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, body: PasswordChangeBody } },
    async (request) => {
      const ctx = requireSession(request);
      const user = await findUserById(deps.db, ctx.userId);
      if (!user) throw ApiError.coded('no_session', 'the user no longer exists');
      // The login's failure limit, in the same windows (login-limits.ts).
      const right = await countLoginAttempt(deps.rateLimiter, request.ip, user.email, async () =>
        verifyPassword(await passwordHashById(deps.db, ctx.userId), request.body.current_password),
      );
      const audit = auditContextOf(request);
      if (!right) {
        request.log.info({ client_ip: request.ip }, 'console password check failed');
        await recordAudit(deps.db, audit, { action: 'account.password_change_failed' });
        throw ApiError.coded('invalid_credentials', 'the current password is wrong');
      }
      const hash = await hashPassword(request.body.new_password);
      const revoked = await deps.db.transaction(async (tx) => {
        await setPasswordHash(tx, ctx.userId, hash);
        const n = await revokeOtherSessions(tx, ctx.userId, ctx.session.id);
        await recordAudit(tx, audit, {
          action: 'account.password_changed',
          detail: { revoked_sessions: n },
        });
        return n;
      });
      request.log.info(
        { account_id: ctx.accountId, user_id: ctx.userId, revoked_sessions: revoked },
        'password changed',
      );
      sendSecurityNotice(deps, user.email, 'password_changed', request.ip);
      return { revoked_sessions: revoked };
    },
  );

  app.get(
    '/console/api/sessions',
    { config: { consoleRole: 'viewer' }, schema: hide },
    async (request) => {
      const ctx = requireSession(request);
      const rows = await listSessions(deps.db, ctx.userId);
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
    },
  );

  app.delete(
    '/console/api/sessions/:id',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const audit = auditContextOf(request);
      const revoked =
        isId(id, 'ses') &&
        (await deps.db.transaction(async (tx) => {
          const done = await revokeSession(tx, ctx.userId, id);
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

  app.post(
    '/console/api/sessions/revoke-others',
    { config: { consoleRole: 'viewer' }, schema: hide },
    async (request) => {
      const ctx = requireSession(request);
      const audit = auditContextOf(request);
      const revoked = await deps.db.transaction(async (tx) => {
        const n = await revokeOtherSessions(tx, ctx.userId, ctx.session.id);
        await recordAudit(tx, audit, { action: 'session.revoked_others', detail: { revoked: n } });
        return n;
      });
      return { revoked };
    },
  );

  app.post(
    '/console/api/password-reset',
    { config: { consolePublic: true }, schema: { ...hide, body: ResetRequestBody } },
    async (request, reply) => {
      const mailer = deps.mailer;
      if (!mailer) {
        throw ApiError.coded(
          'email_unavailable',
          'e-mail is off on this deployment: ask an owner or admin of your account, or the operator, for a new invitation link',
        );
      }
      const email = normaliseEmail(request.body.email);
      // Counted whether or not the address is a user's: the limit says nothing either.
      await countResetRequest(deps.rateLimiter, request.ip, email);
      const user = await findUserByEmail(deps.db, email);
      // Only users who have a password (an invited one accepts the invitation instead).
      if (user?.joined_at) {
        const token = await createPasswordReset(deps.db, user.id);
        mailer.send(
          passwordResetMessage({
            to: user.email,
            link: `${deps.config.console.publicUrl}/console/reset#token=${token}`,
          }),
        );
        request.log.info({ user_id: user.id }, 'password reset link sent');
      }
      return reply.code(202).send({
        message: `If a user signs in with this e-mail, a link to choose a new password is on its way. It works once, for ${RESET_TTL_SECONDS / 60} minutes.`,
      });
    },
  );

  app.post(
    '/console/api/password-reset/confirm',
    { config: { consolePublic: true }, schema: { ...hide, body: ResetConfirmBody } },
    async (request, reply) => {
      // A wrong token counts against the client address, before any hashing (login-limits.ts).
      const usable = await countResetAttempt(deps.rateLimiter, request.ip, () =>
        resetUsable(deps.db, request.body.token),
      );
      if (!usable) throw invalidReset();
      const hash = await hashPassword(request.body.password);
      const userId = await resetUser(deps.db, request.body.token);
      if (!userId) throw invalidReset();
      // A reset proves the mailbox, not the second factor: a user who has one types a code, and
      // nothing (password, sessions, the link) changes before it is right (issue 27 item 1).
      return signInOrChallenge(deps, request, reply, userId, {
        passwordHash: hash,
        resetTokenHash: linkTokenHash(request.body.token),
      });
    },
  );
}
