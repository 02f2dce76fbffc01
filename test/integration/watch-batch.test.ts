/**
 * Watches in bulk (issue 30 item 2), on both engines, through the public API: a batch with
 * invalid items creates the valid ones and reports the rest, each with the answer it would have
 * had alone; the quota and the rate limit count each watch; pause, resume and delete by ids and by
 * label; answers conform to the OpenAPI document.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ADDR_B58,
  ADDR2_B58,
  type ApiHarness,
  apiHarness,
  type Caller,
  json,
  openapiDocument,
  responseChecker,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

interface BatchResult {
  created: number;
  failed: number;
  results: Array<{
    index: number;
    status: number;
    watch?: { id: string; secret?: string; endpoint_id: string | null; label: string | null };
    error?: { error: string; code?: string; details?: Array<{ field: string }> };
  }>;
}

/** `count` distinct valid TRON addresses (41-hex). */
function addresses(count: number, salt = 0): string[] {
  return Array.from(
    { length: count },
    (_, i) =>
      `41${salt.toString(16).padStart(2, '0')}${i.toString(16).padStart(6, '0')}${'cd'.repeat(16)}`,
  );
}

describe.each(dbEngines)('watch batches on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  const post = (hh: ApiHarness, c: Caller, url: string, payload: unknown) =>
    hh.app.inject({
      method: 'POST',
      url,
      headers: c.headers,
      payload: payload as Record<string, unknown>,
    });

  it('creates the valid items and reports each invalid one with the answer it would have had alone', async () => {
    h = await apiHarness(engine);
    const check = responseChecker(await openapiDocument(h.app));
    const c = await h.caller({ plan: 'starter' }); // 20 active watches
    const other = await h.caller({ plan: 'starter' });
    const otherEp = json<{ id: string }>(
      await post(h, other, '/v1/endpoints', { url: 'https://hooks.example.com/other' }),
    );
    const ep = json<{ id: string }>(
      await post(h, c, '/v1/endpoints', { url: 'https://hooks.example.com/mine' }),
    );
    const res = await post(h, c, '/v1/watches/batch', {
      items: [
        { address: ADDR_B58, asset_filter: 'USDT', endpoint_id: ep.id, label: 'shop' },
        { address: 'Tnotanaddress', asset_filter: 'USDT', endpoint_id: ep.id },
        { address: ADDR2_B58, asset_filter: 'BTC', endpoint_id: ep.id },
        { address: ADDR2_B58, asset_filter: 'USDT', endpoint_id: ep.id, colour: 'red' },
        { address: ADDR_B58, asset_filter: 'USDT', endpoint_id: ep.id },
        { address: ADDR2_B58, asset_filter: 'TRX', endpoint_id: otherEp.id },
        { address: ADDR2_B58, asset_filter: 'TRX' },
        'not an object',
        { address: ADDR2_B58, asset_filter: 'TRX', webhook_url: 'https://hooks.example.com/own' },
        { address: ADDR2_B58, asset_filter: 'USDT', endpoint_id: ep.id, label: 'shop' },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(check('/v1/watches/batch', 'post', res)).toEqual([]);
    const body = json<BatchResult>(res);
    expect(body.results.map((r) => r.status)).toEqual([
      201, 400, 400, 400, 409, 404, 400, 400, 201, 201,
    ]);
    expect(body.created).toBe(3);
    expect(body.failed).toBe(7);
    expect(body.results[1]?.error?.details?.map((d) => d.field)).toEqual(['address']);
    expect(body.results[2]?.error?.details?.map((d) => d.field)).toEqual(['asset_filter']);
    expect(body.results[3]?.error?.details?.map((d) => d.field)).toEqual(['colour']);
    expect(body.results[6]?.error?.code).toBe('invalid_target');
    // A watch on an endpoint has no secret; one with its own URL gets its secret here, once.
    expect(body.results[0]?.watch?.secret).toBeUndefined();
    expect(body.results[8]?.watch?.secret).toMatch(/^whsec_/);
    const { rows } = await h.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM watches WHERE account_id = $1`,
      [c.accountId],
    );
    expect(rows[0]?.n).toBe(3);
    const { rows: audit } = await h.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM audit_log WHERE action = 'watch.created'`,
    );
    expect(audit[0]?.n).toBe(3);

    // Too many items, or none: the whole request is refused.
    const tooMany = await post(h, c, '/v1/watches/batch', {
      items: Array.from({ length: 1_001 }, () => ({})),
    });
    expect(tooMany.statusCode).toBe(400);
    expect((await post(h, c, '/v1/watches/batch', { items: [] })).statusCode).toBe(400);
  });

  it('counts each watch against the quota and the rate limit, as single creations would', async () => {
    h = await apiHarness(engine);
    const c = await h.caller({ plan: 'free' }); // 3 active watches, 60 requests per minute
    const ep = json<{ id: string }>(
      await post(h, c, '/v1/endpoints', { url: 'https://hooks.example.com/q' }),
    );
    const quota = json<BatchResult>(
      await post(h, c, '/v1/watches/batch', {
        items: addresses(5).map((address) => ({
          address,
          asset_filter: 'ALL',
          endpoint_id: ep.id,
        })),
      }),
    );
    expect(quota.results.map((r) => r.status)).toEqual([201, 201, 201, 402, 402]);
    expect(quota.results[3]?.error?.code).toBe('quota_exceeded');

    // Another account (its own window of 60 requests per minute): 70 items in one batch.
    const big = await h.caller({ plan: 'free' });
    const ep2 = json<{ id: string }>(
      await post(h, big, '/v1/endpoints', { url: 'https://hooks.example.com/r' }),
    );
    const res = json<BatchResult>(
      await post(h, big, '/v1/watches/batch', {
        items: addresses(70, 1).map((address) => ({
          address,
          asset_filter: 'ALL',
          endpoint_id: ep2.id,
        })),
      }),
    );
    // 1 request for the endpoint, then 59 items fit the window of 60: the 60th item is refused
    // as rate_limited, and every later one with it.
    const statuses = res.results.map((r) => r.status);
    expect(statuses.slice(59).every((s) => s === 429)).toBe(true);
    expect(statuses.slice(0, 59).every((s) => s !== 429)).toBe(true);
    expect(res.results[59]?.error?.code).toBe('rate_limited');
    // The next request is refused by the guard itself: the window is full.
    const after = await h.app.inject({ method: 'GET', url: '/v1/watches', headers: big.headers });
    expect(after.statusCode).toBe(429);
  });

  it('creates the valid items together, each answered as it would have been alone, with every side effect', async () => {
    h = await apiHarness(engine);
    const hh = h;
    const [a, b, c, d] = addresses(4, 3);
    const items = (ep: string) => [
      { address: ADDR_B58, asset_filter: 'USDT', webhook_url: 'https://hooks.example.com/own' },
      { address: a, asset_filter: 'ALL', endpoint_id: ep, label: 'l', metadata: { order: 'o-1' } },
      { address: a, asset_filter: 'ALL', endpoint_id: ep },
      { address: b, asset_filter: 'TRX', webhook_url: 'https://hooks.example.com/b?t=1' },
      { address: c, asset_filter: 'USDT', telegram: true },
      { address: c, asset_filter: 'USDT', endpoint_id: ep },
      { address: d, asset_filter: 'USDT', endpoint_id: ep },
      { address: a, asset_filter: 'ALL', endpoint_id: ep },
    ];
    // Two accounts alike (4 active watches, one already taken by the same first watch): one
    // sends the items as a batch, the other one POST /v1/watches per item.
    const setUp = async () => {
      const caller = await hh.caller({ plan: 'starter', watchQuota: 4 });
      const ep = json<{ id: string }>(
        await post(hh, caller, '/v1/endpoints', { url: 'https://hooks.example.com/ep' }),
      );
      const first = json<{ id: string }>(
        await post(hh, caller, '/v1/watches', {
          address: ADDR_B58,
          asset_filter: 'USDT',
          webhook_url: 'https://hooks.example.com/first',
        }),
      );
      return { caller, ep: ep.id, first: first.id };
    };
    const batch = await setUp();
    const alone = await setUp();
    const res = json<BatchResult>(
      await post(h, batch.caller, '/v1/watches/batch', { items: items(batch.ep) }),
    );
    const singles: Array<{ status: number; body: Record<string, unknown> }> = [];
    for (const item of items(alone.ep)) {
      const r = await post(h, alone.caller, '/v1/watches', item);
      singles.push({ status: r.statusCode, body: json(r) });
    }
    expect(res.results.map((r) => r.status)).toEqual([409, 201, 409, 201, 400, 201, 402, 409]);
    expect(singles.map((r) => r.status)).toEqual(res.results.map((r) => r.status));
    expect(res.created).toBe(3);
    // Each error body is the one the item got alone, but for the ids of each account's watches.
    const mine = [batch.first, ...res.results.map((r) => r.watch?.id)];
    const theirs = [alone.first, ...singles.map((r) => r.body.id)];
    const neutral = (v: unknown, ids: unknown[]) =>
      JSON.parse(
        ids.reduce<string>(
          (t, id, i) => (typeof id === 'string' ? t.split(id).join(`<watch ${i}>`) : t),
          JSON.stringify(v),
        ),
      );
    for (const [i, r] of res.results.entries()) {
      if (r.status === 201) continue;
      expect(neutral(r.error, mine)).toEqual(neutral(singles[i]?.body, theirs));
    }
    const err = (i: number) => res.results[i]?.error as Record<string, unknown> | undefined;
    expect(err(0)?.watch_id).toBe(batch.first);
    expect(err(2)?.watch_id).toBe(res.results[1]?.watch?.id);
    expect(err(7)?.watch_id).toBe(res.results[1]?.watch?.id);
    expect(err(4)?.code).toBe('telegram_not_bound');
    expect(err(6)?.code).toBe('quota_exceeded');
    expect(err(6)?.usage).toEqual({ active_watches: 4, limit: 4, plan: 'Starter' });

    // The rows: in item order, one activation block, the endpoint, the metadata, a sealed secret.
    const { rows } = await h.db.query<{
      id: string;
      active_from_block: string;
      endpoint_id: string | null;
      metadata: unknown;
      label: string | null;
      secret_key_id: string | null;
      secret_ciphertext: Buffer | Uint8Array | null;
    }>(
      `SELECT id, active_from_block::text, endpoint_id, metadata, label, secret_key_id,
              secret_ciphertext
         FROM watches WHERE account_id = $1 ORDER BY created_at, id`,
      [batch.caller.accountId],
    );
    const created = [1, 3, 5].map((i) => res.results[i]?.watch?.id);
    expect(rows.map((r) => r.id)).toEqual([batch.first, ...created]);
    const made = rows.slice(1);
    expect(new Set(made.map((r) => r.active_from_block)).size).toBe(1);
    expect(made.map((r) => r.endpoint_id)).toEqual([batch.ep, null, batch.ep]);
    expect(made[0]?.metadata).toEqual({ order: 'o-1' });
    expect(made[0]?.label).toBe('l');
    expect(made[0]?.secret_ciphertext).toBeNull();
    const sealed = made[1];
    expect(
      h.secrets.decrypt({
        keyId: sealed?.secret_key_id as string,
        ciphertext: Buffer.from(sealed?.secret_ciphertext as Uint8Array),
      }),
    ).toBe(res.results[3]?.watch?.secret);
    expect(res.results[1]?.watch).toMatchObject({ endpoint_id: batch.ep, label: 'l' });

    // One audit entry per watch created, as each would have had, marked as a batch's.
    const { rows: audit } = await h.db.query<{
      target_id: string;
      actor_type: string;
      actor_id: string;
      actor_label: string | null;
      network: string | null;
      detail: Record<string, unknown>;
    }>(
      `SELECT target_id, actor_type, actor_id, actor_label, network, detail FROM audit_log
        WHERE account_id = $1 AND action = 'watch.created' AND detail->>'batch' = 'true'
        ORDER BY at, id`,
      [batch.caller.accountId],
    );
    expect(audit.map((e) => e.target_id)).toEqual(created);
    expect(
      audit.every((e) => e.actor_type === 'api_key' && e.actor_id === batch.caller.keyId),
    ).toBe(true);
    // Who and where, as on the entry of the watch the same key created alone.
    const { rows: single } = await h.db.query<{
      actor_label: string | null;
      network: string | null;
    }>(
      `SELECT actor_label, network FROM audit_log WHERE action = 'watch.created' AND target_id = $1`,
      [batch.first],
    );
    expect(single[0]?.actor_label).toBeTruthy();
    for (const e of audit) {
      expect({ actor_label: e.actor_label, network: e.network }).toEqual(single[0]);
    }
    expect(audit[1]?.detail).toMatchObject({
      asset_filter: 'TRX',
      channel: 'webhook',
      webhook_host: 'hooks.example.com',
      endpoint_id: null,
      batch: true,
    });
    expect(audit[2]?.detail).toMatchObject({ endpoint_id: batch.ep, channel: 'webhook' });
  });

  it('pauses, resumes and deletes by ids and by label, each watch with its own result', async () => {
    h = await apiHarness(engine);
    const check = responseChecker(await openapiDocument(h.app));
    const c = await h.caller({ plan: 'pro' });
    const other = await h.caller({ plan: 'pro' });
    const ep = json<{ id: string }>(
      await post(h, c, '/v1/endpoints', { url: 'https://hooks.example.com/p' }),
    );
    const made = json<BatchResult>(
      await post(h, c, '/v1/watches/batch', {
        items: addresses(6, 2).map((address, i) => ({
          address,
          asset_filter: 'ALL',
          endpoint_id: ep.id,
          label: i < 4 ? 'order-batch-7' : 'other',
        })),
      }),
    );
    const ids = made.results.map((r) => r.watch?.id as string);
    const theirs = json<{ id: string }>(
      await post(h, other, '/v1/watches', {
        address: ADDR_B58,
        asset_filter: 'ALL',
        webhook_url: 'https://hooks.example.com/x',
      }),
    );

    const paused = await post(h, c, '/v1/watches/batch/pause', { label: 'order-batch-7' });
    expect(paused.statusCode).toBe(200);
    expect(check('/v1/watches/batch/pause', 'post', paused)).toEqual([]);
    const p = json<{ succeeded: number; results: Array<{ id: string; status: number }> }>(paused);
    expect(p.succeeded).toBe(4);
    expect(p.results.map((r) => r.id)).toEqual(ids.slice(0, 4));
    const { rows } = await h.db.query<{ id: string; status: string }>(
      `SELECT id, status FROM watches WHERE account_id = $1 ORDER BY created_at, id`,
      [c.accountId],
    );
    expect(rows.map((r) => r.status)).toEqual([
      'PAUSED',
      'PAUSED',
      'PAUSED',
      'PAUSED',
      'ACTIVE',
      'ACTIVE',
    ]);

    const resumed = json<{ results: Array<{ status: number }> }>(
      await post(h, c, '/v1/watches/batch/resume', { ids: [ids[0], ids[1], theirs.id, 'wh_x'] }),
    );
    expect(resumed.results.map((r) => r.status)).toEqual([200, 200, 404, 404]);

    const deleted = await post(h, c, '/v1/watches/batch/delete', { ids: [ids[0], theirs.id] });
    expect(check('/v1/watches/batch/delete', 'post', deleted)).toEqual([]);
    expect(
      json<{ results: Array<{ status: number }> }>(deleted).results.map((r) => r.status),
    ).toEqual([204, 404]);
    // The other account's watch is untouched.
    const { rows: t } = await h.db.query<{ deleted_at: Date | null; status: string }>(
      'SELECT deleted_at, status FROM watches WHERE id = $1',
      [theirs.id],
    );
    expect(t[0]).toEqual({ deleted_at: null, status: 'ACTIVE' });

    const both = await post(h, c, '/v1/watches/batch/pause', { ids: [ids[1]], label: 'other' });
    expect(both.statusCode).toBe(400);
    const neither = await post(h, c, '/v1/watches/batch/pause', {});
    expect(neither.statusCode).toBe(400);
  });
});
