/**
 * Hot queries at scale (issue 17 item 5), on PostgreSQL: one account with BENCH_HOT_EVENTS events
 * (default 10,000,000), each with one notification, of which BENCH_HOT_CHAT_ROWS (300,000) are
 * due chat (telegram) notifications due before every webhook one, 64 × BENCH_HOT_CLAIMS due
 * webhook notifications, and BENCH_HOT_DEAD (1,000) DEAD ones spread evenly over the rest.
 * Measured, each next to a baseline in the same run:
 * - the webhook claim of 64 rows (src/delivery/claim.ts) with migration 023's channel index, and
 *   with the index it replaced (notifications_due, next_attempt_at only) — each claim in a
 *   savepoint rolled back after it, inside a transaction rolled back at the end, so every claim
 *   of both sides takes the same 64 committed due rows (the backend's CPU time includes the
 *   savepoint's two round trips);
 * - the dead letters page (the console's events page filtered on DEAD, 50 rows: src/events/list.ts)
 *   and its second page, and the same page as main wrote it before (newest-status subquery only);
 * - the selection of a bulk redelivery (src/events/redeliver.ts, every DEAD event), likewise.
 * Goals: claim under 5 ms, DEAD page under 25 ms (median).
 * Seeding writes the rows without indexes and builds them afterwards (the same definitions: the
 * migrations' own, read back from the catalog), then VACUUM ANALYZE; foreign keys are restored
 * NOT VALID (not re-checked: the plans do not depend on it).
 */

import fs from 'node:fs';
import os from 'node:os';
import pg from 'pg';
import { migrate } from '../src/db/migrate.js';
import type { Db, Queryable } from '../src/db/pool.js';
import { claimDue, claimStatement } from '../src/delivery/claim.js';
import { DEAD_EVENTS_SQL, eventsPageJson, pageQuery } from '../src/events/list.js';
import { emptyDb } from '../test/helpers/db.js';

export interface BenchHotOptions {
  events?: number;
  chatRows?: number;
  dead?: number;
  /** Claims measured per side (64 rows each). */
  claims?: number;
  /** Keep the database afterwards (its URL is printed) to look at plans. */
  keep?: boolean;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
const p90 = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.9))] ?? Number.NaN;
};
const ms = (x: number) => `${x.toFixed(x < 10 ? 2 : 0)} ms`;
const fmt = (xs: number[]) => `median ${ms(median(xs))}, p90 ${ms(p90(xs))} (${xs.length} runs)`;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/**
 * 8 kB pages a statement touched (shared hits + reads, EXPLAIN ANALYZE BUFFERS): the work the
 * plan does, whatever the machine's load.
 */
async function pages(db: Queryable, text: string, values: unknown[]): Promise<number> {
  const { rows } = await db.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, number> }> }>(
    `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`,
    values,
  );
  const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
  return (plan?.['Shared Hit Blocks'] ?? 0) + (plan?.['Shared Read Blocks'] ?? 0);
}

/** Rolls back whatever the measurement did. */
class Rollback extends Error {}

export async function benchHotQueries(opts: BenchHotOptions = {}): Promise<string[]> {
  if (!process.env.DATABASE_URL) {
    return ['hot: skipped (needs DATABASE_URL: the goals are PostgreSQL figures)'];
  }
  const n = opts.events ?? 10_000_000;
  const chat = Math.min(opts.chatRows ?? 300_000, n);
  const claims = opts.claims ?? 20;
  const hookDue = 64 * (claims + 2);
  const dead = Math.min(opts.dead ?? 1_000, Math.max(0, n - chat - hookDue));
  const t = await emptyDb('postgres');
  const lines: string[] = [];
  const cleanup: Array<() => Promise<void>> = [];
  try {
    const db = t.db;
    await migrate(db);
    // Seeding, index builds and the baselines outlast the pool's 30 s query deadline at 10,000,000
    // events: they run on a client of their own, without one.
    const raw = new pg.Client({ connectionString: t.url });
    await raw.connect();
    const slow: Db = {
      kind: 'postgres',
      query: async <R>(text: string, values?: readonly unknown[], o?: { name?: string }) => {
        const r = await raw.query({
          text,
          values: values as unknown[] | undefined,
          ...(o?.name ? { name: o.name } : {}),
        });
        return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
      },
      transaction: async (fn) => {
        await raw.query('BEGIN');
        try {
          const out = await fn(slow);
          await raw.query('COMMIT');
          return out;
        } catch (err) {
          await raw.query('ROLLBACK');
          throw err;
        }
      },
      close: () => raw.end(),
    };
    cleanup.push(() => raw.end());
    // The CPU time of this client's PostgreSQL backend (/proc/PID/stat, when the server runs on
    // this machine): what a query costs the server whatever the machine's load, unlike wall time.
    const backend = Number(
      (await raw.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid,
    );
    const cpuMs = (): number | undefined => {
      try {
        const stat = fs.readFileSync(`/proc/${backend}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, 100 ticks per second
      } catch {
        return undefined;
      }
    };
    /** Run `fn`, returning its result and the backend's CPU ms per `runs`. */
    const cpuPer = async <T>(runs: number, fn: () => Promise<T>): Promise<[T, string]> => {
      const c0 = cpuMs();
      const out = await fn();
      const c1 = cpuMs();
      const per =
        c0 === undefined || c1 === undefined
          ? 'n/a (server not on this machine)'
          : `${((c1 - c0) / runs).toFixed(2)} ms`;
      return [out, per];
    };
    const account = 'acc_bench_hot';
    await db.query(
      `INSERT INTO accounts (id, email, plan) VALUES ($1, 'hot@example.com', 'business')`,
      [account],
    );
    for (const [id, channel] of [
      ['wh_chat', 'telegram'],
      ['wh_hook', 'webhook'],
    ] as const) {
      await db.query(
        `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                              channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block)
         VALUES ($1, $2, 'mainnet', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
                 '41a614f803b6fd780986a42c78ec9c7f77e6ded13c', 'ALL', 'both', $3::text,
                 CASE WHEN $3::text = 'webhook' THEN 'https://93.184.216.34/hook' END,
                 CASE WHEN $3::text = 'webhook' THEN 'k' END,
                 CASE WHEN $3::text = 'webhook' THEN '\\x00'::bytea END, 1)`,
        [id, account, channel],
      );
    }
    await db.query(`UPDATE accounts SET telegram_chat_id = '1001' WHERE id = $1`, [account]);

    const seedStart = performance.now();
    const restore = await dropForSeeding(slow);
    // Event g: 1..chat chat events (due telegram notification, due an hour ago onwards: ahead of
    // every webhook row in next_attempt_at order); then hookDue due webhook notifications; then
    // DELIVERED ones with `dead` DEAD ones spread evenly.
    const step = dead > 0 ? Math.floor((n - chat - hookDue) / dead) : 0;
    const chunk = 1_000_000;
    for (let from = 1; from <= n; from += chunk) {
      const to = Math.min(n, from + chunk - 1);
      await slow.query(
        `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                             block_number, block_timestamp, from_address, to_address, amount_raw,
                             contract, created_at)
         SELECT 'evt_' || substr(md5('e' || g), 1, 26), $1,
                CASE WHEN g <= $4 THEN 'wh_chat' ELSE 'wh_hook' END, 'mainnet', 'incoming', 'USDT',
                md5(g::text) || md5('t' || g::text), 0, 79000000 + g / 100,
                timestamptz '2026-01-01', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
                'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', 1000000 + g,
                'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
                timestamptz '2026-01-01' + g * interval '1 microsecond'
           FROM generate_series($2::int, $3::int) g`,
        [account, from, to, chat],
      );
      await slow.query(
        `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                    next_attempt_at, created_at, delivered_at)
         SELECT 'ntf_' || lpad(to_hex(g / 1000), 10, '0') || substr(md5('n' || g), 1, 16),
                'evt_' || substr(md5('e' || g), 1, 26), $1,
                CASE WHEN g <= $4 THEN 'wh_chat' ELSE 'wh_hook' END,
                CASE WHEN g <= $4 THEN 'telegram' ELSE 'webhook' END,
                CASE WHEN g <= $4 + $5 THEN 'PENDING'
                     WHEN $6 > 0 AND (g - $4 - $5) % $6 = 0 AND (g - $4 - $5) / $6 <= $7 THEN 'DEAD'
                     ELSE 'DELIVERED' END,
                CASE WHEN g <= $4 + $5 THEN 0 ELSE 1 END,
                CASE WHEN g <= $4 THEN now() - interval '1 hour' + g * interval '1 microsecond'
                     WHEN g <= $4 + $5 THEN now() - interval '1 minute' + g * interval '1 microsecond'
                     ELSE timestamptz '2026-01-01' END,
                timestamptz '2026-01-01' + g * interval '1 microsecond',
                CASE WHEN g > $4 + $5 THEN timestamptz '2026-01-01' END
           FROM generate_series($2::int, $3::int) g`,
        [account, from, to, chat, hookDue, step, dead],
      );
    }
    await restore();
    await slow.query('VACUUM (ANALYZE) events');
    await slow.query('VACUUM (ANALYZE) notifications');
    await slow.query('CHECKPOINT');
    const counts = (
      await slow.query<{ status: string; channel: string; n: string }>(
        'SELECT status, channel, count(*)::text AS n FROM notifications GROUP BY 1, 2 ORDER BY 1, 2',
      )
    ).rows
      .map((r) => `${r.status}/${r.channel} ${Number(r.n).toLocaleString('en-US')}`)
      .join(', ');
    const load = os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ');
    lines.push(
      `database: postgres; machine: ${os.cpus().length} cores, load average ${load} (wall times depend on it; the PostgreSQL backend's CPU time and the pages touched much less)`,
      `${n.toLocaleString('en-US')} events of one account seeded in ${((performance.now() - seedStart) / 1000).toFixed(0)} s; notifications: ${counts}`,
    );

    // --- The webhook claim (64 rows), with the channel index and with the index it replaced.
    const claimRuns = async (
      baseline: boolean,
    ): Promise<{ times: number[]; pages: number; cpu: string }> => {
      const times: number[] = [];
      let touched = 0;
      let cpu = '';
      await slow
        .transaction(async (tx) => {
          if (baseline) {
            await tx.query('DROP INDEX notifications_due_channel');
            await tx.query(
              `CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE status = 'PENDING'`,
            );
            await tx.query('ANALYZE notifications');
          }
          // Each claim runs in a savepoint rolled back after it: it claims committed due rows,
          // as a worker's claim (its own statement) does, and every run claims the same 64. Run
          // one after another in one open transaction instead, each claim would first walk past
          // the index entries of the rows the earlier ones moved (still live to that
          // transaction), which no worker ever does: that made the figure grow with the runs.
          const claim = async () => {
            await tx.query('SAVEPOINT claim');
            let got = 0;
            const ms = await timed(async () => {
              got = (
                await claimDue(tx, {
                  limit: 64,
                  leaseMs: 30_000,
                  owner: 'bench',
                  channel: 'webhook',
                })
              ).claimed.length;
            });
            await tx.query('ROLLBACK TO SAVEPOINT claim');
            if (got !== 64) throw new Error(`claim took ${got} rows, not 64`);
            return ms;
          };
          for (let i = 0; i < 2; i++) await claim(); // warm-up
          [, cpu] = await cpuPer(claims, async () => {
            for (let i = 0; i < claims; i++) times.push(await claim());
          });
          const st = claimStatement({
            limit: 64,
            leaseMs: 30_000,
            owner: 'bench',
            channel: 'webhook',
          });
          touched = await pages(tx, st.text, st.values);
          throw new Rollback();
        })
        .catch((err: unknown) => {
          if (!(err instanceof Rollback)) throw err;
        });
      return { times, pages: touched, cpu };
    };
    const claimNew = await claimRuns(false);
    const claimOld = await claimRuns(true);
    lines.push(
      `webhook claim of 64 rows with ${chat.toLocaleString('en-US')} due chat rows ahead: ${fmt(claimNew.times)}; PostgreSQL CPU ${claimNew.cpu} per claim; ${claimNew.pages} pages (goal < 5 ms)`,
      `  baseline, the index before migration 023 (next_attempt_at only): ${fmt(claimOld.times)}; PostgreSQL CPU ${claimOld.cpu} per claim; ${claimOld.pages} pages; ratio ${(median(claimOld.times) / median(claimNew.times)).toFixed(0)}×`,
    );

    // --- The dead letters page, 50 rows, first and second page.
    const q = { accountId: account, network: 'mainnet', limit: 50, status: 'DEAD' as const };
    const first = JSON.parse((await eventsPageJson(slow, q)).json) as {
      next_before: string | null;
    };
    const pageRuns = async (run: (before?: string) => Promise<unknown>, k: number) => {
      const one: number[] = [];
      const two: number[] = [];
      await run();
      const [, cpu] = await cpuPer(k * (first.next_before ? 2 : 1), async () => {
        for (let i = 0; i < k; i++) {
          one.push(await timed(() => run()));
          if (first.next_before) {
            const b = first.next_before;
            two.push(await timed(() => run(b)));
          }
        }
      });
      return { one, two, cpu };
    };
    // As the API runs it: a named statement (eventsPageJson), on the measured backend.
    const fresh = await pageRuns(
      (before?: string) => eventsPageJson(slow, before ? { ...q, before } : q),
      20,
    );
    const oldText = (t: string) => t.replace(` AND ${DEAD_EVENTS_SQL}`, '');
    const oldPage = (before?: string) => {
      const p = pageQuery(before ? { ...q, before } : q);
      return slow.query(oldText(p.text), p.values);
    };
    const old = await pageRuns(oldPage, 2);
    const p1 = pageQuery(q);
    const newPages = await pages(slow, p1.text, p1.values);
    const oldPages = await pages(slow, oldText(p1.text), p1.values);
    lines.push(
      `dead letters page (50 of ${dead.toLocaleString('en-US')} DEAD among ${n.toLocaleString('en-US')} events): first page ${fmt(fresh.one)}, ${newPages} pages; second ${fmt(fresh.two)}; PostgreSQL CPU ${fresh.cpu} per page (goal < 25 ms)`,
      `  baseline, the query before migration 023 (newest status of every event): first page ${fmt(old.one)}, ${oldPages} pages; second ${fmt(old.two)}; PostgreSQL CPU ${old.cpu} per page; ratio ${(median(old.one) / median(fresh.one)).toFixed(0)}×`,
    );

    // --- The bulk redelivery's selection (every DEAD event, oldest first), without the insert.
    const bulkSql = (withIndex: boolean) => `SELECT e.id FROM events e
        WHERE e.account_id = $1 AND e.network = $2
          ${withIndex ? `AND ${DEAD_EVENTS_SQL}` : ''}
          AND (SELECT n.status FROM notifications n WHERE n.event_id = e.id
                ORDER BY n.created_at DESC LIMIT 1) = 'DEAD'
        ORDER BY e.created_at LIMIT 10000`;
    const bulk = async (withIndex: boolean, k: number) => {
      const times: number[] = [];
      for (let i = 0; i < k; i++) {
        let rows = 0;
        times.push(
          await timed(async () => {
            rows = (await slow.query(bulkSql(withIndex), [account, 'mainnet'])).rows.length;
          }),
        );
        if (rows !== dead) throw new Error(`bulk selection found ${rows}, not ${dead}`);
      }
      return times;
    };
    const [bulkNew, bulkCpu] = await cpuPer(10, () => bulk(true, 10));
    // The old selection reads every event of the account: bounded at 2 minutes.
    await slow.query(`SET statement_timeout = '120s'`);
    const bulkOld = await bulk(false, 1).catch((err: { code?: string }) => {
      if (err.code === '57014') return [120_000];
      throw err;
    });
    await slow.query('RESET statement_timeout');
    const bulkNewPages = await pages(db, bulkSql(true), [account, 'mainnet']);
    lines.push(
      `bulk redelivery selection (all ${dead.toLocaleString('en-US')} DEAD): ${fmt(bulkNew)}; PostgreSQL CPU ${bulkCpu} per selection; ${bulkNewPages} pages`,
      `  baseline, before migration 023 (stopped at 120 s): ${fmt(bulkOld)}; ratio ${(median(bulkOld) / median(bulkNew)).toFixed(0)}×`,
    );
  } finally {
    for (const c of cleanup) await c().catch(() => undefined);
    if (opts.keep) lines.push(`database kept: ${t.url}`);
    else await t.drop();
  }
  return lines;
}

/**
 * Drop the indexes, primary keys and foreign keys of events and notifications (seeding 10,000,000
 * rows into random-keyed b-trees is many times slower than building them afterwards).
 * @returns what puts them back: the same definitions, read from the catalog before dropping.
 */
async function dropForSeeding(db: Db): Promise<() => Promise<void>> {
  const tables = ['events', 'notifications', 'attempts'];
  const { rows: fks } = await db.query<{ tbl: string; name: string; def: string }>(
    `SELECT conrelid::regclass::text AS tbl, conname AS name, pg_get_constraintdef(oid) AS def
       FROM pg_constraint WHERE contype = 'f' AND conrelid::regclass::text = ANY($1)`,
    [tables],
  );
  const { rows: pks } = await db.query<{ tbl: string; name: string; def: string }>(
    `SELECT conrelid::regclass::text AS tbl, conname AS name, pg_get_constraintdef(oid) AS def
       FROM pg_constraint WHERE contype IN ('p', 'u') AND conrelid::regclass::text = ANY($1)
        AND conrelid::regclass::text <> 'attempts'`,
    [tables],
  );
  const { rows: idx } = await db.query<{ name: string; def: string }>(
    `SELECT indexname AS name, indexdef AS def FROM pg_indexes
      WHERE tablename IN ('events', 'notifications')
        AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))`,
  );
  for (const f of fks) await db.query(`ALTER TABLE ${f.tbl} DROP CONSTRAINT ${f.name}`);
  for (const p of pks) await db.query(`ALTER TABLE ${p.tbl} DROP CONSTRAINT ${p.name}`);
  for (const i of idx) await db.query(`DROP INDEX ${i.name}`);
  return async () => {
    await db.transaction(async (tx) => {
      await tx.query(`SET LOCAL maintenance_work_mem = '1GB'`);
      for (const p of pks) await tx.query(`ALTER TABLE ${p.tbl} ADD CONSTRAINT ${p.name} ${p.def}`);
      for (const i of idx) await tx.query(i.def);
      for (const f of fks)
        await tx.query(`ALTER TABLE ${f.tbl} ADD CONSTRAINT ${f.name} ${f.def} NOT VALID`);
    });
  };
}
