/**
 * E-mailing watch alerts (issue 19 item 2) from the `watch_alerts` outbox (migration 043) that
 * src/watches/health.ts fills: a watch's deliveries started failing (at most one per watch per
 * WATCH_ALERT_WINDOW_HOURS), it recovered, or tronwatch paused it.
 *
 * Sending is not wired yet: the e-mail transport and the members' opt-in belong to the team
 * accounts work (src/mail/, issue 18). This module is the one seam to connect: give
 * {@link mailPendingAlerts} a {@link AlertMailer} (the transport) and, once members exist, make
 * {@link alertRecipients} return the members who opted in. Until then the alerts are kept in the
 * outbox (and shown by the console's banner), nothing is lost.
 */
import type { Db } from '../db/pool.js';

/** One alert e-mail to send. */
export interface AlertMail {
  /** Recipients' addresses (never empty). */
  to: string[];
  subject: string;
  /** Plain text body. */
  text: string;
  /** The outbox row, for logs and links. */
  alert: { id: string; watch_id: string; kind: 'failing' | 'recovered' | 'auto_paused' };
}

/** The transport: resolves once the message is accepted, throws when it was not. */
export type AlertMailer = (mail: AlertMail) => Promise<void>;

/**
 * Who gets an account's alerts. Today: the account's own e-mail address. After the team accounts
 * work (issue 18) is merged: the account's members who opted in to delivery alerts.
 */
export async function alertRecipients(db: Db, accountId: string): Promise<string[]> {
  const { rows } = await db.query<{ email: string | null }>(
    'SELECT email FROM accounts WHERE id = $1',
    [accountId],
  );
  return rows.flatMap((r) => (r.email ? [r.email] : []));
}

const SUBJECTS = {
  failing: 'Deliveries to your webhook are failing',
  recovered: 'Deliveries to your webhook recovered',
  auto_paused: 'Your watch was paused: its deliveries kept failing',
} as const;

/**
 * Send the alerts not mailed yet, oldest first, at most `limit`; each is marked mailed once the
 * mailer accepted it (one that fails stays for the next run).
 * @param consoleUrl the console's public URL, for the link to the watch (config.console.publicUrl).
 * @returns how many were sent.
 */
export async function mailPendingAlerts(
  db: Db,
  mailer: AlertMailer,
  consoleUrl: string,
  limit = 100,
): Promise<number> {
  const { rows } = await db.query<{
    id: string;
    watch_id: string;
    account_id: string;
    kind: AlertMail['alert']['kind'];
    message: string;
    address: string;
    label: string | null;
    webhook_url: string | null;
  }>(
    `SELECT a.id, a.watch_id, a.account_id, a.kind, a.message, w.address, w.label, w.webhook_url
       FROM watch_alerts a JOIN watches w ON w.id = a.watch_id
      WHERE a.mailed_at IS NULL ORDER BY a.created_at, a.id LIMIT $1`,
    [limit],
  );
  let sent = 0;
  for (const r of rows) {
    const to = await alertRecipients(db, r.account_id);
    if (to.length > 0) {
      const name = r.label ? `${r.label} (${r.address})` : r.address;
      await mailer({
        to,
        subject: SUBJECTS[r.kind],
        text: [
          `Watch: ${name}`,
          `Endpoint: ${r.webhook_url ?? 'Telegram'}`,
          '',
          r.message,
          '',
          `${consoleUrl.replace(/\/+$/, '')}/console/watches/${encodeURIComponent(r.watch_id)}`,
        ].join('\n'),
        alert: { id: r.id, watch_id: r.watch_id, kind: r.kind },
      });
    }
    await db.query('UPDATE watch_alerts SET mailed_at = now() WHERE id = $1', [r.id]);
    sent++;
  }
  return sent;
}
