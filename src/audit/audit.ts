/**
 * The audit log (issue 18 item 5; migration 035): who changed what, when, and from which client
 * address, for every change made through the console or the API.
 *
 * - recordAudit writes one entry. Callers pass the transaction of the change they record
 *   (`tx`), so a change never commits without its entry and an entry never outlives a rolled-back
 *   change; only changes that are not database writes (a test send) or that fail (a wrong
 *   password) are recorded on their own.
 * - Never a secret: the entry's `detail` goes through cleanDetail, which keeps a small flat object
 *   of scalars, drops every member whose name says it holds a credential (secret, token,
 *   password, hash, cipher, authorization, cookie, key material) and redacts any string shaped like
 *   an API key (`tw_live_…`, `tw_test_…`), a webhook secret (`whsec_…`) or a password hash.
 * - Who: {@link AuditContext}; derived from a request in exactly one place (src/audit/actor.ts).
 * - Reading: listAuditLog (the console's page, GET /v1/audit), newest first, keyset-paged on
 *   (at, id) with an opaque cursor, filtered by actor, action and time.
 * - Retention: pruneAuditLog deletes entries older than a cutoff in batches (AUDIT_RETENTION_DAYS,
 *   config.audit.retentionDays; the pruning job calls it).
 */
import { type Environment, environmentOf } from '../common/environment.js';
import { newId } from '../common/ids.js';
import type { Queryable } from '../db/pool.js';

/** Who acted: a console user, an API key, or a part of tronwatch itself. */
export type ActorType = 'user' | 'api_key' | 'system';

export interface AuditActor {
  type: ActorType;
  /**
   * 'user': the user's id (today an account has one login: the account id); 'api_key': the key
   * id (`key_…`); 'system': the part that acted ('cli', 'telegram').
   */
  id: string;
  /** The console session the user acted through (`ses_…`), when there is one. */
  sessionId?: string | null;
  /**
   * A name for people, kept with the entry as it is when they act (issue 29 item 2): default the
   * user's e-mail or the key's prefix and name, read in the INSERT; given when the actor is gone
   * by then (a member who leaves).
   */
  label?: string | null;
}

/** The who and where of an entry. */
export interface AuditContext {
  /** The account the change belongs to; null for a deployment-wide operation (CLI rotation). */
  accountId: string | null;
  actor: AuditActor;
  /** The client address (Fastify's request.ip, which honours TRUST_PROXY); null off HTTP. */
  clientIp: string | null;
  /**
   * The caller's environment as a network (issue 32): the API key's, or the console's switch;
   * recorded on entries about an environment's objects (ENVIRONMENT_ACTIONS), never on others.
   * Absent: none known (the CLI, the Telegram bot, tronwatch itself).
   */
  network?: string | null;
}

/**
 * Actions on an environment's objects (keys, watches, endpoints, events, test transfers): their
 * entries record the environment (migration 090); sign-ins, members and passwords belong to none.
 */
const ENVIRONMENT_ACTIONS = /^(api_key|watch|watches|endpoint|event|events|test_transfer)\./;

/**
 * Every action recorded, with the sentence the console shows. Names are `<thing>.<what happened>`
 * in the field's terms; the filter takes one of them or a group (`watch.*`).
 */
export const AUDIT_ACTIONS = {
  'account.created': 'Account created by the operator (CLI)',
  'account.invited': 'Invitation link made by the operator (CLI)',
  'account.signed_up': 'Signed up',
  'account.invite_accepted': 'Accepted an invitation and set the password',
  'account.password_changed': 'Changed the password',
  'account.password_change_failed': 'Password change refused (wrong current password)',
  'account.password_reset': 'Reset the password from an e-mailed link',
  'member.invited': 'Invited a member',
  'member.role_changed': "Changed a member's role",
  'member.removed': 'Removed a member (or left the account)',
  'member.alert_emails_changed': 'Turned their own alert e-mails on or off',
  'session.signed_in': 'Signed in',
  'session.sign_in_failed': 'Failed sign-in (wrong password or authentication code)',
  'session.signed_out': 'Signed out',
  'session.revoked': 'Revoked a session',
  'session.revoked_others': 'Signed out every other session',
  'two_factor.enabled': 'Turned the second factor (authenticator app) on',
  'two_factor.disabled': 'Turned the second factor off',
  'two_factor.recovery_codes_regenerated': 'Made new recovery codes (the old ones stopped working)',
  'two_factor.recovery_code_used': 'Signed in with a recovery code',
  'two_factor.reset_for_member': "Turned a member's second factor off (lost device)",
  'two_factor.code_locked': "Locked a user's code step after wrong codes",
  'account.two_factor_required': 'Required a second factor of every member',
  'account.two_factor_not_required': 'Stopped requiring a second factor of every member',
  'api_key.created': 'Created an API key',
  'api_key.revoked': 'Revoked an API key',
  'api_key.narrowed': "Narrowed an API key to its maker's lowered role",
  'watch.created': 'Created a watch',
  'watch.deleted': 'Deleted a watch',
  'watch.paused': 'Paused a watch',
  'watch.resumed': 'Resumed a watch',
  'watch.test_sent': 'Sent a test event',
  'watch.updated': 'Edited a watch (webhook URL or label)',
  'watch.secret_rotated': "Rotated a watch's webhook secret",
  'watch.previous_secret_expired': "Ended a secret rotation's grace period",
  'endpoint.created': 'Created an endpoint',
  'endpoint.updated': 'Edited an endpoint (URL, label, on/off or pace)',
  'endpoint.deleted': 'Deleted an endpoint',
  'endpoint.secret_rotated': "Rotated an endpoint's secret",
  'endpoint.previous_secret_expired': "Ended an endpoint secret rotation's grace period",
  'test_transfer.created': 'Test deposit triggered (test mode)',
  'endpoint.paused': 'Switched an endpoint off automatically: its deliveries all failed for days',
  'endpoint.redelivered': "Redelivered an endpoint's dead letters",
  'endpoint.replayed': "Replayed an endpoint's failed deliveries since a time",
  'endpoint.test_sent': 'Sent a test event to an endpoint',
  'event.redelivered': 'Redelivered an event',
  'event.bulk_redelivered': 'Redelivered dead events in bulk',
  'telegram.link_created': 'Created a Telegram connect link',
  'telegram.bound': 'Connected a Telegram chat',
  'telegram.unbound': 'Disconnected the Telegram chat',
  'secrets.rotated': 'Re-encrypted webhook secrets under a new key',
  'retention.pruned': 'Deleted data older than its retention (a pruning pass)',
  'alert_channel.created': 'Added an alert channel (Slack-compatible or signed alert webhook)',
  'alert_channel.updated': 'Edited an alert channel (URL host, on or off)',
  'alert_channel.deleted': 'Removed an alert channel',
  'alert_channel.test_sent': 'Sent a test alert',
} as const;

export type AuditAction = keyof typeof AUDIT_ACTIONS;

/** The action names, for schemas and the console's filter. */
export const AUDIT_ACTION_NAMES = Object.keys(AUDIT_ACTIONS) as AuditAction[];

/** A detail member's value: scalars only (the entry stays small and never nests a payload). */
export type AuditValue = string | number | boolean | null;

export interface AuditEntry {
  action: AuditAction;
  /** What was acted on (`wh_…`, `key_…`, `evt_…`, `ses_…`, a chat id), if one thing. */
  targetId?: string | null;
  /** A small object of scalars; cleaned by cleanDetail before it is stored. */
  detail?: Record<string, AuditValue | undefined>;
}

/** Members kept per entry, characters kept per string. */
const MAX_MEMBERS = 16;
const MAX_STRING = 200;

/** Member names that say they hold a credential: never stored, whatever their value. */
const CREDENTIAL_NAME =
  /secret|token|passw|passphrase|hash|cipher|authori[sz]ation|cookie|credential|^key$|api_?key$|private/i;

/** Strings shaped like a credential: an API key, a webhook secret, a PHC password hash. */
const CREDENTIAL_VALUE =
  /tw_(live|test)_[1-9A-HJ-NP-Za-km-z]{12,}|whsec_[A-Za-z0-9+/=_-]{8,}|\$argon2/;

/** What replaces a credential-shaped string. */
export const REDACTED = '[redacted]';

/**
 * The detail as stored: at most MAX_MEMBERS members, scalars only (anything else dropped), no
 * member named like a credential, strings cut at MAX_STRING characters and any string shaped
 * like a credential replaced by REDACTED. Undefined members are dropped.
 */
export function cleanDetail(
  detail: Record<string, AuditValue | undefined> | undefined,
): Record<string, AuditValue> {
  const out: Record<string, AuditValue> = {};
  if (!detail) return out;
  let n = 0;
  for (const [name, value] of Object.entries(detail)) {
    if (n >= MAX_MEMBERS) break;
    if (value === undefined || CREDENTIAL_NAME.test(name)) continue;
    if (typeof value === 'string') {
      out[name] = CREDENTIAL_VALUE.test(value) ? REDACTED : value.slice(0, MAX_STRING);
    } else if (
      value === null ||
      typeof value === 'boolean' ||
      (typeof value === 'number' && Number.isFinite(value))
    ) {
      out[name] = value;
    } else {
      continue;
    }
    n++;
  }
  return out;
}

/**
 * Write one entry. Pass the transaction of the change it records (see the module doc).
 * The target id is cleaned like a detail string (a credential-shaped one is redacted).
 */
export async function recordAudit(
  db: Queryable,
  ctx: AuditContext,
  entry: AuditEntry,
): Promise<void> {
  const target = entry.targetId ?? null;
  await db.query(
    `INSERT INTO audit_log (id, account_id, actor_type, actor_id, session_id, action, target_id,
                            detail, client_ip, actor_label, network)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9,
             coalesce($10::text, CASE $3::text
               WHEN 'user' THEN (SELECT u.email FROM console_users u WHERE u.id = $4::text)
               WHEN 'api_key' THEN (SELECT k.key_prefix || coalesce(' · ' || k.name, '')
                                      FROM api_keys k WHERE k.id = $4::text)
               ELSE $4::text END), $11)`,
    [
      newId('aud'),
      ctx.accountId,
      ctx.actor.type,
      ctx.actor.id,
      ctx.actor.sessionId ?? null,
      entry.action,
      target === null ? null : CREDENTIAL_VALUE.test(target) ? REDACTED : target.slice(0, 128),
      JSON.stringify(cleanDetail(entry.detail)),
      ctx.clientIp?.slice(0, 64) ?? null,
      ctx.actor.label ?? null,
      ENVIRONMENT_ACTIONS.test(entry.action) ? (ctx.network ?? null) : null,
    ],
  );
}

/**
 * Write several entries of one context in one statement (a batch's changes; the same rows
 * recordAudit would write one by one, in order: ids ascending). Pass the transaction of the
 * changes they record. No entries: nothing.
 */
export async function recordAudits(
  db: Queryable,
  ctx: AuditContext,
  entries: readonly AuditEntry[],
): Promise<void> {
  if (entries.length === 0) return;
  const ids = entries.map(() => newId('aud')).sort();
  await db.query(
    `INSERT INTO audit_log (id, account_id, actor_type, actor_id, session_id, action, target_id,
                            detail, client_ip, actor_label, network)
     SELECT e.id, $1::text, $2::text, $3::text, $4::text, e.action, e.target_id, e.detail::jsonb,
            $5::text,
            coalesce($6::text, CASE $2::text
              WHEN 'user' THEN (SELECT u.email FROM console_users u WHERE u.id = $3::text)
              WHEN 'api_key' THEN (SELECT k.key_prefix || coalesce(' · ' || k.name, '')
                                     FROM api_keys k WHERE k.id = $3::text)
              ELSE $3::text END),
            e.network
       FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
            WITH ORDINALITY AS e(id, action, target_id, detail, network, ord)
      ORDER BY e.ord`,
    [
      ctx.accountId,
      ctx.actor.type,
      ctx.actor.id,
      ctx.actor.sessionId ?? null,
      ctx.clientIp?.slice(0, 64) ?? null,
      ctx.actor.label ?? null,
      ids,
      entries.map((e) => e.action),
      entries.map((e) => {
        const target = e.targetId ?? null;
        return target === null
          ? null
          : CREDENTIAL_VALUE.test(target)
            ? REDACTED
            : target.slice(0, 128);
      }),
      entries.map((e) => JSON.stringify(cleanDetail(e.detail))),
      entries.map((e) => (ENVIRONMENT_ACTIONS.test(e.action) ? (ctx.network ?? null) : null)),
    ],
  );
}

/**
 * A step a domain function runs inside its own transaction, after its change and before COMMIT,
 * with the change's result: how a caller writes the audit entry in the same transaction when the
 * function opens the transaction itself (createWatch, resumeWatch, redeliverEvent, …).
 */
export type InTransaction<T> = (tx: Queryable, result: T) => Promise<void>;

/** The system actors. */
export const CLI_ACTOR: AuditActor = { type: 'system', id: 'cli' };
export const TELEGRAM_ACTOR: AuditActor = { type: 'system', id: 'telegram' };
/**
 * tronwatch itself acting (issue 29 item 2): `login` (a code step locked), `members` (keys revoked
 * or narrowed with their maker's removal or role change), `watch_health` (auto-pause and
 * auto-resume), `retention` (a pruning run).
 */
export const SYSTEM_ACTORS = {
  login: { type: 'system', id: 'login' },
  members: { type: 'system', id: 'members' },
  watchHealth: { type: 'system', id: 'watch_health' },
  retention: { type: 'system', id: 'retention' },
} as const satisfies Record<string, AuditActor>;

/** An entry as the console and GET /v1/audit show it. */
export interface AuditEntryView {
  id: string;
  /** ISO 8601 UTC with microseconds. */
  at: string;
  actor: {
    type: ActorType;
    id: string | null;
    /** A name for people: the user's e-mail, the key's prefix and name; null when unknown. */
    label: string | null;
    session_id: string | null;
  };
  action: string;
  target_id: string | null;
  detail: Record<string, AuditValue>;
  client_ip: string | null;
  /** The environment of the change (issue 32): `live`, `test`, or null (none). */
  environment: Environment | null;
}

export interface AuditPage {
  data: AuditEntryView[];
  /** Pass as `cursor` for the next (older) page; null when there is none. */
  next_cursor: string | null;
}

export interface AuditQuery {
  /** Page size, 1..200. */
  limit: number;
  /** From a previous page's next_cursor. */
  cursor?: string | undefined;
  /** `user`, `api_key`, `system`, or one actor: `<type>:<id>`. */
  actor?: string | undefined;
  /** An action name, or a group `<thing>.*`. */
  action?: string | undefined;
  /** Inclusive lower bound on `at` (ISO 8601 text, as given). */
  since?: string | undefined;
  /** Exclusive upper bound on `at` (ISO 8601 text, as given). */
  until?: string | undefined;
}

/** A filter or cursor the log cannot be read with; `field` names the query member. */
export class AuditQueryError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'AuditQueryError';
  }
}

const ACTOR_RE = /^(user|api_key|system)(?::([A-Za-z0-9_.:-]{1,128}))?$/;
const ACTION_RE = /^[a-z_]{1,40}(\.\*|\.[a-z_]{1,40})$/;
const CURSOR_RE = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)\|(aud_[0-9a-z]{26})$/;

/** The opaque cursor of an entry: base64url of `<at>|<id>`. */
function cursorOf(at: string, id: string): string {
  return Buffer.from(`${at}|${id}`, 'utf8').toString('base64url');
}

function parseCursor(cursor: string): { at: string; id: string } {
  const m = CURSOR_RE.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m?.[1] || !m[2]) throw new AuditQueryError('cursor', 'not a cursor this log gave');
  return { at: m[1], id: m[2] };
}

interface AuditRow {
  id: string;
  at: string;
  actor_type: ActorType;
  actor_id: string | null;
  session_id: string | null;
  action: string;
  target_id: string | null;
  detail: Record<string, AuditValue> | string;
  client_ip: string | null;
  actor_label: string | null;
  network: string | null;
}

/**
 * One page of the account's entries of one environment, newest first (issue 32: nothing mixes).
 * @param network the reader's environment as a network (the API key's, or the console's switch):
 *   its entries (environment `live` for `mainnet`, `test` for `nile`) and the entries that belong
 *   to no environment (sign-ins, members, passwords, account settings: network null).
 *   The other environment's entries are never in the page.
 * @throws AuditQueryError for a malformed actor, action or cursor; the database's 22007/22008
 *   when a time bound is not a timestamp PostgreSQL can hold (the caller answers 400).
 */
export async function listAuditLog(
  db: Queryable,
  accountId: string,
  network: string,
  q: AuditQuery,
): Promise<AuditPage> {
  const values: unknown[] = [accountId, network];
  const where = ['a.account_id = $1', '(a.network = $2 OR a.network IS NULL)'];
  const add = (sql: (p: string) => string, v: unknown) => {
    values.push(v);
    where.push(sql(`$${values.length}`));
  };
  if (q.actor !== undefined) {
    const m = ACTOR_RE.exec(q.actor);
    if (!m) {
      throw new AuditQueryError(
        'actor',
        'must be user, api_key or system, optionally followed by :<id> (api_key:key_…)',
      );
    }
    add((p) => `a.actor_type = ${p}`, m[1]);
    if (m[2] !== undefined) add((p) => `a.actor_id = ${p}`, m[2]);
  }
  if (q.action !== undefined) {
    if (!ACTION_RE.test(q.action)) {
      throw new AuditQueryError(
        'action',
        'must be an action name (watch.created) or a group (watch.*)',
      );
    }
    if (q.action.endsWith('.*')) add((p) => `starts_with(a.action, ${p})`, q.action.slice(0, -1));
    else add((p) => `a.action = ${p}`, q.action);
  }
  if (q.since !== undefined) add((p) => `a.at >= ${p}::text::timestamptz`, q.since);
  if (q.until !== undefined) add((p) => `a.at < ${p}::text::timestamptz`, q.until);
  if (q.cursor !== undefined) {
    const c = parseCursor(q.cursor);
    values.push(c.at, c.id);
    where.push(`(a.at, a.id) < ($${values.length - 1}::text::timestamptz, $${values.length})`);
  }
  values.push(q.limit + 1);
  const { rows } = await db.query<AuditRow>(
    `SELECT a.id, to_char(a.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at,
            a.actor_type, a.actor_id, a.session_id, a.action, a.target_id, a.detail, a.client_ip,
            a.network, coalesce(a.actor_label, CASE a.actor_type
              WHEN 'user' THEN (SELECT u.email FROM console_users u WHERE u.id = a.actor_id)
              WHEN 'api_key' THEN (SELECT k.key_prefix || coalesce(' · ' || k.name, '')
                                     FROM api_keys k WHERE k.id = a.actor_id)
              ELSE a.actor_id
            END) AS actor_label
       FROM audit_log a
      WHERE ${where.join(' AND ')}
      ORDER BY a.at DESC, a.id DESC
      LIMIT $${values.length}`,
    values,
  );
  const more = rows.length > q.limit;
  const page = more ? rows.slice(0, q.limit) : rows;
  const last = page[page.length - 1];
  return {
    data: page.map((r) => ({
      id: r.id,
      at: r.at,
      actor: {
        type: r.actor_type,
        id: r.actor_id,
        label: r.actor_label,
        session_id: r.session_id,
      },
      action: r.action,
      target_id: r.target_id,
      detail: typeof r.detail === 'string' ? JSON.parse(r.detail) : r.detail,
      client_ip: r.client_ip,
      environment: r.network === null ? null : environmentOf(r.network),
    })),
    next_cursor: more && last ? cursorOf(last.at, last.id) : null,
  };
}

/**
 * Retention: delete every entry older than `olderThan`, `batchSize` rows per statement (each its
 * own short transaction, the oldest first through audit_log_at), until none is left.
 * @param olderThan the cutoff instant (now minus AUDIT_RETENTION_DAYS days, say); entries at or
 *   after it are kept.
 * @param batchSize rows per DELETE, a positive integer.
 * @returns how many entries were deleted.
 * @throws RangeError for a batch size that is not a positive integer.
 */
export async function pruneAuditLog(
  db: Queryable,
  olderThan: Date,
  batchSize: number,
): Promise<number> {
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
    throw new RangeError('batch size must be a positive integer');
  }
  let total = 0;
  for (;;) {
    const { rowCount } = await db.query(
      `DELETE FROM audit_log WHERE id IN (
         SELECT id FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2)`,
      [olderThan, batchSize],
    );
    total += rowCount;
    if (rowCount < batchSize) return total;
  }
}

/** The retention cutoff for `days` of retention at `now`: entries before it are pruned. */
export function auditCutoff(days: number, now: Date = new Date()): Date {
  return new Date(now.getTime() - days * 86_400_000);
}
