/**
 * The account's members (issue 18 item 3): list, invite by e-mail, send an invitation again,
 * change a role, remove (or leave). The rules are the domain's (src/accounts/users.ts); the guard
 * checks the least role of each route (guard.ts), the domain the rest (an admin cannot touch an
 * owner, nobody grants more than they hold, the last owner stays).
 *
 *   GET    /console/api/members             → { data: Member[] }                       (viewer)
 *   POST   /console/api/members             → 201 InviteResult | 409 email_taken (a member already) | 429 (admin)
 *   POST   /console/api/members/{id}/invite → InviteResult | 404 | 409 (already joined) | 429  (admin)
 *   POST   /console/api/members/{id}/role   → Member & { keys_narrowed } | 403 insufficient_role | 409 last_owner
 *   DELETE /console/api/members/{id}        → 200 { keys_revoked } | 403 insufficient_role | 409 last_owner
 *   PUT    /console/api/members/me/alerts   → Member (the signed-in user)               (viewer)
 *
 * Alert e-mails (issue 19 item 2, src/watches/alert-mail.ts) are each member's own choice: the
 * `me` route changes only the signed-in user's `alert_emails`, never someone else's, so every
 * role may call it; the list shows everyone's.
 * Role change and removal are open to every role at the guard because anyone may lower their own
 * role or leave; acting on someone else needs admin (owner for an owner), checked by the domain.
 * An invitation goes by e-mail when SMTP_URL is set (the link is then never shown); when e-mail is
 * off, the answer carries the link for the admin to pass on. A removed member's sessions end at
 * once (deleted with the user), and so do their live streams (src/console/routes/live.ts).
 *
 * Issue 27: a role change or removal, the member's links cancelled, their keys narrowed or
 * revoked and every audit entry commit together (src/accounts/membership.ts); the answer lists
 * the keys so the page tells the owner. Inviting an address that already has a user (of another
 * account) answers as any invitation, and that user is e-mailed instead; invitations are limited
 * per account (INVITES_PER_ACCOUNT) and per client address (INVITES_PER_ADDRESS) per hour.
 */
import { AccountInputError, findAccountById } from '../../accounts/accounts.js';
import { createDecoyInvite, createInvite, INVITE_TTL_SECONDS } from '../../accounts/credentials.js';
import {
  changeMemberRole,
  findDecoy,
  inviteMember,
  listDecoys,
  removeDecoy,
  removeMember,
  setDecoyRole,
} from '../../accounts/membership.js';
import {
  findUserByEmail,
  findUserById,
  listUsers,
  MemberError,
  roleAtLeast,
  setAlertEmails,
  type UserRow,
} from '../../accounts/users.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { inviteExistingMessage, inviteMessage } from '../../mail/messages.js';
import { clientAddressKey } from '../../rate-limit/limiter.js';
import { type ConsoleContext, clearSessionCookies, requireSession } from '../guard.js';
import {
  IdParams,
  type InviteResult,
  type Member,
  MemberAlertsBody,
  MemberInviteBody,
  MemberRoleBody,
} from '../schemas.js';

const hide = { hide: true } as const;

/** Invitations (new or sent again) per account per hour. */
export const INVITES_PER_ACCOUNT = 20;
/** Invitations per client address per hour, whatever the account. */
export const INVITES_PER_ADDRESS = 20;
const INVITE_WINDOW_MS = 60 * 60_000;

function memberView(u: UserRow, ctx: ConsoleContext): Member {
  return {
    id: u.id,
    email: u.email,
    role: u.role,
    status: u.joined_at ? 'active' : 'invited',
    created_at: u.created_at.toISOString(),
    joined_at: u.joined_at?.toISOString() ?? null,
    alert_emails: u.alert_emails,
    two_factor: u.two_factor,
    you: u.id === ctx.userId,
  };
}

/** A MemberError as the console answers it. */
function memberError(err: unknown): unknown {
  if (!(err instanceof MemberError)) return err;
  switch (err.code) {
    case 'not_found':
      return new ApiError(404, 'member not found');
    case 'email_taken':
      return ApiError.coded('email_taken', 'a user with this e-mail already exists');
    default:
      return ApiError.coded(err.code, err.message);
  }
}

export function memberRoutes(app: App, deps: AppDeps): void {
  /**
   * Count an invitation against the account's and the client's hourly windows.
   * @throws ApiError 429 rate_limited with Retry-After.
   */
  async function countInvitation(ip: string, accountId: string): Promise<void> {
    for (const [id, limit] of [
      [`invite-acc:${accountId}`, INVITES_PER_ACCOUNT],
      [`invite-new-ip:${clientAddressKey(ip)}`, INVITES_PER_ADDRESS],
    ] as const) {
      const r = await deps.rateLimiter.hit(id, limit, undefined, INVITE_WINDOW_MS);
      if (!r.allowed) {
        throw new ApiError(
          429,
          `too many invitations: try again in ${r.retryAfterSeconds} s`,
          'rate_limited',
          undefined,
          {},
          { 'Retry-After': String(r.retryAfterSeconds) },
        );
      }
    }
  }

  /**
   * What an invitation answers, and its e-mail: the link to a new member, or, to an address that
   * already has a user (`decoy`), a notice without a link. Both answer alike: e-mail off, the
   * placeholder's link is shown, and its preview reads as any invitation's (issue 40 item 8).
   */
  async function invited(
    user: UserRow,
    token: string,
    decoy: boolean,
    ctx: ConsoleContext,
  ): Promise<InviteResult> {
    const link = `${deps.config.console.publicUrl}/console/invite#token=${token}`;
    const account = await findAccountById(deps.db, ctx.accountId);
    const inviter = await findUserById(deps.db, ctx.userId);
    if (deps.mailer) {
      const common = {
        to: user.email,
        role: user.role,
        accountEmail: account?.email ?? ctx.accountId,
        ...(inviter ? { invitedBy: inviter.email } : {}),
      };
      const existing = decoy ? await findUserByEmail(deps.db, user.email) : undefined;
      if (!decoy) deps.mailer.send(inviteMessage({ ...common, link }));
      else if (existing) {
        deps.mailer.send(
          inviteExistingMessage({ ...common, consoleUrl: deps.config.console.publicUrl }),
        );
      }
    }
    return {
      member: memberView(user, ctx),
      emailed: deps.mailer !== undefined,
      link: deps.mailer ? null : link,
      expires_at: new Date(Date.now() + INVITE_TTL_SECONDS * 1000).toISOString(),
    };
  }

  app.get(
    '/console/api/members',
    { config: { consoleRole: 'viewer' }, schema: hide },
    async (request) => {
      const ctx = requireSession(request);
      const users = await listUsers(deps.db, ctx.accountId);
      const decoys = await listDecoys(deps.db, ctx.accountId);
      return { data: [...users, ...decoys].map((u) => memberView(u, ctx)) };
    },
  );

  app.post(
    '/console/api/members',
    { config: { consoleRole: 'admin' }, schema: { ...hide, body: MemberInviteBody } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const { email, role } = request.body;
      if (role === 'owner' && ctx.role !== 'owner') {
        throw ApiError.coded('insufficient_role', 'only an owner invites an owner');
      }
      await countInvitation(request.ip, ctx.accountId);
      const inviter = await findUserById(deps.db, ctx.userId);
      let made: Awaited<ReturnType<typeof inviteMember>>;
      try {
        made = await inviteMember(
          deps.db,
          ctx.accountId,
          { email, role, invitedBy: inviter?.email ?? ctx.userId },
          auditContextOf(request),
        );
      } catch (err) {
        if (err instanceof AccountInputError) {
          throw new ApiError(400, 'invalid request body', undefined, [
            { field: 'email', message: err.message },
          ]);
        }
        throw memberError(err);
      }
      request.log.info(
        { account_id: ctx.accountId, user_id: made.member.id, role, by: ctx.userId },
        'member invited',
      );
      return reply.code(201).send(await invited(made.member, made.token, made.existing, ctx));
    },
  );

  app.post(
    '/console/api/members/:id/invite',
    { config: { consoleRole: 'admin' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const found = isId(id, 'usr') ? await findUserById(deps.db, id) : undefined;
      const user = found?.account_id === ctx.accountId ? found : undefined;
      const decoy = user
        ? undefined
        : isId(id, 'usr')
          ? await findDecoy(deps.db, ctx.accountId, id)
          : undefined;
      const target = user ?? decoy;
      if (!target) throw new ApiError(404, 'member not found');
      if (target.joined_at) {
        throw new ApiError(409, 'this member has joined: a forgotten password is reset by e-mail');
      }
      if (target.role === 'owner' && ctx.role !== 'owner') {
        throw ApiError.coded('insufficient_role', 'only an owner invites an owner');
      }
      await countInvitation(request.ip, ctx.accountId);
      const inviter = await findUserById(deps.db, ctx.userId);
      // A new link cancels the member's earlier ones (credentials.ts): one live link per user.
      const token = user
        ? await createInvite(deps.db, user.id, inviter?.email ?? null)
        : await createDecoyInvite(deps.db, target.id, inviter?.email ?? null);
      return invited(target, token, !user, ctx);
    },
  );

  app.post(
    '/console/api/members/:id/role',
    {
      config: { consoleRole: 'viewer' },
      schema: { ...hide, params: IdParams, body: MemberRoleBody },
    },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      if (!isId(id, 'usr')) throw new ApiError(404, 'member not found');
      const role = request.body.role;
      const decoy = await findDecoy(deps.db, ctx.accountId, id);
      if (decoy) {
        // A placeholder answers as an invited member would (membership.ts).
        if (!roleAtLeast(ctx.role, 'admin') || !roleAtLeast(ctx.role, role)) {
          throw ApiError.coded('insufficient_role', `a ${ctx.role} cannot grant the ${role} role`);
        }
        const d = await setDecoyRole(deps.db, ctx.accountId, id, role);
        if (!d) throw new ApiError(404, 'member not found');
        return { ...memberView(d, ctx), keys_narrowed: [] };
      }
      try {
        const { user, keysNarrowed } = await changeMemberRole(
          deps.db,
          ctx.accountId,
          { userId: ctx.userId, role: ctx.role },
          id,
          role,
          auditContextOf(request),
        );
        request.log.info(
          {
            account_id: ctx.accountId,
            user_id: id,
            role: user.role,
            by: ctx.userId,
            keys_narrowed: keysNarrowed.length,
          },
          'member role changed',
        );
        return { ...memberView(user, ctx), keys_narrowed: keysNarrowed };
      } catch (err) {
        throw memberError(err);
      }
    },
  );

  app.put(
    '/console/api/members/me/alerts',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, body: MemberAlertsBody } },
    async (request) => {
      const ctx = requireSession(request);
      const on = request.body.alert_emails;
      // The change and its audit entry commit together.
      const user = await deps.db.transaction(async (tx) => {
        const u = await setAlertEmails(tx, ctx.accountId, ctx.userId, on);
        if (!u) return undefined;
        await recordAudit(tx, auditContextOf(request), {
          action: 'member.alert_emails_changed',
          targetId: u.id,
          detail: { alert_emails: on },
        });
        return u;
      });
      // The session's user exists (the guard just read it); a removal racing this request ends here.
      if (!user) throw new ApiError(404, 'member not found');
      request.log.info(
        { account_id: ctx.accountId, user_id: user.id, alert_emails: on },
        'member alert e-mails changed',
      );
      return memberView(user, ctx);
    },
  );

  app.delete(
    '/console/api/members/:id',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      if (!isId(id, 'usr')) throw new ApiError(404, 'member not found');
      if (roleAtLeast(ctx.role, 'admin') && (await removeDecoy(deps.db, ctx.accountId, id))) {
        return { keys_revoked: [] };
      }
      let keysRevoked: Awaited<ReturnType<typeof removeMember>>['keysRevoked'];
      try {
        ({ keysRevoked } = await removeMember(
          deps.db,
          ctx.accountId,
          { userId: ctx.userId, role: ctx.role },
          id,
          auditContextOf(request),
        ));
      } catch (err) {
        throw memberError(err);
      }
      request.log.info(
        {
          account_id: ctx.accountId,
          user_id: id,
          by: ctx.userId,
          keys_revoked: keysRevoked.length,
        },
        id === ctx.userId ? 'member left' : 'member removed',
      );
      if (id === ctx.userId) clearSessionCookies(request, reply);
      // 200 with the keys revoked with the member: the page tells the owner (issue 27 item 2).
      return reply.code(200).send({ keys_revoked: keysRevoked });
    },
  );
}
