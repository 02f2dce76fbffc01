/**
 * One chain per redelivery (src/events/redeliver.ts, migration 016), on both engines: any number
 * of redeliveries of one event at the same instant (single and bulk, the public API and the
 * domain function together) create exactly one new PENDING notification, and the database itself
 * refuses a second PENDING notification for an event.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/common/errors.js';
import { redeliverDead, redeliverEvent } from '../../src/events/redeliver.js';
import { type ApiHarness, apiHarness, insertEvents, webhookWatch } from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

describe.each(dbEngines)('redelivery on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function deadEvents(count: number) {
    h = await apiHarness(engine);
    const c = await h.caller();
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch(),
    });
    const watchId = (created.json() as { id: string }).id;
    const ids = await insertEvents(h.db, {
      accountId: c.accountId,
      watchId,
      tag: 'rd',
      count,
      start: '2026-01-08T13:36:54Z',
    });
    await h.db.query(`UPDATE notifications SET status = 'DEAD', attempts = 6`);
    return { c, watchId, ids };
  }

  async function pendingOf(eventId: string): Promise<number> {
    const { rows } = await (h as ApiHarness).db.query<{ n: string }>(
      `SELECT count(*)::int8 AS n FROM notifications WHERE event_id = $1 AND status = 'PENDING'`,
      [eventId],
    );
    return Number(rows[0]?.n);
  }

  it('eight redeliveries of one event at once make one new chain; the others are 409', async () => {
    const { c, ids } = await deadEvents(1);
    const id = ids[0] as string;
    const h0 = h as ApiHarness;
    const results = await Promise.allSettled([
      ...Array.from({ length: 4 }, () => redeliverEvent(h0.db, c.accountId, 'mainnet', id)),
      ...Array.from({ length: 4 }, () =>
        h0.app.inject({ method: 'POST', url: `/v1/events/${id}/redeliver`, headers: c.headers }),
      ),
    ]);
    const created = results.filter(
      (r) =>
        (r.status === 'fulfilled' && typeof r.value === 'string') ||
        (r.status === 'fulfilled' && typeof r.value !== 'string' && r.value.statusCode === 201),
    );
    expect(created).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected') {
        expect(r.reason).toBeInstanceOf(ApiError);
        expect((r.reason as ApiError).status).toBe(409);
      } else if (typeof r.value !== 'string' && r.value.statusCode !== 201) {
        expect(r.value.statusCode).toBe(409);
      }
    }
    expect(await pendingOf(id)).toBe(1);
  });

  it('bulk and single redeliveries at once: every dead event gets exactly one new chain', async () => {
    const { c, ids } = await deadEvents(20);
    const h0 = h as ApiHarness;
    const results = await Promise.allSettled([
      redeliverDead(h0.db, c.accountId, 'mainnet', {}),
      redeliverDead(h0.db, c.accountId, 'mainnet', {}),
      ...ids.slice(0, 10).map((id) => redeliverEvent(h0.db, c.accountId, 'mainnet', id)),
    ]);
    for (const r of results) {
      if (r.status === 'rejected') expect((r.reason as ApiError).status).toBe(409);
    }
    const bulk = results
      .slice(0, 2)
      .map((r) => (r.status === 'fulfilled' ? Number(r.value) : 0))
      .reduce((a, b) => a + b, 0);
    const single = results.slice(2).filter((r) => r.status === 'fulfilled').length;
    expect(bulk + single).toBe(20);
    for (const id of ids) expect(await pendingOf(id), id).toBe(1);
  });

  it('the database refuses a second PENDING notification for one event', async () => {
    const { ids } = await deadEvents(1);
    const db = (h as ApiHarness).db;
    await db.query(`UPDATE notifications SET status = 'PENDING'`);
    await expect(
      db.query(
        `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                    next_attempt_at, created_at)
         SELECT 'ntf_second', id, account_id, watch_id, 'webhook', 'PENDING', 0, now(), now()
           FROM events WHERE id = $1`,
        [ids[0]],
      ),
    ).rejects.toMatchObject({ code: '23505' });
  });
});
