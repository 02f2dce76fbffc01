/**
 * The alert outbox (issue 29 item 1; migration 055): every change of a watch's state that
 * src/watches/health.ts queues (an outage starts, it ends, the watch is paused) is one
 * `watch_alerts` row and one `alert_sends` row per target, written in the same transaction:
 *
 *   target 'email'   the account's members who opted in (src/watches/alert-mail.ts)
 *   target ach_…     an enabled alert channel of the account: a Slack-compatible incoming
 *                    webhook or the signed alert webhook (src/watches/alert-channels.ts)
 *
 * {@link AlertLoop} (worker role, one process at a time: lease {@link ALERT_LEASE}) sends them:
 * - Paced, never silent: per watch and target, at most one message per `paceMinutes`
 *   (WATCH_ALERT_PACE_MINUTES, default 5). Changes that wait meanwhile (a flapping endpoint) go
 *   out together as one summary that lists each of them (src/watches/alert-message.ts), so an
 *   on-call team gets neither a storm nor silence, and the last message always says the state
 *   the watch is in now.
 * - Durable: a row is marked sent only after its target accepted it; a failed send is tried
 *   again on the delivery schedule (+1 m, +5 m, +30 m, +2 h, +6 h, compressed by
 *   DELIVERY_SCHEDULE_SCALE) and given up after the sixth failure; a 429's Retry-After is waited
 *   for without counting a try. A restart loses nothing.
 * - Never in the way of deliveries: its own loop, its own connections and timeouts; the
 *   delivery worker only inserts rows.
 * - Host only: the composed text names a receiver by its host; errors kept in `last_error` are
 *   written by the senders, which never put a URL's path or query in them.
 */
import { randomBytes } from 'node:crypto';
import { newId } from '../common/ids.js';
import type { Logger } from '../common/logger.js';
import { sleep } from '../common/retry.js';
import type { Db, Queryable } from '../db/pool.js';
import { releaseLease, takeLease } from '../retention/lease.js';
import {
  type AlertChange,
  type AlertKind,
  type AlertText,
  type AlertWatch,
  composeAlert,
} from './alert-message.js';

/** The e-mail target of alert_sends.target. */
export const EMAIL_TARGET = 'email';

/**
 * Queue the sends of alert `alertId` in the caller's transaction: one for e-mail, one per
 * enabled alert channel of the account (migration 056). The alert is about a watch (`w.id`
 * `wch_…`) or, for an endpoint's alert (issue 30, migration 092), an endpoint (`ep_…`).
 */
export async function queueAlertSends(
  tx: Queryable,
  alertId: string,
  w: { id: string; account_id: string },
): Promise<void> {
  const { rows } = await tx.query<{ id: string }>(
    `SELECT id FROM alert_channels WHERE account_id = $1 AND enabled ORDER BY id`,
    [w.account_id],
  );
  const endpoint = isEndpointId(w.id);
  for (const target of [EMAIL_TARGET, ...rows.map((r) => r.id)]) {
    await tx.query(
      `INSERT INTO alert_sends (id, alert_id, watch_id, endpoint_id, account_id, target)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [newId('als'), alertId, endpoint ? null : w.id, endpoint ? w.id : null, w.account_id, target],
    );
  }
}

/** An endpoint's id (`ep_…`), as opposed to a watch's: the subject of an alert. */
export function isEndpointId(id: string): boolean {
  return id.startsWith('ep_');
}

/** What a target's sender is given: one composed alert (one change, or a summary). */
export interface AlertMessage {
  accountId: string;
  /** alert_sends.target: 'email' or the channel's id. */
  target: string;
  watch: AlertWatch;
  changes: readonly AlertChange[];
  alert: AlertText;
}

/**
 * A failed send. `retryAfterMs`: the target asked to wait (HTTP 429 Retry-After): not counted
 * as a try. The message is kept in `alert_sends.last_error`: it must hold no URL path or query.
 */
export class AlertSendError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'AlertSendError';
  }
}

/**
 * Sends one composed alert to one kind of target; resolves when it was accepted (or, for e-mail,
 * when there was nobody to send it to), throws (preferably an {@link AlertSendError}) when not.
 */
export type AlertSender = (m: AlertMessage) => Promise<void>;

/** Waits after a failed send, ms, before DELIVERY_SCHEDULE_SCALE: the delivery schedule. */
export const ALERT_RETRY_MS = [60_000, 300_000, 1_800_000, 7_200_000, 21_600_000] as const;

/** The lease one alert sender holds across replicas (maintenance_leases.name). */
export const ALERT_LEASE = 'alerts';

export interface AlertLoopOptions {
  db: Db;
  /** The console's public URL, for the link to the watch (config.console.publicUrl). */
  consoleUrl: string;
  /** WATCH_ALERT_PACE_MINUTES (config.alerts.paceMinutes). */
  paceMinutes: number;
  /** The e-mail target's sender; without it e-mail sends wait in the outbox. */
  email?: AlertSender | undefined;
  /** The alert channels' sender (ach_… targets); without it they wait. */
  channels?: AlertSender | undefined;
  logger: Logger;
  /** Multiplies {@link ALERT_RETRY_MS} (DELIVERY_SCHEDULE_SCALE; default 1). */
  retryScale?: number;
  /** How often the loop looks for due sends, ms (default 5 000). */
  intervalMs?: number;
  /** Groups (watch × target) looked at per run (default 200). */
  batch?: number;
}

/** One watch (or one endpoint, issue 30) and one target: what is paced and summed up. */
interface Group {
  target: string;
  /** The watch's id, or the endpoint's (`ep_…`) for an endpoint's alert. */
  subject: string;
  account_id: string;
}

/** What one run did. */
export interface AlertRunResult {
  /** Messages accepted (a summary counts once). */
  sent: number;
  /** Sends that failed this run (tried again later, or given up). */
  failed: number;
}

/**
 * The worker role's alert sender (module doc). `runOnce` for tests and the loop; `start`/`stop`
 * for the service.
 */
export class AlertLoop {
  private readonly holder = `alerts-${randomBytes(6).toString('hex')}`;
  private loop: Promise<void> | undefined;
  private readonly stopping = new AbortController();
  private wakeUp: (() => void) | undefined;

  constructor(private readonly o: AlertLoopOptions) {}

  /**
   * One pass, now, if this process gets the lease: every due group of sends (one watch and one
   * target, its pace elapsed) becomes one message. @returns the counts, or null without lease.
   */
  async runOnce(): Promise<AlertRunResult | null> {
    const { db } = this.o;
    const every = this.o.intervalMs ?? 5_000;
    if (!(await takeLease(db, ALERT_LEASE, this.holder, Math.max(60_000, 4 * every)))) {
      return null;
    }
    const paceMs = this.o.paceMinutes * 60_000;
    // Due groups only (their backoff over, their pace elapsed, a sender for their target), so
    // the batch is never filled with groups that wait.
    const { rows: groups } = await db.query<Group>(
      // A send is about one watch or one endpoint (migration 092); each subject is paced alone.
      `SELECT g.target, coalesce(g.watch_id, g.endpoint_id) AS subject, g.account_id
         FROM (SELECT s.target, s.watch_id, s.endpoint_id, s.account_id, max(s.due_at) AS due,
                      min(s.created_at) AS first,
                      CASE WHEN s.watch_id IS NOT NULL THEN
                        (SELECT max(l.sent_at) FROM alert_sends l
                          WHERE l.target = s.target AND l.watch_id = s.watch_id
                            AND l.sent_at IS NOT NULL)
                      ELSE
                        (SELECT max(l.sent_at) FROM alert_sends l
                          WHERE l.target = s.target AND l.endpoint_id = s.endpoint_id
                            AND l.sent_at IS NOT NULL AND l.endpoint_id IS NOT NULL)
                      END AS last_sent
                 FROM alert_sends s
                WHERE s.sent_at IS NULL AND s.given_up_at IS NULL
                  AND ((s.target = 'email' AND $3::boolean) OR (s.target <> 'email' AND $4::boolean))
                GROUP BY s.target, s.watch_id, s.endpoint_id, s.account_id) AS g
        WHERE g.due <= now()
          AND (g.last_sent IS NULL OR g.last_sent + make_interval(secs => $2::float8) <= now())
        ORDER BY g.first, g.target, subject
        LIMIT $1`,
      [
        this.o.batch ?? 200,
        paceMs / 1000,
        this.o.email !== undefined,
        this.o.channels !== undefined,
      ],
    );
    const result: AlertRunResult = { sent: 0, failed: 0 };
    for (const g of groups) {
      if (this.stopping.signal.aborted) break;
      const send = g.target === EMAIL_TARGET ? this.o.email : this.o.channels;
      if (!send) continue;
      if (await this.sendGroup(g, send)) result.sent++;
      else result.failed++;
    }
    return result;
  }

  private async sendGroup(g: Group, send: AlertSender): Promise<boolean> {
    const { db } = this.o;
    const { rows } = await db.query<{
      send_id: string;
      tries: number;
      id: string;
      kind: AlertKind;
      message: string;
      created_at: Date;
    }>(
      `SELECT s.id AS send_id, s.tries, a.id, a.kind, a.message, a.created_at
         FROM alert_sends s JOIN watch_alerts a ON a.id = s.alert_id
        WHERE s.target = $1 AND s.sent_at IS NULL AND s.given_up_at IS NULL
          AND (s.watch_id = $2 OR s.endpoint_id = $2)
        ORDER BY a.created_at, a.id`,
      [g.target, g.subject],
    );
    const { rows: ws } = isEndpointId(g.subject)
      ? // An endpoint's alert (issue 30): named by its label and host, with its live watches.
        await db.query<AlertWatch>(
          `SELECT e.id, '' AS address, e.label, e.url AS webhook_url, e.network,
                  json_build_object('id', e.id, 'label', e.label, 'watch_count',
                    (SELECT count(*)::int FROM watches w
                      WHERE w.endpoint_id = e.id AND w.deleted_at IS NULL)) AS endpoint
             FROM endpoints e WHERE e.id = $1`,
          [g.subject],
        )
      : await db.query<AlertWatch>(
          // A watch on an endpoint (issue 30) delivers to the endpoint's URL: its receiver.
          `SELECT w.id, w.address, w.label, COALESCE(ep.url, w.webhook_url) AS webhook_url,
                  w.network
             FROM watches w LEFT JOIN endpoints ep ON ep.id = w.endpoint_id WHERE w.id = $1`,
          [g.subject],
        );
    const watch = ws[0];
    if (!watch || rows.length === 0) return false;
    const changes: AlertChange[] = rows.map((r) => ({
      id: r.id,
      kind: r.kind,
      message: r.message,
      at: new Date(r.created_at),
    }));
    const ids = rows.map((r) => r.send_id);
    const alert = composeAlert(watch, changes, this.o.consoleUrl, this.o.paceMinutes);
    try {
      await send({ accountId: g.account_id, target: g.target, watch, changes, alert });
    } catch (err) {
      const e = err instanceof AlertSendError ? err : undefined;
      const line = (e?.message ?? 'the send failed').slice(0, 300);
      if (e?.retryAfterMs !== undefined) {
        await db.query(
          `UPDATE alert_sends SET last_error = $2,
                  due_at = now() + make_interval(secs => $3::float8 / 1000)
            WHERE id = ANY($1::text[])`,
          [ids, line, e.retryAfterMs],
        );
      } else {
        const tries = Math.max(...rows.map((r) => r.tries)) + 1;
        const wait = ALERT_RETRY_MS[tries - 1];
        await db.query(
          `UPDATE alert_sends SET tries = $2, last_error = $3,
                  due_at = now() + make_interval(secs => $4::float8 / 1000),
                  given_up_at = CASE WHEN $5::boolean THEN now() END
            WHERE id = ANY($1::text[])`,
          [ids, tries, line, (wait ?? 0) * (this.o.retryScale ?? 1), wait === undefined],
        );
      }
      this.o.logger.warn(
        {
          [isEndpointId(g.subject) ? 'endpoint_id' : 'watch_id']: g.subject,
          alert_target: g.target === EMAIL_TARGET ? 'email' : g.target,
          err: line,
        },
        'watch alert not sent',
      );
      return false;
    }
    await db.query('UPDATE alert_sends SET sent_at = now() WHERE id = ANY($1::text[])', [ids]);
    if (g.target === EMAIL_TARGET) {
      await db.query('UPDATE watch_alerts SET mailed_at = now() WHERE id = ANY($1::text[])', [
        changes.map((c) => c.id),
      ]);
    }
    return true;
  }

  /** Run until `signal` aborts or {@link stop}; {@link wake} runs a pass at once. */
  start(signal: AbortSignal): Promise<void> {
    const every = this.o.intervalMs ?? 5_000;
    const both = AbortSignal.any([signal, this.stopping.signal]);
    this.loop = (async () => {
      while (!both.aborted) {
        try {
          const r = await this.runOnce();
          if (r?.sent) this.o.logger.info({ alerts: r.sent }, 'watch alerts sent');
        } catch (err) {
          this.o.logger.warn({ err: (err as Error).message }, 'watch alerts not sent');
        }
        const tick = new AbortController();
        this.wakeUp = () => tick.abort();
        await sleep(every, AbortSignal.any([both, tick.signal]));
        this.wakeUp = undefined;
      }
    })();
    return this.loop;
  }

  /** Look for due sends now (a test button, a new alert in this process). */
  wake(): void {
    this.wakeUp?.();
  }

  /** Stop the loop and give the lease up. */
  async stop(): Promise<void> {
    this.stopping.abort();
    this.wakeUp?.();
    await this.loop;
    await releaseLease(this.o.db, ALERT_LEASE, this.holder).catch(() => undefined);
  }
}

/**
 * Queue one alert in the caller's transaction: its `watch_alerts` row and one `alert_sends` row
 * per target (migration 055): 'email', and each enabled alert channel of the account
 * (src/watches/alert-channels.ts). `message` is one sentence without any URL. `w.id` is a
 * watch's id, or an endpoint's (`ep_…`, migration 092) for an endpoint's alert.
 */
export async function queueAlert(
  tx: Queryable,
  w: { id: string; account_id: string },
  kind: 'failing' | 'recovered' | 'auto_paused',
  message: string,
): Promise<void> {
  const alertId = newId('alr');
  const endpoint = isEndpointId(w.id);
  await tx.query(
    `INSERT INTO watch_alerts (id, watch_id, endpoint_id, account_id, kind, message)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [alertId, endpoint ? null : w.id, endpoint ? w.id : null, w.account_id, kind, message],
  );
  await queueAlertSends(tx, alertId, w);
}
