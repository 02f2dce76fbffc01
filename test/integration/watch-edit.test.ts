/**
 * Editing and labelling a watch (issue 19 item 4): PATCH /v1/watches/{id} changes the webhook URL
 * (checked as at creation) and the label; labels can be given at creation and are listed; a 409
 * duplicate names the existing watch (`watch_id`, issue 19 item 7). Both engines; every answer
 * is checked against the OpenAPI document.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ADDR_B58,
  type ApiHarness,
  apiHarness,
  json,
  openapiDocument,
  responseChecker,
  webhookWatch,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

type Body = Record<string, unknown>;

describe.each(dbEngines)('editing watches on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('changes the URL (checked like creation) and the label; lists show the label', async () => {
    h = await apiHarness(engine);
    const hh = h;
    const check = responseChecker(await openapiDocument(hh.app));
    const c = await hh.caller();
    const created = await hh.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch({ label: '  Shop EU deposits  ' }),
    });
    expect(created.statusCode).toBe(201);
    const w = json(created);
    expect(w.label).toBe('Shop EU deposits');
    const patch = (payload: unknown, id = w.id as string, headers = c.headers) =>
      hh.app.inject({
        method: 'PATCH',
        url: `/v1/watches/${id}`,
        headers,
        payload: payload as Body,
      });

    const moved = await patch({ webhook_url: 'https://hooks2.example.com/tron?x=1' });
    expect(moved.statusCode).toBe(200);
    expect(check('/v1/watches/{id}', 'patch', moved)).toEqual([]);
    expect(json(moved)).toMatchObject({
      id: w.id,
      webhook_url: 'https://hooks2.example.com/tron?x=1',
      label: 'Shop EU deposits',
      address: ADDR_B58,
    });
    const relabelled = await patch({ label: 'Main wallet' });
    expect(json(relabelled)).toMatchObject({
      label: 'Main wallet',
      webhook_url: 'https://hooks2.example.com/tron?x=1',
    });
    const list = json<{ data: Body[] }>(
      await hh.app.inject({ url: '/v1/watches', headers: c.headers }),
    );
    expect(list.data[0]).toMatchObject({ id: w.id, label: 'Main wallet' });
    // The secret is unchanged by an edit (the row's ciphertext is the same).
    const { rows } = await hh.db.query<{ webhook_url: string; label: string }>(
      'SELECT webhook_url, label FROM watches WHERE id = $1',
      [w.id],
    );
    expect(rows[0]).toEqual({
      webhook_url: 'https://hooks2.example.com/tron?x=1',
      label: 'Main wallet',
    });

    expect(json(await patch({ label: '' })).label).toBeNull();
    expect(json(await patch({ label: 'x' })).label).toBe('x');
    expect(json(await patch({ label: null })).label).toBeNull();

    // Refused as at creation: a field error naming the member, nothing changed.
    const refusals: Array<[unknown, string]> = [
      [{ webhook_url: 'http://hooks.example.com/x' }, 'webhook_url'],
      [{ webhook_url: 'https://10.0.0.1/x' }, 'webhook_url'],
      [{ webhook_url: 'https://user:pw@hooks.example.com/x' }, 'webhook_url'],
      [{ webhook_url: 'https://nothing.invalid/x' }, 'webhook_url'],
      [{ webhook_url: `https://hooks.example.com/${'a'.repeat(2100)}` }, 'webhook_url'],
      [{ label: 'a'.repeat(101) }, 'label'],
      [{ label: 'two\nlines' }, 'label'],
      [{ label: 7 }, 'label'],
      [{ address: ADDR_B58 }, 'address'],
      [{}, 'body'],
    ];
    for (const [payload, field] of refusals) {
      const res = await patch(payload);
      expect(res.statusCode, JSON.stringify(payload).slice(0, 80)).toBe(400);
      expect(check('/v1/watches/{id}', 'patch', res)).toEqual([]);
      const body = json<{ details?: Array<{ field: string }> }>(res);
      expect(JSON.stringify(body.details ?? body)).toContain(field);
    }
    const after = json<{ data: Body[] }>(
      await hh.app.inject({ url: '/v1/watches', headers: c.headers }),
    );
    expect(after.data[0]).toMatchObject({
      webhook_url: 'https://hooks2.example.com/tron?x=1',
      label: null,
    });

    // Not found, malformed, someone else's, deleted: 404 alike.
    expect((await patch({ label: 'a' }, 'wh_nope')).statusCode).toBe(404);
    const other = await hh.caller();
    expect((await patch({ label: 'a' }, w.id as string, other.headers)).statusCode).toBe(404);
    await hh.app.inject({ method: 'DELETE', url: `/v1/watches/${w.id}`, headers: c.headers });
    expect((await patch({ label: 'a' })).statusCode).toBe(404);
  }, 180_000);

  it('a duplicate names the existing watch; a Telegram watch has no URL to change', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const first = json(
      await h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: c.headers,
        payload: webhookWatch(),
      }),
    );
    const dup = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch({ webhook_url: 'https://other.example.com/x' }),
    });
    expect(dup.statusCode).toBe(409);
    expect(json(dup)).toMatchObject({ watch_id: first.id });
    expect(json(dup).error).toContain(first.id as string);

    await h.db.query(`UPDATE accounts SET telegram_chat_id = '12345' WHERE id = $1`, [c.accountId]);
    const tg = json(
      await h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: c.headers,
        payload: { address: ADDR_B58, asset_filter: 'USDT', telegram: true, label: 'Chat' },
      }),
    );
    expect(tg.label).toBe('Chat');
    const res = await h.app.inject({
      method: 'PATCH',
      url: `/v1/watches/${tg.id}`,
      headers: c.headers,
      payload: { webhook_url: 'https://hooks.example.com/x' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('Telegram');
    const ok = await h.app.inject({
      method: 'PATCH',
      url: `/v1/watches/${tg.id}`,
      headers: c.headers,
      payload: { label: 'Chat 2' },
    });
    expect(json(ok).label).toBe('Chat 2');
  }, 180_000);
});
