/**
 * The events page row writer (src/events/event.ts): PostgreSQL's timestamp text to ISO 8601, and the
 * direct JSON writer of a row, which must give exactly JSON.stringify of the row's object — for
 * realistic rows (the fast path) and for rows holding characters JSON escapes (the slow path).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  eventRowJson,
  eventRowObject,
  isoFromPgTimestamp,
  splitEventRow,
} from '../../src/events/event.js';

/** The object and the direct JSON writer of one row text (they must agree). */
const rowWriters = {
  object: (line: string) => eventRowObject(splitEventRow(line)),
  json: (line: string) => eventRowJson(line, splitEventRow(line)),
};

describe('isoFromPgTimestamp', () => {
  it.each([
    ['2026-01-08 13:36:54', 6, '2026-01-08T13:36:54.000000Z'],
    ['2026-01-08 13:36:54', 3, '2026-01-08T13:36:54.000Z'],
    ['2026-01-08 13:36:54.1', 6, '2026-01-08T13:36:54.100000Z'],
    ['2026-01-08 13:36:54.000001', 6, '2026-01-08T13:36:54.000001Z'],
    ['2026-01-08 13:36:54.123456', 6, '2026-01-08T13:36:54.123456Z'],
    // Milliseconds truncate, as to_char(…, 'MS') and Date do.
    ['2026-01-08 13:36:54.999999', 3, '2026-01-08T13:36:54.999Z'],
    ['0001-01-01 00:00:00', 3, '0001-01-01T00:00:00.000Z'],
  ] as const)('%s (%i digits) → %s', (text, digits, iso) => {
    expect(isoFromPgTimestamp(text, digits)).toBe(iso);
  });

  it.each([
    '2026-01-08T13:36:54',
    '2026-01-08 13:36:54+00',
    '2026-01-08 13:36:54.1234567',
    '12026-01-08 13:36:54',
    '2026-01-08 13:36:54 BC',
    'Thu Jan 08 13:36:54 2026',
    '',
  ])('refuses %j (not ISO DateStyle text of a timestamp)', (text) => {
    expect(() => isoFromPgTimestamp(text, 6)).toThrow(/DateStyle must be ISO/);
  });
});

const SEP = '\x1f';
const B58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const HEX = '0123456789abcdef';
const word = (alphabet: string, min: number, max: number) =>
  fc.string({ unit: fc.constantFrom(...alphabet), minLength: min, maxLength: max });
const pgTimestamp = fc
  .tuple(
    fc.date({ min: new Date('2000-01-01'), max: new Date('2099-12-31'), noInvalidDate: true }),
    fc.integer({ min: 0, max: 999_999 }),
  )
  .map(([d, us]) => {
    const base = d.toISOString().slice(0, 19).replace('T', ' ');
    // PostgreSQL drops trailing fractional zeros, and the fraction entirely when it is zero.
    const frac = String(us).padStart(6, '0').replace(/0+$/, '');
    return frac === '' ? base : `${base}.${frac}`;
  });

/**
 * A row as the page query writes it: 22 fields joined by SEP, in its concat_ws order (the
 * notification's held_reason and held_since, '' when not held, issue 36; then `proof`, issue 26,
 * and the event's metadata as jsonb text, '' for none, issue 30).
 */
function row(fields: {
  id: string;
  watch: string;
  tx: string;
  from: string;
  to: string;
  contract: string;
  notification: string;
  index: number;
  block: number;
  raw: bigint;
  attempts: number;
  ts: [string, string, string];
  enums: [string, string, string, string];
  proof?: string;
  metadata?: string;
  /** [held_reason, held_since] of the notification; absent: not held. */
  held?: [string, string];
}): string {
  const [network, direction, asset, status] = fields.enums;
  return [
    fields.id,
    fields.watch,
    network,
    direction,
    asset,
    fields.tx,
    String(fields.index),
    String(fields.block),
    fields.ts[0],
    fields.from,
    fields.to,
    fields.raw.toString(),
    fields.contract,
    fields.ts[1],
    fields.notification,
    status,
    String(fields.attempts),
    fields.ts[2],
    fields.held?.[0] ?? '',
    fields.held?.[1] ?? '',
    fields.proof ?? 'signed',
    fields.metadata ?? '',
  ].join(SEP);
}

const enums = fc.tuple(
  fc.constantFrom('mainnet', 'nile'),
  fc.constantFrom('incoming', 'outgoing'),
  fc.constantFrom('USDT', 'TRX'),
  fc.constantFrom('PENDING', 'DELIVERED', 'DEAD'),
);
const common = {
  index: fc.integer({ min: 0, max: 10_000 }),
  block: fc.integer({ min: 0, max: 2 ** 40 }),
  raw: fc.bigInt({ min: 1n, max: 2n ** 256n - 1n }),
  attempts: fc.integer({ min: 0, max: 6 }),
  ts: fc.tuple(pgTimestamp, pgTimestamp, pgTimestamp),
  enums,
  held: fc.option(
    fc.tuple(
      fc.constantFrom('awaiting_confirmation', 'single_provider', 'contradicted'),
      pgTimestamp,
    ),
    { nil: undefined },
  ),
};

describe('the events page row writer', () => {
  it('writes realistic rows exactly as JSON.stringify of their object (fast path)', () => {
    fc.assert(
      fc.property(
        fc.record({
          id: word(HEX, 26, 26).map((s) => `evt_${s}`),
          watch: word(HEX, 26, 26).map((s) => `wh_${s}`),
          tx: word(HEX, 64, 64),
          from: word(B58, 34, 34),
          to: word(B58, 34, 34),
          contract: fc.oneof(fc.constant(''), word(B58, 34, 34)),
          notification: word(HEX, 26, 26).map((s) => `ntf_${s}`),
          ...common,
        }),
        (f) => {
          const line = row(f);
          const written = rowWriters.json(line);
          const object = rowWriters.object(line);
          expect(written).toBe(JSON.stringify(object));
          expect(object.contract).toBe(f.contract === '' ? null : f.contract);
          expect(object.amount_raw).toBe(f.raw.toString());
          // The hold (issue 36) as the notification row has it, null when not held.
          expect(object.delivery?.held ?? null).toEqual(
            f.held === undefined ? null : { reason: f.held[0], since: expect.any(String) },
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  it('escapes what JSON must escape when a field holds it (slow path), never broken JSON', () => {
    // Any text but SEP: quotes, backslashes, control characters, non-ASCII, lone surrogates.
    const text = fc
      .string({ unit: 'binary', minLength: 1, maxLength: 12 })
      .filter((s) => !s.includes(SEP));
    fc.assert(
      fc.property(
        fc.record({
          id: text,
          watch: text,
          tx: text,
          from: text,
          to: text,
          contract: text,
          notification: text,
          ...common,
        }),
        (f) => {
          const line = row(f);
          const written = rowWriters.json(line);
          expect(written).toBe(JSON.stringify(rowWriters.object(line)));
          const parsed = JSON.parse(written) as Record<string, unknown>;
          expect(parsed.tx_id).toBe(f.tx);
          expect(parsed.from).toBe(f.from);
          expect(parsed.contract).toBe(f.contract);
        },
      ),
      { numRuns: 300 },
    );
    // The characters that matter, one by one.
    for (const c of ['"', '\\', '\n', '\u0000', '\u001e', '\ud800', '\udfff', '😀', 'é']) {
      const line = row({
        id: `evt_${c}`,
        watch: 'wh_1',
        tx: 'ab',
        from: 'T1',
        to: 'T2',
        contract: '',
        notification: 'ntf_1',
        index: 0,
        block: 1,
        raw: 1n,
        attempts: 0,
        ts: ['2026-01-08 13:36:54', '2026-01-08 13:36:54', '2026-01-08 13:36:54'],
        enums: ['mainnet', 'incoming', 'TRX', 'PENDING'],
      });
      const written = rowWriters.json(line);
      expect(written).toBe(JSON.stringify(rowWriters.object(line)));
      expect((JSON.parse(written) as { event_id: string }).event_id).toBe(`evt_${c}`);
    }
  });

  it('writes an event whose notification is missing (six empty delivery fields) with delivery null', () => {
    const line = [
      'evt_1',
      'wh_1',
      'mainnet',
      'incoming',
      'TRX',
      'ab',
      '0',
      '7',
      '2026-01-08 13:36:54.5',
      'T1',
      'T2',
      '1500000',
      '',
      '2026-01-08 13:36:54.000001',
      '',
      '',
      '',
      '',
      '',
      '',
      'provider',
      '',
    ].join(SEP);
    const written = rowWriters.json(line);
    expect(written).toBe(JSON.stringify(rowWriters.object(line)));
    expect(JSON.parse(written)).toMatchObject({
      event_id: 'evt_1',
      amount: '1.5',
      contract: null,
      block_timestamp: '2026-01-08T13:36:54.500Z',
      delivery: null,
    });
  });

  it('refuses a row that does not have exactly 22 fields', () => {
    expect(() => rowWriters.json(['a', 'b'].join(SEP))).toThrow(/2 fields, not 22/);
    expect(() => rowWriters.json(Array(21).fill('1').join(SEP))).toThrow(/21 fields/);
    expect(() => rowWriters.json(Array(23).fill('1').join(SEP))).toThrow(/23 fields/);
  });

  it('writes the metadata member only for an event that has it, as PostgreSQL wrote its jsonb', () => {
    const base = {
      id: 'evt_1',
      watch: 'wh_1',
      tx: 'ab',
      from: 'T1',
      to: 'T2',
      contract: '',
      notification: 'ntf_1',
      index: 0,
      block: 1,
      raw: 1n,
      attempts: 0,
      ts: ['2026-01-08 13:36:54', '2026-01-08 13:36:54', '2026-01-08 13:36:54'] as [
        string,
        string,
        string,
      ],
      enums: ['mainnet', 'incoming', 'TRX', 'DELIVERED'] as [string, string, string, string],
    };
    const without = rowWriters.json(row(base));
    expect(Object.hasOwn(JSON.parse(without) as object, 'metadata')).toBe(false);
    // jsonb text: spaces after ':' and ',', control characters escaped (never a raw SEP).
    const text = '{"note": "a \\"quoted\\" \\u001f", "customer_id": "c_1842"}';
    const line = row({ ...base, metadata: text });
    const written = rowWriters.json(line);
    expect(written).toBe(JSON.stringify(rowWriters.object(line)));
    const parsed = JSON.parse(written) as { metadata: unknown; delivery: unknown };
    expect(parsed.metadata).toEqual({ note: 'a "quoted" \u001f', customer_id: 'c_1842' });
    expect(Object.keys(parsed).slice(-2)).toEqual(['metadata', 'delivery']);
  });
});
