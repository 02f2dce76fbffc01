/**
 * The console's e-mails (issue 18 items 1–3), each with a plain-text and an HTML body saying the
 * same thing. Every value put in the HTML is escaped. Links carry their token in the fragment
 * (`#token=…`), which browsers never send to a server, so it cannot land in an access log.
 */
import type { MailMessage } from './mailer.js';

/** `s` with HTML's special characters escaped (text and attribute values). */
export function escapeHtml(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** A simple HTML body: paragraphs, one button-like link, a closing line. */
function html(paragraphs: string[], link: { href: string; label: string }, after: string): string {
  const ps = paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`).join('\n');
  return `<!doctype html>
<html><body style="font-family: system-ui, sans-serif; color: #1f2937; line-height: 1.5">
${ps}
<p><a href="${escapeHtml(link.href)}" style="display: inline-block; padding: 8px 16px; background: #0f766e; color: #ffffff; border-radius: 6px; text-decoration: none">${escapeHtml(link.label)}</a></p>
<p style="color: #6b7280; font-size: 13px">${escapeHtml(after)}</p>
<p style="color: #6b7280; font-size: 13px">If the button does not work, copy this address into your browser: ${escapeHtml(link.href)}</p>
</body></html>`;
}

/** An invitation to join an account's console as `role` (the link sets the password, 7 days). */
export function inviteMessage(o: {
  to: string;
  link: string;
  role: string;
  accountEmail: string;
  invitedBy?: string;
}): MailMessage {
  const who = o.invitedBy ? `${o.invitedBy} invited you` : 'You are invited';
  const intro = `${who} to the tronwatch console of ${o.accountEmail}, as ${o.role}.`;
  const how = 'Open the link below to choose your password and sign in.';
  const after = 'The link works once, within 7 days. If you did not expect it, ignore this e-mail.';
  return {
    kind: 'invite',
    to: o.to,
    subject: 'Your invitation to the tronwatch console',
    text: `${intro}\n\n${how}\n\n${o.link}\n\n${after}\n`,
    html: html([intro, how], { href: o.link, label: 'Accept the invitation' }, after),
  };
}

/** A password reset link (30 minutes, single use). */
export function passwordResetMessage(o: { to: string; link: string }): MailMessage {
  const intro = 'Someone asked to reset the password of your tronwatch console user.';
  const how =
    'Open the link below to choose a new one. Every session of your user is then signed out.';
  const after =
    'The link works once, within 30 minutes. If you did not ask for it, ignore this e-mail: your password stays as it is.';
  return {
    kind: 'password_reset',
    to: o.to,
    subject: 'Reset your tronwatch console password',
    text: `${intro}\n\n${how}\n\n${o.link}\n\n${after}\n`,
    html: html([intro, how], { href: o.link, label: 'Choose a new password' }, after),
  };
}

/**
 * To an address that already has a console user, invited again (issue 27 item 4): the inviter is
 * answered as for any invitation, and the user is told here instead of getting a link. No link:
 * one mailbox signs in to one account.
 */
export function inviteExistingMessage(o: {
  to: string;
  role: string;
  accountEmail: string;
  invitedBy?: string;
  consoleUrl: string;
}): MailMessage {
  const who = o.invitedBy ?? 'A member';
  const intro = `${who} invited this address to the tronwatch console of ${o.accountEmail}, as ${o.role}. This address already signs in to a tronwatch console, and one address belongs to one account, so no invitation link was made.`;
  const how =
    'If you want to join, ask them to invite another address of yours. If you did not expect this, ignore this e-mail: nothing changed for your user.';
  const link = `${o.consoleUrl}/console/`;
  return {
    kind: 'invite_existing',
    to: o.to,
    subject: 'An invitation to a tronwatch console for an address that already has a user',
    text: `${intro}\n\n${how}\n\n${link}\n`,
    html: html([intro, how], { href: link, label: 'Open the console' }, ''),
  };
}

/** What changed in a user's sign-in protection (issue 18 item 4): each is e-mailed to the user. */
export type SecurityEvent =
  | 'two_factor_enabled'
  | 'two_factor_disabled'
  | 'two_factor_reset'
  | 'recovery_code_used'
  | 'recovery_codes_regenerated'
  | 'code_locked'
  | 'password_changed'
  | 'password_reset';

const SECURITY_TEXT: Record<SecurityEvent, { subject: string; what: string }> = {
  two_factor_enabled: {
    subject: 'Two-factor sign-in is on for your tronwatch console user',
    what: 'Two-factor sign-in was turned on for your tronwatch console user: signing in now asks for a code from your authenticator app.',
  },
  two_factor_disabled: {
    subject: 'Two-factor sign-in was turned off for your tronwatch console user',
    what: 'Two-factor sign-in was turned off for your tronwatch console user: your password alone now signs you in.',
  },
  two_factor_reset: {
    subject: 'Two-factor sign-in was turned off for your tronwatch console user',
    what: "An owner of your account (or the deployment's operator) turned off two-factor sign-in for your tronwatch console user, as is done for a lost device. Set up a new device on the Security page.",
  },
  recovery_code_used: {
    subject: 'A recovery code was used to sign in to tronwatch',
    what: 'One of your recovery codes was just used to sign in to your tronwatch console user. It cannot be used again.',
  },
  recovery_codes_regenerated: {
    subject: 'New recovery codes were made for your tronwatch console user',
    what: 'A new set of recovery codes was made for your tronwatch console user: the earlier codes no longer work.',
  },
  code_locked: {
    subject: 'Wrong sign-in codes for your tronwatch console user: code step locked for an hour',
    what: 'Several wrong two-factor codes were typed after your right password, so the code step of your tronwatch console user is locked for an hour. Whoever typed them knows your password.',
  },
  password_changed: {
    subject: 'The password of your tronwatch console user was changed',
    what: 'The password of your tronwatch console user was just changed; every other session of yours was signed out.',
  },
  password_reset: {
    subject: 'The password of your tronwatch console user was reset',
    what: 'The password of your tronwatch console user was just reset from an e-mailed link; every session of yours was signed out.',
  },
};

/**
 * A notice to the user that their sign-in protection changed (turned on or off, a recovery code
 * used), so a change they did not make is noticed. It carries no secret and no token: the link is
 * the console's Security page. @param ip the client address the change came from, when known.
 */
export function securityNoticeMessage(o: {
  to: string;
  event: SecurityEvent;
  consoleUrl: string;
  ip?: string | null;
}): MailMessage {
  const t = SECURITY_TEXT[o.event];
  const from = o.ip ? ` It came from the address ${o.ip}.` : '';
  const intro = `${t.what}${from}`;
  const check =
    'If this was you, nothing more is needed. If it was not, change your password and check your second factor and sessions on the Security page at once, and tell an owner of your account.';
  const link = `${o.consoleUrl}/console/security`;
  const after = 'This e-mail is sent for every change to how you sign in.';
  return {
    kind: `security_${o.event}`,
    to: o.to,
    subject: t.subject,
    text: `${intro}\n\n${check}\n\n${link}\n\n${after}\n`,
    html: html([intro, check], { href: link, label: 'Open the Security page' }, after),
  };
}
