/**
 * The account's members (issue 18 item 3): list, invite by e-mail, send an invitation again,
 * change a role, remove (or leave). The rules are the domain's (src/accounts/users.ts); the guard
 * checks the least role of each route (guard.ts), the domain the rest (an admin cannot touch an
 * owner, nobody grants more than they hold, the last owner stays).
 *
 *   GET    /console/api/members             → { data: Member[] }                       (viewer)
 *   POST   /console/api/members             → 201 InviteResult | 409 email_taken         (admin)
 *   POST   /console/api/members/{id}/invite → InviteResult | 404 | 409 (already joined)  (admin)
 *   POST   /console/api/members/{id}/role   → Member | 403 insufficient_role | 409 last_owner
 *   DELETE /console/api/members/{id}        → 204 | 403 insufficient_role | 409 last_owner
 *   PUT    /console/api/members/me/alerts   → Member (the signed-in user)               (viewer)
 *
 * Alert e-mails (issue 19 item 2, src/watches/alert-mail.ts) are each member's own choice: the
 * `me` route changes only the signed-in user's `alert_emails`, never someone else's, so every
 * role may call it; the list shows everyone's.
 * Role change and removal are open to every role at the guard because anyone may lower their own
 * role or leave; acting on someone else needs admin (owner for an owner), checked by the domain.
 * An invitation goes by e-mail when SMTP_URL is set (the link is then never shown); when e-mail is
 * off, the answer carries the link for the admin to pass on. A removed member's sessions end at
 * once (deleted with the user). Audit hook: the lead records member actions here after merge.
 */
import { AccountInputError, findAccountById } from '../../accounts/accounts.js';
import { createInvite, INVITE_TTL_SECONDS } from '../../accounts/credentials.js';
import {
  changeRole,
  createUser,
  findUserById,
  listUsers,
  MemberError,
  removeUser,
  setAlertEmails,
  type UserRow,
} from '../../accounts/users.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { inviteMessage } from '../../mail/messages.js';
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
  /** Make an invitation link for `user`, e-mail it when e-mail is on. */
  async function invite(user: UserRow, ctx: ConsoleContext): Promise<InviteResult> {
    const token = await createInvite(deps.db, user.id);
    const link = `${deps.config.console.publicUrl}/console/invite#token=${token}`;
    const account = await findAccountById(deps.db, ctx.accountId);
    const inviter = await findUserById(deps.db, ctx.userId);
    if (deps.mailer) {
      deps.mailer.send(
        inviteMessage({
          to: user.email,
          link,
          role: user.role,
          accountEmail: account?.email ?? ctx.accountId,
          ...(inviter ? { invitedBy: inviter.email } : {}),
        }),
      );
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
      return { data: users.map((u) => memberView(u, ctx)) };
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
      let user: UserRow;
      try {
        user = await createUser(deps.db, { accountId: ctx.accountId, email, role });
      } catch (err) {
        if (err instanceof AccountInputError) {
          throw new ApiError(400, 'invalid request body', undefined, [
            { field: 'email', message: err.message },
          ]);
        }
        throw memberError(err);
      }
      request.log.info(
        { account_id: ctx.accountId, user_id: user.id, role, by: ctx.userId },
        'member invited',
      );
      await recordAudit(deps.db, auditContextOf(request), {
        action: 'member.invited',
        targetId: user.id,
        detail: { email: user.email, role },
      });
      return reply.code(201).send(await invite(user, ctx));
    },
  );

  app.post(
    '/console/api/members/:id/invite',
    { config: { consoleRole: 'admin' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const user = isId(id, 'usr') ? await findUserById(deps.db, id) : undefined;
      if (!user || user.account_id !== ctx.accountId) throw new ApiError(404, 'member not found');
      if (user.joined_at) {
        throw new ApiError(409, 'this member has joined: a forgotten password is reset by e-mail');
      }
      if (user.role === 'owner' && ctx.role !== 'owner') {
        throw ApiError.coded('insufficient_role', 'only an owner invites an owner');
      }
      return invite(user, ctx);
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
      try {
        const user = await changeRole(
          deps.db,
          ctx.accountId,
          { userId: ctx.userId, role: ctx.role },
          id,
          request.body.role,
        );
        request.log.info(
          { account_id: ctx.accountId, user_id: id, role: user.role, by: ctx.userId },
          'member role changed',
        );
        await recordAudit(deps.db, auditContextOf(request), {
          action: 'member.role_changed',
          targetId: id,
          detail: { email: user.email, role: user.role },
        });
        return memberView(user, ctx);
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
      try {
        await removeUser(deps.db, ctx.accountId, { userId: ctx.userId, role: ctx.role }, id);
      } catch (err) {
        throw memberError(err);
      }
      request.log.info(
        { account_id: ctx.accountId, user_id: id, by: ctx.userId },
        id === ctx.userId ? 'member left' : 'member removed',
      );
      await recordAudit(deps.db, auditContextOf(request), {
        action: 'member.removed',
        targetId: id,
        detail: { left: id === ctx.userId },
      });
      if (id === ctx.userId) clearSessionCookies(request, reply);
      return reply.code(204).send();
    },
  );
}
