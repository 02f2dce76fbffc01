/**
 * The console's second-factor routes (issue 18 item 4; src/accounts/two-factor.ts):
 *
 *   GET    /console/api/two-factor                 → TwoFactorState
 *   POST   /console/api/two-factor/setup           {password} → TwoFactorSetup | 401 invalid_credentials | 409 two_factor_state
 *   POST   /console/api/two-factor/enable          {code} → { recovery_codes } | 401 invalid_code | 409
 *   POST   /console/api/two-factor/disable         {password, code} → 204 | 401 invalid_credentials | 401 invalid_code | 409
 *   POST   /console/api/two-factor/recovery-codes  {password} → { recovery_codes } | 401 | 409
 *   PUT    /console/api/account/two-factor         {required} → TwoFactorState (owner) | 409
 *   DELETE /console/api/members/{id}/two-factor    → 204 | 404 (owner: a member's lost device)
 *
 * Every route is the signed-in user's own (viewer and up), but requiring a second factor of the
 * account and turning a member's off, which are the owner's. Setting up asks for the password (a
 * stolen session cannot bind the thief's app and lock the user out); turning it off asks for the
 * password and a code; new recovery codes ask for the password. Each password check, and each
 * code that protects something (turning it off), is counted in the login's windows
 * (src/console/login-limits.ts), so none of them guesses faster than the sign-in; the code that
 * confirms a set-up is not (its secret was just shown to this session). The set-up routes answer while the account requires a second factor that the
 * user has not set up yet (guard.ts `consoleBeforeSecondFactor`). Each change is audited, and
 * e-mailed to the user it concerns when e-mail is on (turned on, off, or off by an owner; a
 * recovery code used to sign in: account.ts), so a change they did not make is noticed. No
 * secret, code or recovery code is logged, recorded or mailed.
 */

import type { FastifyRequest } from 'fastify';
import QRCode from 'qrcode';
import { passwordHashById } from '../../accounts/credentials.js';
import {
  beginEnrolment,
  CODE_LOCK_SECONDS,
  clearCodeFailures,
  codeLockedUntil,
  confirmEnrolment,
  countCodeFailure,
  disableTwoFactor,
  replaceRecoveryCodes,
  setRequireTwoFactor,
  TwoFactorError,
  twoFactorEnabled,
  twoFactorState,
  verifySecondFactor,
} from '../../accounts/two-factor.js';
import { findUserById } from '../../accounts/users.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit, SYSTEM_ACTORS } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { type SecurityEvent, securityNoticeMessage } from '../../mail/messages.js';
import { requireSession } from '../guard.js';
import { countLoginAttempt } from '../login-limits.js';
import { verifyPassword } from '../passwords.js';
import {
  IdParams,
  RecoveryCodesBody,
  TwoFactorDisableBody,
  TwoFactorEnableBody,
  TwoFactorRequirementBody,
  type TwoFactorSetup,
  TwoFactorSetupBody,
} from '../schemas.js';

const hide = { hide: true } as const;

/**
 * E-mail the user that their sign-in protection changed (src/mail/messages.ts
 * securityNoticeMessage), when e-mail is on; in the background, never failing the request.
 */
export function sendSecurityNotice(
  deps: Pick<AppDeps, 'mailer' | 'config'>,
  to: string,
  event: SecurityEvent,
  ip: string | null,
): void {
  deps.mailer?.send(
    securityNoticeMessage({ to, event, consoleUrl: deps.config.console.publicUrl, ip }),
  );
}

/**
 * 429 code_locked: the user's code step is locked until `until` (issue 27 item 3), with the lock's
 * end in the answer (`locked_until`) and Retry-After.
 */
export function codeLockedError(until: Date): ApiError {
  const seconds = Math.max(1, Math.ceil((until.getTime() - Date.now()) / 1000));
  return new ApiError(
    429,
    `too many wrong codes for this user: the code step is locked until ${until.toISOString()}`,
    'code_locked',
    { locked_until: until.toISOString(), lock_seconds: CODE_LOCK_SECONDS },
    {},
    { 'Retry-After': String(seconds) },
  );
}

/**
 * Count a wrong code against the user, whatever the address (two-factor.ts countCodeFailure).
 * When it locks the code step: an audit entry by the system (the owners see it), the user
 * e-mailed at the first lock of the day, and 429 code_locked thrown.
 * @returns the wrong codes left before the lock when it did not lock.
 */
export async function noteCodeFailure(
  deps: Pick<AppDeps, 'db' | 'mailer' | 'config'>,
  request: FastifyRequest,
  user: { userId: string; accountId: string; email: string },
): Promise<{ left: number }> {
  const f = await countCodeFailure(deps.db, user.userId);
  if (!f.lockedUntil) return { left: f.left };
  await recordAudit(
    deps.db,
    { accountId: user.accountId, actor: SYSTEM_ACTORS.login, clientIp: request.ip ?? null },
    {
      action: 'two_factor.code_locked',
      targetId: user.userId,
      detail: { email: user.email, locked_until: f.lockedUntil.toISOString() },
    },
  );
  request.log.warn({ user_id: user.userId }, 'second factor locked after wrong codes');
  if (f.notify) sendSecurityNotice(deps, user.email, 'code_locked', request.ip);
  throw codeLockedError(f.lockedUntil);
}

/** 409 two_factor_state from a TwoFactorError. */
function stateError(err: unknown): never {
  if (err instanceof TwoFactorError) throw ApiError.coded('two_factor_state', err.message);
  throw err;
}

/** Register the second-factor routes. */
export function securityRoutes(app: App, deps: AppDeps): void {
  /** The signed-in user, or 401. */
  const userOf = async (userId: string) => {
    const u = await findUserById(deps.db, userId);
    if (!u) throw ApiError.coded('no_session', 'the user no longer exists');
    return u;
  };
  /** The user's password, counted like a sign-in. @throws 401 invalid_credentials, 429. */
  const checkPassword = async (ip: string, user: { id: string; email: string }, pw: string) => {
    const right = await countLoginAttempt(deps.rateLimiter, ip, user.email, async () =>
      verifyPassword(await passwordHashById(deps.db, user.id), pw),
    );
    if (!right) throw ApiError.coded('invalid_credentials', 'the password is wrong');
  };
  const wrongCode = () =>
    ApiError.coded(
      'invalid_code',
      'wrong code: type the 6 digits your authenticator app shows now (or, to turn it off, a recovery code)',
    );
  /**
   * A code that protects a change (turning the factor off, new recovery codes): refused while the
   * user's code step is locked, counted in the login's windows and in the user's own.
   * @throws 401 invalid_code, 429 code_locked / login_rate_limited.
   */
  const checkCode = async (
    request: FastifyRequest,
    user: { id: string; email: string; account_id: string },
    code: string,
  ) => {
    const until = await codeLockedUntil(deps.db, user.id);
    if (until) throw codeLockedError(until);
    const right = await countLoginAttempt(
      deps.rateLimiter,
      request.ip,
      user.email,
      async () => (await verifySecondFactor(deps.db, deps.secrets, user.id, code)) !== false,
    );
    if (!right) {
      await noteCodeFailure(deps, request, {
        userId: user.id,
        accountId: user.account_id,
        email: user.email,
      });
      throw wrongCode();
    }
    await clearCodeFailures(deps.db, user.id);
  };

  app.get(
    '/console/api/two-factor',
    { config: { consoleRole: 'viewer', consoleBeforeSecondFactor: true }, schema: hide },
    async (request) => {
      const ctx = requireSession(request);
      const state = await twoFactorState(deps.db, ctx.userId);
      if (!state) throw ApiError.coded('no_session', 'the user no longer exists');
      return state;
    },
  );

  app.post(
    '/console/api/two-factor/setup',
    {
      config: { consoleRole: 'viewer', consoleBeforeSecondFactor: true },
      schema: { ...hide, body: TwoFactorSetupBody },
    },
    async (request): Promise<TwoFactorSetup> => {
      const ctx = requireSession(request);
      const user = await userOf(ctx.userId);
      await checkPassword(request.ip, user, request.body.password);
      const { secret, uri } = await beginEnrolment(deps.db, deps.secrets, user).catch(stateError);
      const svg = await QRCode.toString(uri, { type: 'svg', margin: 1, errorCorrectionLevel: 'M' });
      return { secret, otpauth_uri: uri, qr_svg: svg };
    },
  );

  app.post(
    '/console/api/two-factor/enable',
    {
      config: { consoleRole: 'viewer', consoleBeforeSecondFactor: true },
      schema: { ...hide, body: TwoFactorEnableBody },
    },
    async (request) => {
      const ctx = requireSession(request);
      const user = await userOf(ctx.userId);
      // Not counted in the login's windows: the secret being confirmed was just shown to this
      // session (which proved the password to get it), so a wrong code guesses nothing, and a
      // user fumbling with the app must not lock their own sign-in.
      const audit = auditContextOf(request);
      const codes = await confirmEnrolment(
        deps.db,
        deps.secrets,
        user.id,
        request.body.code,
        undefined,
        (tx) => recordAudit(tx, audit, { action: 'two_factor.enabled' }),
      ).catch(stateError);
      if (!codes) throw wrongCode();
      sendSecurityNotice(deps, user.email, 'two_factor_enabled', request.ip);
      request.log.info({ user_id: user.id }, 'second factor enabled');
      return { recovery_codes: codes };
    },
  );

  app.post(
    '/console/api/two-factor/disable',
    {
      config: { consoleRole: 'viewer' },
      schema: { ...hide, body: TwoFactorDisableBody },
    },
    async (request, reply) => {
      const ctx = requireSession(request);
      const user = await userOf(ctx.userId);
      if (!(await twoFactorEnabled(deps.db, user.id))) {
        throw ApiError.coded('two_factor_state', 'the second factor is not on');
      }
      await checkPassword(request.ip, user, request.body.password);
      await checkCode(request, user, request.body.code);
      await deps.db.transaction(async (tx) => {
        await disableTwoFactor(tx, user.id);
        await recordAudit(tx, auditContextOf(request), { action: 'two_factor.disabled' });
      });
      sendSecurityNotice(deps, user.email, 'two_factor_disabled', request.ip);
      request.log.info({ user_id: user.id }, 'second factor disabled');
      return reply.code(204).send();
    },
  );

  app.post(
    '/console/api/two-factor/recovery-codes',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, body: RecoveryCodesBody } },
    async (request) => {
      const ctx = requireSession(request);
      const user = await userOf(ctx.userId);
      if (!(await twoFactorEnabled(deps.db, user.id))) {
        throw ApiError.coded('two_factor_state', 'the second factor is not on');
      }
      // The password and a current code (issue 27 item 7): a session and a password alone do not
      // replace the codes that stand in for the device.
      await checkPassword(request.ip, user, request.body.password);
      await checkCode(request, user, request.body.code);
      const codes = await deps.db.transaction(async (tx) => {
        const c = await replaceRecoveryCodes(tx, user.id);
        await recordAudit(tx, auditContextOf(request), {
          action: 'two_factor.recovery_codes_regenerated',
        });
        return c;
      });
      sendSecurityNotice(deps, user.email, 'recovery_codes_regenerated', request.ip);
      return { recovery_codes: codes };
    },
  );

  app.put(
    '/console/api/account/two-factor',
    { config: { consoleRole: 'owner' }, schema: { ...hide, body: TwoFactorRequirementBody } },
    async (request) => {
      const ctx = requireSession(request);
      const { required } = request.body;
      // An owner who requires it has it: the rule never starts by locking its author out.
      if (required && !(await twoFactorEnabled(deps.db, ctx.userId))) {
        throw ApiError.coded(
          'two_factor_state',
          'turn on your own second factor before requiring one of every member',
        );
      }
      await deps.db.transaction(async (tx) => {
        await setRequireTwoFactor(tx, ctx.accountId, required);
        await recordAudit(tx, auditContextOf(request), {
          action: required ? 'account.two_factor_required' : 'account.two_factor_not_required',
        });
      });
      return twoFactorState(deps.db, ctx.userId);
    },
  );

  app.delete(
    '/console/api/members/:id/two-factor',
    { config: { consoleRole: 'owner' }, schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const member = isId(id, 'usr') ? await findUserById(deps.db, id) : undefined;
      if (!member || member.account_id !== ctx.accountId) {
        throw new ApiError(404, 'member not found');
      }
      if (member.id === ctx.userId) {
        throw ApiError.coded(
          'two_factor_state',
          'turn your own second factor off on the Security page (it asks for a code)',
        );
      }
      const done = await deps.db.transaction(async (tx) => {
        const d = await disableTwoFactor(tx, member.id);
        if (d) {
          await recordAudit(tx, auditContextOf(request), {
            action: 'two_factor.reset_for_member',
            targetId: member.id,
          });
        }
        return d;
      });
      if (!done) throw ApiError.coded('two_factor_state', 'this member has no second factor');
      sendSecurityNotice(deps, member.email, 'two_factor_reset', request.ip);
      return reply.code(204).send();
    },
  );
}
