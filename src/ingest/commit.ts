/**
 * The ingest transaction (DESIGN data flow, invariant 2): for one solidified block, match active
 * watches, insert the events and their notifications (the transactional outbox) and advance the
 * cursor, all in ONE transaction. The cursor row is locked first and must sit at block-1, so a
 * second ingester (or a retry after a crash) can neither skip nor repeat a block; event ids are
 * derived from (watch, tx_id, event_index) and inserted with ON CONFLICT DO NOTHING, so even a
 * cursor moved back by hand cannot duplicate an event.
 *
 * Each event copies its watch's `metadata` (migration 085) in the same statement, so the payload
 * delivered and listed says what the watch said when the transfer was matched.
 *
 * events.created_at is unique and strictly increasing: base = max(now(), last_event_at + 1 µs),
 * then +1 µs per event in block order, so GET /v1/events pages exactly (invariant 8).
 */
import { eventId, newId } from '../common/ids.js';
import type { Db, Queryable } from '../db/pool.js';
import { hexToBase58 } from '../tron/address.js';
import type { BlockRef, Transfer } from '../tron/types.js';
import { BlockCheckError } from '../tron/verify.js';
import { candidateAddresses, type Match, matchTransfers, type WatchMatchRow } from './match.js';

/** The cursor is not at block-1: another ingester advanced it, or the caller is confused. */
export class CursorMovedError extends Error {
  readonly retryable = false;
  constructor(
    readonly expected: number,
    readonly actual: number | undefined,
  ) {
    super(`chain cursor is at ${actual ?? 'nothing'}, expected ${expected}`);
    this.name = 'CursorMovedError';
  }
}

export interface CursorRow {
  block_number: number;
  /** blockID of that block, lowercase hex; '' for a cursor created before any commit. */
  block_id: string;
  /** That block's timestamp; null before the first commit. */
  block_timestamp: Date | null;
}

export async function readCursor(db: Queryable, network: string): Promise<CursorRow | undefined> {
  const { rows } = await db.query<CursorRow>(
    'SELECT block_number, block_id, block_timestamp FROM chain_cursor WHERE network = $1',
    [network],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    block_number: Number(r.block_number),
    block_id: r.block_id,
    block_timestamp: r.block_timestamp === null ? null : new Date(r.block_timestamp),
  };
}

/**
 * Create the cursor so that `firstBlock` is the next block ingested. No-op when it exists.
 * @returns the cursor in force.
 */
export async function ensureCursor(
  db: Queryable,
  network: string,
  firstBlock: number,
): Promise<CursorRow> {
  await db.query(
    `INSERT INTO chain_cursor (network, block_number, block_id) VALUES ($1, $2, '')
     ON CONFLICT (network) DO NOTHING`,
    [network, Math.max(0, firstBlock - 1)],
  );
  const c = await readCursor(db, network);
  if (!c) throw new Error('chain cursor missing after insert');
  return c;
}

/** Active watches on any of `addresses`, activated strictly below `blockNumber`. */
async function candidateWatches(
  tx: Queryable,
  network: string,
  addresses: string[],
  blockNumber: number,
): Promise<WatchMatchRow[]> {
  const { rows } = await tx.query<WatchMatchRow>(
    // A join against unnest() rather than `= ANY($1)`: the planner probes the hash index once
    // per candidate on a large table and hashes a small one, where `= ANY` would compare every
    // row with every candidate (measured: 19 ms for 800 candidates on 1,000 watches).
    `SELECT w.id, w.account_id, w.address_hex, w.asset_filter, w.direction, w.channel
       FROM unnest($1::text[]) AS c(address_hex)
       JOIN watches w ON w.address_hex = c.address_hex
      WHERE w.status = 'ACTIVE' AND w.deleted_at IS NULL
        AND w.network = $2 AND w.active_from_block < $3`,
    [addresses, network, blockNumber],
  );
  return rows;
}

async function insertEvents(
  tx: Queryable,
  network: string,
  block: BlockRef,
  matches: Match[],
  deliverProviderProof: boolean,
): Promise<number> {
  const cols = {
    id: [] as string[],
    ntf: [] as string[],
    account: [] as string[],
    watch: [] as string[],
    channel: [] as string[],
    direction: [] as string[],
    asset: [] as string[],
    txId: [] as string[],
    eventIndex: [] as number[],
    from: [] as string[],
    to: [] as string[],
    amount: [] as string[],
    contract: [] as Array<string | null>,
    proof: [] as string[],
    held: [] as boolean[],
  };
  const b58 = new Map<string, string>();
  const enc = (h: string) => {
    let v = b58.get(h);
    if (v === undefined) {
      v = hexToBase58(h);
      b58.set(h, v);
    }
    return v;
  };
  for (const m of matches) {
    const t: Transfer = m.transfer;
    cols.id.push(eventId(m.watch.id, t.txId, t.eventIndex));
    cols.ntf.push(newId('ntf'));
    cols.account.push(m.watch.account_id);
    cols.watch.push(m.watch.id);
    cols.channel.push(m.watch.channel);
    cols.direction.push(m.direction);
    cols.asset.push(t.asset);
    cols.txId.push(t.txId);
    cols.eventIndex.push(t.eventIndex);
    cols.from.push(enc(t.from));
    cols.to.push(enc(t.to));
    cols.amount.push(t.amountRaw.toString());
    cols.contract.push(t.contract === null ? null : enc(t.contract));
    // Transfers from the node group carry the level it established; others claim nothing.
    const proof = t.proof ?? 'provider';
    cols.proof.push(proof);
    // One provider's word never moves money by itself (issue 36 item 5): held until a second
    // provider confirms the receipt (confirm.ts), unless the operator opted in.
    cols.held.push(proof === 'provider' && !deliverProviderProof);
  }
  const { rows } = await tx.query<{ n: number }>(
    `WITH base AS (
       SELECT GREATEST(now(), COALESCE((SELECT last_event_at FROM chain_cursor WHERE network = $3)
                                       + interval '1 microsecond', now())) AS t
     ),
     input AS (
       SELECT * FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                            $10::text[], $11::text[], $12::int[], $13::text[], $14::text[],
                            $15::numeric[], $16::text[], $17::text[], $18::bool[])
         WITH ORDINALITY AS i(id, ntf, account_id, watch_id, channel, direction, asset, tx_id,
                              event_index, from_address, to_address, amount_raw, contract, proof,
                              held, ord)
     ),
     ins AS (
       INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                           block_number, block_timestamp, from_address, to_address, amount_raw,
                           contract, proof, created_at, metadata)
       SELECT i.id, i.account_id, i.watch_id, $3, i.direction, i.asset, i.tx_id, i.event_index,
              $1, $2::timestamptz, i.from_address, i.to_address, i.amount_raw, i.contract, i.proof,
              base.t + (i.ord - 1) * interval '1 microsecond',
              -- The watch's metadata as it is now (migration 085): the event keeps this copy.
              (SELECT w.metadata FROM watches w WHERE w.id = i.watch_id)
         FROM input i CROSS JOIN base
       ON CONFLICT (id) DO NOTHING
       RETURNING id, account_id, watch_id, created_at
     ),
     ntf AS (
       INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                  next_attempt_at, created_at, network, held_since, held_reason,
                                  held_next_check_at)
       SELECT i.ntf, ins.id, ins.account_id, ins.watch_id, i.channel, 'PENDING', 0, now(), ins.created_at,
              $3, CASE WHEN i.held THEN now() END,
              CASE WHEN i.held THEN 'awaiting_confirmation' END, CASE WHEN i.held THEN now() END
         FROM ins JOIN input i ON i.id = ins.id
       RETURNING created_at
     ),
     -- Keep created_at strictly increasing across blocks and ingesters (runs even unreferenced).
     cur AS (
       UPDATE chain_cursor SET last_event_at = (SELECT max(created_at) FROM ntf)
        WHERE network = $3 AND EXISTS (SELECT 1 FROM ntf)
       RETURNING 1
     )
     SELECT count(*)::int8 AS n FROM ntf`,
    [
      block.number,
      new Date(block.timestamp).toISOString(),
      network,
      cols.id,
      cols.ntf,
      cols.account,
      cols.watch,
      cols.channel,
      cols.direction,
      cols.asset,
      cols.txId,
      cols.eventIndex,
      cols.from,
      cols.to,
      cols.amount,
      cols.contract,
      cols.proof,
      cols.held,
    ],
  );
  const r = rows[0];
  return r?.n ?? 0;
}

export interface CommitResult {
  /** Events (and notifications) inserted. */
  events: number;
  /** Watches that matched at least one transfer. */
  matches: number;
}

export interface CommitHooks {
  /** Called inside the transaction after the events are written, before the cursor moves (tests). */
  beforeCursorAdvance?: () => Promise<void>;
  /**
   * TRON_DELIVER_PROVIDER_PROOF=1: notifications of `provider`-proof events are claimable at once
   * (the operator accepted one provider's word for them). Default false: they are created held
   * (migration 095, `held_reason` 'awaiting_confirmation') until src/ingest/confirm.ts releases
   * them on a second provider's agreement.
   */
  deliverProviderProof?: boolean;
}

/**
 * More writes in the commit's transaction, after the cursor moved (the light client's state,
 * finality-gate.ts: stored with the block it is at, so a restart finds the two together).
 */
export type CommitAlso = (tx: Queryable) => Promise<void>;

/**
 * Commit one block: events, notifications and the cursor advance in one transaction; the
 * advance also clears the ingest stall, if one was recorded (stall.ts). Notifications of
 * `provider`-proof transfers are created held unless `hooks.deliverProviderProof` (CommitHooks).
 * @param block its number, blockID and timestamp, and its header's parentHash: the cursor must
 *   hold that blockID for the block before (checked under the cursor's row lock; a cursor made
 *   before any commit holds '' and checks nothing: the first block is the checkpoint).
 * @throws CursorMovedError when the cursor is not at block.number - 1; BlockCheckError('parent')
 *   when the block does not follow the committed chain (nothing is written either way).
 */
export async function commitBlock(
  db: Db,
  network: string,
  block: BlockRef & { parentHash?: string },
  transfers: readonly Transfer[],
  hooks: CommitHooks = {},
  also?: CommitAlso,
): Promise<CommitResult> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ block_number: number; block_id: string }>(
      'SELECT block_number, block_id FROM chain_cursor WHERE network = $1 FOR UPDATE',
      [network],
    );
    const at = rows[0]?.block_number === undefined ? undefined : Number(rows[0].block_number);
    if (at !== block.number - 1) throw new CursorMovedError(block.number - 1, at);
    const prev = (rows[0]?.block_id ?? '').toLowerCase();
    if (block.parentHash !== undefined && prev !== '' && block.parentHash.toLowerCase() !== prev) {
      throw new BlockCheckError(
        'parent',
        block.number,
        `parentHash ${block.parentHash} is not the committed blockID of block ${at} (${prev})`,
      );
    }
    let events = 0;
    let matched = 0;
    if (transfers.length > 0) {
      const watches = await candidateWatches(
        tx,
        network,
        candidateAddresses(transfers),
        block.number,
      );
      const matches = matchTransfers(transfers, watches);
      matched = matches.length;
      if (matches.length > 0) {
        events = await insertEvents(
          tx,
          network,
          block,
          matches,
          hooks.deliverProviderProof === true,
        );
      }
    }
    await hooks.beforeCursorAdvance?.();
    // Moving the cursor ends any stall recorded for this block (stall.ts), in the same transaction.
    await tx.query(
      `UPDATE chain_cursor SET block_number = $2, block_id = $3, updated_at = now(),
              block_timestamp = $4::timestamptz,
              stalled_block = NULL, stalled_reason = NULL, stalled_since = NULL
        WHERE network = $1`,
      [network, block.number, block.id, new Date(block.timestamp).toISOString()],
    );
    await also?.(tx);
    return { events, matches: matched };
  });
}
