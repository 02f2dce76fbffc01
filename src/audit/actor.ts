/**
 * Who made a request, for the audit log (src/audit/audit.ts): the one place that derives an
 * entry's actor, account and client address from a request, so that a change of who can act
 * (users with roles, issue 18 item 3) changes this function and nothing else.
 *
 * - A console request with a session (request.console, set by src/console/guard.ts; its shape in
 *   src/accounts/callers.ts, below the HTTP layers): actor 'user', the
 *   signed-in member's id (`usr_…`, src/accounts/users.ts); the session is kept too.
 * - A /v1 request (request.auth, src/api/auth.ts): actor 'api_key', the key's id.
 * - A console request without a session yet (sign-up, sign-in, a failed sign-in, an invitation):
 *   the caller says which login it is about (`login`).
 * The client address is Fastify's request.ip: the socket peer, or behind a proxy named in
 * TRUST_PROXY the address it forwarded.
 */

import type { FastifyRequest } from 'fastify';
import type {} from '../accounts/callers.js';
import type { AuditContext } from './audit.js';

/** The login a sessionless console request is about (sign-up, sign-in, failed sign-in). */
export interface AuditLogin {
  accountId: string;
  /** The console user (`usr_…`). */
  userId: string;
  /** The session the request opened, if it opened one. */
  sessionId?: string | null;
}

/**
 * The audit context of `request`.
 * @param login for a console request that has no session (yet): whose login it concerns; it
 *   takes precedence over the request's session.
 * @throws Error when the request has no caller and no login is given (a programming error: every
 *   audited route is behind the console guard or the /v1 guard).
 */
export function auditContextOf(request: FastifyRequest, login?: AuditLogin): AuditContext {
  const clientIp = request.ip ?? null;
  if (login) {
    return {
      accountId: login.accountId,
      actor: { type: 'user', id: login.userId, sessionId: login.sessionId ?? null },
      clientIp,
    };
  }
  if (request.console) {
    return {
      accountId: request.console.accountId,
      actor: {
        type: 'user',
        id: request.console.userId,
        sessionId: request.console.session.id,
      },
      clientIp,
      network: request.console.network,
    };
  }
  if (request.auth) {
    return {
      accountId: request.auth.accountId,
      actor: { type: 'api_key', id: request.auth.keyId },
      clientIp,
      network: request.auth.network,
    };
  }
  throw new Error('auditContextOf: the request has no caller (no session, no API key)');
}
