/**
 * SPEC §POST/GET/DELETE /v1/watches: every status and code, through the HTTP app on a real
 * database (both engines).
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ADDR_B58,
  ADDR_HEX,
  ADDR2_B58,
  type ApiHarness,
  apiHarness,
  type Caller,
  json,
  webhookWatch,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

type Body = Record<string, unknown>;

describe.each(dbEngines)('/v1/watches on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function setup(opts: Parameters<ApiHarness['caller']>[0] = {}) {
    // The longest block interval the config takes (60 s): the head the harness stored stays
    // fresh for the whole test however loaded the machine is, so the activation block is exactly
    // that head (its extrapolation of a stale head is chain-head.test.ts's subject).
    h = await apiHarness(engine, { env: { TRON_BLOCK_INTERVAL_MS: '60000' } });
    return { h, c: await h.caller(opts) };
  }

  function post(c: Caller, payload: Body, url = '/v1/watches') {
    if (!h) throw new Error('no harness');
    return h.app.inject({ method: 'POST', url, headers: c.headers, payload });
  }

  /** A 400 without a code whose details name `field`. */
  function expectFieldError(res: { statusCode: number; body: string }, field: string) {
    expect(res.statusCode).toBe(400);
    const body = JSON.parse(res.body) as Body;
    expect(body.code).toBeUndefined();
    expect(typeof body.error).toBe('string');
    const details = body.details as Array<{ field: string; message: string }>;
    expect(details.map((d) => d.field)).toContain(field);
    for (const d of details) expect(d.message.length).toBeGreaterThan(0);
    return details;
  }

  it('creates a webhook watch: 201 WatchCreated with the secret once, encrypted at rest', async () => {
    const { h, c } = await setup();
    const res = await post(c, webhookWatch());
    expect(res.statusCode).toBe(201);
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    const w = json(res);
    expect(w).toEqual({
      id: expect.stringMatching(/^wh_[0-9a-z]{26}$/),
      address: ADDR_B58,
      asset_filter: 'USDT',
      direction: 'incoming',
      channel: 'webhook',
      webhook_url: 'https://hooks.example.com/tron',
      endpoint_id: null,
      label: null,
      metadata: null,
      status: 'ACTIVE',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      // Additive (issue 36 item 4): the stored head, as in the row below.
      active_from_block: 1_018,
      paused_reason: null,
      auto_paused_at: null,
      secret_rotated_at: null,
      previous_secret_expires_at: null,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      note: expect.stringContaining('only once'),
    });
    const { rows } = await h.db.query<{
      address_hex: string;
      active_from_block: number;
      secret_key_id: string;
      secret_ciphertext: Uint8Array;
    }>(
      'SELECT address_hex, active_from_block, secret_key_id, secret_ciphertext FROM watches WHERE id = $1',
      [w.id],
    );
    const row = rows[0]!;
    expect(row.address_hex).toBe(ADDR_HEX);
    // Exactly the chain head the harness stored a moment ago (DESIGN invariant 5): one block
    // higher would miss the transfers of the watch's first block.
    expect(row.active_from_block).toBe(1_018);
    expect(Buffer.from(row.secret_ciphertext).toString('latin1')).not.toContain(String(w.secret));
    expect(
      h.secrets.decrypt({
        keyId: row.secret_key_id,
        ciphertext: Buffer.from(row.secret_ciphertext),
      }),
    ).toBe(w.secret);

    // GET never returns the secret.
    const list = await h.app.inject({ url: '/v1/watches', headers: c.headers });
    expect(list.statusCode).toBe(200);
    expect(list.body).not.toContain(String(w.secret));
    expect(json(list).data).toEqual([
      {
        id: w.id,
        address: ADDR_B58,
        asset_filter: 'USDT',
        direction: 'incoming',
        channel: 'webhook',
        webhook_url: 'https://hooks.example.com/tron',
        endpoint_id: null,
        label: null,
        metadata: null,
        status: 'ACTIVE',
        created_at: w.created_at,
        active_from_block: 1_018,
        paused_reason: null,
        auto_paused_at: null,
        secret_rotated_at: null,
        previous_secret_expires_at: null,
        // Additive (issue 19 item 1): a new watch's endpoint health, nothing attempted yet.
        health: expect.objectContaining({
          alert: null,
          consecutive_failures: 0,
          failing_since: null,
          hour: { attempts: 0, succeeded: 0, success_rate: null, p50_ms: null, p95_ms: null },
          day: { attempts: 0, succeeded: 0, success_rate: null, p50_ms: null, p95_ms: null },
        }),
      },
    ]);
  });

  it('accepts a 41-hex address, every direction and asset filter, and network: mainnet', async () => {
    const { c } = await setup({ plan: 'starter' });
    const hex = await post(
      c,
      webhookWatch({
        address: ADDR_HEX.toUpperCase(),
        direction: 'both',
        asset_filter: 'ALL',
        network: 'mainnet',
      }),
    );
    expect(hex.statusCode).toBe(201);
    expect(json(hex)).toMatchObject({
      address: ADDR_HEX.toUpperCase(),
      direction: 'both',
      asset_filter: 'ALL',
    });
    const out = await post(
      c,
      webhookWatch({ asset_filter: 'TRX', direction: 'outgoing' }),
      '/v1/watches?network=mainnet',
    );
    expect(out.statusCode).toBe(201);
  });

  it('answers 400 invalid_target for zero or two targets', async () => {
    const { c } = await setup();
    const zero = [
      { address: ADDR_B58, asset_filter: 'USDT' },
      { address: ADDR_B58, asset_filter: 'USDT', telegram: false },
      { address: ADDR_B58, asset_filter: 'USDT', webhook_url: null },
    ];
    const two = [webhookWatch({ telegram: true })];
    for (const body of [...zero, ...two]) {
      const res = await post(c, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(json(res).code).toBe('invalid_target');
      expect(res.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
    }
  });

  it('answers 400 telegram_not_bound while no chat is connected, and creates a chat watch once one is', async () => {
    const { h, c } = await setup();
    const body = { address: ADDR_B58, asset_filter: 'TRX', telegram: true };
    const res = await post(c, body);
    expect(res.statusCode).toBe(400);
    expect(json(res).code).toBe('telegram_not_bound');

    await h.db.query("UPDATE accounts SET telegram_chat_id = '12345' WHERE id = $1", [c.accountId]);
    const ok = await post(c, body);
    expect(ok.statusCode).toBe(201);
    const w = json(ok);
    expect(w).toMatchObject({ channel: 'telegram', webhook_url: null, asset_filter: 'TRX' });
    expect(w).not.toHaveProperty('secret');
  });

  it('answers 400 testnet_unsupported to a body or query naming a testnet', async () => {
    const { h, c } = await setup();
    for (const network of ['nile', 'shasta', 'testnet']) {
      const inBody = await post(c, webhookWatch({ network }));
      expect(inBody.statusCode).toBe(400);
      expect(json(inBody).code).toBe('testnet_unsupported');
      const inQuery = await post(c, webhookWatch(), `/v1/watches?network=${network}`);
      expect(json(inQuery).code).toBe('testnet_unsupported');
      const list = await h.app.inject({
        url: `/v1/watches?network=${network}`,
        headers: c.headers,
      });
      expect(list.statusCode).toBe(400);
      expect(json(list).code).toBe('testnet_unsupported');
    }
    const listed = await h.app.inject({ url: '/v1/watches', headers: c.headers });
    expect(json(listed).data).toEqual([]);
  });

  it('answers 400 with details naming address for an invalid address', async () => {
    const { c } = await setup();
    for (const address of [
      'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u', // bad checksum
      'T123',
      '42a614f803b6fd780986a42c78ec9c7f77e6ded13c', // wrong version byte
      ' TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
    ]) {
      expectFieldError(await post(c, webhookWatch({ address })), 'address');
    }
    expectFieldError(await post(c, webhookWatch({ address: '' })), 'address');
    expectFieldError(await post(c, { asset_filter: 'USDT', telegram: true }), 'address');
  });

  it('refuses each non-public or malformed webhook_url with 400 (no code) naming webhook_url', async () => {
    const { h, c } = await setup();
    const refused = [
      'http://hooks.example.com/tron', // not https
      'https://user:pass@hooks.example.com/tron', // credentials
      'https://10.1.2.3/hook', // private IPv4 literal
      'https://192.168.0.10/hook',
      'https://[::1]/hook', // IPv6 loopback
      'https://2130706433/hook', // decimal 127.0.0.1
      'https://0x7f.1/hook', // hex 127.0.0.1
      'https://[::ffff:127.0.0.1]/hook', // IPv4-mapped loopback
      'https://localhost/hook',
      'https://localhost./hook', // trailing dot: the same host
      'https://api.localhost./hook',
      'ftp://hooks.example.com/x',
      `https://hooks.example.com/${'a'.repeat(2049 - 'https://hooks.example.com/'.length)}`,
    ];
    expect(refused[refused.length - 1]).toHaveLength(2049);
    for (const webhook_url of refused) {
      const details = expectFieldError(await post(c, webhookWatch({ webhook_url })), 'webhook_url');
      expect(details.find((d) => d.field === 'webhook_url')?.message, webhook_url).toBeTruthy();
    }
    // Exactly 2048 characters is allowed.
    const longest = `https://hooks.example.com/${'a'.repeat(2048 - 'https://hooks.example.com/'.length)}`;
    expect((await post(c, webhookWatch({ webhook_url: longest }))).statusCode).toBe(201);
    const { rows } = await h.db.query<{ n: number }>('SELECT count(*)::int8 AS n FROM watches');
    expect(rows[0]?.n).toBe(1);
  });

  it('answers 400 to malformed JSON or an invalid body, 415 to another content type, 413 to a huge body', async () => {
    const { h, c } = await setup();
    const raw = (payload: string, contentType = 'application/json') =>
      h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: { ...c.headers, 'content-type': contentType },
        payload,
      });
    for (const bad of ['{"address":', '{', 'nul', '{"a":1}}', '{"__proto__":{"x":1}}']) {
      const res = await raw(bad);
      expect(res.statusCode, bad).toBe(400);
      const body = json(res);
      expect(body.code).toBeUndefined();
      expect(body.details).toEqual([{ field: 'body', message: expect.any(String) }]);
      expect(res.headers['x-ratelimit-limit']).toBe('60');
    }
    expectFieldError(await raw(''), 'body');
    expectFieldError(await raw('[]'), 'body');
    expectFieldError(await raw('"x"'), 'body');
    const invalid = expectFieldError(
      await raw(
        JSON.stringify({
          address: ADDR_B58,
          asset_filter: 'BTC',
          direction: 'sideways',
          telegram: 'maybe',
        }),
      ),
      'asset_filter',
    );
    expect(invalid.map((d) => d.field).sort()).toEqual(['asset_filter', 'direction', 'telegram']);
    expectFieldError(
      await raw(JSON.stringify({ webhook_url: 'https://a.example.com/' })),
      'asset_filter',
    );

    const text = await raw('address=x', 'text/plain');
    expect(text.statusCode).toBe(415);
    expect(json(text)).toEqual({ error: expect.any(String) });
    expect(text.headers['x-ratelimit-limit']).toBe('60');
    const form = await raw('address=x', 'application/x-www-form-urlencoded');
    expect(form.statusCode).toBe(415);

    const huge = await raw(JSON.stringify(webhookWatch({ pad: 'x'.repeat(100_000) })));
    expect(huge.statusCode).toBe(413);
    expect(json(huge)).toEqual({ error: expect.any(String) });
  });

  it('answers 402 quota_exceeded with the exact usage, counting ACTIVE watches only', async () => {
    const { h, c } = await setup();
    const addresses = [ADDR_B58, ADDR2_B58];
    for (const [i, direction] of ['incoming', 'outgoing', 'both'].entries()) {
      const res = await post(c, webhookWatch({ direction, address: addresses[i % 2] }));
      expect(res.statusCode).toBe(201);
    }
    const full = await post(c, webhookWatch({ asset_filter: 'TRX' }));
    expect(full.statusCode).toBe(402);
    expect(json(full)).toEqual({
      error: expect.any(String),
      code: 'quota_exceeded',
      usage: { active_watches: 3, limit: 3, plan: 'Free' },
    });
    expect(full.headers['x-ratelimit-limit']).toBe('60');

    // A paused watch holds no slot (DESIGN decisions).
    await h.db.query(
      "UPDATE watches SET status = 'PAUSED' WHERE id = (SELECT id FROM watches WHERE account_id = $1 ORDER BY created_at LIMIT 1)",
      [c.accountId],
    );
    expect((await post(c, webhookWatch({ asset_filter: 'TRX' }))).statusCode).toBe(201);

    // An account's own quota overrides the plan's; usage names the plan.
    const small = await h.caller({ plan: 'starter', watchQuota: 1 });
    expect((await post(small, webhookWatch())).statusCode).toBe(201);
    const res = await post(small, webhookWatch({ asset_filter: 'ALL' }));
    expect(json(res)).toMatchObject({
      code: 'quota_exceeded',
      usage: { active_watches: 1, limit: 1, plan: 'Starter' },
    });
  });

  it('answers 409 to a duplicate identity, in either address encoding, before the quota', async () => {
    const { h, c } = await setup({ watchQuota: 1 });
    const first = await post(c, webhookWatch({ direction: 'both' }));
    expect(first.statusCode).toBe(201);
    for (const address of [ADDR_B58, ADDR_HEX, ADDR_HEX.toUpperCase(), `0x${ADDR_HEX}`]) {
      // A different URL does not make another watch: the channel is the identity, not the URL.
      const dup = await post(
        c,
        webhookWatch({ address, direction: 'both', webhook_url: 'https://other.example.com/x' }),
      );
      expect(dup.statusCode, address).toBe(409);
      const body = json(dup);
      expect(body.code).toBeUndefined();
      expect(body.error).toContain(String(json(first).id));
    }
    // Another direction is another identity (then the quota of 1 applies).
    expect((await post(c, webhookWatch({ direction: 'incoming' }))).statusCode).toBe(402);
    // Another account may watch the same address.
    const other = await h.caller();
    expect((await post(other, webhookWatch({ direction: 'both' }))).statusCode).toBe(201);
  });

  it('serialises concurrent creations: one duplicate wins, the quota is never overrun', async () => {
    const { h, c } = await setup({ watchQuota: 2 });
    const same = await Promise.all([1, 2, 3, 4].map(() => post(c, webhookWatch())));
    expect(same.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409]);
    const distinct = await Promise.all(
      ['TRX', 'ALL'].flatMap((asset_filter) =>
        ['incoming', 'outgoing'].map((direction) =>
          post(c, webhookWatch({ asset_filter, direction })),
        ),
      ),
    );
    expect(distinct.map((r) => r.statusCode).sort()).toEqual([201, 402, 402, 402]);
    const { rows } = await h.db.query<{ n: number }>(
      'SELECT count(*)::int8 AS n FROM watches WHERE account_id = $1 AND deleted_at IS NULL',
      [c.accountId],
    );
    expect(rows[0]?.n).toBe(2);
  });

  it('lists only the caller’s live watches, newest first', async () => {
    const { h, c } = await setup({ plan: 'starter' });
    const ids: string[] = [];
    for (const asset_filter of ['USDT', 'TRX', 'ALL']) {
      ids.push(String(json(await post(c, webhookWatch({ asset_filter }))).id));
    }
    const other = await h.caller();
    await post(other, webhookWatch());
    await h.app.inject({ method: 'DELETE', url: `/v1/watches/${ids[1]}`, headers: c.headers });
    const res = await h.app.inject({ url: '/v1/watches', headers: c.headers });
    expect(res.statusCode).toBe(200);
    expect((json(res).data as Body[]).map((w) => w.id)).toEqual([ids[2], ids[0]]);
  });

  it('deletes: 204 and the slot is free at once; 404 when missing, malformed, foreign or deleted twice', async () => {
    const { h, c } = await setup({ watchQuota: 1 });
    const w = json(await post(c, webhookWatch()));
    expect((await post(c, webhookWatch({ asset_filter: 'TRX' }))).statusCode).toBe(402);

    const other = await h.caller();
    const foreign = await h.app.inject({
      method: 'DELETE',
      url: `/v1/watches/${w.id}`,
      headers: other.headers,
    });
    expect(foreign.statusCode).toBe(404);
    expect(json(foreign)).toEqual({ error: expect.any(String) });

    const del = await h.app.inject({
      method: 'DELETE',
      url: `/v1/watches/${w.id}`,
      headers: c.headers,
    });
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    expect(del.headers['x-ratelimit-limit']).toBe('60');
    // Slot freed immediately.
    expect((await post(c, webhookWatch({ asset_filter: 'TRX' }))).statusCode).toBe(201);
    // The row stays (soft delete) for its events and notifications.
    const { rows } = await h.db.query<{ deleted_at: Date | null }>(
      'SELECT deleted_at FROM watches WHERE id = $1',
      [w.id],
    );
    expect(rows[0]?.deleted_at).toBeInstanceOf(Date);

    for (const id of [
      w.id,
      'wh_00000000000000000000000000',
      'nope',
      'evt_00000000000000000000000000',
      'x'.repeat(300),
    ]) {
      const res = await h.app.inject({
        method: 'DELETE',
        url: `/v1/watches/${id}`,
        headers: c.headers,
      });
      expect(res.statusCode, String(id)).toBe(404);
      expect(json(res).code).toBeUndefined();
      expect(res.headers['x-ratelimit-limit']).toBe('60');
    }
    // A DELETE sent with a JSON content type and no body is fine.
    const w2 = json(await h.app.inject({ url: '/v1/watches', headers: c.headers })).data as Body[];
    const withType = await h.app.inject({
      method: 'DELETE',
      url: `/v1/watches/${w2[0]?.id}`,
      headers: { ...c.headers, 'content-type': 'application/json' },
    });
    expect(withType.statusCode).toBe(204);
  });

  it('answers 503 with Retry-After while no chain head is known', async () => {
    h = await apiHarness(engine, { chainHead: false });
    const c = await h.caller();
    const res = await post(c, webhookWatch());
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expect(json(res)).toEqual({ error: 'chain head not known yet; retry shortly' });
    const { rows } = await h.db.query<{ n: number }>('SELECT count(*)::int8 AS n FROM watches');
    expect(rows[0]?.n).toBe(0);
  });

  it('answers 404 with the error body to an unknown /v1 route, 400 to a malformed URL', async () => {
    const { h, c } = await setup();
    const unknown = await h.app.inject({ url: '/v1/nothing', headers: c.headers });
    expect(unknown.statusCode).toBe(404);
    expect(json(unknown)).toEqual({ error: expect.any(String) });
    expect(unknown.headers['x-ratelimit-limit']).toBe('60');
    const put = await h.app.inject({
      method: 'PUT',
      url: '/v1/watches',
      headers: c.headers,
      payload: {},
    });
    expect(put.statusCode).toBe(404);
    const bad = await h.app.inject({
      method: 'DELETE',
      url: '/v1/watches/%E0%A4%A',
      headers: c.headers,
    });
    expect(bad.statusCode).toBe(400);
    expect(json(bad)).toEqual({ error: expect.any(String) });
    expect(bad.headers['x-ratelimit-limit']).toBe('60');
  });
});
