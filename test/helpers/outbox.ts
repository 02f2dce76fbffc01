/**
 * Outbox fixtures written straight into the schema of migration 002, bypassing the API and the
 * ingester (so a test can also store what the API would refuse, e.g. a private-IP webhook_url):
 * an account, a webhook watch with its secret encrypted by a SecretBox, and events with their
 * PENDING webhook notifications. Event ids come from src/common/ids.ts (eventId: a pure function
 * of watch, tx_id, event_index), like the ingester's.
 */
import { randomBytes } from 'node:crypto';
import { eventId, newId } from '../../src/common/ids.js';
import { newWebhookSecret, type SecretBox } from '../../src/common/secrets.js';
import type { Queryable } from '../../src/db/pool.js';

/** USDT (TRC-20) on mainnet: the watched address of the fixtures and the events' contract. */
export const USDT_CONTRACT = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
export const USDT_CONTRACT_HEX = '41a614f803b6fd780986a42c78ec9c7f77e6ded13c';
/** Two well-formed mainnet addresses used as counterparties. */
export const FROM_ADDRESS = 'TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL';
export const TO_ADDRESS = USDT_CONTRACT;

/** Insert an account; returns its id (acc_…). */
export async function insertAccount(db: Queryable, plan = 'pro'): Promise<string> {
  const id = newId('acc');
  await db.query('INSERT INTO accounts (id, email, plan) VALUES ($1, $2, $3)', [
    id,
    `${id}@example.test`,
    plan,
  ]);
  return id;
}

export interface WebhookWatch {
  watchId: string;
  /** The whsec_ secret as the API would return it once at creation. */
  secret: string;
}

/**
 * Insert an ACTIVE webhook watch on USDT_CONTRACT. `url` is stored as given (not checked).
 * @param opts.secret the plaintext secret (default: a new one); `box` encrypts it.
 */
export async function insertWebhookWatch(
  db: Queryable,
  box: SecretBox,
  opts: { accountId: string; url: string; secret?: string; direction?: string },
): Promise<WebhookWatch> {
  const watchId = newId('wh');
  const secret = opts.secret ?? newWebhookSecret();
  const enc = box.encrypt(secret);
  await db.query(
    `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                          channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block)
     VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', $5, 'webhook', $6, $7, $8, 0)`,
    [
      watchId,
      opts.accountId,
      USDT_CONTRACT,
      USDT_CONTRACT_HEX,
      opts.direction ?? 'incoming',
      opts.url,
      enc.keyId,
      enc.ciphertext,
    ],
  );
  return { watchId, secret };
}

/** What insertEvents stored for one event, as the SPEC Event would show it. */
export interface StoredEvent {
  eventId: string;
  notificationId: string;
  txId: string;
  eventIndex: number;
  blockNumber: number;
  /** Exactly as stored (ms precision). */
  blockTimestamp: Date;
  amountRaw: string;
}

/**
 * Insert `count` USDT events (incoming, to USDT_CONTRACT) for a watch, each with a PENDING
 * webhook notification due at `dueAt` (default now), in one statement pair (fast for thousands).
 * created_at is strictly increasing past every existing event (the events table requires it).
 */
export async function insertEvents(
  db: Queryable,
  opts: { accountId: string; watchId: string; count?: number; dueAt?: Date },
): Promise<StoredEvent[]> {
  const count = opts.count ?? 1;
  const blockTimestamp = new Date(Date.UTC(2026, 0, 15, 12, 30, 45, 123));
  const events: StoredEvent[] = [];
  for (let i = 0; i < count; i++) {
    const txId = randomBytes(32).toString('hex');
    events.push({
      eventId: eventId(opts.watchId, txId, i % 4),
      notificationId: newId('ntf'),
      txId,
      eventIndex: i % 4,
      blockNumber: 79_072_107 + i,
      blockTimestamp,
      amountRaw: (1_500_000n + BigInt(i)).toString(),
    });
  }
  await db.query(
    `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                         block_number, block_timestamp, from_address, to_address, amount_raw,
                         contract, created_at)
     SELECT e.id, $2, $3, 'mainnet', 'incoming', 'USDT', e.tx_id, e.event_index, e.block_number,
            $4, $5, $6, e.amount_raw::numeric, $7,
            base.t + (e.ord * interval '1 microsecond')
       FROM unnest($1::text[], $8::text[], $9::int4[], $10::int8[], $11::text[])
              WITH ORDINALITY AS e(id, tx_id, event_index, block_number, amount_raw, ord),
            (SELECT GREATEST(now(), COALESCE(max(created_at), now())) AS t FROM events) AS base`,
    [
      events.map((e) => e.eventId),
      opts.accountId,
      opts.watchId,
      blockTimestamp,
      FROM_ADDRESS,
      TO_ADDRESS,
      USDT_CONTRACT,
      events.map((e) => e.txId),
      events.map((e) => e.eventIndex),
      events.map((e) => e.blockNumber),
      events.map((e) => e.amountRaw),
    ],
  );
  await db.query(
    `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status,
                                next_attempt_at, created_at)
     SELECT n.id, n.event_id, e.account_id, e.watch_id, 'webhook', 'PENDING',
            COALESCE($3::timestamptz, now()), e.created_at
       FROM unnest($1::text[], $2::text[]) AS n(id, event_id)
       JOIN events e ON e.id = n.event_id`,
    [events.map((e) => e.notificationId), events.map((e) => e.eventId), opts.dueAt ?? null],
  );
  return events;
}

/** A notification row as the tests inspect it. */
export interface NotificationRow {
  id: string;
  status: 'PENDING' | 'DELIVERED' | 'DEAD';
  attempts: number;
  next_attempt_at: Date;
  lease_token: string | null;
  delivered_at: Date | null;
  last_status: number | null;
  last_error: string | null;
}

export async function notification(db: Queryable, id: string): Promise<NotificationRow> {
  const { rows } = await db.query<NotificationRow>(
    `SELECT id, status, attempts, next_attempt_at, lease_token, delivered_at, last_status,
            last_error
       FROM notifications WHERE id = $1`,
    [id],
  );
  const row = rows[0];
  if (!row) throw new Error(`no notification ${id}`);
  return row;
}

/** An attempts row. */
export interface AttemptRow {
  attempt: number;
  started_at: Date;
  duration_ms: number;
  http_status: number | null;
  error: string | null;
}

/** The attempts of a notification, in recording order. */
export async function attemptsOf(db: Queryable, notificationId: string): Promise<AttemptRow[]> {
  const { rows } = await db.query<AttemptRow>(
    `SELECT attempt, started_at, duration_ms, http_status, error
       FROM attempts WHERE notification_id = $1 ORDER BY id`,
    [notificationId],
  );
  return rows;
}

/** Count of notifications per status. */
export async function statusCounts(db: Queryable): Promise<Record<string, number>> {
  const { rows } = await db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int8 AS n FROM notifications GROUP BY status',
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}
