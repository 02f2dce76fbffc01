/**
 * Export of a filtered events list (issue 19 item 5): every event the console's filters select,
 * newest first, as CSV (RFC 4180, one header line) or as one JSON array of EventWithDelivery
 * (SPEC §EventWithDelivery, the objects GET /v1/events pages hold).
 *
 * Streamed, any size: the list is read in keyset chunks of `chunk` events (the same page
 * statement as the list, src/events/list.ts, with `before` = the previous chunk's oldest
 * created_at, so nothing is skipped or repeated: DESIGN invariant 8), and each chunk is written
 * out before the next is read. Memory is one chunk whatever the number of events, and it works the
 * same on PostgreSQL and PGlite (no server-side cursor held open across a slow download, so no
 * connection or snapshot is kept for its length).
 *
 * The CSV's last column `metadata` (issue 40 item 5) is the event's metadata as JSON text (the
 * watch's, copied at the match), empty when it has none; the JSON export has it as the event's own
 * `metadata` member.
 *
 * Each event also carries its watch's label (issue 29: a person reads an export by label, a
 * program by id): the CSV column `watch_label` after `watch_id`, and the additive JSON member
 * `watch_label` (string or null) at the end of each object. Labels are read once, before the
 * first chunk, for the account's watches of the network (deleted ones included: their events
 * stay listed); a label edited during a long download shows as it was when the export started.
 */
import { stringify } from 'csv-stringify/sync';
import type { Queryable } from '../db/pool.js';
import { eventRowJson, eventRowObject, isoFromPgTimestamp, splitEventRow } from './event.js';
import { type ListEventsQuery, pageQuery } from './list.js';

/** The filters of an export: a list query without its paging. */
export type ExportQuery = Omit<ListEventsQuery, 'limit' | 'before' | 'after' | 'activeKeyId'>;

/** CSV columns, in order (the header line). Amounts as exact decimal text, times ISO 8601 UTC. */
export const CSV_COLUMNS = [
  'event_id',
  'block_timestamp',
  'block_number',
  'tx_id',
  'event_index',
  'direction',
  'asset',
  'amount',
  'amount_raw',
  'from',
  'to',
  'contract',
  'watch_id',
  'watch_label',
  'delivery_status',
  'delivery_attempts',
  'notification_id',
  'metadata',
] as const;

/** The labels of the account's watches on the network, deleted ones included: id → label. */
async function watchLabels(db: Queryable, q: ExportQuery): Promise<Map<string, string | null>> {
  const { rows } = await db.query<{ id: string; label: string | null }>(
    'SELECT id, label FROM watches WHERE account_id = $1 AND network = $2',
    [q.accountId, q.network],
  );
  return new Map(rows.map((r) => [r.id, r.label]));
}

/** Events read per statement: a bound on memory and on one statement's time. */
export const EXPORT_CHUNK = 500;

/**
 * The export as text pieces (the CSV header or `[`, then one piece per chunk, then `]` for
 * JSON), read lazily: the next chunk is read when the consumer asks for the next piece.
 * @param chunk events per statement, 1..200 bucket sizes are rounded as the list's (default 500).
 * @throws the database error 22007/22008 when a bound is not a timestamp PostgreSQL can hold
 *   (from the first read; the caller answers 400 before it sends anything).
 */
export async function* exportEvents(
  db: Queryable,
  q: ExportQuery,
  format: 'csv' | 'json',
  chunk = EXPORT_CHUNK,
): AsyncGenerator<string> {
  let before: string | undefined;
  let first = true;
  const labels = await watchLabels(db, q);
  for (;;) {
    const page = pageQuery({ ...q, limit: chunk, ...(before !== undefined ? { before } : {}) });
    const { rows } = await db.query<{ r: string }>(page.text, page.values, { name: page.name });
    if (first) yield format === 'csv' ? stringify([CSV_COLUMNS as unknown as string[]]) : '[';
    const n = Math.min(rows.length, chunk);
    let piece = '';
    const records: string[][] = [];
    for (let i = 0; i < n; i++) {
      const line = (rows[i] as { r: string }).r;
      const f = splitEventRow(line);
      if (format === 'json') {
        // eventRowJson ends with the object's closing brace: the label is appended before it.
        const json = eventRowJson(line, f);
        const label = JSON.stringify(labels.get(f[1] as string) ?? null);
        piece += `${first && i === 0 ? '' : ','}${json.slice(0, -1)},"watch_label":${label}}`;
      } else {
        const e = eventRowObject(f);
        records.push([
          e.event_id,
          e.block_timestamp,
          String(e.block_number),
          e.tx_id,
          String(e.event_index),
          e.direction,
          e.asset,
          e.amount,
          e.amount_raw,
          e.from,
          e.to,
          e.contract ?? '',
          e.watch_id,
          labels.get(e.watch_id) ?? '',
          e.delivery?.status ?? '',
          e.delivery === null ? '' : String(e.delivery.attempts),
          e.delivery?.notification_id ?? '',
          // The watch's metadata as it was at the match (issue 40 item 5), as its JSON text
          // (one cell, any keys): '' when none.
          e.metadata === undefined ? '' : JSON.stringify(e.metadata),
        ]);
      }
      before = f[13];
    }
    first = false;
    if (format === 'csv' && records.length > 0) piece = stringify(records);
    if (piece !== '') yield piece;
    if (rows.length <= chunk) break;
    before = isoFromPgTimestamp(before as string, 6);
  }
  if (format === 'json') yield ']';
}
