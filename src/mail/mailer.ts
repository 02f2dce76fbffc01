/**
 * E-mail (issue 18 item 1): one outgoing mailer per process, through nodemailer's SMTP transport
 * (SMTP_URL: `smtp://user:pass@host:587`, upgraded with STARTTLS when the server offers it, or
 * `smtps://…:465`), from MAIL_FROM. Any module sends through it: console invitations and password
 * resets (src/mail/messages.ts), alert e-mails.
 *
 * The promises it keeps:
 * - `send()` never blocks the caller and never throws: the message is queued in the process and
 *   sent in the background, so a slow or absent SMTP server never slows a request, and a request's
 *   answer never depends on it (a password reset answers the same whether a mail went out).
 * - Sending is retried: a transient failure (connection refused or lost, timeout, a 4xx reply:
 *   greylisting, a full queue) is tried again after a backoff with full jitter (src/common/retry.ts),
 *   up to `attempts` tries (default 6: about 30 s to 1 min in total); a 5xx reply (the server
 *   refuses this message or recipient for good) is not. A message that fails for good is logged and
 *   counted, and dropped: the queue is in memory, a restart loses what it held (the user asks again).
 * - Nothing secret is logged: the log lines carry the message's `kind` (invite, password_reset, …),
 *   the attempt and the SMTP error's code and reply code, never the recipient, the subject, the
 *   body or its links (they hold tokens).
 */
import { createTransport } from 'nodemailer';
import type { Logger } from '../common/logger.js';
import { backoffDelay, sleep } from '../common/retry.js';

/** One e-mail: both bodies say the same thing (plain text for every client, HTML for most). */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
  /** What it is (invite, password_reset, alert, …): the only thing about it that is logged. */
  kind: string;
}

/** The part of nodemailer's transporter the mailer uses (tests may give their own). */
export interface MailTransport {
  sendMail(m: {
    from: string;
    to: string;
    subject: string;
    text: string;
    html: string;
  }): Promise<unknown>;
  close(): void;
}

export interface MailerOptions {
  /** SMTP_URL (smtp:// or smtps://), or a transport. */
  transport: string | MailTransport;
  /** MAIL_FROM: `Name <address>` or an address. */
  from: string;
  logger: Logger;
  /** Tries per message, the first included (default 6). */
  attempts?: number;
  /** First backoff before jitter, ms (default 1 000); doubles per try up to `capMs`. */
  baseMs?: number;
  /** Largest backoff, ms (default 30 000). */
  capMs?: number;
  /** Deadline of one SMTP conversation stage, ms (connect, greeting, each reply; default 20 000). */
  timeoutMs?: number;
}

/** Whether an SMTP failure may pass on a later try: not a 5xx reply (RFC 5321 §4.2.1). */
export function transientMailError(err: unknown): boolean {
  const code = (err as { responseCode?: unknown } | null)?.responseCode;
  return !(typeof code === 'number' && code >= 500 && code < 600);
}

/** The outgoing mailer (module doc). `send` queues; `idle` waits for the queue; `close` ends. */
export class Mailer {
  private readonly transport: MailTransport;
  private readonly pending = new Set<Promise<void>>();
  private readonly stop = new AbortController();
  private readonly attempts: number;
  /** Messages handed to the SMTP server, and given up after the last try (since start). */
  readonly counts = { sent: 0, failed: 0 };

  constructor(private readonly o: MailerOptions) {
    const timeout = o.timeoutMs ?? 20_000;
    this.transport =
      typeof o.transport === 'string'
        ? createTransport(o.transport, {
            connectionTimeout: timeout,
            greetingTimeout: timeout,
            socketTimeout: timeout,
          } as never)
        : o.transport;
    this.attempts = Math.max(1, o.attempts ?? 6);
  }

  /** Queue `message` for sending in the background (never throws, never waits for the server). */
  send(message: MailMessage): void {
    if (this.stop.signal.aborted) {
      this.o.logger.warn({ mail: message.kind }, 'mail not sent: the mailer is closed');
      return;
    }
    const p = this.deliver(message).finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /**
   * Send `message` once, now, and wait for the SMTP server's answer: for callers that keep their
   * own outbox and retry on their next run (watch alerts, src/watches/alert-mail.ts).
   * @throws the transport's error (nothing is retried here); Error when the mailer is closed.
   */
  async sendNow(message: MailMessage): Promise<void> {
    if (this.stop.signal.aborted) throw new Error('the mailer is closed');
    await this.transport.sendMail({
      from: this.o.from,
      to: message.to,
      subject: message.subject,
      text: message.text,
      html: message.html,
    });
    this.counts.sent++;
    this.o.logger.info({ mail: message.kind, attempt: 1 }, 'mail sent');
  }

  /** Resolves when every message queued so far is sent or given up (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  /** Stop retrying (messages between tries are dropped), wait for sends in flight, close. */
  async close(): Promise<void> {
    this.stop.abort();
    await this.idle();
    this.transport.close();
  }

  private async deliver(m: MailMessage): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.transport.sendMail({
          from: this.o.from,
          to: m.to,
          subject: m.subject,
          text: m.text,
          html: m.html,
        });
        this.counts.sent++;
        this.o.logger.info({ mail: m.kind, attempt }, 'mail sent');
        return;
      } catch (err) {
        const e = err as { code?: unknown; responseCode?: unknown };
        const retry =
          transientMailError(err) && attempt < this.attempts && !this.stop.signal.aborted;
        this.o.logger.warn(
          { mail: m.kind, attempt, code: e.code, smtp_code: e.responseCode, will_retry: retry },
          'mail not sent',
        );
        if (!retry) {
          this.counts.failed++;
          return;
        }
        await sleep(
          backoffDelay(attempt, { baseMs: this.o.baseMs ?? 1_000, capMs: this.o.capMs ?? 30_000 }),
          this.stop.signal,
        );
        if (this.stop.signal.aborted) {
          this.counts.failed++;
          return;
        }
      }
    }
  }
}

/** The process's mailer from config (`mail.smtpUrl`), or undefined when e-mail is off. */
export function createMailer(
  cfg: { smtpUrl: string | undefined; from: string },
  logger: Logger,
): Mailer | undefined {
  return cfg.smtpUrl ? new Mailer({ transport: cfg.smtpUrl, from: cfg.from, logger }) : undefined;
}
