/**
 * E-mailing watch alerts (issue 19 item 2; issue 29 item 1): the e-mail target of the alert
 * outbox (src/watches/alert-outbox.ts) that src/watches/health.ts fills: a watch's deliveries
 * started failing (every outage), they recovered, or tronwatch paused it; several changes that
 * waited for the pace come as one summary. The body names the receiver by its host only.
 *
 * The worker role's alert loop uses it when SMTP_URL is set (src/service.ts). Who gets an
 * alert ({@link alertRecipients}): the account's members who have joined and opted in
 * (`console_users.alert_emails`, migration 047; each member switches it on the Members page;
 * owners and admins start opted in, developers and viewers out). When nobody has opted in, nobody
 * is mailed: that is the members' choice, and the console's banner still shows the alert. Only an
 * account that no member has joined yet (made by the CLI, never signed in to: nobody could
 * choose) falls back to the account's own e-mail address. Without e-mail the alerts stay in the
 * outbox, and the banner shows them.
 */
import type { Db } from '../db/pool.js';
import type { Mailer } from '../mail/mailer.js';
import type { AlertKind } from './alert-message.js';
import { AlertSendError, type AlertSender } from './alert-outbox.js';

/** One alert e-mail to send. */
export interface AlertMail {
  /** Recipients' addresses (never empty). */
  to: string[];
  subject: string;
  /** Plain text body. */
  text: string;
  /** The alerts it carries (one, or several summed up), for logs and tests. */
  alert: {
    /** The watch; null for an endpoint's alert (issue 30), which sets `endpoint_id`. */
    watch_id: string | null;
    endpoint_id?: string;
    ids: string[];
    kinds: AlertKind[];
  };
}

/** The transport: resolves once the message is accepted, throws when it was not. */
export type AlertMailer = (mail: AlertMail) => Promise<void>;

/**
 * Who gets an account's alerts: its members (console_users, migration 030) who have joined and
 * opted in (`alert_emails`, migration 047), whatever their role, ordered by e-mail. An empty list
 * when members have joined but none opted in (their choice: nothing is sent). An account that no
 * member has joined yet (made by the CLI and never signed in to) falls back to its own e-mail
 * address, as nobody could have chosen.
 */
export async function alertRecipients(db: Db, accountId: string): Promise<string[]> {
  const { rows } = await db.query<{ email: string; alert_emails: boolean }>(
    `SELECT email, alert_emails FROM console_users
      WHERE account_id = $1 AND joined_at IS NOT NULL
      ORDER BY email`,
    [accountId],
  );
  if (rows.length > 0) return rows.filter((r) => r.alert_emails).map((r) => r.email);
  const { rows: acc } = await db.query<{ email: string | null }>(
    'SELECT email FROM accounts WHERE id = $1',
    [accountId],
  );
  return acc.flatMap((r) => (r.email ? [r.email] : []));
}

/**
 * The e-mail target of the alert outbox (src/watches/alert-outbox.ts): each composed alert goes to
 * {@link alertRecipients} as one message through `transport`. With nobody to send to (every
 * member opted out) it resolves without sending: the alert is done with, not kept for later.
 * @throws AlertSendError when the transport refused (`SMTP <code>` or the error's code; never
 *   the recipients or the body).
 */
export function emailAlertSender(db: Db, transport: AlertMailer): AlertSender {
  return async (m) => {
    const to = await alertRecipients(db, m.accountId);
    if (to.length === 0) return;
    try {
      await transport({
        to,
        subject: m.alert.subject,
        text: m.alert.text,
        alert: {
          watch_id: m.watch.endpoint ? null : m.watch.id,
          ...(m.watch.endpoint ? { endpoint_id: m.watch.endpoint.id } : {}),
          ids: m.changes.map((c) => c.id),
          kinds: m.changes.map((c) => c.kind),
        },
      });
    } catch (err) {
      const e = err as { code?: unknown; responseCode?: unknown };
      const why =
        typeof e.responseCode === 'number' ? `SMTP ${e.responseCode}` : String(e.code ?? 'error');
      throw new AlertSendError(`e-mail not accepted: ${why}`);
    }
  };
}

/** The SMTP transport of {@link emailAlertSender}: the process's mailer, one message now. */
export function mailerTransport(mailer: Mailer): AlertMailer {
  return (m) =>
    mailer.sendNow({
      to: m.to.join(', '),
      subject: m.subject,
      text: m.text,
      html: `<pre style="font-family:inherit;white-space:pre-wrap">${escapeHtml(m.text)}</pre>`,
      kind: m.alert.kinds.length === 1 ? `alert_${m.alert.kinds[0]}` : 'alert_summary',
    });
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
