/**
 * Who is calling a request, as the HTTP layers establish it and the layers below read it (the
 * audit log's actor, src/audit/actor.ts): `request.auth` for a `/v1/*` (or `/mcp`) request,
 * set by the API key guard (src/api/auth.ts), and `request.console` for a `/console/api/*`
 * request with a session, set by the console guard (src/console/guard.ts).
 *
 * The shapes and the FastifyRequest fields live here, below both layers, so a domain module can
 * read who is calling without importing an HTTP layer (test/unit/layout.test.ts). Types only.
 */
import type {} from 'fastify';
import type { ApiKeyScope } from './keys.js';
import type { Plan, PlanLimits } from './plans.js';
import type { Role } from './users.js';

/** Who is calling: set on `request.auth` for every authenticated `/v1/*` request. */
export interface AuthContext {
  keyId: string;
  accountId: string;
  /**
   * The key's environment as a network (issue 32; src/common/environment.ts): `mainnet` for a
   * `tw_live_` key, `nile` for a `tw_test_` key. Routes act on this network's objects only.
   */
  network: string;
  /** The most the key may do (src/accounts/keys.ts): each /v1 route needs a least role. */
  role: Role;
  plan: Plan;
  /** The limits in force for the account (plan, or the account's own for Business). */
  limits: PlanLimits;
  /**
   * True when the key was looked up in the database for this request. False when it came from
   * the KeyCache: the route's statement must then check the key is not revoked
   * (src/api/auth.ts, module doc).
   */
  verified: boolean;
  /** What the key may do: `full` (also when absent), or `read` (GET only; read-only MCP tools). */
  scope?: ApiKeyScope;
}

/** A console session as listed (never its token): a row of `console_sessions`. */
export interface SessionRow {
  id: string;
  account_id: string;
  /** The user signed in (`usr_…`). */
  user_id: string;
  created_at: Date;
  last_used_at: Date;
  expires_at: Date;
  user_agent: string | null;
  ip: string | null;
}

/** The console caller of a request (null outside /console/api or without a session). */
export interface ConsoleContext {
  session: SessionRow;
  accountId: string;
  /** The signed-in user (`usr_…`). */
  userId: string;
  /** The user's role as of this request. */
  role: Role;
  /**
   * The environment the console shows and changes, as a network (issue 32): `mainnet` (live) or
   * `nile` (test), from the environment switch (src/console/guard.ts consoleNetwork).
   */
  network: string;
  /**
   * The account requires a second factor and the user has none yet (issue 18 item 4): only routes
   * marked `consoleBeforeSecondFactor` answer until one is set up.
   */
  secondFactorMissing: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller of a `/v1/*` request (null elsewhere): src/api/auth.ts. */
    auth: AuthContext | null;
    /** The console caller (null outside /console/api or without a session): src/console/guard.ts. */
    console: ConsoleContext | null;
  }
}

/**
 * The environment a request acts in, as a network (issue 32; src/common/environment.ts): the API
 * key's (`tw_live_` → the live network, `tw_test_` → nile), else the console's switch, else
 * `liveNetwork` (the deployment's network).
 */
export function callerNetwork(
  request: { auth: AuthContext | null; console: ConsoleContext | null },
  liveNetwork: string,
): string {
  return request.auth?.network ?? request.console?.network ?? liveNetwork;
}
