/**
 * The console's request guard (SPEC §Authentication, Console; §Errors, Console errors; DESIGN
 * "The console"), for every route under `/console/api/`:
 *
 * - Session: the HttpOnly cookie `tw_session` names a live session (sessions.ts useSession, which
 *   also slides its expiry). Routes that need one and get none answer 401 `no_session`.
 * - CSRF (double submit, bound to the session): every state-changing request (anything but GET,
 *   HEAD, OPTIONS) must carry `X-CSRF-Token` equal to the `tw_csrf` cookie, compared in constant
 *   time; with a session, that cookie must also be the session's own token (its SHA-256 is
 *   stored), so a cookie planted by a sibling subdomain does not pass. Otherwise 403
 *   `csrf_mismatch`. Login and sign-up are state-changing too: the page gets a pre-session
 *   `tw_csrf` from GET /console/api/session before it posts them.
 * - Role (issue 18 item 3): every route that is not public declares the least role it needs
 *   (`config.consoleRole`: viewer, developer, admin, owner; src/accounts/users.ts); the session's
 *   user must hold at least that role now, or 403 insufficient_role. A route that declares
 *   neither `consolePublic` nor `consoleRole` is refused when it is registered, so none is left
 *   unchecked.
 * - Second factor (issue 18 item 4): when the user's account requires a second factor and the user
 *   has none, every route but those marked `consoleBeforeSecondFactor` (session, sign-out, the
 *   set-up itself) answers 403 `two_factor_setup_required`, so a password alone reaches nothing.
 *
 * Cookies: Path=/console, SameSite=Lax, HttpOnly for the session; Secure, except on plain-http
 * loopback (a developer's http://127.0.0.1:8080), where a browser would drop a Secure cookie.
 */
import { timingSafeEqual } from 'node:crypto';
import type {} from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ConsoleContext } from '../accounts/callers.js';
import { type Role, roleAtLeast } from '../accounts/users.js';
import type { App } from '../api/types.js';
import { TEST_NETWORK } from '../common/environment.js';
import { ApiError } from '../common/errors.js';
import type { Db } from '../db/pool.js';
import { newToken, tokenHash, useSession } from './sessions.js';

export const SESSION_COOKIE = 'tw_session';
export const CSRF_COOKIE = 'tw_csrf';
export const CSRF_HEADER = 'x-csrf-token';
/**
 * The console's environment switch (issue 32): cookie `tw_env` = `test` shows and changes the
 * test environment (Nile: test keys, test watches, test events); absent or anything else, the
 * live one. Set by the page (not HttpOnly: the page's switch writes it), Path=/console.
 */
export const ENV_COOKIE = 'tw_env';
/**
 * The environment a console page was loaded in (`live` or `test`), sent by the page with every
 * request (web/src/api.ts). When the switch moved since (another tab or window of the same
 * browser set `tw_env`), the request is refused with 409 `environment_changed` and the page
 * reloads: a page still showing test mode never creates a live key, watch or endpoint, nor the
 * reverse. Requests without it (scripts, older pages) follow the cookie alone.
 */
export const ENV_HEADER = 'x-tronwatch-environment';
const COOKIE_PATH = '/console';

export type { ConsoleContext } from '../accounts/callers.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A console route that works without a session (config, session, sign-up, login, invite). */
    consolePublic?: boolean;
    /** The least role a console route needs (every non-public console route declares one). */
    consoleRole?: Role;
    /**
     * A route a user may call while their account requires a second factor they have not set up
     * (reading the session, signing out, setting the second factor up).
     */
    consoleBeforeSecondFactor?: boolean;
  }
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Whether cookies may lack Secure: plain http to a loopback host name. */
function insecureLoopback(request: FastifyRequest): boolean {
  return request.protocol === 'http' && LOOPBACK_HOSTS.has(request.hostname.toLowerCase());
}

/** Cookie attributes of the console's cookies for this request. */
export function cookieOptions(request: FastifyRequest, httpOnly: boolean, maxAgeSeconds?: number) {
  return {
    path: COOKIE_PATH,
    httpOnly,
    sameSite: 'lax' as const,
    secure: !insecureLoopback(request),
    ...(maxAgeSeconds !== undefined ? { maxAge: maxAgeSeconds } : {}),
  };
}

/** Set the session's cookies (login, sign-up, invitation). */
export function setSessionCookies(
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  csrf: string,
): void {
  // No Max-Age: the server's sliding expiry decides; the cookies last the browser session or
  // until the server refuses them.
  reply.setCookie(SESSION_COOKIE, token, cookieOptions(request, true));
  reply.setCookie(CSRF_COOKIE, csrf, cookieOptions(request, false));
}

/** Clear the session cookie and give the page a fresh pre-session CSRF token (logout). */
export function clearSessionCookies(request: FastifyRequest, reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, cookieOptions(request, true));
  reply.setCookie(CSRF_COOKIE, newToken(), cookieOptions(request, false));
}

/** Give the page a `tw_csrf` cookie if it has none (GET /console/api/session). */
export function ensureCsrfCookie(request: FastifyRequest, reply: FastifyReply): void {
  if (!request.cookies[CSRF_COOKIE]) {
    reply.setCookie(CSRF_COOKIE, newToken(), cookieOptions(request, false));
  }
}

function equalConstantTime(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The environment a console request is in, as a network: TEST_NETWORK when its `tw_env` cookie
 * says `test`, else `liveNetwork` (the deployment's network).
 */
export function consoleNetwork(request: FastifyRequest, liveNetwork: string): string {
  return request.cookies[ENV_COOKIE] === 'test' ? TEST_NETWORK : liveNetwork;
}

/** The console caller, for routes that need one. @throws ApiError 401 no_session. */
export function requireSession(request: FastifyRequest): ConsoleContext {
  if (!request.console) throw ApiError.coded('no_session', 'sign in to the console');
  return request.console;
}

/**
 * Register the guard on `app` for `/console/api/*`: find the session, then check CSRF on
 * state-changing requests. A route without `consolePublic` and without a session gets 401
 * no_session (before CSRF, so an expired session reads as such).
 */
export function registerConsoleGuard(
  app: App,
  deps: { db: Db; sessionTtlSeconds: number; network: string },
): void {
  app.decorateRequest('console', null);
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/console/api/')) return;
    const config = route.config as { consolePublic?: boolean; consoleRole?: Role } | undefined;
    if (config?.consolePublic !== true && config?.consoleRole === undefined) {
      throw new Error(`console route ${route.method} ${route.url} declares no consoleRole`);
    }
  });
  app.addHook('onRequest', async (request) => {
    const path = request.routeOptions.url;
    if (path === undefined || !path.startsWith('/console/api/')) return;
    const token = request.cookies[SESSION_COOKIE];
    let csrfHash: string | undefined;
    if (token) {
      const found = await useSession(deps.db, token, deps.sessionTtlSeconds);
      if (found) {
        request.console = {
          session: found.session,
          accountId: found.session.account_id,
          userId: found.session.user_id,
          role: found.role,
          network: consoleNetwork(request, deps.network),
          secondFactorMissing: found.secondFactorMissing,
        };
        csrfHash = found.csrfHash;
      }
    }
    if (!request.console && request.routeOptions.config?.consolePublic !== true) {
      throw ApiError.coded('no_session', 'sign in to the console (no session, or it expired)');
    }
    const pageEnv = request.headers[ENV_HEADER];
    if (typeof pageEnv === 'string' && pageEnv !== '') {
      const now = request.cookies[ENV_COOKIE] === 'test' ? 'test' : 'live';
      if (pageEnv !== now) {
        throw ApiError.coded(
          'environment_changed',
          `this page is in ${pageEnv === 'test' ? 'test' : 'live'} mode, but the console was switched to ${now} mode (in another tab or window): reload the page`,
        );
      }
    }
    if (!SAFE_METHODS.has(request.method)) checkCsrf(request, csrfHash);
    if (
      request.console?.secondFactorMissing &&
      request.routeOptions.config?.consoleBeforeSecondFactor !== true &&
      request.routeOptions.config?.consolePublic !== true
    ) {
      throw ApiError.coded(
        'two_factor_setup_required',
        'this account requires a second factor: set one up on the Security page first',
      );
    }
    const needed = request.routeOptions.config?.consoleRole;
    if (request.console && needed !== undefined && !roleAtLeast(request.console.role, needed)) {
      throw ApiError.coded(
        'insufficient_role',
        `this needs the ${needed} role or higher; yours is ${request.console.role}`,
      );
    }
  });
}

/** Double-submit CSRF check bound to the session (module doc). @throws 403 csrf_mismatch. */
function checkCsrf(request: FastifyRequest, csrfHash: string | undefined): void {
  const header = request.headers[CSRF_HEADER];
  const cookie = request.cookies[CSRF_COOKIE];
  const ok =
    typeof header === 'string' &&
    typeof cookie === 'string' &&
    cookie !== '' &&
    equalConstantTime(header, cookie) &&
    (csrfHash === undefined || equalConstantTime(tokenHash(cookie), csrfHash));
  if (!ok) {
    throw ApiError.coded(
      'csrf_mismatch',
      'X-CSRF-Token must equal the tw_csrf cookie of this session',
    );
  }
}
