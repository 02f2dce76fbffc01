/**
 * Test deposits on demand (issue 32 item 3; `POST /v1/test/transfers`, the console's "Trigger
 * test deposit"): a transfer of a chosen asset, amount, direction and counterparty for a test
 * watch's address, stored as a `transfer.confirmed` event of the test environment with its
 * notification, in one transaction. From there it takes the real path: the outbox, the delivery
 * worker's claim, signing with the watch's (or its endpoint's) secret, the retry schedule, DEAD,
 * redelivery, Telegram; `GET /v1/events` with a test key lists it.
 *
 * What keeps it from ever being money:
 * - only a test watch (network `nile`, src/common/environment.ts) can be named: the watch is
 *   looked up in the caller's environment, and a live key never reaches this function (403
 *   test_mode_only in the route);
 * - the event's network is the watch's (migration 090 ties event, watch, endpoint and
 *   notification to one network), so its body says `network: "nile"`, `livemode: false`, and
 *   its deliveries carry `Tronwatch-Test-Mode: true`;
 * - its `tx_id` is synthetic and says so: `test_` + 59 hex digits (64 characters, like a chain
 *   transaction id, but never a valid one: no chain id starts with `test_`).
 *
 * Event ids stay a pure function of (watch, tx_id, event_index) (DESIGN invariant 2); the tx_id is
 * random, so each call is a new transfer. `created_at` is strictly increasing per account (the
 * paging key, migration 004): calls of one account are serialised by an advisory lock, and each
 * takes max(now, the account's newest event + 1 µs).
 */
import { randomBytes } from 'node:crypto';
import { type Static, Type as T } from '@sinclair/typebox';
import type { InTransaction } from '../audit/audit.js';
import { isLivemode } from '../common/environment.js';
import { ApiError, type FieldError } from '../common/errors.js';
import { eventId, isId, newId } from '../common/ids.js';
import { StringEnum } from '../common/schema.js';
import type { Db } from '../db/pool.js';
import {
  hexToBase58,
  InvalidAddressError,
  NILE_USDT_CONTRACT_BASE58,
  parseAddress,
} from '../tron/address.js';
import { type EventRow, type EventWithDelivery, eventPayload } from './event.js';

/** The counterparty when none is given: TRON's zero address (41 + 20 zero bytes), nobody's. */
export const TEST_COUNTERPARTY = hexToBase58(`41${'00'.repeat(20)}`);

/** Prefix of every synthetic transaction id. */
export const TEST_TX_PREFIX = 'test_';

/** Amounts: a positive decimal with at most 6 fractional digits and 15 integer digits. */
const AMOUNT_RE = /^(0|[1-9][0-9]{0,14})(\.[0-9]{1,6})?$/;

/** `POST /v1/test/transfers`'s body. */
export const CreateTestTransferSchema = T.Object(
  {
    watch_id: T.String({ description: 'A test watch of the caller (`wh_…`).' }),
    amount: T.String({
      pattern: AMOUNT_RE.source,
      description:
        'The amount as a decimal string (`"25"`, `"1.5"`, at most 6 decimals), more than 0.',
      examples: ['25.5'],
    }),
    asset: T.Optional(
      StringEnum(['USDT', 'TRX'] as const, {
        description:
          "Default: the watch's asset_filter, or USDT when it is ALL. Must be one the watch's filter takes.",
      }),
    ),
    direction: T.Optional(
      StringEnum(['incoming', 'outgoing'] as const, {
        description:
          "The side of the watched address: `incoming` (a deposit to it, the default) or `outgoing` (a payment from it). Must be one the watch's direction takes.",
      }),
    ),
    counterparty: T.Optional(
      T.String({
        maxLength: 128,
        description: `The other side's TRON address (base58 or 41-hex). Default: ${TEST_COUNTERPARTY} (the zero address).`,
      }),
    ),
  },
  {
    $id: 'CreateTestTransfer',
    additionalProperties: false,
    description:
      'A test deposit (test mode only): a transfer that never happened on any chain, delivered as a `transfer.confirmed` event with `livemode: false`.',
  },
);
export type CreateTestTransferBody = Static<typeof CreateTestTransferSchema>;

/** The watch columns a test transfer needs. */
interface TestWatchRow {
  id: string;
  account_id: string;
  network: string;
  address_hex: string;
  asset_filter: 'USDT' | 'TRX' | 'ALL';
  direction: 'incoming' | 'outgoing' | 'both';
  channel: 'webhook' | 'telegram';
  status: 'ACTIVE' | 'PAUSED';
  head: string | number | null;
}

/** `"1.5"` → `"1500000"` (6 decimals); exact, no floating point. */
export function amountRaw(amount: string): string {
  const [whole = '0', frac = ''] = amount.split('.');
  const raw = `${whole}${frac.padEnd(6, '0')}`.replace(/^0+/, '');
  return raw === '' ? '0' : raw;
}

/**
 * Create a test transfer for `accountId`'s test watch and queue its delivery.
 * @param network the caller's environment; must be a test one (not mainnet).
 * @param inTx run in the transaction with the event (the audit entry).
 * @returns the event as `GET /v1/events` shows it (delivery PENDING, 0 attempts).
 * @throws ApiError 403 test_mode_only (a live environment), 404 (no such live watch of the caller
 *   in this environment, or a malformed id), 409 (the watch is paused), 400 with `details` (an
 *   amount of 0, an asset or direction the watch does not take, a bad counterparty).
 */
export async function createTestTransfer(
  db: Db,
  accountId: string,
  network: string,
  body: CreateTestTransferBody,
  inTx?: InTransaction<EventWithDelivery>,
): Promise<EventWithDelivery> {
  if (isLivemode(network)) {
    throw ApiError.coded(
      'test_mode_only',
      'test transfers are for test mode only: use a tw_test_ key (or switch the console to test mode)',
    );
  }
  if (!isId(body.watch_id, 'wh')) throw new ApiError(404, 'watch not found');
  const problems: FieldError[] = [];
  const raw = AMOUNT_RE.test(body.amount) ? amountRaw(body.amount) : '0';
  if (raw === '0') {
    problems.push({ field: 'amount', message: 'a positive decimal, at most 6 decimals' });
  }
  let counterpartyHex = `41${'00'.repeat(20)}`;
  if (body.counterparty !== undefined) {
    try {
      counterpartyHex = parseAddress(body.counterparty).hex;
    } catch (err) {
      if (!(err instanceof InvalidAddressError)) throw err;
      problems.push({ field: 'counterparty', message: err.message });
    }
  }
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<TestWatchRow>(
      `SELECT w.id, w.account_id, w.network, w.address_hex, w.asset_filter, w.direction,
              w.channel, w.status,
              (SELECT h.head_block_number FROM chain_head h WHERE h.network = w.network) AS head
         FROM watches w
        WHERE w.id = $1 AND w.account_id = $2 AND w.network = $3 AND w.deleted_at IS NULL`,
      [body.watch_id, accountId, network],
    );
    const w = rows[0];
    if (!w) throw new ApiError(404, 'watch not found');
    const asset = body.asset ?? (w.asset_filter === 'ALL' ? 'USDT' : w.asset_filter);
    if (w.asset_filter !== 'ALL' && w.asset_filter !== asset) {
      problems.push({
        field: 'asset',
        message: `the watch's asset_filter is ${w.asset_filter}: it would not match a ${asset} transfer`,
      });
    }
    const direction = body.direction ?? (w.direction === 'outgoing' ? 'outgoing' : 'incoming');
    if (w.direction !== 'both' && w.direction !== direction) {
      problems.push({
        field: 'direction',
        message: `the watch's direction is ${w.direction}: it would not match an ${direction} transfer`,
      });
    }
    if (problems.length > 0) throw new ApiError(400, 'invalid request body', undefined, problems);
    if (w.status !== 'ACTIVE') {
      throw new ApiError(409, 'the watch is paused: resume it to receive test transfers');
    }
    // One account's test transfers one at a time: created_at strictly increasing (module doc).
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`tw_test_transfer:${accountId}`]);
    const txId = `${TEST_TX_PREFIX}${randomBytes(30).toString('hex').slice(0, 59)}`;
    const watched = hexToBase58(w.address_hex);
    const other = hexToBase58(counterpartyHex);
    const id = eventId(w.id, txId, 0);
    const ntf = newId('ntf');
    const { rows: inserted } = await tx.query<EventRow & { notification_created_at: Date }>(
      `WITH base AS (
         SELECT GREATEST(clock_timestamp(),
                         COALESCE((SELECT max(created_at) FROM events WHERE account_id = $2)
                                  + interval '1 microsecond', clock_timestamp())) AS t
       ), ins AS (
         INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                             event_index, block_number, block_timestamp, from_address, to_address,
                             amount_raw, contract, proof, created_at)
         SELECT $1, $2, $3, $4, $5, $6, $7, 0, $8, date_trunc('milliseconds', clock_timestamp()),
                $9, $10, $11::numeric, $12, 'test', base.t
           FROM base
         RETURNING *
       ), n AS (
         INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                    next_attempt_at, created_at, network)
         SELECT $13, ins.id, ins.account_id, ins.watch_id, $14, 'PENDING', 0, now(),
                ins.created_at, ins.network
           FROM ins
         RETURNING created_at
       )
       SELECT ins.id, ins.account_id, ins.watch_id, ins.network, ins.direction, ins.asset,
              ins.tx_id, ins.event_index, ins.block_number::int8 AS block_number,
              ins.block_timestamp, ins.from_address, ins.to_address,
              ins.amount_raw::text AS amount_raw, ins.contract, ins.proof, ins.created_at,
              n.created_at AS notification_created_at
         FROM ins, n`,
      [
        id,
        accountId,
        w.id,
        w.network,
        direction,
        asset,
        txId,
        Number(w.head ?? 0),
        direction === 'incoming' ? other : watched,
        direction === 'incoming' ? watched : other,
        raw,
        asset === 'USDT' ? NILE_USDT_CONTRACT_BASE58 : null,
        ntf,
        w.channel,
      ],
    );
    const row = inserted[0];
    if (!row) throw new Error('INSERT … RETURNING returned no row');
    const event: EventWithDelivery = {
      ...eventPayload({ ...row, block_number: Number(row.block_number) }),
      delivery: {
        notification_id: ntf,
        status: 'PENDING',
        attempts: 0,
        created_at: row.notification_created_at.toISOString(),
        // A test deposit carries no money: never held (issue 36 item 5).
        held: null,
      },
    };
    await inTx?.(tx, event);
    return event;
  });
}
