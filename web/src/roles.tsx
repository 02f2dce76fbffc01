/**
 * What the signed-in user's role lets them do on a page (issue 18 item 3). The server decides:
 * every console route declares the least role it needs (`config.consoleRole` in
 * src/console/routes/*.ts) and answers 403 `insufficient_role` below it (src/console/guard.ts).
 * The pages only follow it, hiding the controls of actions the role cannot take and saying so in
 * one muted line; data is never hidden.
 *
 * The least role of each action shown outside Members and Account (src/console/routes/*.ts):
 *   admin      read the audit log
 *   developer  create and revoke API keys; create, edit, pause, resume, delete a watch; send a
 *              test event; rotate a secret and end its grace period; redeliver one or all
 *   viewer     everything else that reads
 *
 * If the role is lowered while a page is open, the server's refusal is explained in words
 * ({@link useRole}'s `explain`) and the session is read again, so the page's controls follow.
 */
import { ApiError, describeError, get } from './api';
import { useApp } from './state';
import type { Me, Role } from './types';

/** The ranking of src/accounts/users.ts (RANK): owner ⊇ admin ⊇ developer ⊇ viewer. */
const RANK: Record<Role, number> = { owner: 3, admin: 2, developer: 1, viewer: 0 };

/** True when `role` grants at least what `needed` does (as the server's roleAtLeast). */
export function roleAtLeast(role: Role, needed: Role): boolean {
  return RANK[role] >= RANK[needed];
}

/** True when `e` is the server's 403 insufficient_role. */
export function isRoleRefusal(e: unknown): e is ApiError {
  return e instanceof ApiError && e.code === 'insufficient_role';
}

/**
 * The sentence for an action refused for the role, to follow "Could not …: " (lower case first,
 * as describeError's server messages). `e.message` is the server's, e.g. "this needs the
 * developer role or higher; yours is viewer".
 */
export function roleRefusalText(e: ApiError): string {
  return `your role does not allow it (${e.message}). An owner or admin of the account can change your role on the Members page.`;
}

export interface RoleView {
  /** The signed-in user's role now (as last read from the server). */
  role: Role;
  /** Whether the role allows an action that needs `needed`. */
  can: (needed: Role) => boolean;
  /**
   * The sentence for a failed action: a role refusal in plain words (and the session is read
   * again, so every control of the page follows the new role), else describeError's.
   */
  explain: (e: unknown) => string;
}

/** The signed-in user's role, for a page's controls (module doc). Inside the signed-in app only. */
export function useRole(): RoleView {
  const { me, setMe } = useApp();
  const role = me.user.role;
  return {
    role,
    can: (needed) => roleAtLeast(role, needed),
    explain: (e) => {
      if (!isRoleRefusal(e)) return describeError(e);
      // The role changed since the page loaded: take the new one. A failure here is left to
      // the next request (a 401 signs out; anything else keeps the page as it is).
      void get<Me>('/session').then(
        (next) => setMe(next),
        () => undefined,
      );
      return roleRefusalText(e);
    },
  };
}

/**
 * One muted line where a form or the controls of a role above the user's would be: "Your role
 * (viewer) can read this account; ask an owner or admin for the developer role to change it."
 * `what` names what the line stands for ("to create and revoke keys"), when the page needs it.
 */
export function RoleNote({ role, needed, what }: { role: Role; needed: Role; what?: string }) {
  return (
    <p class="muted role-note" data-testid="role-note">
      {`Your role (${role}) ${role === 'viewer' ? 'can read this account' : 'does not include this'}; `}
      {`ask an owner or admin for the ${needed} role ${what ?? 'to change it'}.`}
    </p>
  );
}
