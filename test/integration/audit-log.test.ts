/**
 * The audit log (issue 18 item 5; src/audit/audit.ts, migration 035), on both engines, through
 * the real app (inject) with the cookies a browser keeps and real API keys:
 *
 * - Every change made through the console (sign-up, keys, watches, pause/resume, test send,
 *   redelivery single and bulk, password change and a refused one, failed and good sign-ins,
 *   session revocations, sign-out, Telegram link, binding and unbinding) and through the API
 *   (watches, pause/resume, redelivery) leaves one entry with its actor (user + session, or the
 *   API key), action, target, detail and client address (request.ip; behind TRUST_PROXY the
 *   forwarded one).
 * - No key, webhook secret, session or CSRF token, Telegram link token or password reaches the
 *   table, not even when a caller hands one to recordAudit.
 * - The entry is written in the change's transaction: a change refused (409, 402) leaves none, and
 *   an entry that cannot be written takes its change with it.
 * - The read endpoint: filters (actor, action, time), paging with a cursor that neither skips nor
 *   repeats, 400 for a malformed filter, one account never sees another's entries.
 * - pruneAuditLog deletes exactly the entries older than the cutoff, in batches.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Update } from 'grammy/types';
import { afterEach, describe, expect, it } from 'vitest';
import { keysCreate, keysRevoke } from '../../src/accounts/cli.js';
import { auditCutoff, pruneAuditLog, REDACTED, recordAudit } from '../../src/audit/audit.js';
import { silentLogger } from '../../src/common/logger.js';
import { loadConfig } from '../../src/config.js';
import { startReceiver } from '../../src/devnet/receiver.js';
import { startTelegramStandIn, type TelegramStandIn } from '../../src/devnet/telegram-stand-in.js';
import { openBot } from '../../src/telegram/bot.js';
import { MemoryPacer } from '../../src/telegram/pacing.js';
import { handleUpdate } from '../../src/telegram/updates.js';
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

interface Entry {
  id: string;
  at: string;
  actor: { type: string; id: string | null; label: string | null; session_id: string | null };
  action: string;
  target_id: string | null;
  detail: Record<string, unknown>;
  client_ip: string | null;
}
interface Page {
  data: Entry[];
  next_cursor: string | null;
}

/** Every stored entry as text, for the "no secret anywhere" checks. */
async function tableText(h: ApiHarness): Promise<string> {
  const { rows } = await h.db.query<{ t: string }>(
    'SELECT coalesce(json_agg(a)::text, $1) AS t FROM audit_log a',
    ['[]'],
  );
  return rows[0]?.t ?? '';
}

/** Every page of the console's log for `query`, oldest last. */
async function allPages(b: Browser, query: string): Promise<Entry[]> {
  const out: Entry[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const sep = query === '' ? '?' : '&';
    const url: string = `/console/api/audit${query === '' ? '' : `?${query}`}${
      cursor ? `${query === '' ? '?' : sep}cursor=${encodeURIComponent(cursor)}` : ''
    }`;
    const res = await b.get(url);
    expect(res.statusCode, res.body).toBe(200);
    const page = json<Page>(res) as unknown as Page;
    out.push(...page.data);
    cursor = page.next_cursor;
    if (cursor === null) return out;
  }
  throw new Error('more than 100 pages');
}

describe.each(dbEngines)('audit log on %s', (engine) => {
  let h: ApiHarness | undefined;
  const stops: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const s of stops.splice(0).reverse()) await s();
    await h?.close();
    h = undefined;
  });

  it('records every console change with the user, session, target and client address, and never a secret', async () => {
    const webhookSecrets = new Map<string, string>();
    const receiver = await startReceiver({
      secretFor: () => [...webhookSecrets.values()][0],
      respond: () => 204,
    });
    stops.push(() => receiver.close());
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-audit-'));
    const ca = path.join(dir, 'ca.pem');
    fs.writeFileSync(ca, receiver.ca);
    h = await apiHarness(engine, {
      env: { ...OPEN, WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_CA_FILE: ca },
    });
    const b = new Browser(h.app, 'localhost', '198.51.100.20');
    expect((await b.signUp('owner@acme-pay.example')).statusCode).toBe(201);
    const firstSession = json<{ data: Array<{ id: string }> }>(await b.get('/console/api/sessions'))
      .data[0]?.id as string;
    const signedIn = json<{ account: { id: string }; user: { id: string } }>(
      await b.get('/console/api/session'),
    );
    const accountId = signedIn.account.id;
    // The signed-in member (issue 18 item 3): the actor of every console change.
    const userId = signedIn.user.id;
    const tokens = new Set<string>([b.jar.get('tw_session') ?? '', b.csrf ?? '']);

    // Keys.
    const key = json<{ key: { id: string; prefix: string }; secret: string }>(
      await b.post('/console/api/keys', { name: 'billing' }),
    );
    expect((await b.del(`/console/api/keys/${key.key.id}`)).statusCode).toBe(200);

    // Watches: create, pause, resume, test send, delete.
    const created = json<{ id: string; secret: string }>(
      await b.post(
        '/console/api/watches',
        webhookWatch({ webhook_url: `${receiver.url}?token=abc123` }),
      ),
    );
    webhookSecrets.set(created.id, created.secret);
    expect((await b.post(`/console/api/watches/${created.id}/pause`)).statusCode).toBe(200);
    expect((await b.post(`/console/api/watches/${created.id}/resume`)).statusCode).toBe(200);
    const sent = await b.post(`/console/api/watches/${created.id}/test`);
    expect(sent.statusCode, sent.body).toBe(200);

    // Redelivery: one event, then every dead one of the watch.
    const events = await insertEvents(h.db, {
      accountId,
      watchId: created.id,
      tag: 'au',
      count: 3,
      start: '2026-01-08T13:36:54Z',
    });
    await h.db.query(`UPDATE notifications SET status = 'DEAD', attempts = 6`);
    const one = await b.post(`/console/api/events/${events[0]}/redeliver`);
    expect(one.statusCode, one.body).toBe(201);
    const bulk = await b.post('/console/api/redeliver', { watch_id: created.id });
    expect(json(bulk)).toEqual({ redelivered: 2 });
    expect((await b.del(`/console/api/watches/${created.id}`)).statusCode).toBe(204);

    // A failed sign-in from elsewhere, a sign-in of a second session there, a refused and a
    // good password change (which signs the other session out).
    const other = new Browser(h.app, 'localhost', '203.0.113.99');
    expect(
      (await other.login('owner@acme-pay.example', 'not the password at all')).statusCode,
    ).toBe(401);
    // An unknown e-mail has no account, so no log to record the attempt in.
    expect((await other.login('nobody@acme-pay.example', 'whatever it is')).statusCode).toBe(401);
    expect((await other.login('owner@acme-pay.example')).statusCode).toBe(200);
    tokens.add(other.jar.get('tw_session') ?? '');
    tokens.add(other.csrf ?? '');
    const wrong = await b.post('/console/api/password', {
      current_password: 'wrong current password',
      new_password: 'a brand new passphrase here',
    });
    expect(wrong.statusCode).toBe(401);
    const changed = await b.post('/console/api/password', {
      current_password: PASSWORD,
      new_password: 'a brand new passphrase here',
    });
    expect(json(changed)).toEqual({ revoked_sessions: 1 });

    // Two more sessions: one revoked by id, one by "sign out every other session"; then sign-out.
    const third = new Browser(h.app, 'localhost', '203.0.113.100');
    expect(
      (await third.login('owner@acme-pay.example', 'a brand new passphrase here')).statusCode,
    ).toBe(200);
    const thirdId = json<{ data: Array<{ id: string; current: boolean }> }>(
      await third.get('/console/api/sessions'),
    ).data.find((s) => s.current)?.id as string;
    expect((await b.del(`/console/api/sessions/${thirdId}`)).statusCode).toBe(204);
    const fourth = new Browser(h.app, 'localhost', '203.0.113.101');
    expect(
      (await fourth.login('owner@acme-pay.example', 'a brand new passphrase here')).statusCode,
    ).toBe(200);
    expect(json(await b.post('/console/api/sessions/revoke-others'))).toEqual({ revoked: 1 });

    const entries = await allPages(b, '');
    // Newest first; read oldest first for the story.
    const story = entries.map((e) => e.action).reverse();
    expect(story).toEqual([
      'account.signed_up',
      'api_key.created',
      'api_key.revoked',
      'watch.created',
      'watch.paused',
      'watch.resumed',
      'watch.test_sent',
      'event.redelivered',
      'event.bulk_redelivered',
      'watch.deleted',
      'session.sign_in_failed',
      'session.signed_in',
      'account.password_change_failed',
      'account.password_changed',
      'session.signed_in',
      'session.revoked',
      'session.signed_in',
      'session.revoked_others',
    ]);
    const by = (action: string) => entries.filter((e) => e.action === action);
    const userActor = {
      type: 'user',
      id: userId,
      label: 'owner@acme-pay.example',
      session_id: firstSession,
    };
    for (const a of ['api_key.created', 'watch.created', 'watch.test_sent', 'session.revoked']) {
      expect(by(a)[0], a).toMatchObject({ actor: userActor, client_ip: '198.51.100.20' });
    }
    expect(by('api_key.created')[0]).toMatchObject({
      target_id: key.key.id,
      detail: { name: 'billing', prefix: key.key.prefix, network: 'mainnet' },
    });
    expect(by('watch.created')[0]).toMatchObject({
      target_id: created.id,
      detail: {
        asset_filter: 'USDT',
        channel: 'webhook',
        webhook_host: new URL(receiver.url).host,
      },
    });
    expect(by('watch.test_sent')[0]).toMatchObject({
      target_id: created.id,
      detail: { ok: true, http_status: 204 },
    });
    expect(by('event.redelivered')[0]?.target_id).toBe(events[0]);
    expect(by('event.bulk_redelivered')[0]).toMatchObject({
      target_id: created.id,
      detail: { redelivered: 2, watch_id: created.id },
    });
    expect(by('session.sign_in_failed')).toHaveLength(1);
    expect(by('session.sign_in_failed')[0]).toMatchObject({
      actor: { type: 'user', id: userId, session_id: null },
      client_ip: '203.0.113.99',
      detail: { reason: 'wrong_password' },
    });
    expect(by('session.signed_in')[2]).toMatchObject({
      client_ip: '203.0.113.99',
      actor: { type: 'user', id: userId },
    });
    expect(by('session.signed_in')[2]?.actor.session_id).toBe(
      by('session.signed_in')[2]?.target_id,
    );
    expect(by('account.password_changed')[0]?.detail).toEqual({ revoked_sessions: 1 });
    expect(by('session.revoked')[0]?.target_id).toBe(thirdId);
    expect(by('session.revoked_others')[0]?.detail).toEqual({ revoked: 1 });

    // Signing out is the last entry, with the session it ended.
    expect((await b.post('/console/api/logout')).statusCode).toBe(204);
    const { rows: last } = await h.db.query<{ action: string; target_id: string }>(
      'SELECT action, target_id FROM audit_log ORDER BY at DESC, id DESC LIMIT 1',
    );
    expect(last[0]).toEqual({ action: 'session.signed_out', target_id: firstSession });

    // Nothing secret in the table: the API key, the webhook secret, the receiver's own token in
    // the URL, the session and CSRF tokens, the passwords.
    const text = await tableText(h);
    for (const s of [
      key.secret,
      created.secret,
      'abc123',
      ...tokens,
      PASSWORD,
      'a brand new passphrase here',
      'not the password at all',
      'wrong current password',
    ]) {
      expect(s.length).toBeGreaterThan(5);
      expect(text).not.toContain(s);
    }
    expect(text).not.toMatch(/tw_live_[1-9A-HJ-NP-Za-km-z]{20}|whsec_|\$argon2/);
  }, 180_000);

  it('records API changes with the key as the actor, and the forwarded address behind TRUST_PROXY', async () => {
    h = await apiHarness(engine, { env: { TRUST_PROXY: '10.0.0.5' } });
    const c = await h.caller();
    const headers = { ...c.headers, 'x-forwarded-for': '192.0.2.44' };
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers,
      remoteAddress: '10.0.0.5',
      payload: webhookWatch(),
    });
    expect(created.statusCode, created.body).toBe(201);
    const { id, secret } = json<{ id: string; secret: string }>(created);
    for (const action of ['pause', 'resume']) {
      const r = await h.app.inject({
        method: 'POST',
        url: `/v1/watches/${id}/${action}`,
        headers,
        remoteAddress: '10.0.0.5',
      });
      expect(r.statusCode).toBe(200);
    }
    const [evt] = await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: id,
      tag: 'ap',
      count: 1,
      start: '2026-01-08T13:36:54Z',
    });
    await h.db.query(`UPDATE notifications SET status = 'DEAD', attempts = 6`);
    const rd = await h.app.inject({
      method: 'POST',
      url: `/v1/events/${evt}/redeliver`,
      headers,
      remoteAddress: '10.0.0.5',
    });
    expect(rd.statusCode, rd.body).toBe(201);
    // Issue 19's changes: an edit, a rotation (its new secret never recorded), its grace ended.
    const edited = await h.app.inject({
      method: 'PATCH',
      url: `/v1/watches/${id}`,
      headers,
      remoteAddress: '10.0.0.5',
      payload: { label: 'Shop' },
    });
    expect(edited.statusCode, edited.body).toBe(200);
    const rotated = await h.app.inject({
      method: 'POST',
      url: `/v1/watches/${id}/rotate-secret`,
      headers,
      remoteAddress: '10.0.0.5',
      payload: {},
    });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const newSecret = json<{ secret: string }>(rotated).secret;
    const ended = await h.app.inject({
      method: 'POST',
      url: `/v1/watches/${id}/previous-secret/expire`,
      headers,
      remoteAddress: '10.0.0.5',
    });
    expect(ended.statusCode, ended.body).toBe(200);
    // From an address that is not the trusted proxy, its X-Forwarded-For is not believed.
    const del = await h.app.inject({
      method: 'DELETE',
      url: `/v1/watches/${id}`,
      headers,
      remoteAddress: '198.51.100.7',
    });
    expect(del.statusCode).toBe(204);

    const { rows } = await h.db.query<{
      action: string;
      actor_type: string;
      actor_id: string;
      session_id: string | null;
      target_id: string;
      client_ip: string;
      account_id: string;
    }>(
      `SELECT action, actor_type, actor_id, session_id, target_id, client_ip, account_id
         FROM audit_log ORDER BY at, id`,
    );
    expect(rows.map((r) => [r.action, r.target_id, r.client_ip])).toEqual([
      ['watch.created', id, '192.0.2.44'],
      ['watch.paused', id, '192.0.2.44'],
      ['watch.resumed', id, '192.0.2.44'],
      ['event.redelivered', evt, '192.0.2.44'],
      ['watch.updated', id, '192.0.2.44'],
      ['watch.secret_rotated', id, '192.0.2.44'],
      ['watch.previous_secret_expired', id, '192.0.2.44'],
      ['watch.deleted', id, '198.51.100.7'],
    ]);
    for (const r of rows) {
      expect(r).toMatchObject({
        actor_type: 'api_key',
        actor_id: c.keyId,
        session_id: null,
        account_id: c.accountId,
      });
    }
    const text = await tableText(h);
    expect(text).not.toContain(c.key);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(newSecret);

    // GET /v1/audit: the same entries to the key, newest first, with the key's label; filters
    // and their 400s as in the console; another account's key sees none of them.
    const read = await h.app.inject({
      method: 'GET',
      url: '/v1/audit?limit=2',
      headers: c.headers,
    });
    expect(read.statusCode, read.body).toBe(200);
    expect(read.headers['x-ratelimit-limit']).toBeDefined();
    const page = json<Page>(read) as unknown as Page;
    expect(page.data.map((e) => e.action)).toEqual([
      'watch.deleted',
      'watch.previous_secret_expired',
    ]);
    expect(page.data[0]?.actor).toEqual({
      type: 'api_key',
      id: c.keyId,
      label: expect.stringMatching(/^tw_live_[1-9A-HJ-NP-Za-km-z]{4}$/),
      session_id: null,
    });
    const rest = await h.app.inject({
      method: 'GET',
      url: `/v1/audit?cursor=${encodeURIComponent(page.next_cursor ?? '')}&action=watch.*`,
      headers: c.headers,
    });
    expect((json<Page>(rest) as unknown as Page).data.map((e) => e.action)).toEqual([
      'watch.secret_rotated',
      'watch.updated',
      'watch.resumed',
      'watch.paused',
      'watch.created',
    ]);
    for (const q of ['actor=robot', 'limit=500', 'network=nile', 'since=yesterday']) {
      const bad = await h.app.inject({ method: 'GET', url: `/v1/audit?${q}`, headers: c.headers });
      expect(bad.statusCode, q).toBe(400);
    }
    const stranger = await h.caller();
    const theirs = await h.app.inject({
      method: 'GET',
      url: '/v1/audit',
      headers: stranger.headers,
    });
    expect(json(theirs)).toEqual({ data: [], next_cursor: null });
    expect((await h.app.inject({ method: 'GET', url: '/v1/audit' })).statusCode).toBe(401);
  }, 180_000);

  it('records before and after of a watch edit and a rotation (hosts only); a refused entry undoes the edit, the rotation and the grace end', async () => {
    // Issue 27 item 6 and issue 29 item 2: `watch.updated` names the old and new label and host
    // (never a path, query or token of the URL); a rotation its grace period; ending the grace
    // period when it was to end. Each commits with its change: an entry the database refuses
    // leaves the watch as it was.
    h = await apiHarness(engine);
    const c = await h.caller();
    const call = (method: 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) =>
      (h as ApiHarness).app.inject({ method, url, headers: c.headers, payload });
    const created = await call(
      'POST',
      '/v1/watches',
      webhookWatch({ label: 'Till', webhook_url: 'https://hooks.example.com/tron?token=old-tok' }),
    );
    expect(created.statusCode, created.body).toBe(201);
    const { id } = json<{ id: string }>(created);
    const edited = await call('PATCH', `/v1/watches/${id}`, {
      label: 'Shop',
      webhook_url: 'https://hooks2.example.com/in?token=new-tok',
    });
    expect(edited.statusCode, edited.body).toBe(200);
    const labelOnly = await call('PATCH', `/v1/watches/${id}`, { label: 'Shop 2' });
    expect(labelOnly.statusCode, labelOnly.body).toBe(200);
    const rotated = await call('POST', `/v1/watches/${id}/rotate-secret`, {
      grace_period_seconds: 3600,
    });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const graceEnd = json<{ previous_secret_expires_at: string }>(
      rotated,
    ).previous_secret_expires_at;
    expect(Date.parse(graceEnd)).toBeGreaterThan(Date.now());
    const detail = async (action: string) => {
      const { rows } = await (h as ApiHarness).db.query<{ detail: Record<string, unknown> }>(
        'SELECT detail FROM audit_log WHERE action = $1 AND target_id = $2 ORDER BY at, id',
        [action, id],
      );
      return rows.map((r) => r.detail);
    };
    expect(await detail('watch.updated')).toEqual([
      {
        changed: 'label,webhook_url',
        previous_label: 'Till',
        label: 'Shop',
        previous_webhook_host: 'hooks.example.com',
        webhook_host: 'hooks2.example.com',
      },
      { changed: 'label', previous_label: 'Shop', label: 'Shop 2' },
    ]);
    const [rotation] = await detail('watch.secret_rotated');
    expect(rotation).toEqual({
      grace_period_seconds: 3600,
      grace_ends_at: expect.any(String),
    });
    expect(Date.parse(String(rotation?.grace_ends_at))).toBe(Date.parse(graceEnd));
    const text = await tableText(h);
    for (const leak of ['old-tok', 'new-tok', '/tron', '/in?', 'token=']) {
      expect(text).not.toContain(leak);
    }

    // The database refuses these entries: each change answers 500 and the watch is unchanged.
    const watchRow = async () => {
      const { rows } = await (h as ApiHarness).db.query<{ t: string }>(
        'SELECT row_to_json(w)::text AS t FROM watches w WHERE id = $1',
        [id],
      );
      return rows[0]?.t;
    };
    const before = await watchRow();
    await h.db.query(`CREATE FUNCTION refuse_watch_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
    await h.db.query(`CREATE TRIGGER refuse_watch_audit BEFORE INSERT ON audit_log FOR EACH ROW
      WHEN (NEW.action IN ('watch.updated', 'watch.secret_rotated',
                           'watch.previous_secret_expired'))
      EXECUTE FUNCTION refuse_watch_audit()`);
    const refused = [
      await call('PATCH', `/v1/watches/${id}`, {
        label: 'Doomed',
        webhook_url: 'https://hooks3.example.com/x',
      }),
      await call('POST', `/v1/watches/${id}/rotate-secret`, { grace_period_seconds: 60 }),
      await call('POST', `/v1/watches/${id}/previous-secret/expire`),
    ];
    expect(refused.map((r) => r.statusCode)).toEqual([500, 500, 500]);
    expect(await watchRow()).toBe(before);
    const listed = json<{ data: Array<Record<string, unknown>> }>(
      await h.app.inject({ method: 'GET', url: '/v1/watches', headers: c.headers }),
    );
    expect(listed.data.find((w) => w.id === id)).toMatchObject({
      label: 'Shop 2',
      webhook_url: 'https://hooks2.example.com/in?token=new-tok',
      previous_secret_expires_at: graceEnd,
    });
    expect(await detail('watch.previous_secret_expired')).toEqual([]);
  }, 180_000);

  it('commits an endpoint rotation and its grace end with their entries: a refused entry undoes them', async () => {
    // Issue 27 item 6 for endpoints (issue 30): like a watch's, an endpoint's rotation and the end
    // of its grace period commit with their audit entries, or not at all.
    h = await apiHarness(engine);
    const c = await h.caller();
    const call = (url: string, payload?: Record<string, unknown>) =>
      (h as ApiHarness).app.inject({ method: 'POST', url, headers: c.headers, payload });
    const created = await call('/v1/endpoints', { url: 'https://hooks.example.com/tron?token=t' });
    expect(created.statusCode, created.body).toBe(201);
    const { id } = json<{ id: string }>(created);
    const rotated = await call(`/v1/endpoints/${id}/rotate-secret`, { grace_period_seconds: 3600 });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const graceEnd = json<{ previous_secret_expires_at: string }>(
      rotated,
    ).previous_secret_expires_at;
    const entries = async (action: string) => {
      const { rows } = await (h as ApiHarness).db.query<{ detail: Record<string, unknown> }>(
        'SELECT detail FROM audit_log WHERE action = $1 AND target_id = $2 ORDER BY at, id',
        [action, id],
      );
      return rows.map((r) => r.detail);
    };
    const [rotation] = await entries('endpoint.secret_rotated');
    expect(Date.parse(String(rotation?.grace_ends_at))).toBe(Date.parse(graceEnd));

    const endpointRow = async () => {
      const { rows } = await (h as ApiHarness).db.query<{ t: string }>(
        'SELECT row_to_json(e)::text AS t FROM endpoints e WHERE id = $1',
        [id],
      );
      return rows[0]?.t;
    };
    const before = await endpointRow();
    await h.db.query(`CREATE FUNCTION refuse_endpoint_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
    await h.db.query(`CREATE TRIGGER refuse_endpoint_audit BEFORE INSERT ON audit_log FOR EACH ROW
      WHEN (NEW.action IN ('endpoint.secret_rotated', 'endpoint.previous_secret_expired'))
      EXECUTE FUNCTION refuse_endpoint_audit()`);
    const refused = [
      await call(`/v1/endpoints/${id}/rotate-secret`, { grace_period_seconds: 60 }),
      await call(`/v1/endpoints/${id}/previous-secret/expire`),
    ];
    expect(refused.map((r) => r.statusCode)).toEqual([500, 500]);
    expect(await endpointRow()).toBe(before);
    expect(await entries('endpoint.secret_rotated')).toHaveLength(1);
    expect(await entries('endpoint.previous_secret_expired')).toEqual([]);
  }, 180_000);

  it('writes the entry in the change’s transaction: a refused change leaves none, a failed entry undoes its change', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('tx@acme-pay.example');
    const first = json<{ id: string }>(await b.post('/console/api/watches', webhookWatch()));
    // A duplicate (409) and a resume beyond the quota (402) record nothing.
    expect((await b.post('/console/api/watches', webhookWatch())).statusCode).toBe(409);
    await b.post(`/console/api/watches/${first.id}/pause`);
    for (const addr of [
      ADDR2_B58,
      'TYASr5UV6HEcXatwdFQfmLVUqQQQMUxHLS',
      'TNUC9Qb1rRpS5CbWLmNMxXBjyFoydXjWFR',
    ]) {
      const r = await b.post('/console/api/watches', webhookWatch({ address: addr }));
      expect(r.statusCode, r.body).toBe(201);
    }
    const over = await b.post(`/console/api/watches/${first.id}/resume`);
    expect(over.statusCode).toBe(402);
    const count = async (action: string) => {
      const { rows } = await (h as ApiHarness).db.query<{ n: number }>(
        'SELECT count(*)::int8 AS n FROM audit_log WHERE action = $1',
        [action],
      );
      return Number(rows[0]?.n);
    };
    expect(await count('watch.created')).toBe(4);
    expect(await count('watch.resumed')).toBe(0);

    // An entry the database refuses: the key it records is not created either (one transaction).
    await h.db.query(
      `ALTER TABLE audit_log ADD CONSTRAINT test_refuse_keys CHECK (action <> 'api_key.created')`,
    );
    const refused = await b.post('/console/api/keys', { name: 'doomed' });
    expect(refused.statusCode).toBe(500);
    const { rows: keys } = await h.db.query('SELECT 1 FROM api_keys WHERE name = $1', ['doomed']);
    expect(keys).toHaveLength(0);
    await h.db.query(
      `ALTER TABLE audit_log ADD CONSTRAINT test_refuse_deletes CHECK (action <> 'watch.deleted')`,
    );
    expect((await b.del(`/console/api/watches/${first.id}`)).statusCode).toBe(500);
    const { rows: still } = await h.db.query<{ deleted_at: Date | null }>(
      'SELECT deleted_at FROM watches WHERE id = $1',
      [first.id],
    );
    expect(still[0]?.deleted_at).toBeNull();
  }, 180_000);

  it('filters by actor, action and time, pages without skipping or repeating, and keeps accounts apart', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('pager@acme-pay.example');
    const signedIn = json<{ account: { id: string }; user: { id: string } }>(
      await b.get('/console/api/session'),
    );
    const accountId = signedIn.account.id;
    // The signed-in member (issue 18 item 3): the actor of every console change.
    const userId = signedIn.user.id;
    const keyIds: string[] = [];
    for (let i = 0; i < 7; i++) {
      keyIds.push(
        json<{ key: { id: string } }>(await b.post('/console/api/keys', { name: `k${i}` })).key.id,
      );
    }
    // The operator's CLI: actor system "cli", no client address.
    const cliKey = await keysCreate(h.db, { account: accountId, name: 'from-cli' });
    await keysRevoke(h.db, { keyId: cliKey.id });
    // Another account's entries never show.
    const stranger = new Browser(h.app, 'localhost', '192.0.2.1');
    await stranger.signUp('stranger@acme-pay.example');
    await stranger.post('/console/api/keys', { name: 'theirs' });

    const everything = await allPages(b, 'limit=3');
    expect(everything).toHaveLength(10); // sign-up, 7 keys, CLI create and revoke
    expect(new Set(everything.map((e) => e.id)).size).toBe(10);
    const { rows: ordered } = await h.db.query<{ id: string }>(
      'SELECT id FROM audit_log WHERE account_id = $1 ORDER BY at DESC, id DESC',
      [accountId],
    );
    expect(everything.map((e) => e.id)).toEqual(ordered.map((r) => r.id));

    const keysOnly = await allPages(b, 'action=api_key.*&limit=2');
    expect(keysOnly).toHaveLength(9);
    expect(json<Page>(await b.get('/console/api/audit?action=api_key.revoked')).data).toHaveLength(
      1,
    );
    const cli = json<Page>(await b.get('/console/api/audit?actor=system')).data;
    expect(cli.map((e) => [e.action, e.actor.id, e.actor.label, e.client_ip])).toEqual([
      ['api_key.revoked', 'cli', 'cli', null],
      ['api_key.created', 'cli', 'cli', null],
    ]);
    expect(cli[1]?.detail).toMatchObject({ name: 'from-cli' });
    expect(json<Page>(await b.get(`/console/api/audit?actor=user:${userId}`)).data).toHaveLength(8);
    expect(json<Page>(await b.get('/console/api/audit?actor=api_key')).data).toHaveLength(0);

    // Time: the newest three entries by their own times. Entries written in one microsecond
    // share a time (`until` is exclusive, so a tie with the newest would drop out): give the
    // account's entries distinct times one second apart, in their order, so the range below is
    // exactly the two entries between the third newest (inclusive) and the newest (exclusive).
    await h.db.query(
      `UPDATE audit_log a SET at = timestamptz '2026-01-01T00:00:00Z' + o.n * interval '1 second'
         FROM (SELECT id, row_number() OVER (ORDER BY at, id) AS n FROM audit_log
                WHERE account_id = $1) o
        WHERE a.id = o.id`,
      [accountId],
    );
    const timed = await allPages(b, 'limit=50');
    expect(timed.map((e) => e.id)).toEqual(everything.map((e) => e.id));
    const [n0, , n2] = timed;
    const range = json<Page>(
      await b.get(
        `/console/api/audit?since=${encodeURIComponent(n2?.at ?? '')}&until=${encodeURIComponent(
          n0?.at ?? '',
        )}`,
      ),
    ).data;
    expect(range.map((e) => e.id)).toEqual([timed[1]?.id, n2?.id]);
    expect(new Set(timed.slice(0, 3).map((e) => e.at)).size).toBe(3);

    // Malformed filters: 400 naming the member, never a 500.
    for (const [q, field] of [
      ['actor=admin', 'actor'],
      ['action=DROP TABLE', 'action'],
      ['cursor=bm90LWEtY3Vyc29y', 'cursor'],
      ['since=not-a-time', 'since'],
      ['limit=0', 'limit'],
      ['limit=0x10', 'limit'],
      ['until=0000-01-01T00:00:00Z', 'until'],
      ['colour=blue', 'colour'],
    ] as const) {
      const r = await b.get(`/console/api/audit?${q.replace(/ /g, '%20')}`);
      expect(r.statusCode, `${q}: ${r.body}`).toBe(400);
      expect(JSON.stringify(json(r)), q).toContain(field);
    }
    // Without a session: 401.
    expect((await new Browser(h.app).get('/console/api/audit')).statusCode).toBe(401);
    const actions = json<{ data: Array<{ name: string; description: string }> }>(
      await b.get('/console/api/audit/actions'),
    ).data;
    expect(actions.map((a) => a.name)).toContain('watch.test_sent');
  }, 180_000);

  it('records Telegram binding (by the bot) and unbinding, never the link token', async () => {
    const standIn: TelegramStandIn = await startTelegramStandIn({});
    stops.push(() => standIn.close());
    const cfg = loadConfig({
      TELEGRAM_BOT_TOKEN: standIn.token,
      TELEGRAM_API_ROOT: standIn.url,
      TELEGRAM_TIMEOUT_MS: '5000',
    });
    const bot = await openBot(cfg.telegram);
    h = await apiHarness(engine, { env: OPEN, telegram: bot });
    const b = new Browser(h.app);
    await b.signUp('chat@acme-pay.example');
    const { link } = json<{ link: string }>(await b.post('/console/api/telegram/connect'));
    const token = new URL(link).searchParams.get('start') ?? '';
    expect(token).toHaveLength(32);
    const update = {
      update_id: 1,
      message: {
        message_id: 1,
        date: Math.floor(Date.now() / 1000),
        chat: { id: 7_700_001, type: 'private', first_name: 'Ann' },
        from: { id: 4242, is_bot: false, first_name: 'Ann' },
        text: `/start ${token}`,
      },
    } as unknown as Update;
    expect(
      await handleUpdate(
        { db: h.db, telegram: bot, pacer: new MemoryPacer(), logger: silentLogger },
        update,
      ),
    ).toBe('bound');
    expect((await b.del('/console/api/telegram')).statusCode).toBe(204);
    const entries = json<Page>(await b.get('/console/api/audit?action=telegram.*')).data;
    expect(entries.map((e) => [e.action, e.actor.type, e.actor.id, e.target_id])).toEqual([
      ['telegram.unbound', 'user', entries[0]?.actor.id, '7700001'],
      ['telegram.bound', 'system', 'telegram', '7700001'],
      ['telegram.link_created', 'user', entries[0]?.actor.id, null],
    ]);
    expect(entries[1]).toMatchObject({
      client_ip: null,
      detail: { chat_type: 'private', chat_title: 'Ann', from_user_id: 4242 },
    });
    expect(await tableText(h)).not.toContain(token);
  }, 180_000);

  it('cleans what a caller hands it: credential members dropped, credential-shaped strings redacted', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    await recordAudit(
      h.db,
      { accountId: c.accountId, actor: { type: 'api_key', id: c.keyId }, clientIp: '192.0.2.9' },
      {
        action: 'api_key.created',
        targetId: c.key,
        detail: {
          secret: 'whsec_abcdefghijklmnop',
          token: 'anything',
          password: 'hunter2hunter2',
          password_hash: '$argon2id$v=19$m=19456',
          authorization: `Bearer ${c.key}`,
          note: `the key is ${c.key}`,
          hook: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=',
          name: 'kept',
          count: 3,
          nested: { a: 1 } as unknown as string,
        },
      },
    );
    const { rows } = await h.db.query<{ target_id: string; detail: unknown }>(
      'SELECT target_id, detail FROM audit_log',
    );
    const detail =
      typeof rows[0]?.detail === 'string' ? JSON.parse(rows[0].detail) : rows[0]?.detail;
    expect(rows[0]?.target_id).toBe(REDACTED);
    expect(detail).toEqual({ note: REDACTED, hook: REDACTED, name: 'kept', count: 3 });
    expect(await tableText(h)).not.toContain(c.key);
  }, 180_000);

  it('prunes entries older than the cutoff in batches and keeps the rest', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const ctx = {
      accountId: c.accountId,
      actor: { type: 'system' as const, id: 'cli' },
      clientIp: null,
    };
    for (let i = 0; i < 7; i++) await recordAudit(h.db, ctx, { action: 'api_key.created' });
    await h.db.query(
      `UPDATE audit_log SET at = now() - interval '400 days'
        WHERE id IN (SELECT id FROM audit_log ORDER BY id LIMIT 5)`,
    );
    const now = new Date();
    const cutoff = auditCutoff(365, now);
    expect(now.getTime() - cutoff.getTime()).toBe(365 * 86_400_000);
    expect(await pruneAuditLog(h.db, cutoff, 2)).toBe(5);
    const { rows } = await h.db.query<{ n: number }>('SELECT count(*)::int8 AS n FROM audit_log');
    expect(Number(rows[0]?.n)).toBe(2);
    expect(await pruneAuditLog(h.db, cutoff, 2)).toBe(0);
    await expect(pruneAuditLog(h.db, cutoff, 0)).rejects.toThrow(RangeError);
  }, 180_000);
});
