/**
 * Finding and following events in the console (issue 19 items 5, 6 and the chat delivery of 7),
 * on both engines, through the real app: search by tx id, event id and address; filters by
 * asset, direction, channel and status; paging both ways; the streamed CSV and JSON export; the
 * live stream (server-sent events over a real socket) telling an account, and only it, that an
 * attempt landed or events arrived, each page of its own environment only (issue 32); a chat delivery's page (chat, message, Bot API answer).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
import { exportEvents } from '../../src/events/export.js';
import { type ApiHarness, apiHarness, insertEvents, json, webhookWatch } from '../helpers/api.js';
import { Browser } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';

const OPEN = { CONSOLE_SIGNUP: 'open' };
const OTHER = 'TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL';
const TX = 'ab'.repeat(32);

interface Page {
  data: Array<{ event_id: string; tx_id: string; asset: string; direction: string }>;
  next_before: string | null;
  next_after: string | null;
}

describe.each(dbEngines)('console search, export and live stream on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  /** The watch's label: a comma and a quote, which CSV must quote. */
  const LABEL = 'Shop, "main" wallet';

  /** A signed-in account with one webhook watch and 30 events (oldest first in `ids`). */
  async function setUp() {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    expect((await b.signUp(`find-${engine}@example.com`)).statusCode).toBe(201);
    const created = await b.post(
      '/console/api/watches',
      webhookWatch({ asset_filter: 'ALL', label: LABEL }),
    );
    expect(created.statusCode, created.body).toBe(201);
    const watchId = json<{ id: string }>(created).id;
    const { rows } = await h.db.query<{ id: string }>('SELECT id FROM accounts');
    const accountId = rows[0]?.id as string;
    const ids = await insertEvents(h.db, {
      accountId,
      watchId,
      tag: 'fd',
      count: 30,
      start: '2026-01-08T13:36:54Z',
    });
    // Event 3: a known transaction, outgoing TRX from OTHER; events 20..29: TRX.
    await h.db.query(
      `UPDATE events SET tx_id = $2, direction = 'outgoing', asset = 'TRX', contract = NULL,
                         from_address = $3 WHERE id = $1`,
      [ids[3], TX, OTHER],
    );
    await h.db.query(`UPDATE events SET asset = 'TRX', contract = NULL WHERE id = ANY($1)`, [
      ids.slice(20),
    ]);
    await h.db.query(`UPDATE notifications SET status = 'DEAD', attempts = 6 WHERE event_id = $1`, [
      ids[5],
    ]);
    return { b, watchId, accountId, ids };
  }

  const page = async (b: Browser, qs: string) => {
    const res = await b.get(`/console/api/events?${qs}`);
    expect(res.statusCode, res.body).toBe(200);
    return json<Page>(res);
  };

  it('finds one event by tx id (any case, 0x allowed), by event id and by address', async () => {
    const { b, ids } = await setUp();
    const byTx = await page(b, `q=0x${TX.toUpperCase()}`);
    expect(byTx.data.map((e) => e.event_id)).toEqual([ids[3]]);
    const byId = await page(b, `q=${ids[7]}`);
    expect(byId.data.map((e) => e.event_id)).toEqual([ids[7]]);
    // OTHER is the sender of event 3 only; the recipient of every event is found on either side.
    const byFrom = await page(b, `q=${OTHER}`);
    expect(byFrom.data.map((e) => e.event_id)).toEqual([ids[3]]);
    const byTo = await page(b, 'q=TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t&limit=200');
    expect(byTo.data).toHaveLength(30);
    // Search combines with the filters.
    expect((await page(b, `q=${OTHER}&asset=USDT`)).data).toHaveLength(0);

    // Any other term is a metadata value (issue 40 item 5): none of these events has metadata.
    expect((await page(b, 'q=hello')).data).toEqual([]);
    const bad = await b.get(`/console/api/events?q=${'x'.repeat(501)}`);
    expect(bad.statusCode).toBe(400);
    expect(json(bad).details).toEqual([
      { field: 'q', message: expect.stringContaining('transaction id (64 hex characters)') },
    ]);
  });

  it('filters by asset, direction, channel and status, and refuses a From after the To', async () => {
    const { b, ids } = await setUp();
    expect((await page(b, 'asset=TRX&limit=200')).data).toHaveLength(11);
    expect((await page(b, 'asset=USDT&limit=200')).data).toHaveLength(19);
    expect((await page(b, 'direction=outgoing')).data.map((e) => e.event_id)).toEqual([ids[3]]);
    expect((await page(b, 'channel=telegram')).data).toHaveLength(0);
    expect((await page(b, 'channel=webhook&limit=200')).data).toHaveLength(30);
    expect((await page(b, 'status=DEAD')).data.map((e) => e.event_id)).toEqual([ids[5]]);
    expect((await b.get('/console/api/events?asset=BTC')).statusCode).toBe(400);

    const range = await b.get(
      '/console/api/events?since=2026-01-09T00:00:00Z&until=2026-01-08T00:00:00Z',
    );
    expect(range.statusCode).toBe(400);
    expect(json(range).details).toEqual([
      { field: 'since', message: '"From" is after "To": choose a start before the end' },
    ]);
  });

  it('pages older and back newer without skipping or repeating', async () => {
    const { b, ids } = await setUp();
    const newestFirst = [...ids].reverse();
    const p1 = await page(b, 'limit=10');
    expect(p1.data.map((e) => e.event_id)).toEqual(newestFirst.slice(0, 10));
    expect(p1.next_after).toBeNull();
    const p2 = await page(b, `limit=10&before=${encodeURIComponent(p1.next_before as string)}`);
    expect(p2.data.map((e) => e.event_id)).toEqual(newestFirst.slice(10, 20));
    const p3 = await page(b, `limit=10&before=${encodeURIComponent(p2.next_before as string)}`);
    expect(p3.data.map((e) => e.event_id)).toEqual(newestFirst.slice(20, 30));
    expect(p3.next_before).toBeNull();
    // Back up: each newer page is the one it came from, newest first.
    const b2 = await page(b, `limit=10&after=${encodeURIComponent(p3.next_after as string)}`);
    expect(b2.data.map((e) => e.event_id)).toEqual(p2.data.map((e) => e.event_id));
    expect(b2.next_before).toBe(p2.next_before);
    const b1 = await page(b, `limit=10&after=${encodeURIComponent(b2.next_after as string)}`);
    expect(b1.data.map((e) => e.event_id)).toEqual(p1.data.map((e) => e.event_id));
    expect(b1.next_after).toBeNull();
    expect(
      (await b.get('/console/api/events?before=2026-01-09T00:00:00Z&after=2026-01-08T00:00:00Z'))
        .statusCode,
    ).toBe(400);
  });

  it('exports the filtered list as CSV and JSON, streamed in chunks', async () => {
    const { b, ids, accountId, watchId } = await setUp();
    const csv = await b.get('/console/api/events/export?format=csv&asset=USDT');
    expect(csv.statusCode, csv.body).toBe(200);
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(csv.headers['content-disposition']).toMatch(
      /^attachment; filename="tronwatch-events-\d{8}-\d{6}\.csv"$/,
    );
    const lines = csv.body.trim().split('\n');
    expect(lines[0]).toBe(
      'event_id,block_timestamp,block_number,tx_id,event_index,direction,asset,amount,amount_raw,from,to,contract,watch_id,watch_label,delivery_status,delivery_attempts,notification_id,metadata',
    );
    expect(lines).toHaveLength(20);
    expect(lines[1]).toMatch(new RegExp(`^${ids[19]},2026-01-08T13:36:51.000Z,79072107,`));
    expect(lines[1]).toContain(',incoming,USDT,1.500019,1500019,');
    // The watch's label beside its id (quoted: it holds a comma and a quote).
    expect(lines[1]).toContain(`,${watchId},"Shop, ""main"" wallet",PENDING,`);

    const js = await b.get(`/console/api/events/export?format=json&q=${TX}`);
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toBe('application/json; charset=utf-8');
    const arr = JSON.parse(js.body) as Array<{
      event_id: string;
      watch_id: string;
      watch_label: string | null;
      delivery: { status: string };
    }>;
    expect(arr.map((e) => e.event_id)).toEqual([ids[3]]);
    expect(arr[0]).toMatchObject({ watch_id: watchId, watch_label: LABEL });
    expect(arr[0]?.delivery.status).toBe('PENDING');
    const empty = await b.get('/console/api/events/export?format=json&channel=telegram');
    expect(JSON.parse(empty.body)).toEqual([]);
    expect((await b.get('/console/api/events/export?format=xml')).statusCode).toBe(400);
    expect(
      (await new Browser(h!.app).get('/console/api/events/export?format=csv')).statusCode,
    ).toBe(401);

    // Chunks of 7 read the whole list in 5 statements, pieces written as they are read, the
    // same bytes as one chunk.
    const pieces: string[] = [];
    for await (const p of exportEvents(h!.db, { accountId, network: 'mainnet' }, 'json', 7)) {
      pieces.push(p);
    }
    expect(pieces.length).toBe(1 + 5 + 1);
    const whole = JSON.parse(pieces.join('')) as Array<{ event_id: string }>;
    expect(whole.map((e) => e.event_id)).toEqual([...ids].reverse());
    const oneChunk: string[] = [];
    for await (const p of exportEvents(h!.db, { accountId, network: 'mainnet' }, 'json', 200)) {
      oneChunk.push(p);
    }
    expect(oneChunk.join('')).toBe(pieces.join(''));
    const csvPieces: string[] = [];
    for await (const p of exportEvents(h!.db, { accountId, network: 'mainnet' }, 'csv', 7)) {
      csvPieces.push(p);
    }
    expect(csvPieces.join('').trim().split('\n')).toHaveLength(31);
  });

  it('streams changes of the account and the page’s environment only: an attempt landing, new events', async () => {
    const { b, ids, accountId, watchId } = await setUp();
    const other = new Browser(h!.app);
    expect((await other.signUp(`other-${engine}@example.com`)).statusCode).toBe(201);
    const base = await h!.app.listen({ port: 0, host: '127.0.0.1' });
    const cookie = (br: Browser) => [...br.jar].map(([k, v]) => `${k}=${v}`).join('; ');

    const refused = await fetch(`${base}/console/api/live`);
    expect(refused.status).toBe(401);

    const open = async (br: Browser, extraCookie = '') => {
      const ac = new AbortController();
      const res = await fetch(`${base}/console/api/live`, {
        headers: { cookie: cookie(br) + extraCookie, accept: 'text/event-stream' },
        signal: ac.signal,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      let text = '';
      const messages: string[] = [];
      void (async () => {
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) return;
            text += Buffer.from(value).toString('utf8');
            let i = text.indexOf('\n\n');
            while (i >= 0) {
              messages.push(text.slice(0, i));
              text = text.slice(i + 2);
              i = text.indexOf('\n\n');
            }
          }
        } catch {
          // aborted
        }
      })();
      return { messages, close: () => ac.abort() };
    };
    const mine = await open(b);
    const theirs = await open(other);
    // The same account's page in test mode (the console's environment switch, issue 32).
    const mineTest = await open(b, '; tw_env=test');
    const changes = (m: string[]) =>
      m
        .filter((s) => s.startsWith('event: change\n'))
        .map((s) => JSON.parse(s.slice(s.indexOf('data: ') + 6)) as Record<string, unknown>);
    try {
      await expect.poll(() => mine.messages.length, { timeout: 10_000 }).toBeGreaterThan(0);
      expect(mine.messages[0]).toContain('retry: 3000');
      // Let the feed read its first watermarks, then an attempt lands for event 9.
      await new Promise((r) => setTimeout(r, 1500));
      await h!.db.query(
        `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status)
         SELECT id, 1, now(), 12, 200 FROM notifications WHERE event_id = $1`,
        [ids[9]],
      );
      await expect
        .poll(() => changes(mine.messages), { timeout: 15_000 })
        .toContainEqual({ event_ids: [ids[9]], new_events: false });

      // New events: the ingester moves chain_cursor.last_event_at with them.
      const fresh = await insertEvents(h!.db, {
        accountId,
        watchId,
        tag: 'nw',
        count: 2,
        start: '2026-01-08T13:40:00Z',
      });
      await h!.db.query(
        `INSERT INTO chain_cursor (network, block_number, block_id, last_event_at)
         VALUES ('mainnet', 79072107, 'x', (SELECT max(created_at) FROM events))
         ON CONFLICT (network) DO UPDATE SET last_event_at = excluded.last_event_at`,
      );
      expect(fresh).toHaveLength(2);
      await expect
        .poll(() => changes(mine.messages).some((c) => c.new_events === true), { timeout: 15_000 })
        .toBe(true);
      expect(changes(theirs.messages)).toEqual([]);
      expect(changes(mineTest.messages)).toEqual([]);

      // A test deposit's attempt lands (issue 32): told to the test-mode page only, then a live
      // attempt: the live page hears of that one and never of the test event before it.
      const key = await createApiKey(h!.db, accountId, { network: 'nile' });
      const auth = { authorization: `Bearer ${key.key}` };
      const tw = await h!.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: auth,
        payload: webhookWatch(),
      });
      expect(tw.statusCode, tw.body).toBe(201);
      const tt = await h!.app.inject({
        method: 'POST',
        url: '/v1/test/transfers',
        headers: auth,
        payload: { watch_id: json<{ id: string }>(tw).id, amount: '1' },
      });
      expect(tt.statusCode, tt.body).toBe(201);
      const testEvent = json<{ event_id: string }>(tt).event_id;
      await h!.db.query(
        `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status)
         SELECT id, 1, now(), 12, 200 FROM notifications WHERE event_id = $1`,
        [testEvent],
      );
      await expect
        .poll(() => changes(mineTest.messages), { timeout: 15_000 })
        .toContainEqual({ event_ids: [testEvent], new_events: false });
      await h!.db.query(
        `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status)
         SELECT id, 1, now(), 12, 200 FROM notifications WHERE event_id = $1`,
        [ids[11]],
      );
      await expect
        .poll(() => changes(mine.messages), { timeout: 15_000 })
        .toContainEqual({ event_ids: [ids[11]], new_events: false });
      const told = (m: string[]) => changes(m).flatMap((c) => c.event_ids as string[]);
      expect(told(mine.messages)).not.toContain(testEvent);
      expect(told(mineTest.messages)).not.toContain(ids[11]);
      expect(told(mineTest.messages)).not.toContain(ids[9]);
    } finally {
      mine.close();
      theirs.close();
      mineTest.close();
    }
  });

  it('tells a failed sign-in how many failures are left before the lock', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    expect((await b.signUp(`lock-${engine}@example.com`)).statusCode).toBe(201);
    const other = new Browser(h.app);
    const left: unknown[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await other.login(`lock-${engine}@example.com`, 'not the password at all');
      expect(r.statusCode).toBe(401);
      left.push(json(r).attempts_left);
      expect(json(r).window_seconds).toBe(900);
    }
    expect(left).toEqual([4, 3, 2, 1, 0]);
    const locked = await other.login(`lock-${engine}@example.com`, 'not the password at all');
    expect(locked.statusCode).toBe(429);
    expect(Number(locked.headers['retry-after'])).toBeGreaterThan(0);
  });

  it("shows a chat delivery as one: the chat, the message sent, the Bot API's answer", async () => {
    const { b, accountId } = await setUp();
    await h!.db.query(
      `UPDATE accounts SET telegram_chat_id = '-100123', telegram_chat_title = 'Treasury ops',
              telegram_chat_type = 'supergroup' WHERE id = $1`,
      [accountId],
    );
    await h!.db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, active_from_block)
       VALUES ('wh_chat1', $1, 'mainnet', $2, '41a614f803b6fd780986a42c78ec9c7f77e6ded13c', 'USDT',
               'incoming', 'telegram', 1000)`,
      [accountId, OTHER],
    );
    const [id] = await insertEvents(h!.db, {
      accountId,
      watchId: 'wh_chat1',
      tag: 'tg',
      count: 1,
      start: '2026-01-08T13:50:00Z',
    });
    await h!.db.query(
      `UPDATE notifications SET channel = 'telegram', status = 'DELIVERED', attempts = 1
        WHERE event_id = $1`,
      [id],
    );
    await h!.db.query(
      `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, response_body)
       SELECT id, 1, now(), 80, 200, '{"ok":true,"result":{"message_id":42}}' FROM notifications WHERE event_id = $1`,
      [id],
    );
    const res = await b.get(`/console/api/events/${id}`);
    expect(res.statusCode, res.body).toBe(200);
    const d = json<{
      channel: string;
      telegram: { chat: Record<string, string>; message_html: string };
      notifications: Array<{ attempt_log: Array<{ response_body: string }> }>;
    }>(res);
    expect(d.channel).toBe('telegram');
    expect(d.telegram.chat).toEqual({ id: '-100123', title: 'Treasury ops', type: 'supergroup' });
    expect(d.telegram.message_html).toContain('Incoming 1.5 USDT');
    expect(d.notifications[0]?.attempt_log[0]?.response_body).toContain('"message_id":42');
    expect((await page(b, 'channel=telegram')).data.map((e) => e.event_id)).toEqual([id]);
    // A webhook watch's event says so, with no chat.
    const { rows } = await h!.db.query<{ id: string }>(
      `SELECT id FROM events WHERE watch_id <> 'wh_chat1' LIMIT 1`,
    );
    const w = json<{ channel: string; telegram: unknown }>(
      await b.get(`/console/api/events/${rows[0]?.id}`),
    );
    expect(w).toMatchObject({ channel: 'webhook', telegram: null });
  });
});
