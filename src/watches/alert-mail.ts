/**
 * E-mailing watch alerts (issue 19 item 2) from the `watch_alerts` outbox (migration 043) that
 * src/watches/health.ts fills: a watch's deliveries started failing (at most one per watch per
 * WATCH_ALERT_WINDOW_HOURS), it recovered, or tronwatch paused it.
 *
 * The worker role runs {@link AlertMailLoop} when SMTP_URL is set (src/service.ts). Who gets an
 * alert ({@link alertRecipients}): the account's members who have joined and opted in
 * (`console_users.alert_emails`, migration 047; each member switches it on the Members page;
 * owners and admins start opted in, developers and viewers out). When nobody has opted in, nobody
 * is mailed: that is the members' choice, and the console's banner still shows the alert. Only an
 * account that no member has joined yet (made by the CLI, never signed in to: nobody could
 * choose) falls back to the account's own e-mail address. Without e-mail the alerts stay in the
 * outbox, and the banner shows them.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../common/logger.js';
import { sleep } from '../common/retry.js';
import type { Db } from '../db/pool.js';
import type { Mailer } from '../mail/mailer.js';
import { releaseLease, takeLease } from '../retention/lease.js';

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

/** The lease one alert mailer holds across replicas (maintenance_leases.name). */
export const ALERT_MAIL_LEASE = 'alert-mail';

/**
 * The worker role's alert mailer: every `intervalMs` (default 30 s) the process holding the
 * lease {@link ALERT_MAIL_LEASE} sends the pending alerts through `mailer` (one message per
 * alert, to every recipient {@link alertRecipients} names), so two workers never send the same alert together. A send that
 * fails leaves its alert pending for the next run; errors are logged, never thrown.
 */
export class AlertMailLoop {
  private readonly holder = `alert-mail-${randomBytes(6).toString('hex')}`;
  private loop: Promise<void> | undefined;
  private readonly stopping = new AbortController();

  constructor(
    private readonly o: {
      db: Db;
      mailer: Mailer;
      consoleUrl: string;
      logger: Logger;
      intervalMs?: number;
    },
  ) {}

  /** One run, now, if this process gets the lease. @returns alerts sent, or null without lease. */
  async runOnce(): Promise<number | null> {
    const { db, mailer, consoleUrl } = this.o;
    const every = this.o.intervalMs ?? 30_000;
    if (!(await takeLease(db, ALERT_MAIL_LEASE, this.holder, Math.max(60_000, 2 * every)))) {
      return null;
    }
    return mailPendingAlerts(
      db,
      (m) =>
        mailer.sendNow({
          to: m.to.join(', '),
          subject: m.subject,
          text: m.text,
          html: `<pre style="font-family:inherit;white-space:pre-wrap">${escapeHtml(m.text)}</pre>`,
          kind: `alert_${m.alert.kind}`,
        }),
      consoleUrl,
    );
  }

  /** Run until `signal` aborts or {@link stop}. */
  start(signal: AbortSignal): Promise<void> {
    const every = this.o.intervalMs ?? 30_000;
    const both = AbortSignal.any([signal, this.stopping.signal]);
    this.loop = (async () => {
      while (!both.aborted) {
        try {
          const n = await this.runOnce();
          if (n) this.o.logger.info({ alerts: n }, 'watch alerts mailed');
        } catch (err) {
          this.o.logger.warn({ err: (err as Error).message }, 'watch alerts not mailed');
        }
        await sleep(every, both);
      }
    })();
    return this.loop;
  }

  /** Stop the loop and give the lease up. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    await releaseLease(this.o.db, ALERT_MAIL_LEASE, this.holder).catch(() => undefined);
  }
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const SUBJECTS = {
  failing: 'Deliveries to your webhook are failing',
  recovered: 'Deliveries to your webhook recovered',
  auto_paused: 'Your watch was paused: its deliveries kept failing',
} as const;

/**
 * Send the alerts not mailed yet, oldest first, at most `limit`; each is marked mailed once the
 * mailer accepted it (one that fails stays for the next run), or at once when it has no recipient
 * (every member opted out: it is not kept to be sent later).
 * @param consoleUrl the console's public URL, for the link to the watch (config.console.publicUrl).
 * @returns how many alerts were done with (sent, or without a recipient).
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
