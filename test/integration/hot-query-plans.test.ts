/**
 * The hot queries use their indexes (issue 17 item 5, migration 023), on PostgreSQL: with a
 * backlog of due chat notifications ahead of the webhook ones, and a few DEAD events among many
 * delivered ones, all analysed, PostgreSQL plans
 * - the webhook claim (and the chat claim) on notifications_due_channel with the channel in the
 *   index condition, so a claim never reads the other channel's due rows (checked by running it:
 *   the rows the index scan returns are at most the claim's limit);
 * - the dead letters page (custom and generic plan) and the bulk redelivery's selection from
 *   notifications_dead_account, not by walking every event of the account.
 * `BENCH=hot npm run bench` measures the same queries at 10,000,000 events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/pool.js';
import { claimStatement } from '../../src/delivery/claim.js';
import { type ListEventsQuery, pageQuery } from '../../src/events/list.js';
import { deadSelection } from '../../src/events/redeliver.js';
import { migratedDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';

const EVENTS = 40_000;
const CHAT_DUE = 12_000;
const HOOK_DUE = 300;
const DEAD = 40;

type PlanNode = {
  'Node Type': string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Actual Rows'?: number;
  Plans?: PlanNode[];
};

/** Every node of a plan, depth first. */
function nodes(p: PlanNode): PlanNode[] {
  return [p, ...(p.Plans ?? []).flatMap(nodes)];
}

async function plan(db: Db, text: string, values: unknown[], analyze = false): Promise<PlanNode> {
  const { rows } = await db.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
    `EXPLAIN (${analyze ? 'ANALYZE, ' : ''}FORMAT JSON) ${text}`,
    values,
  );
  const p = rows[0]?.['QUERY PLAN'][0]?.Plan;
  if (!p) throw new Error('no plan');
  return p;
}

/** The plan PostgreSQL keeps for a prepared statement once it stops planning (generic). */
async function genericPlan(db: Db, text: string, values: unknown[]): Promise<PlanNode> {
  return db.transaction(async (tx) => {
    await tx.query('SET LOCAL plan_cache_mode = force_generic_plan');
    await tx.query(`PREPARE plan_test AS ${text}`);
    // A text[] parameter as an array literal ({"a","b"}), anything else as its text.
    const literal = (v: unknown) =>
      Array.isArray(v)
        ? `{${v.map((x) => `"${String(x).replace(/["\\]/g, '\\$&')}"`).join(',')}}`
        : String(v);
    const literals = values.map((v) => `'${literal(v).replace(/'/g, "''")}'`).join(', ');
    const r = await tx.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (FORMAT JSON) EXECUTE plan_test(${literals})`,
    );
    await tx.query('DEALLOCATE plan_test');
    const p = r.rows[0]?.['QUERY PLAN'][0]?.Plan;
    if (!p) throw new Error('no plan');
    return p;
  });
}

const usesIndex = (p: PlanNode, name: string) => nodes(p).filter((n) => n['Index Name'] === name);

describe.skipIf(!POSTGRES_URL)('hot query plans on postgres', () => {
  let t: TestDb;
  const account = 'acc_hot_plans';

  beforeAll(async () => {
    t = await migratedDb('postgres');
    const db = t.db;
    await db.query(
      `INSERT INTO accounts (id, email, plan, telegram_chat_id)
       VALUES ($1, 'hot@example.com', 'pro', '1001'), ('acc_other', 'other@example.com', 'pro', NULL)`,
      [account],
    );
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block)
       VALUES ('wh_chat', $1, 'mainnet', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
               '41a614f803b6fd780986a42c78ec9c7f77e6ded13c', 'ALL', 'both', 'telegram', NULL, NULL, NULL, 1),
              ('wh_hook', $1, 'mainnet', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
               '41a614f803b6fd780986a42c78ec9c7f77e6ded13c', 'ALL', 'both', 'webhook',
               'https://93.184.216.34/hook', 'k', '\\x00'::bytea, 1),
              ('wh_other', 'acc_other', 'mainnet', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
               '41a614f803b6fd780986a42c78ec9c7f77e6ded13c', 'ALL', 'both', 'webhook',
               'https://93.184.216.34/hook', 'k', '\\x00'::bytea, 1)`,
      [account],
    );
    // Events 1..CHAT_DUE: due chat notifications (due first); then HOOK_DUE due webhook ones; then
    // delivered ones with DEAD ones spread evenly; a second account's events, half DEAD.
    const step = Math.floor((EVENTS - CHAT_DUE - HOOK_DUE) / DEAD);
    await db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                           block_number, block_timestamp, from_address, to_address, amount_raw,
                           contract, created_at)
       SELECT 'evt_' || substr(md5('e' || g), 1, 26), CASE WHEN g > $2 THEN 'acc_other' ELSE $1 END,
              CASE WHEN g > $2 THEN 'wh_other' WHEN g <= $3 THEN 'wh_chat' ELSE 'wh_hook' END,
              'mainnet', 'incoming', 'USDT', md5(g::text) || md5('t' || g::text), 0, 79000000 + g,
              timestamptz '2026-01-01', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
              'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', 1000000 + g, 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
              timestamptz '2026-01-01' + g * interval '1 microsecond'
         FROM generate_series(1, $2 + 2000) g`,
      [account, EVENTS, CHAT_DUE],
    );
    await db.query(
      `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                  next_attempt_at, created_at)
       SELECT 'ntf_' || substr(md5('n' || g), 1, 26), 'evt_' || substr(md5('e' || g), 1, 26),
              CASE WHEN g > $2 THEN 'acc_other' ELSE $1 END,
              CASE WHEN g > $2 THEN 'wh_other' WHEN g <= $3 THEN 'wh_chat' ELSE 'wh_hook' END,
              CASE WHEN g <= $3 THEN 'telegram' ELSE 'webhook' END,
              CASE WHEN g > $2 THEN CASE WHEN g % 2 = 0 THEN 'DEAD' ELSE 'DELIVERED' END
                   WHEN g <= $3 + $4 THEN 'PENDING'
                   WHEN (g - $3 - $4) % $5 = 0 AND (g - $3 - $4) / $5 <= $6 THEN 'DEAD'
                   ELSE 'DELIVERED' END,
              0,
              CASE WHEN g <= $3 THEN now() - interval '1 hour' + g * interval '1 microsecond'
                   ELSE now() - interval '1 minute' + g * interval '1 microsecond' END,
              timestamptz '2026-01-01' + g * interval '1 microsecond'
         FROM generate_series(1, $2 + 2000) g`,
      [account, EVENTS, CHAT_DUE, HOOK_DUE, step, DEAD],
    );
    // One event in 100 carries its watch's metadata (an invoice each, a customer per 50).
    await db.query(
      `UPDATE events SET metadata = jsonb_build_object('invoice', 'INV-' || right(id, 6),
                                                       'customer', 'c_' || (block_number % 50))
        WHERE block_number % 100 = 0`,
    );
    await db.query('VACUUM (ANALYZE) events');
    await db.query('VACUUM (ANALYZE) notifications');
  }, 120_000);

  afterAll(async () => {
    await t?.drop();
  });

  it('claims each channel on notifications_due_channel, never reading the other channel', async () => {
    for (const channel of ['webhook', 'telegram'] as const) {
      const st = claimStatement({ limit: 64, leaseMs: 30_000, owner: 'plan', channel });
      const p = await plan(t.db, st.text, st.values);
      const scans = usesIndex(p, 'notifications_due_channel');
      expect(scans, `${channel}: ${JSON.stringify(p)}`).toHaveLength(1);
      expect(scans[0]?.['Index Cond']).toMatch(/channel = /);
      expect(usesIndex(p, 'notifications_due')).toHaveLength(0);
    }
    // Run (and roll back): the webhook claim's index scan hands over at most its 64 rows, not the
    // 12,000 due chat rows ahead of them.
    const st = claimStatement({ limit: 64, leaseMs: 30_000, owner: 'plan', channel: 'webhook' });
    const ran = await t.db
      .transaction(async (tx) => {
        const { rows } = await tx.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${st.text}`,
          st.values,
        );
        throw Object.assign(new Error('rollback'), { plan: rows[0]?.['QUERY PLAN'][0]?.Plan });
      })
      .catch((err: { plan?: PlanNode }) => err.plan);
    expect(ran).toBeDefined();
    const scan = usesIndex(ran as PlanNode, 'notifications_due_channel')[0];
    expect(scan?.['Actual Rows']).toBeLessThanOrEqual(64);
    expect(scan?.['Actual Rows']).toBeGreaterThan(0);
  });

  it('finds the dead letters page from notifications_dead_account, custom and generic plan', async () => {
    const shapes = [{}, { before: '2026-01-01T00:00:00.03Z' }, { watchId: 'wh_hook' }];
    for (const shape of shapes) {
      const q = pageQuery({
        accountId: account,
        network: 'mainnet',
        limit: 50,
        status: 'DEAD',
        ...shape,
      });
      for (const p of [
        await plan(t.db, q.text, q.values),
        await genericPlan(t.db, q.text, q.values),
      ]) {
        const dead = usesIndex(p, 'notifications_dead_account');
        expect(dead, JSON.stringify(p)).toHaveLength(1);
        expect(dead[0]?.['Index Cond']).toMatch(/account_id = /);
        // Not a walk of the account's events in page order.
        expect(usesIndex(p, 'events_account_created'), JSON.stringify(p)).toHaveLength(0);
      }
    }
    // And the page is the dead letters, newest first.
    const q = pageQuery({ accountId: account, network: 'mainnet', limit: 200, status: 'DEAD' });
    const { rows } = await t.db.query<{ r: string }>(q.text, q.values);
    expect(rows).toHaveLength(DEAD);
  });

  it('finds events by metadata from events_metadata_values, custom and generic plan', async () => {
    const { rows: sample } = await t.db.query<{ invoice: string }>(
      `SELECT metadata->>'invoice' AS invoice FROM events
        WHERE account_id = $1 AND metadata IS NOT NULL ORDER BY created_at LIMIT 1 OFFSET 100`,
      [account],
    );
    const invoice = sample[0]?.invoice as string;
    const shapes: Array<Pick<ListEventsQuery, 'search' | 'metadata'>> = [
      { search: { kind: 'metadata', value: invoice } },
      { metadata: { invoice } },
      { metadata: { invoice, customer: 'c_0' } },
    ];
    for (const shape of shapes) {
      const q = pageQuery({ accountId: account, network: 'mainnet', limit: 50, ...shape });
      for (const p of [
        await plan(t.db, q.text, q.values),
        await genericPlan(t.db, q.text, q.values),
      ]) {
        expect(usesIndex(p, 'events_metadata_values'), JSON.stringify(p)).toHaveLength(1);
        expect(usesIndex(p, 'events_account_created'), JSON.stringify(p)).toHaveLength(0);
      }
      const { rows } = await t.db.query<{ r: string }>(q.text, q.values);
      expect(rows.length, JSON.stringify(shape)).toBe(1);
    }
  });

  it('selects a bulk redelivery from notifications_dead_account', async () => {
    for (const scope of [{}, { watchId: 'wh_hook' }, { since: '2026-01-01T00:00:00.02Z' }]) {
      const q = deadSelection(account, 'mainnet', scope);
      const p = await plan(t.db, q.text, q.values);
      expect(usesIndex(p, 'notifications_dead_account'), JSON.stringify(p)).toHaveLength(1);
      expect(usesIndex(p, 'events_account_created'), JSON.stringify(p)).toHaveLength(0);
    }
    const q = deadSelection(account, 'mainnet', {});
    expect((await t.db.query(q.text, q.values)).rows).toHaveLength(DEAD);
  });
});
