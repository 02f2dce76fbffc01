/**
 * Alert channels of an account (issue 29 item 1; migration 056), beside e-mail:
 *
 * - `slack`: a Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat, Discord's
 *   `/slack` URL, …): POST `{"text": …}` (application/json), 2xx = accepted.
 * - `webhook`: the signed alert webhook, for an on-call tool (PagerDuty/Opsgenie bridges, your
 *   own): POST of {@link AlertWebhookPayload} signed with Standard Webhooks headers
 *   (`webhook-id`, `webhook-timestamp`, `webhook-signature`: src/delivery/standard-webhooks.ts)
 *   by the channel's own `whsec_` secret, made at creation and shown once, stored encrypted
 *   (AES-256-GCM, key id kept for rotation) like a watch's secret.
 *
 * At most one of each kind per account ({@link saveAlertChannel} creates or edits it). Every
 * change writes its audit entry in the same transaction (`alert_channel.*`). A channel's URL
 * follows the webhook URL policy (src/net/url-policy.ts: https, public addresses, re-checked at
 * every connect by the same guarded lookup as deliveries, redirects never followed), and only its
 * host is ever shown: a Slack URL's path is its credential.
 *
 * {@link AlertChannelSender} sends the outbox's messages for channel targets
 * (src/watches/alert-outbox.ts) and the console's test messages, over its own connection pool
 * and deadline, never the delivery worker's.
 */
import { type Agent, request } from 'undici';
import { type AuditContext, recordAudit } from '../audit/audit.js';
import { newId } from '../common/ids.js';
import { newWebhookSecret, type SecretBox } from '../common/secrets.js';
import type { Db, Queryable } from '../db/pool.js';
import { USER_AGENT, webhookAgent } from '../delivery/send.js';
import { standardWebhookHeaders } from '../delivery/standard-webhooks.js';
import type { Mailer } from '../mail/mailer.js';
import type { Resolver } from '../net/dns.js';
import { checkUrlForm, checkWebhookUrl } from '../net/url-policy.js';
import { alertRecipients } from './alert-mail.js';
import { type AlertText, receiverHost } from './alert-message.js';
import { type AlertMessage, AlertSendError, type AlertSender } from './alert-outbox.js';

/** The kinds of alert channel. */
export const ALERT_CHANNEL_KINDS = ['slack', 'webhook'] as const;
export type AlertChannelKind = (typeof ALERT_CHANNEL_KINDS)[number];

/** An alert channel as the console shows it: never its URL beyond the host, never its secret. */
export interface AlertChannelView {
  id: string;
  kind: AlertChannelKind;
  /** The URL's host (and port): all that is shown of it. */
  host: string;
  enabled: boolean;
  created_at: string;
  updated_at: string;
  /** When a message last went out on it; null: never. */
  last_sent_at: string | null;
  /** Messages waiting (paced, or after a failed send). */
  pending: number;
  /** The newest failure of a message still waiting or given up in the last day; null: none. */
  last_error: string | null;
}

/** The console's alert settings (GET /console/api/alert-settings). */
export interface AlertSettings {
  /** WATCH_ALERT_PACE_MINUTES: at most one message per watch and channel in this many minutes. */
  pace_minutes: number;
  email: {
    /** SMTP_URL is set: alert e-mails go out. */
    available: boolean;
    /** Who gets them now (members who opted in; the account's address if none has joined). */
    recipients: string[];
  };
  channels: AlertChannelView[];
}

interface ChannelRow {
  id: string;
  account_id: string;
  kind: AlertChannelKind;
  url: string;
  secret_key_id: string | null;
  secret_ciphertext: Uint8Array | null;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
}

/**
 * A refused change: `invalid_url` (400, with the policy's reason), `not_found` (404), or
 * `email_off` (a test e-mail without SMTP_URL: 503 email_unavailable).
 */
export class AlertChannelError extends Error {
  constructor(
    readonly code: 'invalid_url' | 'not_found' | 'email_off',
    message: string,
  ) {
    super(message);
    this.name = 'AlertChannelError';
  }
}

/** The account's channels, by kind. */
export async function listAlertChannels(
  db: Queryable,
  accountId: string,
): Promise<AlertChannelView[]> {
  const { rows } = await db.query<
    ChannelRow & {
      last_sent_at: Date | null;
      pending: number;
      last_error: string | null;
    }
  >(
    `SELECT c.*,
            (SELECT max(s.sent_at) FROM alert_sends s WHERE s.target = c.id) AS last_sent_at,
            (SELECT count(*)::int FROM alert_sends s
              WHERE s.target = c.id AND s.sent_at IS NULL AND s.given_up_at IS NULL) AS pending,
            (SELECT s.last_error FROM alert_sends s
              WHERE s.target = c.id AND s.last_error IS NOT NULL AND s.sent_at IS NULL
                AND (s.given_up_at IS NULL OR s.given_up_at > now() - interval '1 day')
              ORDER BY s.due_at DESC LIMIT 1) AS last_error
       FROM alert_channels c WHERE c.account_id = $1 ORDER BY c.kind`,
    [accountId],
  );
  return rows.map((r) => ({
    id: r.id,
    kind: r.kind,
    host: receiverHost(r.url) ?? '',
    enabled: r.enabled,
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
    last_sent_at: r.last_sent_at ? new Date(r.last_sent_at).toISOString() : null,
    pending: r.pending,
    last_error: r.last_error,
  }));
}

/** What {@link saveAlertChannel} needs besides the database. */
export interface AlertChannelDeps {
  /** Encrypts the alert webhook's secret (the service's keyring). */
  secrets: SecretBox;
  /** WEBHOOK_ALLOW_CIDRS (config.delivery.allowCidrs). */
  allowCidrs: readonly string[];
  /** Resolves the URL's host at save time (default: the system resolver). */
  resolver?: Resolver | undefined;
}

/**
 * Create the account's channel of `kind`, or edit it: a new `url` (checked by the webhook URL
 * policy, resolving its host) and/or `enabled`. Creating needs `url`; an alert webhook gets its
 * secret then, returned once. Disabling drops the channel's waiting messages (they would be stale
 * when it is enabled again). The audit entry (`alert_channel.created` / `.updated`, with the host
 * and on/off before and after) is written in the same transaction.
 * @returns the channel and, on creation of an alert webhook only, its secret (`whsec_…`).
 * @throws AlertChannelError invalid_url (the URL is missing on creation, or refused: `message`
 *   says why).
 */
export async function saveAlertChannel(
  db: Db,
  deps: AlertChannelDeps,
  input: {
    accountId: string;
    kind: AlertChannelKind;
    url?: string | undefined;
    enabled?: boolean | undefined;
  },
  audit: AuditContext,
): Promise<{ channel: AlertChannelView; secret: string | null; created: boolean }> {
  if (input.url !== undefined) {
    const check = await checkWebhookUrl(input.url, {
      allowCidrs: deps.allowCidrs,
      resolver: deps.resolver,
    });
    if (!check.ok) throw new AlertChannelError('invalid_url', check.reason);
  }
  let secret: string | null = null;
  let created = false;
  await db.transaction(async (tx) => {
    const { rows } = await tx.query<ChannelRow>(
      'SELECT * FROM alert_channels WHERE account_id = $1 AND kind = $2 FOR UPDATE',
      [input.accountId, input.kind],
    );
    const before = rows[0];
    if (!before) {
      if (input.url === undefined) {
        throw new AlertChannelError('invalid_url', 'a URL is needed to add the channel');
      }
      if (input.kind === 'webhook') secret = newWebhookSecret();
      const sealed = secret === null ? null : deps.secrets.encrypt(secret);
      const id = newId('ach');
      await tx.query(
        `INSERT INTO alert_channels (id, account_id, kind, url, secret_key_id, secret_ciphertext,
                                     enabled)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [
          id,
          input.accountId,
          input.kind,
          input.url,
          sealed?.keyId ?? null,
          sealed?.ciphertext ?? null,
          input.enabled ?? true,
        ],
      );
      created = true;
      await recordAudit(tx, audit, {
        action: 'alert_channel.created',
        targetId: id,
        detail: { kind: input.kind, host: receiverHost(input.url), enabled: input.enabled ?? true },
      });
      return;
    }
    const url = input.url ?? before.url;
    const enabled = input.enabled ?? before.enabled;
    await tx.query(
      `UPDATE alert_channels SET url = $2, enabled = $3, updated_at = now() WHERE id = $1`,
      [before.id, url, enabled],
    );
    if (!enabled) {
      await tx.query(
        'DELETE FROM alert_sends WHERE target = $1 AND sent_at IS NULL AND given_up_at IS NULL',
        [before.id],
      );
    }
    await recordAudit(tx, audit, {
      action: 'alert_channel.updated',
      targetId: before.id,
      detail: {
        kind: input.kind,
        host_before: receiverHost(before.url),
        host_after: receiverHost(url),
        url_changed: url !== before.url,
        enabled_before: before.enabled,
        enabled_after: enabled,
      },
    });
  });
  const channel = (await listAlertChannels(db, input.accountId)).find((c) => c.kind === input.kind);
  if (!channel) throw new AlertChannelError('not_found', 'alert channel not found');
  return { channel, secret, created };
}

/**
 * Remove the account's channel of `kind`, its waiting messages with it (sent ones are kept for
 * the record), and write `alert_channel.deleted` in the same transaction.
 * @throws AlertChannelError not_found when the account has no such channel.
 */
export async function deleteAlertChannel(
  db: Db,
  accountId: string,
  kind: AlertChannelKind,
  audit: AuditContext,
): Promise<void> {
  await db.transaction(async (tx) => {
    const { rows } = await tx.query<ChannelRow>(
      'SELECT * FROM alert_channels WHERE account_id = $1 AND kind = $2 FOR UPDATE',
      [accountId, kind],
    );
    const c = rows[0];
    if (!c) throw new AlertChannelError('not_found', 'alert channel not found');
    await tx.query('DELETE FROM alert_sends WHERE target = $1', [c.id]);
    await tx.query('DELETE FROM alert_channels WHERE id = $1', [c.id]);
    await recordAudit(tx, audit, {
      action: 'alert_channel.deleted',
      targetId: c.id,
      detail: { kind, host: receiverHost(c.url) },
    });
  });
}

/**
 * The body of the signed alert webhook (`type` `watch.alert`, or `alert.test` for the console's
 * test), following the Standard Webhooks payload shape `{type, timestamp, data}`. Every text in
 * it is also in the e-mail; none holds a URL's path or query except `console_url`, the console's
 * own page of the watch.
 */
export interface AlertWebhookPayload {
  type: 'watch.alert' | 'alert.test';
  /** When the message was made, ISO 8601. */
  timestamp: string;
  data: {
    /** The watch (null in a test, and in an endpoint's alert). */
    watch: { id: string; address: string; label: string | null } | null;
    /**
     * Additive (issue 30): the endpoint an endpoint's alert is about (one alert for all the
     * watches on it; `watch` is then null), with its live watches; absent otherwise.
     */
    endpoint?: { id: string; label: string | null; watch_count: number };
    /** The receiver's host (and port); null for a chat watch or a test. */
    endpoint_host: string | null;
    /** The watch's state after the last change. */
    state: AlertText['state'] | 'test';
    /** Outages that started among `changes`. */
    outages: number;
    /** More than one change summed up (the pace held them). */
    summary: boolean;
    /** Each change, oldest first; dedupe on `id` (alr_…): a change is in one message per channel. */
    changes: Array<{ id: string; kind: string; message: string; at: string }>;
    subject: string;
    text: string;
    /** The console's page of the watch (`?env=test` for a test-mode one). */
    console_url: string | null;
    /**
     * Additive (issue 32, test mode): false when the alert is about a test-mode watch or
     * endpoint (Nile, `tw_test_` keys; its subject and text are marked `[TEST MODE]` too), true
     * for a live one and for a channel test. An on-call tool that pages on live outages only
     * ignores a `watch.alert` whose `livemode` is not true.
     */
    livemode: boolean;
    /** Additive (issue 32): `live` or `test`, the same as `livemode`, spelled out. */
    environment: 'live' | 'test';
  };
}

/** Slack's mrkdwn escapes (https://api.slack.com/reference/surfaces/formatting#escaping). */
function slackEscape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** What {@link AlertChannelSender} needs. */
export interface AlertChannelSenderOptions {
  db: Db;
  secrets: SecretBox;
  /** Deadline of one request, ms (config.delivery.timeoutMs). */
  timeoutMs: number;
  /** WEBHOOK_ALLOW_CIDRS. */
  allowCidrs: readonly string[];
  /** WEBHOOK_CA_FILE. */
  caFile?: string | undefined;
  /** Connect-time resolver (default: the system's). */
  resolver?: Resolver | undefined;
}

/**
 * Sends alert messages to channels: {@link send} for the outbox, {@link sendTest} for the
 * console's button. One small connection pool with the delivery's address guard.
 */
export class AlertChannelSender {
  private readonly agent: Agent;
  /** Plain-http URLs (inside WEBHOOK_ALLOW_CIDRS only): every answer must be inside it. */
  private readonly httpAgent: Agent;

  /** @throws Error when caFile cannot be read. */
  constructor(private readonly o: AlertChannelSenderOptions) {
    const opts = {
      timeoutMs: o.timeoutMs,
      allowCidrs: o.allowCidrs,
      caFile: o.caFile,
      resolver: o.resolver,
      connections: 4,
    };
    this.agent = webhookAgent(opts);
    this.httpAgent = webhookAgent(opts, 'allow-list');
  }

  /** The outbox's sender for ach_… targets. */
  readonly send: AlertSender = async (m: AlertMessage) => {
    const { rows } = await this.o.db.query<ChannelRow>(
      'SELECT * FROM alert_channels WHERE id = $1',
      [m.target],
    );
    const c = rows[0];
    if (!c?.enabled) throw new AlertSendError('the channel was removed or turned off');
    const payload: AlertWebhookPayload = {
      type: 'watch.alert',
      timestamp: new Date().toISOString(),
      data: {
        watch: m.watch.endpoint
          ? null
          : { id: m.watch.id, address: m.watch.address, label: m.watch.label },
        ...(m.watch.endpoint ? { endpoint: m.watch.endpoint } : {}),
        endpoint_host: m.alert.host,
        state: m.alert.state,
        outages: m.alert.outages,
        summary: m.changes.length > 1,
        changes: m.changes.map((x) => ({
          id: x.id,
          kind: x.kind,
          message: x.message,
          at: x.at.toISOString(),
        })),
        subject: m.alert.subject,
        text: m.alert.text,
        console_url: m.alert.link,
        livemode: m.alert.livemode,
        environment: m.alert.livemode ? 'live' : 'test',
      },
    };
    const last = m.changes[m.changes.length - 1]?.id ?? m.watch.id;
    await this.post(c, payload, `${last}.${m.target}`);
  };

  /**
   * Send a test message on the account's channel of `kind` now (the console's button), outside
   * the outbox. @returns null when accepted, else the reason (one line, host only).
   * @throws AlertChannelError not_found when the account has no such channel.
   */
  async sendTest(accountId: string, kind: AlertChannelKind): Promise<string | null> {
    const { rows } = await this.o.db.query<ChannelRow>(
      'SELECT * FROM alert_channels WHERE account_id = $1 AND kind = $2',
      [accountId, kind],
    );
    const c = rows[0];
    if (!c) throw new AlertChannelError('not_found', 'alert channel not found');
    const subject = 'Test alert from tronwatch';
    const text =
      "This is a test of your tronwatch alert channel. Real alerts say when a watch's deliveries start failing, when they recover, and when a watch is paused.";
    try {
      await this.post(
        c,
        {
          type: 'alert.test',
          timestamp: new Date().toISOString(),
          data: {
            watch: null,
            endpoint_host: null,
            state: 'test',
            outages: 0,
            summary: false,
            changes: [],
            subject,
            text,
            console_url: null,
            livemode: true,
            environment: 'live',
          },
        },
        newId('als'),
      );
      return null;
    } catch (err) {
      return err instanceof AlertSendError ? err.message : 'the send failed';
    }
  }

  /** POST one message to channel `c`. @throws AlertSendError (host only in its message). */
  private async post(
    c: ChannelRow,
    payload: AlertWebhookPayload,
    messageId: string,
  ): Promise<void> {
    const host = receiverHost(c.url) ?? '';
    const form = checkUrlForm(c.url, { allowCidrs: this.o.allowCidrs });
    if (!form.ok) throw new AlertSendError(`refused: ${form.reason}`);
    let body: Buffer;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
    };
    if (c.kind === 'slack') {
      const d = payload.data;
      body = Buffer.from(
        JSON.stringify({ text: `*${slackEscape(d.subject)}*\n${slackEscape(d.text)}` }),
      );
    } else {
      if (!c.secret_ciphertext || !c.secret_key_id)
        throw new AlertSendError('the channel has no secret');
      let secret: string;
      try {
        const ct = c.secret_ciphertext;
        secret = this.o.secrets.decrypt({
          keyId: c.secret_key_id,
          ciphertext: Buffer.from(ct.buffer, ct.byteOffset, ct.byteLength),
        });
      } catch {
        throw new AlertSendError('the channel secret cannot be decrypted (unknown key id)');
      }
      body = Buffer.from(JSON.stringify(payload));
      Object.assign(headers, standardWebhookHeaders(secret, messageId, body, Date.now() / 1000));
    }
    let status: number;
    let retryAfter: string | string[] | undefined;
    try {
      const res = await request(c.url, {
        method: 'POST',
        headers,
        body,
        dispatcher: form.plainHttp ? this.httpAgent : this.agent,
        signal: AbortSignal.timeout(this.o.timeoutMs),
      });
      status = res.statusCode;
      retryAfter = res.headers['retry-after'];
      await res.body.dump({ limit: 65_536 }).catch(() => undefined);
    } catch (err) {
      const e = err as { code?: unknown; name?: unknown };
      const why =
        e.name === 'TimeoutError' || e.name === 'AbortError'
          ? 'timeout'
          : String(e.code ?? e.name ?? 'error');
      throw new AlertSendError(`no answer from ${host}: ${why}`);
    }
    if (status >= 200 && status < 300) return;
    if (status === 429) {
      const s = Number(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
      throw new AlertSendError(
        `${host} answered HTTP 429`,
        (Number.isFinite(s) && s > 0 ? Math.min(s, 3_600) : 60) * 1000,
      );
    }
    throw new AlertSendError(`${host} answered HTTP ${status}`);
  }

  /** Close the connection pool. */
  async close(): Promise<void> {
    await this.agent.close();
    await this.httpAgent.close();
  }
}

/**
 * The Alerts page's test button: send a test alert on `target` now, outside the outbox and the
 * pace, and record `alert_channel.test_sent` (with whether it was accepted).
 * @returns null when accepted, else why not (one line, host only).
 * @throws AlertChannelError not_found (no such channel), email_off (e-mail without a mailer).
 */
export async function sendTestAlert(
  db: Db,
  o: Omit<AlertChannelSenderOptions, 'db'> & { mailer?: Mailer | undefined },
  accountId: string,
  target: 'email' | AlertChannelKind,
  audit: AuditContext,
): Promise<string | null> {
  let error: string | null = null;
  if (target === 'email') {
    const mailer = o.mailer;
    if (!mailer) throw new AlertChannelError('email_off', 'e-mail is off (SMTP_URL is not set)');
    const to = await alertRecipients(db, accountId);
    if (to.length === 0) {
      error = 'nobody gets alert e-mails: every member turned them off (Members page)';
    } else {
      const text =
        "This is a test of your tronwatch alert e-mails. Real alerts say when a watch's deliveries start failing, when they recover, and when a watch is paused.";
      try {
        await mailer.sendNow({
          to: to.join(', '),
          subject: 'Test alert from tronwatch',
          text,
          html: `<p>${text.replace(/'/g, '&#39;')}</p>`,
          kind: 'alert_test',
        });
      } catch (err) {
        const e = err as { responseCode?: unknown; code?: unknown };
        error = `e-mail not accepted: ${typeof e.responseCode === 'number' ? `SMTP ${e.responseCode}` : String(e.code ?? 'error')}`;
      }
    }
  } else {
    const sender = new AlertChannelSender({ ...o, db });
    try {
      error = await sender.sendTest(accountId, target);
    } finally {
      await sender.close();
    }
  }
  await recordAudit(db, audit, {
    action: 'alert_channel.test_sent',
    targetId: target,
    detail: { target, ok: error === null },
  });
  return error;
}
