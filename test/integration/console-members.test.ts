/**
 * Issue 18 items 1–3 on both engines, through the real app and a real SMTP server in the test
 * process: e-mail (invitations and reset links received and followed; retries; e-mail off),
 * password reset (single use, 30 minutes, the same answer for an unknown address, limits, every
 * session revoked), members and roles (invite, accept, change a role, remove, the last owner, the
 * role matrix: every console action tried with every role), and the migration of an existing
 * account's login to its owner user.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { setPasswordHash } from '../../src/accounts/credentials.js';
import { createUser, ROLES, type Role, roleAtLeast } from '../../src/accounts/users.js';
import { hashPassword } from '../../src/console/passwords.js';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.js';
import { Mailer } from '../../src/mail/mailer.js';
import { passwordResetMessage } from '../../src/mail/messages.js';
import { type ApiHarness, apiHarness, json, webhookWatch } from '../helpers/api.js';
import { Browser, PASSWORD } from '../helpers/console.js';
import { dbEngines, emptyDb } from '../helpers/db.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

const OPEN = { CONSOLE_SIGNUP: 'open' };
const NEW_PASSWORD = 'a fresh and long passphrase';

/** The token in a link's fragment (`…#token=…`). */
function tokenOf(link: string | undefined): string {
  const t = new URL(link ?? 'http://x/').hash.replace(/^#token=/, '');
  if (!t) throw new Error(`no token in ${link}`);
  return t;
}

let smtp: TestSmtp;
beforeAll(async () => {
  smtp = await startSmtp();
});
afterAll(async () => {
  await smtp?.close();
});

describe.each(dbEngines)('members, roles, e-mail and password reset on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
    // One SMTP server for both engines: each test reads only its own messages.
    smtp.received.length = 0;
  });

  /** A harness with e-mail on (the test SMTP server) and open sign-up. */
  const withMail = () =>
    apiHarness(engine, {
      env: {
        ...OPEN,
        SMTP_URL: smtp.url,
        MAIL_FROM: 'tronwatch <no-reply@tronwatch.test>',
        PUBLIC_URL: 'https://tw.example.com',
      },
    });

  it('invites a member by e-mail; the link from the message sets the password and signs in with the role', async () => {
    h = await withMail();
    const owner = new Browser(h.app);
    expect((await owner.signUp('owner1@example.com')).statusCode).toBe(201);
    const me = json<{ user: { role: string; email: string } }>(
      await owner.get('/console/api/session'),
    );
    expect(me.user).toMatchObject({ role: 'owner', email: 'owner1@example.com' });
    expect(json(await owner.get('/console/api/config')).email).toBe(true);

    const invited = await owner.post('/console/api/members', {
      email: 'Dev1@Example.com',
      role: 'developer',
    });
    expect(invited.statusCode, invited.body).toBe(201);
    // E-mail on: the link went by e-mail and is not in the answer.
    expect(json(invited)).toMatchObject({
      emailed: true,
      link: null,
      member: { email: 'dev1@example.com', role: 'developer', status: 'invited' },
    });
    const mail = await smtp.waitFor('dev1@example.com', /invitation/);
    expect(mail.from).toContain('no-reply@tronwatch.test');
    expect(mail.text).toContain('as developer');
    expect(mail.link).toMatch(/^https:\/\/tw\.example\.com\/console\/invite#token=/);
    // The HTML body carries the same link.
    expect(mail.html).toContain(`href="${mail.link}"`);
    // Only the token's hash is stored.
    const token = tokenOf(mail.link);
    const { rows } = await h.db.query<{ token_hash: string }>(
      'SELECT token_hash FROM console_invites',
    );
    expect(rows.map((r) => r.token_hash)).not.toContain(token);

    const dev = new Browser(h.app);
    await dev.get('/console/api/config');
    const accepted = await dev.post('/console/api/invite/accept', { token, password: PASSWORD });
    expect(accepted.statusCode, accepted.body).toBe(200);
    expect(json(accepted)).toMatchObject({
      user: { email: 'dev1@example.com', role: 'developer' },
      account: { email: 'owner1@example.com' },
    });
    // The same account: the developer sees the owner's keys, and makes one.
    expect((await dev.post('/console/api/keys', { name: 'ci' })).statusCode).toBe(201);
    const keys = json<{ data: unknown[] }>(await owner.get('/console/api/keys'));
    expect(keys.data).toHaveLength(1);
    // The members list.
    const members = json<{ data: Array<{ email: string; role: string; status: string }> }>(
      await dev.get('/console/api/members'),
    );
    expect(members.data.map((m) => [m.email, m.role, m.status])).toEqual([
      ['owner1@example.com', 'owner', 'active'],
      ['dev1@example.com', 'developer', 'active'],
    ]);
    // The link works once.
    const again = await new Browser(h.app).post('/console/api/invite/accept', {
      token,
      password: PASSWORD,
    });
    expect(again.statusCode).toBe(403); // no csrf cookie yet: refused before anything
    const b2 = new Browser(h.app);
    await b2.get('/console/api/config');
    const reused = await b2.post('/console/api/invite/accept', { token, password: PASSWORD });
    expect(json(reused).code).toBe('invalid_invite');
    // An e-mail that is already a user's.
    const dup = await owner.post('/console/api/members', {
      email: 'dev1@example.com',
      role: 'viewer',
    });
    expect(dup.statusCode).toBe(409);
    expect(json(dup).code).toBe('email_taken');
  });

  it('with e-mail off, shows the invitation link to the admin, and refuses reset by e-mail', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const owner = new Browser(h.app);
    expect((await owner.signUp('owner2@example.com')).statusCode).toBe(201);
    expect(json(await owner.get('/console/api/config')).email).toBe(false);
    const invited = json<{ emailed: boolean; link: string }>(
      await owner.post('/console/api/members', { email: 'v2@example.com', role: 'viewer' }),
    );
    expect(invited.emailed).toBe(false);
    expect(invited.link).toMatch(/^http:\/\/localhost:8080\/console\/invite#token=/);
    const v = new Browser(h.app);
    await v.get('/console/api/config');
    const accepted = await v.post('/console/api/invite/accept', {
      token: tokenOf(invited.link),
      password: PASSWORD,
    });
    expect(json(accepted)).toMatchObject({ user: { role: 'viewer' } });
    const reset = await new Browser(h.app).post('/console/api/password-reset', {
      email: 'owner2@example.com',
    });
    expect(reset.statusCode).toBe(403); // csrf first
    const anon = new Browser(h.app);
    await anon.get('/console/api/config');
    const off = await anon.post('/console/api/password-reset', { email: 'owner2@example.com' });
    expect(off.statusCode).toBe(503);
    expect(json(off).code).toBe('email_unavailable');
  });

  it('resets a password by e-mail: the same answer for an unknown address, single use, every session revoked', async () => {
    h = await withMail();
    const a = new Browser(h.app);
    expect((await a.signUp('resetme@example.com')).statusCode).toBe(201);
    const b = new Browser(h.app);
    expect((await b.login('resetme@example.com')).statusCode).toBe(200);

    const anon = new Browser(h.app, 'localhost', '198.51.100.20');
    await anon.get('/console/api/config');
    const known = await anon.post('/console/api/password-reset', { email: 'ResetMe@example.com' });
    const unknown = await anon.post('/console/api/password-reset', {
      email: 'nobody-here@example.com',
    });
    expect(known.statusCode).toBe(202);
    expect(unknown.statusCode).toBe(202);
    expect(unknown.body).toBe(known.body);
    const mail = await smtp.waitFor('resetme@example.com', /Reset/);
    expect(mail.link).toMatch(/^https:\/\/tw\.example\.com\/console\/reset#token=/);
    expect(mail.html).toContain(`href="${mail.link}"`);
    await h.mailer?.idle();
    expect(smtp.received.some((m) => m.to.includes('nobody-here@example.com'))).toBe(false);
    const token = tokenOf(mail.link);
    const { rows } = await h.db.query<{ token_hash: string; expires_at: Date; created_at: Date }>(
      'SELECT token_hash, expires_at, created_at FROM console_password_resets',
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.token_hash).not.toBe(token);
    expect(rows[0]?.token_hash).toMatch(/^[0-9a-f]{64}$/);
    // 30 minutes.
    expect(
      (rows[0]?.expires_at.getTime() ?? 0) - (rows[0]?.created_at.getTime() ?? 0),
    ).toBeGreaterThan(29.9 * 60_000);
    expect(
      (rows[0]?.expires_at.getTime() ?? 0) - (rows[0]?.created_at.getTime() ?? 0),
    ).toBeLessThanOrEqual(30 * 60_000 + 1_000);

    const c = new Browser(h.app);
    await c.get('/console/api/config');
    const done = await c.post('/console/api/password-reset/confirm', {
      token,
      password: NEW_PASSWORD,
    });
    expect(done.statusCode, done.body).toBe(200);
    expect(json(done)).toMatchObject({ user: { email: 'resetme@example.com' } });
    // Every earlier session of the user ended; the new one works.
    expect((await a.get('/console/api/session')).statusCode).toBe(401);
    expect((await b.get('/console/api/session')).statusCode).toBe(401);
    expect((await c.get('/console/api/session')).statusCode).toBe(200);
    expect((await new Browser(h.app).login('resetme@example.com')).statusCode).toBe(401);
    expect((await new Browser(h.app).login('resetme@example.com', NEW_PASSWORD)).statusCode).toBe(
      200,
    );
    // Single use.
    const d = new Browser(h.app);
    await d.get('/console/api/config');
    const reused = await d.post('/console/api/password-reset/confirm', {
      token,
      password: 'yet another passphrase',
    });
    expect(reused.statusCode).toBe(400);
    expect(json(reused).code).toBe('invalid_reset');
  });

  it('refuses an expired reset link, and limits reset requests per address and per client', async () => {
    h = await withMail();
    expect((await new Browser(h.app).signUp('limits@example.com')).statusCode).toBe(201);
    const x = new Browser(h.app, 'localhost', '198.51.100.30');
    await x.get('/console/api/config');
    expect(
      (await x.post('/console/api/password-reset', { email: 'limits@example.com' })).statusCode,
    ).toBe(202);
    const mail = await smtp.waitFor('limits@example.com', /Reset/);
    await h.db.query("UPDATE console_password_resets SET expires_at = now() - interval '1 second'");
    const expired = await x.post('/console/api/password-reset/confirm', {
      token: tokenOf(mail.link),
      password: NEW_PASSWORD,
    });
    expect(json(expired).code).toBe('invalid_reset');
    // Per e-mail address, from any client: 3 in 15 minutes (one used above).
    for (const ip of ['198.51.100.31', '198.51.100.32']) {
      const y = new Browser(h.app, 'localhost', ip);
      await y.get('/console/api/config');
      expect(
        (await y.post('/console/api/password-reset', { email: 'limits@example.com' })).statusCode,
      ).toBe(202);
    }
    const z = new Browser(h.app, 'localhost', '198.51.100.33');
    await z.get('/console/api/config');
    const fourth = await z.post('/console/api/password-reset', { email: 'limits@example.com' });
    expect(fourth.statusCode).toBe(429);
    expect(json(fourth).code).toBe('login_rate_limited');
    expect(Number(fourth.headers['retry-after'])).toBeGreaterThan(0);
    // An unknown address is limited alike (nothing to tell them apart).
    for (let i = 0; i < 3; i++) {
      expect(
        (await z.post('/console/api/password-reset', { email: 'ghost@example.com' })).statusCode,
      ).toBe(202);
    }
    expect(
      (await z.post('/console/api/password-reset', { email: 'ghost@example.com' })).statusCode,
    ).toBe(429);
    // Per client: 10 in 15 minutes, whatever the addresses.
    const w = new Browser(h.app, 'localhost', '198.51.100.34');
    await w.get('/console/api/config');
    for (let i = 0; i < 10; i++) {
      expect(
        (await w.post('/console/api/password-reset', { email: `spray${i}@example.com` }))
          .statusCode,
      ).toBe(202);
    }
    expect(
      (await w.post('/console/api/password-reset', { email: 'spray-last@example.com' })).statusCode,
    ).toBe(429);
  });

  it('changes roles and removes members: removed sessions end at once, the last owner stays', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const owner = new Browser(h.app);
    expect((await owner.signUp('boss@example.com')).statusCode).toBe(201);
    const ownerId = json<{ user: { id: string } }>(await owner.get('/console/api/session')).user.id;
    const accountId = json<{ account: { id: string } }>(await owner.get('/console/api/session'))
      .account.id;
    const member = async (email: string, role: Role) => {
      const u = await createUser(h!.db, { accountId, email, role });
      await setPasswordHash(h!.db, u.id, await hashPassword(PASSWORD));
      const b = new Browser(h!.app);
      expect((await b.login(email)).statusCode).toBe(200);
      return { id: u.id, b };
    };
    // The last owner can neither leave nor be demoted.
    const leave = await owner.del(`/console/api/members/${ownerId}`);
    expect(leave.statusCode).toBe(409);
    expect(json(leave).code).toBe('last_owner');
    const demote = await owner.post(`/console/api/members/${ownerId}/role`, { role: 'admin' });
    expect(json(demote).code).toBe('last_owner');

    const admin = await member('adm@example.com', 'admin');
    const dev = await member('dev@example.com', 'developer');
    // An admin cannot touch an owner, nor make one.
    expect(
      json(await admin.b.post(`/console/api/members/${ownerId}/role`, { role: 'viewer' })).code,
    ).toBe('insufficient_role');
    expect(json(await admin.b.del(`/console/api/members/${ownerId}`)).code).toBe(
      'insufficient_role',
    );
    expect(
      json(await admin.b.post(`/console/api/members/${dev.id}/role`, { role: 'owner' })).code,
    ).toBe('insufficient_role');
    expect(
      json(await admin.b.post('/console/api/members', { email: 'o2@example.com', role: 'owner' }))
        .code,
    ).toBe('insufficient_role');
    // An admin changes a developer's role; it applies from the next request.
    const changed = await admin.b.post(`/console/api/members/${dev.id}/role`, { role: 'viewer' });
    expect(json(changed)).toMatchObject({ role: 'viewer' });
    const refused = await dev.b.post('/console/api/keys', {});
    expect(refused.statusCode).toBe(403);
    expect(json(refused).code).toBe('insufficient_role');
    // A member cannot raise their own role.
    expect(
      json(await dev.b.post(`/console/api/members/${dev.id}/role`, { role: 'admin' })).code,
    ).toBe('insufficient_role');
    // Removed: their session ends at once.
    expect((await admin.b.del(`/console/api/members/${dev.id}`)).statusCode).toBe(200);
    const gone = await dev.b.get('/console/api/session');
    expect(gone.statusCode).toBe(401);
    expect(json(gone).code).toBe('no_session');
    expect((await new Browser(h.app).login('dev@example.com')).statusCode).toBe(401);
    // With a second owner, the first may step down, and then leave.
    expect(
      (await owner.post(`/console/api/members/${admin.id}/role`, { role: 'owner' })).statusCode,
    ).toBe(200);
    expect(
      json(await owner.post(`/console/api/members/${ownerId}/role`, { role: 'admin' })),
    ).toMatchObject({ role: 'admin' });
    expect((await owner.del(`/console/api/members/${ownerId}`)).statusCode).toBe(200);
    expect((await owner.get('/console/api/session')).statusCode).toBe(401);
    // The new sole owner cannot leave.
    expect(json(await admin.b.del(`/console/api/members/${admin.id}`)).code).toBe('last_owner');
    // A member of another account is not found from this one.
    const other = new Browser(h.app);
    expect((await other.signUp('else@example.com')).statusCode).toBe(201);
    expect((await other.del(`/console/api/members/${admin.id}`)).statusCode).toBe(404);
  });

  it('alert e-mails: on for owners and admins, off for others, each member switches their own', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const owner = new Browser(h.app);
    expect((await owner.signUp('alerts-owner@example.com')).statusCode).toBe(201);
    const session = json<{ user: { id: string }; account: { id: string } }>(
      await owner.get('/console/api/session'),
    );
    const accountId = session.account.id;
    const member = async (email: string, role: Role) => {
      const u = await createUser(h!.db, { accountId, email, role });
      await setPasswordHash(h!.db, u.id, await hashPassword(PASSWORD));
      const b = new Browser(h!.app);
      expect((await b.login(email)).statusCode).toBe(200);
      return { id: u.id, b };
    };
    const admin = await member('alerts-admin@example.com', 'admin');
    const dev = await member('alerts-dev@example.com', 'developer');
    const viewer = await member('alerts-viewer@example.com', 'viewer');
    // Invited from the console: an admin starts on, a developer off.
    const invitedAdmin = json<{ member: { alert_emails: boolean } }>(
      await owner.post('/console/api/members', { email: 'inv-admin@example.com', role: 'admin' }),
    );
    expect(invitedAdmin.member.alert_emails).toBe(true);
    const invitedDev = json<{ member: { alert_emails: boolean } }>(
      await owner.post('/console/api/members', { email: 'inv-dev@example.com', role: 'developer' }),
    );
    expect(invitedDev.member.alert_emails).toBe(false);
    type Listed = { email: string; alert_emails: boolean; you: boolean };
    const listed = async (b: Browser) =>
      Object.fromEntries(
        json<{ data: Listed[] }>(await b.get('/console/api/members')).data.map((m) => [
          m.email,
          m.alert_emails,
        ]),
      );
    expect(await listed(viewer.b)).toEqual({
      'alerts-owner@example.com': true,
      'alerts-admin@example.com': true,
      'inv-admin@example.com': true,
      'alerts-dev@example.com': false,
      'inv-dev@example.com': false,
      'alerts-viewer@example.com': false,
    });

    // A developer opts in and the owner opts out: each answer is the member's own row.
    const on = await dev.b.put('/console/api/members/me/alerts', { alert_emails: true });
    expect(on.statusCode, on.body).toBe(200);
    expect(json(on)).toMatchObject({ id: dev.id, alert_emails: true, you: true });
    const off = await owner.put('/console/api/members/me/alerts', { alert_emails: false });
    expect(json(off)).toMatchObject({ id: session.user.id, alert_emails: false, you: true });
    expect(await listed(admin.b)).toMatchObject({
      'alerts-owner@example.com': false,
      'alerts-dev@example.com': true,
      'alerts-admin@example.com': true,
    });
    // A role change keeps the choice.
    await owner.post(`/console/api/members/${dev.id}/role`, { role: 'admin' });
    expect((await listed(owner))['alerts-dev@example.com']).toBe(true);
    await owner.post(`/console/api/members/${admin.id}/role`, { role: 'viewer' });
    expect((await listed(owner))['alerts-admin@example.com']).toBe(true);

    // Nobody switches someone else's: there is no such route, whatever the role.
    const other = await owner.request('PUT', `/console/api/members/${viewer.id}/alerts`, {
      alert_emails: true,
    });
    expect(other.statusCode).toBe(404);
    expect((await listed(owner))['alerts-viewer@example.com']).toBe(false);
    // Bad bodies: 400 with the field named; without the CSRF token: 403.
    for (const body of [{}, { alert_emails: 'yes' }, { alert_emails: true, email: 'x@y.z' }]) {
      const bad = await viewer.b.put('/console/api/members/me/alerts', body);
      expect(bad.statusCode, JSON.stringify(body)).toBe(400);
      expect(json(bad).error).toBeTypeOf('string');
    }
    const noCsrf = await viewer.b.request(
      'PUT',
      '/console/api/members/me/alerts',
      { alert_emails: true },
      { csrf: null },
    );
    expect(noCsrf.statusCode).toBe(403);
    expect((await listed(owner))['alerts-viewer@example.com']).toBe(false);
    // Signed out: 401.
    expect(
      (await new Browser(h.app).put('/console/api/members/me/alerts', { alert_emails: true }))
        .statusCode,
    ).toBe(401);

    // Each change is in the audit log, by the member, on their own row.
    const { rows } = await h.db.query<{ actor_id: string; target_id: string; detail: unknown }>(
      `SELECT actor_id, target_id, detail FROM audit_log
        WHERE action = 'member.alert_emails_changed' ORDER BY at, id`,
    );
    expect(rows).toEqual([
      { actor_id: dev.id, target_id: dev.id, detail: { alert_emails: true } },
      { actor_id: session.user.id, target_id: session.user.id, detail: { alert_emails: false } },
    ]);
  });

  it('role matrix: every console action with every role', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const owner = new Browser(h.app);
    expect((await owner.signUp('matrix@example.com')).statusCode).toBe(201);
    const accountId = json<{ account: { id: string } }>(await owner.get('/console/api/session'))
      .account.id;
    const passwordHash = await hashPassword(PASSWORD);
    let n = 0;
    const newUser = async (role: Role) => {
      const u = await createUser(h!.db, { accountId, email: `m${++n}@example.com`, role });
      await setPasswordHash(h!.db, u.id, passwordHash);
      return u;
    };
    const as: Record<Role, Browser> = {
      owner,
      admin: new Browser(h.app),
      developer: new Browser(h.app),
      viewer: new Browser(h.app),
    };
    for (const role of ['admin', 'developer', 'viewer'] as const) {
      const u = await newUser(role);
      expect((await as[role].login(u.email)).statusCode).toBe(200);
    }
    const fakeWatch = 'wh_00000000000000000000000000';
    const fakeKey = 'key_00000000000000000000000000';
    const fakeEvent = 'evt_00000000000000000000000000';
    type Action = {
      name: string;
      needs: Role;
      run: (b: Browser) => Promise<LightMyRequestResponse>;
    };
    const actions: Action[] = [
      { name: 'overview', needs: 'viewer', run: (b) => b.get('/console/api/overview') },
      { name: 'list keys', needs: 'viewer', run: (b) => b.get('/console/api/keys') },
      { name: 'list watches', needs: 'viewer', run: (b) => b.get('/console/api/watches') },
      { name: 'list events', needs: 'viewer', run: (b) => b.get('/console/api/events') },
      {
        name: 'event detail',
        needs: 'viewer',
        run: (b) => b.get(`/console/api/events/${fakeEvent}`),
      },
      { name: 'list members', needs: 'viewer', run: (b) => b.get('/console/api/members') },
      { name: 'telegram status', needs: 'viewer', run: (b) => b.get('/console/api/telegram') },
      { name: 'own sessions', needs: 'viewer', run: (b) => b.get('/console/api/sessions') },
      {
        name: 'own second factor state',
        needs: 'viewer',
        run: (b) => b.get('/console/api/two-factor'),
      },
      {
        name: 'own alert e-mails',
        needs: 'viewer',
        run: (b) => b.put('/console/api/members/me/alerts', { alert_emails: true }),
      },
      {
        name: 'revoke own other sessions',
        needs: 'viewer',
        run: (b) => b.post('/console/api/sessions/revoke-others'),
      },
      { name: 'create key', needs: 'developer', run: (b) => b.post('/console/api/keys', {}) },
      { name: 'revoke key', needs: 'developer', run: (b) => b.del(`/console/api/keys/${fakeKey}`) },
      {
        name: 'create watch',
        needs: 'developer',
        run: (b) => b.post('/console/api/watches', webhookWatch()),
      },
      {
        name: 'delete watch',
        needs: 'developer',
        run: (b) => b.del(`/console/api/watches/${fakeWatch}`),
      },
      {
        name: 'pause watch',
        needs: 'developer',
        run: (b) => b.post(`/console/api/watches/${fakeWatch}/pause`),
      },
      {
        name: 'resume watch',
        needs: 'developer',
        run: (b) => b.post(`/console/api/watches/${fakeWatch}/resume`),
      },
      {
        name: 'test send',
        needs: 'developer',
        run: (b) => b.post(`/console/api/watches/${fakeWatch}/test`),
      },
      {
        name: 'redeliver event',
        needs: 'developer',
        run: (b) => b.post(`/console/api/events/${fakeEvent}/redeliver`),
      },
      {
        name: 'redeliver range',
        needs: 'developer',
        run: (b) => b.post('/console/api/redeliver', { watch_id: fakeWatch }),
      },
      {
        name: 'connect telegram',
        needs: 'admin',
        run: (b) => b.post('/console/api/telegram/connect'),
      },
      { name: 'unbind telegram', needs: 'admin', run: (b) => b.del('/console/api/telegram') },
      {
        name: 'invite member',
        needs: 'admin',
        run: (b) =>
          b.post('/console/api/members', { email: `i${++n}@example.com`, role: 'viewer' }),
      },
      {
        name: 'invite again',
        needs: 'admin',
        run: async (b) => {
          const u = await h!.db.query<{ id: string }>(
            'SELECT id FROM console_users WHERE account_id = $1 AND role = $2',
            [accountId, 'viewer'],
          );
          const pending = await createUser(h!.db, {
            accountId,
            email: `p${++n}@example.com`,
            role: 'viewer',
          });
          expect(u.rows.length).toBeGreaterThan(0);
          return b.post(`/console/api/members/${pending.id}/invite`);
        },
      },
      {
        name: "change another member's role",
        needs: 'admin',
        run: async (b) =>
          b.post(`/console/api/members/${(await newUser('viewer')).id}/role`, {
            role: 'developer',
          }),
      },
      {
        name: 'remove another member',
        needs: 'admin',
        run: async (b) => b.del(`/console/api/members/${(await newUser('developer')).id}`),
      },
      {
        name: 'invite an owner',
        needs: 'owner',
        run: (b) => b.post('/console/api/members', { email: `o${++n}@example.com`, role: 'owner' }),
      },
      {
        name: 'make an owner',
        needs: 'owner',
        run: async (b) =>
          b.post(`/console/api/members/${(await newUser('viewer')).id}/role`, { role: 'owner' }),
      },
      {
        name: "change an owner's role",
        needs: 'owner',
        run: async (b) =>
          b.post(`/console/api/members/${(await newUser('owner')).id}/role`, { role: 'viewer' }),
      },
      {
        name: 'require a second factor of every member',
        needs: 'owner',
        // false: requiring it needs the owner's own second factor (409), not the point here.
        run: (b) => b.put('/console/api/account/two-factor', { required: false }),
      },
      {
        name: "turn a member's second factor off",
        needs: 'owner',
        run: async (b) => b.del(`/console/api/members/${(await newUser('viewer')).id}/two-factor`),
      },
      {
        name: 'remove an owner',
        needs: 'owner',
        run: async (b) => b.del(`/console/api/members/${(await newUser('owner')).id}`),
      },
    ];
    const table: string[] = [];
    for (const action of actions) {
      for (const role of ROLES) {
        const res = await action.run(as[role]);
        const allowed = roleAtLeast(role, action.needs);
        const code = res.statusCode === 403 ? json(res).code : undefined;
        table.push(`${action.name} as ${role}: ${res.statusCode}`);
        if (allowed) {
          expect(code, `${action.name} as ${role}: ${res.body}`).not.toBe('insufficient_role');
          // Past the guard: the action's own answer (a 404 for a made-up id, 503 for Telegram
          // without a bot), never an internal error.
          expect(res.statusCode, `${action.name} as ${role}: ${res.body}`).not.toBe(500);
        } else {
          expect(res.statusCode, `${action.name} as ${role}: ${res.body}`).toBe(403);
          expect(code, `${action.name} as ${role}`).toBe('insufficient_role');
        }
      }
    }
    expect(table).toHaveLength(actions.length * ROLES.length);
  });

  it("migrates an existing account's login to its owner user (password and sessions kept)", async () => {
    const t = await emptyDb(engine);
    try {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-mig-'));
      for (const f of fs.readdirSync(MIGRATIONS_DIR)) {
        if (Number(f.slice(0, 3)) < 30)
          fs.copyFileSync(path.join(MIGRATIONS_DIR, f), path.join(dir, f));
      }
      await migrate(t.db, dir);
      const hash = await hashPassword(PASSWORD);
      await t.db.query(
        `INSERT INTO accounts (id, email, plan, password_hash)
         VALUES ('acc_01jz0000000000000000000000', 'old@example.com', 'pro', $1),
                ('acc_01jz0000000000000000000001', 'nopass@example.com', 'free', NULL)`,
        [hash],
      );
      await t.db.query(
        `INSERT INTO console_sessions (id, token_hash, csrf_hash, account_id, expires_at)
         VALUES ('ses_01jz0000000000000000000000', 'aa', 'bb', 'acc_01jz0000000000000000000000',
                 now() + interval '1 day')`,
      );
      await migrate(t.db);
      const { rows } = await t.db.query<{
        id: string;
        email: string;
        role: string;
        password_hash: string | null;
        joined: boolean;
      }>(
        'SELECT id, email, role, password_hash, joined_at IS NOT NULL AS joined FROM console_users ORDER BY id',
      );
      expect(rows).toEqual([
        {
          id: 'usr_01jz0000000000000000000000',
          email: 'old@example.com',
          role: 'owner',
          password_hash: hash,
          joined: true,
        },
        {
          id: 'usr_01jz0000000000000000000001',
          email: 'nopass@example.com',
          role: 'owner',
          password_hash: null,
          joined: false,
        },
      ]);
      const s = await t.db.query<{ user_id: string }>('SELECT user_id FROM console_sessions');
      expect(s.rows).toEqual([{ user_id: 'usr_01jz0000000000000000000000' }]);
    } finally {
      await t.drop();
    }
  });
});

describe.each(dbEngines)('migration 047 (alert e-mails) on %s', (engine) => {
  it('opts existing owners and admins in, developers and viewers out', async () => {
    const t = await emptyDb(engine);
    try {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-mig47-'));
      for (const f of fs.readdirSync(MIGRATIONS_DIR)) {
        if (Number(f.slice(0, 3)) < 47)
          fs.copyFileSync(path.join(MIGRATIONS_DIR, f), path.join(dir, f));
      }
      await migrate(t.db, dir);
      await t.db.query(
        `INSERT INTO accounts (id, email, plan)
         VALUES ('acc_01jz0000000000000000000047', 'm47@example.com', 'pro')`,
      );
      for (const role of ROLES) {
        await t.db.query(
          `INSERT INTO console_users (id, account_id, email, role, joined_at)
           VALUES ($1, 'acc_01jz0000000000000000000047', $2, $3, now())`,
          [`usr_01jz00000000000000000047${role.slice(0, 2)}`, `${role}47@example.com`, role],
        );
      }
      await migrate(t.db);
      const { rows } = await t.db.query<{ role: string; alert_emails: boolean }>(
        'SELECT role, alert_emails FROM console_users ORDER BY email',
      );
      expect(Object.fromEntries(rows.map((r) => [r.role, r.alert_emails]))).toEqual({
        owner: true,
        admin: true,
        developer: false,
        viewer: false,
      });
    } finally {
      await t.drop();
    }
  });
});

describe('the mailer', () => {
  it('retries a transient failure in the background, gives up on a permanent one, and never logs the message', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'debug' },
      new Writable({
        write(chunk, _enc, cb) {
          lines.push(String(chunk));
          cb();
        },
      }),
    );
    const mailer = new Mailer({
      transport: smtp.url,
      from: 'tronwatch <no-reply@tronwatch.test>',
      logger,
      baseMs: 20,
      capMs: 50,
    });
    const message = passwordResetMessage({
      to: 'retry@example.com',
      link: 'https://tw.example.com/console/reset#token=SECRET-TOKEN-123',
    });
    smtp.failNext(2, 451);
    const before = smtp.refused;
    // send() returns at once: nothing waits for the server.
    expect(mailer.send(message)).toBeUndefined();
    const got = await smtp.waitFor('retry@example.com');
    expect(got.link).toBe('https://tw.example.com/console/reset#token=SECRET-TOKEN-123');
    expect(smtp.refused - before).toBe(2);
    await mailer.idle();
    expect(mailer.counts).toEqual({ sent: 1, failed: 0 });
    // A 5xx is final: one try.
    smtp.failNext(1, 550);
    mailer.send({ ...message, to: 'refused@example.com' });
    await mailer.idle();
    expect(mailer.counts).toEqual({ sent: 1, failed: 1 });
    expect(smtp.received.some((m) => m.to.includes('refused@example.com'))).toBe(false);
    await mailer.close();
    const log = lines.join('');
    expect(log).toContain('"mail":"password_reset"');
    expect(log).toContain('"will_retry":true');
    expect(log).not.toContain('SECRET-TOKEN-123');
    expect(log).not.toContain('retry@example.com');
    expect(log).not.toContain('Reset your');
  });
});
