/**
 * The console's JSON API (issue 12 items 1–6; SPEC §Authentication Console, §Errors Console
 * errors): sign-up and login with argon2id passwords, sessions in cookies with a sliding expiry,
 * CSRF bound to the session, login limits, invitations, keys, watches (same rules as /v1, pause
 * and resume), events with their attempts, redelivery and the overview. On both engines, through
 * the real app (inject), with the cookies a browser would keep.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts.js';
import { createInvite } from '../../src/accounts/credentials.js';
import { startReceiver } from '../../src/devnet/receiver.js';
import { TestEventSchema } from '../../src/events/event.js';
import {
  ADDR2_B58,
  type ApiHarness,
  apiHarness,
  insertEvents,
  json,
  webhookWatch,
} from '../helpers/api.js';
import { Browser, PASSWORD } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';

const OPEN = { CONSOLE_SIGNUP: 'open' };

describe.each(dbEngines)('console API on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('signs up (open), sets the session and csrf cookies, and answers Me', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    const res = await b.signUp('Alice@Example.com');
    expect(res.statusCode, res.body).toBe(201);
    expect(json(res)).toMatchObject({
      account: { email: 'alice@example.com', plan: 'free', plan_name: 'Free' },
      limits: { requests_per_minute: 60, active_watches: 3 },
    });
    const setCookies = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
    const session = setCookies.find((c) => c.startsWith('tw_session='));
    const csrf = setCookies.find((c) => c.startsWith('tw_csrf='));
    expect(session).toMatch(/; Path=\/console/);
    expect(session).toMatch(/; HttpOnly/);
    expect(session).toMatch(/; SameSite=Lax/);
    // Plain-http loopback: no Secure (a browser would drop it).
    expect(session).not.toMatch(/Secure/);
    expect(csrf).not.toMatch(/HttpOnly/);
    // Only the hash of the session token is stored.
    const token = b.jar.get('tw_session') ?? '';
    const { rows } = await h.db.query<{ token_hash: string }>(
      'SELECT token_hash FROM console_sessions',
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0]?.token_hash).not.toContain(token);
    const { rows: acc } = await h.db.query<{ password_hash: string }>(
      'SELECT password_hash FROM console_users',
    );
    expect(acc[0]?.password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect((await b.get('/console/api/session')).statusCode).toBe(200);
    // A second sign-up with the same e-mail.
    const again = await new Browser(h.app).signUp('alice@example.com');
    expect(again.statusCode).toBe(409);
    expect(json(again).code).toBe('email_taken');
  });

  it('marks the cookies Secure off loopback, and refuses sign-up when closed', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app, 'console.example.com');
    const res = await b.signUp('bob@example.com');
    expect(res.statusCode).toBe(201);
    const session = ([] as string[])
      .concat(res.headers['set-cookie'] ?? [])
      .find((c) => c.startsWith('tw_session='));
    expect(session).toMatch(/; Secure/);
    await h.close();
    h = await apiHarness(engine);
    const closed = await new Browser(h.app).signUp('carol@example.com');
    expect(closed.statusCode).toBe(403);
    expect(json(closed)).toMatchObject({ code: 'signup_closed' });
  });

  it('answers 401 no_session without a session, and 403 csrf_mismatch without the header', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const anon = new Browser(h.app);
    for (const url of ['/console/api/session', '/console/api/keys', '/console/api/overview']) {
      const res = await anon.get(url);
      expect(res.statusCode, url).toBe(401);
      expect(json(res)).toEqual({ error: expect.any(String), code: 'no_session' });
    }
    const b = new Browser(h.app);
    expect((await b.signUp('dave@example.com')).statusCode).toBe(201);
    const missing = await b.post('/console/api/keys', {}, { csrf: null });
    expect(missing.statusCode).toBe(403);
    expect(json(missing).code).toBe('csrf_mismatch');
    const wrong = await b.post('/console/api/keys', {}, { csrf: 'x'.repeat(43) });
    expect(json(wrong).code).toBe('csrf_mismatch');
    // A tw_csrf cookie and header that agree but are not this session's token (cookie tossing).
    const planted = 'p'.repeat(43);
    b.jar.set('tw_csrf', planted);
    const tossed = await b.post('/console/api/keys', {}, { csrf: planted });
    expect(tossed.statusCode).toBe(403);
    expect(json(tossed).code).toBe('csrf_mismatch');
    // Login is state-changing too.
    const c = new Browser(h.app);
    const login = await c.post('/console/api/login', {
      email: 'dave@example.com',
      password: PASSWORD,
    });
    expect(login.statusCode).toBe(403);
    expect(json(login).code).toBe('csrf_mismatch');
  });

  it('answers unknown e-mail and wrong password alike, and refuses the sixth failed login (a right password too)', async () => {
    h = await apiHarness(engine, { env: OPEN });
    expect((await new Browser(h.app).signUp('erin@example.com')).statusCode).toBe(201);
    const b = new Browser(h.app, 'localhost', '198.51.100.9');
    const unknown = await b.login('nobody@example.com', 'wrong password 1');
    const wrong = await b.login('erin@example.com', 'wrong password 2');
    expect(unknown.statusCode).toBe(401);
    expect(json(unknown)).toEqual(json(wrong));
    // Additive (issue 19 item 7): the failures this address has left for this e-mail.
    expect(json(wrong)).toEqual({
      error: 'wrong e-mail or password',
      code: 'invalid_credentials',
      attempts_left: 4,
      window_seconds: 900,
    });
    for (let i = 3; i <= 6; i++) {
      expect((await b.login('erin@example.com', `wrong password ${i}`)).statusCode).toBe(401);
    }
    // Five failures for this address and e-mail: the sixth is refused, the right password too.
    const sixth = await b.login('erin@example.com', 'wrong password 7');
    expect(sixth.statusCode).toBe(429);
    expect(json(sixth).code).toBe('login_rate_limited');
    const retry = Number(sixth.headers['retry-after']);
    expect(retry).toBeGreaterThan(14 * 60);
    expect(retry).toBeLessThanOrEqual(15 * 60);
    expect((await b.login('erin@example.com')).statusCode).toBe(429);
    // Keyed on the pair (issue 17 item 2): the same e-mail from another address is not locked
    // out, and this address may still try another e-mail.
    expect(
      (await new Browser(h.app, 'localhost', '192.0.2.44').login('erin@example.com')).statusCode,
    ).toBe(200);
    expect((await b.login('x@example.com', 'nope')).statusCode).toBe(401);
  });

  it('expires a session after its lifetime without use, and slides it with each use', async () => {
    h = await apiHarness(engine, { env: { ...OPEN, CONSOLE_SESSION_TTL_SECONDS: '2' } });
    const b = new Browser(h.app);
    expect((await b.signUp('fay@example.com')).statusCode).toBe(201);
    const first = await h.db.query<{ expires_at: Date }>('SELECT expires_at FROM console_sessions');
    await new Promise((r) => setTimeout(r, 1200));
    expect((await b.get('/console/api/session')).statusCode).toBe(200);
    const moved = await h.db.query<{ expires_at: Date }>('SELECT expires_at FROM console_sessions');
    expect(moved.rows[0]?.expires_at.getTime()).toBeGreaterThan(
      first.rows[0]?.expires_at.getTime() ?? 0,
    );
    await new Promise((r) => setTimeout(r, 2300));
    const expired = await b.get('/console/api/session');
    expect(expired.statusCode).toBe(401);
    expect(json(expired).code).toBe('no_session');
  });

  it('lists sessions, revokes others, and a password change revokes every other session', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const a = new Browser(h.app);
    expect((await a.signUp('gus@example.com')).statusCode).toBe(201);
    const b = new Browser(h.app);
    expect((await b.login('gus@example.com')).statusCode).toBe(200);
    const c = new Browser(h.app);
    expect((await c.login('gus@example.com')).statusCode).toBe(200);
    const list = json<{ data: Array<{ id: string; current: boolean }> }>(
      await a.get('/console/api/sessions'),
    );
    expect(list.data).toHaveLength(3);
    expect(list.data.filter((s) => s.current)).toHaveLength(1);
    const other = list.data.find((s) => !s.current);
    expect((await a.del(`/console/api/sessions/${other?.id}`)).statusCode).toBe(204);
    const changed = await a.post('/console/api/password', {
      current_password: PASSWORD,
      new_password: 'a brand new passphrase',
    });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(json(changed)).toEqual({ revoked_sessions: 1 });
    expect((await b.get('/console/api/session')).statusCode).toBe(401);
    expect((await c.get('/console/api/session')).statusCode).toBe(401);
    expect((await a.get('/console/api/session')).statusCode).toBe(200);
    expect((await new Browser(h.app).login('gus@example.com')).statusCode).toBe(401);
    expect(
      (await new Browser(h.app).login('gus@example.com', 'a brand new passphrase')).statusCode,
    ).toBe(200);
    expect((await a.post('/console/api/logout')).statusCode).toBe(204);
    expect((await a.get('/console/api/session')).statusCode).toBe(401);
  });

  it('gives a CLI-made account its password through a one-time invitation', async () => {
    h = await apiHarness(engine);
    const acc = await createAccount(h.db, { email: 'hal@example.com', plan: 'pro' });
    const token = await createInvite(h.db, acc.id);
    const b = new Browser(h.app);
    await b.get('/console/api/config');
    const res = await b.post('/console/api/invite/accept', { token, password: PASSWORD });
    expect(res.statusCode, res.body).toBe(200);
    expect(json(res)).toMatchObject({ account: { email: 'hal@example.com', plan_name: 'Pro' } });
    const again = await new Browser(h.app).post('/console/api/invite/accept', {
      token,
      password: PASSWORD,
    });
    expect(again.statusCode).toBe(403); // no csrf cookie yet in a fresh browser
    const c = new Browser(h.app);
    await c.get('/console/api/config');
    const reused = await c.post('/console/api/invite/accept', { token, password: PASSWORD });
    expect(reused.statusCode).toBe(400);
    expect(json(reused).code).toBe('invalid_invite');
    expect((await new Browser(h.app).login('hal@example.com')).statusCode).toBe(200);
  });

  it('limits what makes the server hash a password: sign-ups per IP, wrong invitation tokens per IP', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const ip = '198.51.100.77';
    for (let i = 1; i <= 10; i++) {
      expect(
        (await new Browser(h.app, 'localhost', ip).signUp(`s${i}@example.com`)).statusCode,
      ).toBe(201);
    }
    const eleventh = await new Browser(h.app, 'localhost', ip).signUp('s11@example.com');
    expect(eleventh.statusCode).toBe(429);
    expect(json(eleventh).code).toBe('login_rate_limited');
    expect(Number(eleventh.headers['retry-after'])).toBeGreaterThan(0);
    const b = new Browser(h.app, 'localhost', '198.51.100.78');
    await b.get('/console/api/config');
    for (let i = 1; i <= 5; i++) {
      const wrong = await b.post('/console/api/invite/accept', {
        token: `nope${i}`,
        password: PASSWORD,
      });
      expect(json(wrong).code).toBe('invalid_invite');
    }
    const sixth = await b.post('/console/api/invite/accept', {
      token: 'nope6',
      password: PASSWORD,
    });
    expect(sixth.statusCode).toBe(429);
    expect(json(sixth).code).toBe('login_rate_limited');
  });

  it('issues a key shown once, lists it, and a revoked key is refused by /v1 at once', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('ivy@example.com');
    const created = await b.post('/console/api/keys', { name: 'payments' });
    expect(created.statusCode).toBe(201);
    const { key, secret } = json<{ key: { id: string; prefix: string }; secret: string }>(created);
    expect(secret).toMatch(/^tw_live_/);
    expect(secret.startsWith(key.prefix)).toBe(true);
    const bearer = { authorization: `Bearer ${secret}` };
    expect((await h.app.inject({ url: '/v1/watches', headers: bearer })).statusCode).toBe(200);
    const listed = json<{ data: Array<Record<string, unknown>> }>(await b.get('/console/api/keys'));
    expect(listed.data).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain(secret);
    expect(listed.data[0]).toMatchObject({ id: key.id, name: 'payments', revoked_at: null });
    // last_used_at is written after the /v1 request (at most once a minute per process).
    await expect
      .poll(
        async () =>
          json<{ data: Array<{ last_used_at: string | null }> }>(await b.get('/console/api/keys'))
            .data[0]?.last_used_at,
      )
      .not.toBeNull();
    const revoked = await b.del(`/console/api/keys/${key.id}`);
    expect(revoked.statusCode).toBe(200);
    expect(json(revoked).revoked_at).toEqual(expect.any(String));
    const refused = await h.app.inject({ url: '/v1/watches', headers: bearer });
    expect(refused.statusCode).toBe(401);
    expect(json(refused).code).toBe('revoked_api_key');
    // Someone else's key id is a 404.
    const other = new Browser(h.app);
    await other.signUp('jay@example.com');
    expect((await other.del(`/console/api/keys/${key.id}`)).statusCode).toBe(404);
  });

  it('creates watches with the /v1 rules, and pause frees a quota slot that resume needs', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('kim@example.com');
    // The same answers as POST /v1/watches for the same bad bodies.
    const caller = await h.caller();
    for (const body of [
      webhookWatch({ telegram: true }),
      webhookWatch({ address: 'Tnot-an-address' }),
      webhookWatch({ webhook_url: 'http://10.0.0.1/x' }),
      { ...webhookWatch(), directon: 'outgoing' },
    ]) {
      const viaConsole = await b.post('/console/api/watches', body);
      const viaApi = await h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: { ...caller.headers, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      expect(viaConsole.statusCode, JSON.stringify(body)).toBe(viaApi.statusCode);
      expect(json(viaConsole)).toEqual(json(viaApi));
    }
    const ids: string[] = [];
    for (const [i, address] of [
      'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
      ADDR2_B58,
      'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7',
    ].entries()) {
      const res = await b.post(
        '/console/api/watches',
        webhookWatch({ address, direction: ['incoming', 'outgoing', 'both'][i] }),
      );
      expect(res.statusCode, res.body).toBe(201);
      expect(json(res).secret).toMatch(/^whsec_/);
      ids.push(String(json(res).id));
    }
    const full = await b.post('/console/api/watches', webhookWatch({ asset_filter: 'TRX' }));
    expect(full.statusCode).toBe(402);
    expect(json(full)).toMatchObject({
      code: 'quota_exceeded',
      usage: { active_watches: 3, limit: 3, plan: 'Free' },
    });
    const paused = await b.post(`/console/api/watches/${ids[0]}/pause`);
    expect(paused.statusCode).toBe(200);
    expect(json(paused).status).toBe('PAUSED');
    const fourth = await b.post('/console/api/watches', webhookWatch({ asset_filter: 'TRX' }));
    expect(fourth.statusCode).toBe(201);
    const resume = await b.post(`/console/api/watches/${ids[0]}/resume`);
    expect(resume.statusCode).toBe(402);
    expect(json(resume).code).toBe('quota_exceeded');
    expect((await b.del(`/console/api/watches/${json(fourth).id}`)).statusCode).toBe(204);
    const resumed = await b.post(`/console/api/watches/${ids[0]}/resume`);
    expect(resumed.statusCode).toBe(200);
    expect(json(resumed).status).toBe('ACTIVE');
    const list = json<{ data: Array<{ id: string; last_event_at: string | null }> }>(
      await b.get('/console/api/watches'),
    );
    expect(list.data.map((w) => w.id).sort()).toEqual([...ids].sort());
    expect(list.data.every((w) => w.last_event_at === null)).toBe(true);
  });

  it('shows an event with its chains, redelivers one event and every dead one, and keeps the history', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    const me = json<{ account: { id: string } }>(await b.signUp('lee@example.com'));
    const accountId = me.account.id;
    const w = json(await b.post('/console/api/watches', webhookWatch())).id as string;
    const ids = await insertEvents(h.db, {
      accountId,
      watchId: w,
      tag: 'rd',
      count: 4,
      start: '2026-01-08T13:36:54.000001Z',
    });
    // Three die after six attempts; one is still pending.
    await h.db.query(
      `UPDATE notifications SET status = 'DEAD', attempts = 6 WHERE event_id = ANY($1::text[])`,
      [ids.slice(0, 3)],
    );
    await h.db.query(
      `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, error)
       SELECT n.id, g, now(), 12, 503, 'HTTP 503: not a 2xx answer'
         FROM notifications n, generate_series(1, 6) g WHERE n.event_id = $1`,
      [ids[0]],
    );
    const dead = json<{ data: Array<{ event_id: string }> }>(
      await b.get('/console/api/events?status=DEAD'),
    );
    expect(dead.data.map((e) => e.event_id)).toEqual([ids[2], ids[1], ids[0]]);
    const pending = await b.post(`/console/api/events/${ids[3]}/redeliver`);
    expect(pending.statusCode).toBe(409);
    const one = await b.post(`/console/api/events/${ids[0]}/redeliver`);
    expect(one.statusCode).toBe(201);
    const detail = json<{
      event: { event_id: string; amount: string };
      payload: string;
      notifications: Array<{
        id: string;
        status: string;
        attempts: number;
        attempt_log: unknown[];
      }>;
    }>(await b.get(`/console/api/events/${ids[0]}`));
    expect(detail.event.event_id).toBe(ids[0]);
    expect(JSON.parse(detail.payload)).toEqual(detail.event);
    expect(detail.notifications.map((n) => [n.status, n.attempts, n.attempt_log.length])).toEqual([
      ['PENDING', 0, 0],
      ['DEAD', 6, 6],
    ]);
    expect(detail.notifications[0]?.id).toBe(json(one).notification_id);
    expect(detail.notifications[1]?.attempt_log[0]).toMatchObject({
      attempt: 1,
      http_status: 503,
      error_class: 'http',
    });
    // GET /v1/events shows the newest chain.
    const key = json<{ secret: string }>(await b.post('/console/api/keys', {})).secret;
    const page = json<{
      data: Array<{ event_id: string; delivery: { status: string; notification_id: string } }>;
    }>(await h.app.inject({ url: '/v1/events', headers: { authorization: `Bearer ${key}` } }));
    const listed = page.data.find((e) => e.event_id === ids[0]);
    expect(listed?.delivery).toMatchObject({
      status: 'PENDING',
      notification_id: json(one).notification_id,
    });
    expect(page.data).toHaveLength(4);
    // "Redeliver all" takes what the filtered list shows: a search for one event takes it alone,
    // a filter that matches none (these are USDT, incoming) takes nothing, a bad search is a 400.
    const one2 = await b.post('/console/api/redeliver', { watch_id: w, q: ids[1] });
    expect(json(one2)).toEqual({ redelivered: 1 });
    for (const f of [{ asset: 'TRX' }, { direction: 'outgoing' }, { channel: 'telegram' }]) {
      expect(
        json(await b.post('/console/api/redeliver', { watch_id: w, ...f })),
        JSON.stringify(f),
      ).toEqual({
        redelivered: 0,
      });
    }
    // A term of none of the id shapes is a metadata value (issue 40 item 5): these events have
    // none, so nothing is taken; a term longer than any metadata value is refused.
    expect(json(await b.post('/console/api/redeliver', { q: 'not a tx' }))).toEqual({
      redelivered: 0,
    });
    const badQ = await b.post('/console/api/redeliver', { q: 'x'.repeat(501) });
    expect(badQ.statusCode).toBe(400);
    expect(json<{ details: Array<{ field: string }> }>(badQ).details[0]?.field).toBe('q');
    const backwards = await b.post('/console/api/redeliver', {
      since: '2026-02-01T00:00:00Z',
      until: '2026-01-01T00:00:00Z',
    });
    expect(backwards.statusCode).toBe(400);
    // Every remaining dead letter of the watch, at once (with the filters they match); then none
    // is left.
    const bulk = await b.post('/console/api/redeliver', {
      watch_id: w,
      asset: 'USDT',
      direction: 'incoming',
      channel: 'webhook',
    });
    expect(json(bulk)).toEqual({ redelivered: 1 });
    expect(
      json<{ data: unknown[] }>(await b.get('/console/api/events?status=DEAD')).data,
    ).toHaveLength(0);
    // The public endpoint: 409 while pending, 404 for another account's event.
    const viaApi = await h.app.inject({
      method: 'POST',
      url: `/v1/events/${ids[0]}/redeliver`,
      headers: { authorization: `Bearer ${key}` },
    });
    expect(viaApi.statusCode).toBe(409);
    const stranger = await h.caller();
    const foreign = await h.app.inject({
      method: 'POST',
      url: `/v1/events/${ids[0]}/redeliver`,
      headers: stranger.headers,
    });
    expect(foreign.statusCode).toBe(404);
    // The overview counts the newest chain of each event of the last 24 hours.
    const overview = json<Record<string, Record<string, unknown>>>(
      await b.get('/console/api/overview'),
    );
    expect(overview.watches).toEqual({ active: 1, paused: 0, quota: 3 });
    expect(overview.rate_limit).toMatchObject({ limit: 60, window_seconds: 60 });
    expect(overview.chain).toMatchObject({
      network: 'mainnet',
      solidified_head: 1000,
      scanned_block: null,
      scanned_block_time: null,
      lag_blocks: null,
    });
    await h.db.query(
      `INSERT INTO chain_cursor (network, block_number, block_id, block_timestamp)
       VALUES ('mainnet', 990, 'b990', now() - interval '60 seconds')`,
    );
    const later = json<Record<string, Record<string, unknown>>>(
      await b.get('/console/api/overview'),
    );
    expect(later.chain).toMatchObject({ scanned_block: 990, lag_blocks: 10 });
    expect(later.chain?.scanned_block_time).toEqual(expect.stringMatching(/Z$/));
    expect(Number(later.chain?.lag_seconds)).toBeGreaterThanOrEqual(60);
    // Events of the last 24 hours by their newest chain's status (these were made in January).
    expect(later.events_24h).toEqual({ PENDING: 0, DELIVERED: 0, DEAD: 0 });
    await h.db.query(
      'UPDATE events SET created_at = now() - make_interval(secs => event_index + 1) WHERE account_id = $1',
      [accountId],
    );
    const newest = (id: string | undefined) =>
      `(SELECT n.id FROM notifications n WHERE n.event_id = '${id}' ORDER BY n.created_at DESC LIMIT 1)`;
    await h.db.query(`UPDATE notifications SET status = 'DELIVERED' WHERE id = ${newest(ids[1])}`);
    await h.db.query(`UPDATE notifications SET status = 'DEAD' WHERE id = ${newest(ids[2])}`);
    const recent = json<Record<string, Record<string, unknown>>>(
      await b.get('/console/api/overview'),
    );
    expect(recent.events_24h).toEqual({ PENDING: 2, DELIVERED: 1, DEAD: 1 });
  });

  it('sends a signed test event marked X-Tronwatch-Test to the watch, shows its outcome and stores nothing', async () => {
    const secrets = new Map<string, string>();
    const receiver = await startReceiver({
      secretFor: () => [...secrets.values()][0],
      respond: (req) =>
        req.verified ? { status: 202, body: 'thanks', headers: { 'x-receiver': 'r1' } } : 401,
    });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-test-event-'));
    const ca = path.join(dir, 'ca.pem');
    fs.writeFileSync(ca, receiver.ca);
    try {
      h = await apiHarness(engine, {
        env: { ...OPEN, WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_CA_FILE: ca },
      });
      const b = new Browser(h.app);
      await b.signUp('max@example.com');
      const created = json<{ id: string; secret: string }>(
        await b.post('/console/api/watches', webhookWatch({ webhook_url: receiver.url })),
      );
      secrets.set(created.id, created.secret);
      const res = await b.post(`/console/api/watches/${created.id}/test`);
      expect(res.statusCode, res.body).toBe(200);
      const outcome = json<{
        ok: boolean;
        http_status: number;
        error_class: string | null;
        response_body: string;
        response_headers: Record<string, string>;
        request: { url: string; headers: Record<string, string>; body: string };
      }>(res);
      expect(outcome).toMatchObject({
        ok: true,
        http_status: 202,
        error_class: null,
        response_body: 'thanks',
      });
      expect(outcome.response_headers['x-receiver']).toBe('r1');
      expect(JSON.stringify(outcome)).not.toContain(created.secret);
      // What the receiver got: a webhook.test (the TestEvent schema), never a transfer it could
      // credit, signed with the watch's secret both ways.
      expect(receiver.received).toHaveLength(1);
      const got = receiver.received[0];
      expect(got?.verified).toBe(true);
      expect(got?.headers['x-tronwatch-test']).toBe('1');
      // A live watch's: no test-mode header (issue 32).
      expect(got?.headers['tronwatch-test-mode']).toBeUndefined();
      expect(got?.body.toString('utf8')).toBe(outcome.request.body);
      const event = got?.event as Record<string, unknown>;
      // `metadata` is there only when the watch has some (issue 30): this one has none.
      expect(Object.keys(event)).toEqual(
        Object.keys(TestEventSchema.properties).filter((k) => k !== 'metadata'),
      );
      expect(event).toMatchObject({
        watch_id: created.id,
        type: 'webhook.test',
        test: true,
        asset: 'USDT',
        amount: '0',
        amount_raw: '0',
        tx_id: '0'.repeat(64),
        direction: 'incoming',
        to: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
      });
      expect(String(event.event_id)).toMatch(/^evt_test_/);
      const wh = new Webhook(created.secret.replace(/^whsec_/, ''));
      expect(() =>
        wh.verify(got?.body ?? Buffer.alloc(0), got?.headers as Record<string, string>),
      ).not.toThrow();
      // Never stored, never listed.
      const { rows } = await h.db.query<{ n: number }>(
        'SELECT (SELECT count(*) FROM events)::int8 + (SELECT count(*) FROM notifications)::int8 + (SELECT count(*) FROM attempts)::int8 AS n',
      );
      expect(Number(rows[0]?.n)).toBe(0);
      expect(json<{ data: unknown[] }>(await b.get('/console/api/events')).data).toEqual([]);
      // Another account's watch, or a telegram-less id: 404.
      const other = new Browser(h.app);
      await other.signUp('ned@example.com');
      expect((await other.post(`/console/api/watches/${created.id}/test`)).statusCode).toBe(404);
      // At most 10 a minute per account: the 11th is refused before anything is sent.
      for (let i = 1; i < 10; i++) {
        expect((await b.post(`/console/api/watches/${created.id}/test`)).statusCode).toBe(200);
      }
      const refused = await b.post(`/console/api/watches/${created.id}/test`);
      expect(refused.statusCode).toBe(429);
      expect(json(refused)).toMatchObject({ code: 'rate_limited' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(receiver.received).toHaveLength(10);
    } finally {
      await receiver.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a test event to a test-mode watch carries Tronwatch-Test-Mode: true and livemode false (issue 32)', async () => {
    const secrets = new Map<string, string>();
    const receiver = await startReceiver({
      secretFor: () => [...secrets.values()][0],
      respond: () => 200,
    });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-test-event-'));
    const ca = path.join(dir, 'ca.pem');
    fs.writeFileSync(ca, receiver.ca);
    try {
      h = await apiHarness(engine, {
        env: { ...OPEN, WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_CA_FILE: ca },
      });
      const b = new Browser(h.app);
      await b.signUp('tess@example.com');
      // The console's environment switch in test mode.
      b.jar.set('tw_env', 'test');
      const created = json<{ id: string; secret: string }>(
        await b.post('/console/api/watches', webhookWatch({ webhook_url: receiver.url })),
      );
      secrets.set(created.id, created.secret);
      const { rows } = await h.db.query<{ network: string }>(
        'SELECT network FROM watches WHERE id = $1',
        [created.id],
      );
      expect(rows[0]?.network).toBe('nile');
      const res = await b.post(`/console/api/watches/${created.id}/test`);
      expect(res.statusCode, res.body).toBe(200);
      const got = receiver.received[0];
      expect(got?.verified).toBe(true);
      expect(got?.headers['x-tronwatch-test']).toBe('1');
      expect(got?.headers['tronwatch-test-mode']).toBe('true');
      expect(got?.event).toMatchObject({ type: 'webhook.test', livemode: false, network: 'nile' });
    } finally {
      await receiver.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
