/**
 * Issue 27: the seven reproductions of the security review of main 0c09a4b, each through the real
 * app (HTTP request → stored state), on both engines, with a real SMTP server in the process:
 *
 * 1. an old invitation link of a joined member cannot take their login over (one live link per
 *    user; an invitation never sets a joined user's password);
 * 2. a key is never more than its maker: a developer's key cannot read /v1/audit, and removing the
 *    developer revokes their keys (audited by the system, the keys listed with their maker);
 * 3. wrong codes from many addresses lock the user's code step, the user is e-mailed, the owner
 *    sees it in the log;
 * 4. inviting a registered address answers as any invitation; invitations are rate-limited;
 * 5. a live stream ends at once when its member is removed, or its session signed out; a few
 *    streams per session at most;
 * 6. member and two-factor changes are recorded in their own transaction (an audit insert that
 *    fails rolls the change back);
 * 7. new recovery codes need a current code and send an e-mail; a reset link changes nothing
 *    (password, sessions) before the second factor.
 */
import { Secret, TOTP } from 'otpauth';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPasswordReset } from '../../src/accounts/credentials.js';
import { type ApiHarness, apiHarness, json } from '../helpers/api.js';
import { Browser, PASSWORD } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

const OPEN = { CONSOLE_SIGNUP: 'open' };

function codeOf(secret: string, offsetSteps = 0): string {
  return TOTP.generate({
    secret: Secret.fromBase32(secret),
    timestamp: Date.now() + offsetSteps * 30_000,
  });
}

/** A code of the secret that is none of the ones accepted now (±1 step). */
function wrongCodeOf(secret: string): string {
  const right = new Set([-1, 0, 1].map((d) => codeOf(secret, d)));
  for (let n = 0; ; n++) {
    const c = String(n).padStart(6, '0');
    if (!right.has(c)) return c;
  }
}

function tokenOf(link: string | null | undefined): string {
  const t = new URL(link ?? 'http://x/').hash.replace(/^#token=/, '');
  if (!t) throw new Error(`no token in ${link}`);
  return t;
}

async function enrol(b: Browser): Promise<{ secret: string; codes: string[] }> {
  const setup = await b.post('/console/api/two-factor/setup', { password: PASSWORD });
  expect(setup.statusCode, setup.body).toBe(200);
  const { secret } = json<{ secret: string }>(setup);
  const on = await b.post('/console/api/two-factor/enable', { code: codeOf(secret) });
  expect(on.statusCode, on.body).toBe(200);
  return { secret, codes: json<{ recovery_codes: string[] }>(on).recovery_codes };
}

let smtp: TestSmtp;
beforeAll(async () => {
  smtp = await startSmtp();
});
afterAll(async () => {
  await smtp?.close();
});

describe.each(dbEngines)('the team account against its own members on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
    smtp.received.length = 0;
  });
  const withMail = () =>
    apiHarness(engine, {
      env: { ...OPEN, SMTP_URL: smtp.url, PUBLIC_URL: 'https://tw.example.com' },
    });

  /** An owner, and an admin who joined through a link (e-mail off: links are in the answers). */
  async function ownerAndAdmin(tag: string) {
    const owner = new Browser(h!.app, 'localhost', '198.51.100.1');
    expect((await owner.signUp(`owner-${tag}@example.com`)).statusCode).toBe(201);
    const inv = await owner.post('/console/api/members', {
      email: `admin-${tag}@example.com`,
      role: 'admin',
    });
    expect(inv.statusCode, inv.body).toBe(201);
    const admin = new Browser(h!.app, 'localhost', '198.51.100.2');
    await admin.get('/console/api/config');
    const acc = await admin.post('/console/api/invite/accept', {
      token: tokenOf(json<{ link: string }>(inv).link),
      password: PASSWORD,
    });
    expect(acc.statusCode, acc.body).toBe(200);
    return { owner, admin };
  }

  it('1. an admin cannot become owner with an old invitation link of a member who joined', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const { owner, admin } = await ownerAndAdmin('r1');
    const first = await admin.post('/console/api/members', {
      email: 'm-r1@example.com',
      role: 'developer',
    });
    expect(first.statusCode).toBe(201);
    const m = json<{ member: { id: string }; link: string }>(first);
    const l1 = tokenOf(m.link);
    const again = await admin.post(`/console/api/members/${m.member.id}/invite`);
    expect(again.statusCode, again.body).toBe(200);
    const l2 = tokenOf(json<{ link: string }>(again).link);
    const member = new Browser(h.app, 'localhost', '198.51.100.3');
    await member.get('/console/api/config');
    expect(
      (await member.post('/console/api/invite/accept', { token: l2, password: PASSWORD }))
        .statusCode,
    ).toBe(200);
    const promoted = await owner.post(`/console/api/members/${m.member.id}/role`, {
      role: 'owner',
    });
    expect(promoted.statusCode, promoted.body).toBe(200);
    // The admin replays the first link: refused, and nothing of the member's changed.
    const takeover = await admin.post('/console/api/invite/accept', {
      token: l1,
      password: 'the admin now knows this password',
    });
    expect(takeover.statusCode, takeover.body).toBe(400);
    expect(json(takeover).code).toBe('invalid_invite');
    expect((await member.get('/console/api/session')).statusCode).toBe(200);
    expect(
      (await new Browser(h.app).login('m-r1@example.com', 'the admin now knows this password'))
        .statusCode,
    ).toBe(401);
    // Even the link that was used cannot be used again.
    expect(
      (
        await admin.post('/console/api/invite/accept', {
          token: l2,
          password: 'another password 1',
        })
      ).statusCode,
    ).toBe(400);
    // The first link was cancelled by the second: its page says nothing either.
    const probe = new Browser(h.app, 'localhost', '198.51.100.9');
    await probe.get('/console/api/config');
    expect(
      (await probe.get(`/console/api/invite?token=${encodeURIComponent(l1)}`)).statusCode,
    ).toBe(400);
    // The original owner is still there.
    const members = json<{ data: Array<{ email: string; role: string }> }>(
      await owner.get('/console/api/members'),
    );
    expect(members.data.filter((x) => x.role === 'owner').map((x) => x.email)).toEqual([
      'm-r1@example.com',
      'owner-r1@example.com',
    ]);
  });

  it('1b. a role change cancels the open links of the member', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const { owner } = await ownerAndAdmin('r1b');
    const inv = await owner.post('/console/api/members', {
      email: 'x-r1b@example.com',
      role: 'viewer',
    });
    const { member, link } = json<{ member: { id: string }; link: string }>(inv);
    // The invitation page says who invited whom, to which account, as what (issue 29).
    const reader = new Browser(h.app, 'localhost', '198.51.100.8');
    const info = await reader.get(`/console/api/invite?token=${encodeURIComponent(tokenOf(link))}`);
    expect(info.statusCode, info.body).toBe(200);
    expect(json(info)).toMatchObject({
      email: 'x-r1b@example.com',
      role: 'viewer',
      account_email: 'owner-r1b@example.com',
      invited_by: 'owner-r1b@example.com',
    });
    expect(
      (await owner.post(`/console/api/members/${member.id}/role`, { role: 'developer' }))
        .statusCode,
    ).toBe(200);
    const b = new Browser(h.app, 'localhost', '198.51.100.4');
    await b.get('/console/api/config');
    const res = await b.post('/console/api/invite/accept', {
      token: tokenOf(link),
      password: PASSWORD,
    });
    expect(res.statusCode).toBe(400);
  });

  it("2. a developer's key cannot read the audit log, and dies with the developer's removal", async () => {
    h = await apiHarness(engine, { env: OPEN });
    const { owner, admin } = await ownerAndAdmin('r2');
    const inv = await owner.post('/console/api/members', {
      email: 'dev-r2@example.com',
      role: 'developer',
    });
    const dev = new Browser(h.app, 'localhost', '198.51.100.5');
    await dev.get('/console/api/config');
    await dev.post('/console/api/invite/accept', {
      token: tokenOf(json<{ link: string }>(inv).link),
      password: PASSWORD,
    });
    const made = await dev.post('/console/api/keys', { name: 'ci' });
    expect(made.statusCode, made.body).toBe(201);
    const { secret, key } = json<{ secret: string; key: { id: string } }>(made);
    // A test-mode key too (the console's environment switch, issue 32).
    dev.jar.set('tw_env', 'test');
    const madeTest = await dev.post('/console/api/keys', { name: 'ci-test' });
    expect(madeTest.statusCode, madeTest.body).toBe(201);
    dev.jar.delete('tw_env');
    const testKey = json<{ secret: string; key: { id: string } }>(madeTest);
    expect(testKey.secret).toMatch(/^tw_test_/);
    const bearer = { authorization: `Bearer ${secret}` };
    const audit = await h.app.inject({ method: 'GET', url: '/v1/audit', headers: bearer });
    expect(audit.statusCode, audit.body).toBe(403);
    expect(json(audit).code).toBe('insufficient_role');
    expect(
      (await h.app.inject({ method: 'GET', url: '/v1/watches', headers: bearer })).statusCode,
    ).toBe(200);
    // A developer cannot make a key above their role.
    expect((await dev.post('/console/api/keys', { name: 'x', role: 'admin' })).statusCode).toBe(
      403,
    );
    // An admin's key reads it.
    const adminKey = json<{ secret: string }>(await admin.post('/console/api/keys', { name: 'a' }));
    expect(
      (
        await h.app.inject({
          method: 'GET',
          url: '/v1/audit',
          headers: { authorization: `Bearer ${adminKey.secret}` },
        })
      ).statusCode,
    ).toBe(200);
    // The list names the maker, and filters by it.
    const devId = json<{ user: { id: string } }>(await dev.get('/console/api/session')).user.id;
    const listed = json<{ data: Array<{ id: string; role: string; created_by: unknown }> }>(
      await owner.get(`/console/api/keys?made_by=${devId}`),
    );
    expect(listed.data).toEqual([
      expect.objectContaining({
        id: key.id,
        role: 'developer',
        created_by: { type: 'user', user_id: devId, email: 'dev-r2@example.com' },
      }),
    ]);
    // Removal revokes the key at once; the owner is told; the system's entry is in the log.
    const removed = await owner.del(`/console/api/members/${devId}`);
    expect(removed.statusCode, removed.body).toBe(200);
    expect(
      json<{ keys_revoked: Array<{ id: string }> }>(removed)
        .keys_revoked.map((k) => k.id)
        .sort(),
    ).toEqual([key.id, testKey.key.id].sort());
    for (const url of ['/v1/audit', '/v1/watches']) {
      const r = await h.app.inject({ method: 'GET', url, headers: bearer });
      expect(r.statusCode).toBe(401);
      expect(json(r).code).toBe('revoked_api_key');
    }
    const { rows } = await h.db.query<{ actor_type: string; actor_id: string; detail: unknown }>(
      `SELECT actor_type, actor_id, detail FROM audit_log
        WHERE action = 'api_key.revoked' AND target_id = $1`,
      [key.id],
    );
    expect(rows).toEqual([
      expect.objectContaining({
        actor_type: 'system',
        actor_id: 'members',
        detail: expect.objectContaining({ reason: 'maker_removed', maker: 'dev-r2@example.com' }),
      }),
    ]);
    // Each key's entry records the key's own environment, not the owner's switch (live here).
    const envs = await h.db.query<{ target_id: string; network: string | null }>(
      `SELECT target_id, network FROM audit_log WHERE action = 'api_key.revoked'`,
    );
    expect(Object.fromEntries(envs.rows.map((r) => [r.target_id, r.network]))).toEqual({
      [key.id]: 'mainnet',
      [testKey.key.id]: 'nile',
    });
    // The removed developer's earlier entries keep their e-mail.
    const log = json<{ data: Array<{ action: string; actor: { label: string | null } }> }>(
      await owner.get('/console/api/audit?action=api_key.created'),
    );
    expect(log.data.map((e) => e.actor.label)).toContain('dev-r2@example.com');
  });

  it("2b. lowering a member's role narrows their keys at once", async () => {
    h = await apiHarness(engine, { env: OPEN });
    const { owner, admin } = await ownerAndAdmin('r2b');
    const { secret } = json<{ secret: string }>(await admin.post('/console/api/keys', {}));
    const bearer = { authorization: `Bearer ${secret}` };
    // And a test-mode key (issue 32): its narrowing is recorded as test, whatever the switch.
    admin.jar.set('tw_env', 'test');
    const testKey = json<{ key: { id: string } }>(await admin.post('/console/api/keys', {})).key;
    admin.jar.delete('tw_env');
    expect(
      (await h.app.inject({ method: 'GET', url: '/v1/audit', headers: bearer })).statusCode,
    ).toBe(200);
    const adminId = json<{ user: { id: string } }>(await admin.get('/console/api/session')).user.id;
    const lowered = await owner.post(`/console/api/members/${adminId}/role`, { role: 'viewer' });
    expect(lowered.statusCode, lowered.body).toBe(200);
    expect(json<{ keys_narrowed: unknown[] }>(lowered).keys_narrowed).toHaveLength(2);
    // The owner's entry names the previous role; the narrowing is the system's (issue 29 item 2).
    const { rows } = await h.db.query<{
      action: string;
      actor_type: string;
      detail: unknown;
      network: string | null;
    }>(
      `SELECT action, actor_type, detail, network FROM audit_log
        WHERE action IN ('member.role_changed', 'api_key.narrowed')
        ORDER BY at, action = 'api_key.narrowed', network`,
    );
    const narrowed = {
      action: 'api_key.narrowed',
      actor_type: 'system',
      detail: expect.objectContaining({
        role: 'viewer',
        reason: 'maker_role_changed',
        maker: 'admin-r2b@example.com',
      }),
    };
    expect(rows).toEqual([
      {
        action: 'member.role_changed',
        actor_type: 'user',
        detail: expect.objectContaining({
          email: 'admin-r2b@example.com',
          previous_role: 'admin',
          role: 'viewer',
          keys_narrowed: 2,
        }),
        network: null,
      },
      // Each key's own environment (issue 32), not the owner's switch (live here).
      { ...narrowed, network: 'mainnet' },
      { ...narrowed, network: 'nile' },
    ]);
    const { rows: test } = await h.db.query<{ target_id: string }>(
      `SELECT target_id FROM audit_log WHERE action = 'api_key.narrowed' AND network = 'nile'`,
    );
    expect(test).toEqual([{ target_id: testKey.id }]);
    expect(
      (await h.app.inject({ method: 'GET', url: '/v1/audit', headers: bearer })).statusCode,
    ).toBe(403);
    // A viewer's key reads, and changes nothing.
    expect(
      (await h.app.inject({ method: 'GET', url: '/v1/watches', headers: bearer })).statusCode,
    ).toBe(200);
    const post = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: { ...bearer, 'content-type': 'application/json' },
      payload: '{}',
    });
    expect(post.statusCode).toBe(403);
  });

  it('3. wrong codes from many addresses lock the code step; the user is e-mailed, the owner sees it', async () => {
    h = await withMail();
    const b = new Browser(h.app, 'localhost', '198.51.100.10');
    await b.signUp('tf-r3@example.com');
    const { secret } = await enrol(b);
    let refused = 0;
    let lockedUntil: string | undefined;
    for (let i = 0; i < 30; i++) {
      const attacker = new Browser(h.app, 'localhost', `203.0.113.${i + 1}`);
      const step = await attacker.login('tf-r3@example.com');
      expect(step.statusCode).toBe(200);
      const { challenge } = json<{ challenge: string }>(step);
      const r = await attacker.post('/console/api/login/second-factor', {
        challenge,
        code: wrongCodeOf(secret),
      });
      if (r.statusCode === 429) {
        refused++;
        expect(json(r).code).toBe('code_locked');
        lockedUntil = json<{ details: { locked_until: string } }>(r).details.locked_until;
        expect(r.headers['retry-after']).toBeDefined();
      } else expect(r.statusCode).toBe(401);
    }
    // Five wrong codes at most, whatever the addresses: the fifth locks, then every try is refused.
    expect(refused).toBe(26);
    expect(Date.parse(lockedUntil ?? '')).toBeGreaterThan(Date.now() + 50 * 60_000);
    // A right code is refused too while locked.
    const last = new Browser(h.app, 'localhost', '192.0.2.77');
    const step = await last.login('tf-r3@example.com');
    const right = await last.post('/console/api/login/second-factor', {
      challenge: json<{ challenge: string }>(step).challenge,
      code: codeOf(secret),
    });
    expect(right.statusCode).toBe(429);
    expect(last.jar.has('tw_session')).toBe(false);
    const mail = await smtp.waitFor('tf-r3@example.com', /locked/);
    expect(mail.text).toContain('locked for an hour');
    const { rows } = await h.db.query<{ actor_type: string; n: number }>(
      `SELECT actor_type, count(*)::int AS n FROM audit_log WHERE action = 'two_factor.code_locked'
        GROUP BY actor_type`,
    );
    expect(rows).toEqual([{ actor_type: 'system', n: 1 }]);
  });

  it('3b. a reused code says "already used"', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('tf-r3b@example.com');
    const { secret } = await enrol(b);
    const code = codeOf(secret, 1);
    const c1 = json<{ challenge: string }>(await b.login('tf-r3b@example.com')).challenge;
    expect(
      (await b.post('/console/api/login/second-factor', { challenge: c1, code })).statusCode,
    ).toBe(200);
    const other = new Browser(h.app, 'localhost', '198.51.100.33');
    const c2 = json<{ challenge: string }>(await other.login('tf-r3b@example.com')).challenge;
    const reused = await other.post('/console/api/login/second-factor', { challenge: c2, code });
    expect(reused.statusCode).toBe(401);
    expect(json<{ error: string; reason: string }>(reused)).toMatchObject({
      code: 'invalid_code',
      reason: 'code_already_used',
    });
    expect(json<{ error: string }>(reused).error).toMatch(/already used/);
  });

  it('4. inviting a registered address answers as any invitation; the user is told by e-mail; invitations are limited', async () => {
    h = await withMail();
    const victim = new Browser(h.app, 'localhost', '198.51.100.20');
    await victim.signUp('known-r4@example.com');
    const prober = new Browser(h.app, 'localhost', '198.51.100.21');
    await prober.signUp('prober-r4@example.com');
    const known = await prober.post('/console/api/members', {
      email: 'known-r4@example.com',
      role: 'viewer',
    });
    const unknown = await prober.post('/console/api/members', {
      email: 'nobody-r4@example.com',
      role: 'viewer',
    });
    expect(known.statusCode, known.body).toBe(201);
    expect(unknown.statusCode).toBe(201);
    const shape = (r: typeof known) => {
      const b = json<{ member: Record<string, unknown> } & Record<string, unknown>>(r);
      return {
        ...b,
        expires_at: typeof b.expires_at,
        member: { ...b.member, id: String(b.member.id).slice(0, 4), email: '', created_at: '' },
      };
    };
    expect(shape(known)).toEqual(shape(unknown));
    // Both listed as invited.
    const list = json<{ data: Array<{ email: string; status: string }> }>(
      await prober.get('/console/api/members'),
    );
    expect(
      list.data
        .filter((m) => m.status === 'invited')
        .map((m) => m.email)
        .sort(),
    ).toEqual(['known-r4@example.com', 'nobody-r4@example.com']);
    const told = await smtp.waitFor('known-r4@example.com', /already has a user/);
    expect(told.text).toContain('prober-r4@example.com');
    expect(told.text).not.toMatch(/#token=/);
    await smtp.waitFor('nobody-r4@example.com', /invitation/);
    // The known user's own account is untouched.
    expect((await victim.get('/console/api/session')).statusCode).toBe(200);
    // Rate limit: 20 invitations per account per hour.
    let last = 0;
    for (let i = 0; i < 20; i++) {
      last = (
        await prober.post('/console/api/members', { email: `p${i}-r4@example.com`, role: 'viewer' })
      ).statusCode;
    }
    expect(last).toBe(429);
    // And per client address, whatever the account: another account from the prober's address
    // is refused at its first invitation; from another address it may invite.
    const sameAddress = new Browser(h.app, 'localhost', '198.51.100.21');
    expect((await sameAddress.signUp('second-r4@example.com')).statusCode).toBe(201);
    const fromThere = await sameAddress.post('/console/api/members', {
      email: 'q-r4@example.com',
      role: 'viewer',
    });
    expect(fromThere.statusCode, fromThere.body).toBe(429);
    expect(json(fromThere).code).toBe('rate_limited');
    const elsewhere = new Browser(h.app, 'localhost', '198.51.100.22');
    expect((await elsewhere.signUp('third-r4@example.com')).statusCode).toBe(201);
    expect(
      (await elsewhere.post('/console/api/members', { email: 'q-r4@example.com', role: 'viewer' }))
        .statusCode,
    ).toBe(201);
  });

  it("5. a live stream ends at once when its member's role changes, the member is removed, the password changed elsewhere or its session signed out; a few per session", async () => {
    h = await apiHarness(engine, { env: OPEN });
    const { owner, admin } = await ownerAndAdmin('r5');
    const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    const cookie = (br: Browser) => [...br.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const open = async (br: Browser) => {
      const ac = new AbortController();
      const res = await fetch(`${base}/console/api/live`, {
        headers: { cookie: cookie(br), accept: 'text/event-stream' },
        signal: ac.signal,
      });
      const state = { status: res.status, text: '', done: false };
      if (res.status === 200) {
        const reader = (res.body as ReadableStream<Uint8Array>).getReader();
        void (async () => {
          try {
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              state.text += Buffer.from(value).toString('utf8');
            }
          } catch {
            // aborted
          }
          state.done = true;
        })();
      } else {
        await res.text();
      }
      return { state, close: () => ac.abort() };
    };
    const a1 = await open(admin);
    const a2 = await open(admin);
    const a3 = await open(admin);
    const a4 = await open(admin);
    expect([a1, a2, a3].map((s) => s.state.status)).toEqual([200, 200, 200]);
    expect(a4.state.status).toBe(429);
    const o1 = await open(owner);
    const streams = [a1, a2, a3, o1];
    try {
      await expect.poll(() => a1.state.text).toContain('retry: 3000');
      const adminId = json<{ user: { id: string } }>(await admin.get('/console/api/session')).user
        .id;
      // A role change ends the member's streams (the page loads again with the new role).
      expect(
        (await owner.post(`/console/api/members/${adminId}/role`, { role: 'developer' }))
          .statusCode,
      ).toBe(200);
      for (const s of [a1, a2, a3]) {
        await expect.poll(() => s.state.done, { timeout: 5000 }).toBe(true);
        expect(s.state.text).toContain('event: end\ndata: {"reason":"role_changed"}');
      }
      // Their places are free again; removal ends the new one.
      const a5 = await open(admin);
      streams.push(a5);
      expect(a5.state.status).toBe(200);
      await expect.poll(() => a5.state.text).toContain('retry: 3000');
      expect((await owner.del(`/console/api/members/${adminId}`)).statusCode).toBe(200);
      await expect.poll(() => a5.state.done, { timeout: 5000 }).toBe(true);
      expect(a5.state.text).toContain('event: end\ndata: {"reason":"removed"}');
      expect(o1.state.done).toBe(false);
      // A password change ends the streams of the user's other sessions, not its own.
      const elsewhere = new Browser(h.app, 'localhost', '198.51.100.6');
      expect((await elsewhere.login('owner-r5@example.com')).statusCode).toBe(200);
      const o2 = await open(elsewhere);
      streams.push(o2);
      expect(o2.state.status).toBe(200);
      await expect.poll(() => o2.state.text).toContain('retry: 3000');
      const changed = await owner.post('/console/api/password', {
        current_password: PASSWORD,
        new_password: 'a new and long passphrase',
      });
      expect(changed.statusCode, changed.body).toBe(200);
      await expect.poll(() => o2.state.done, { timeout: 5000 }).toBe(true);
      expect(o2.state.text).toContain('event: end\ndata: {"reason":"signed_out"}');
      expect(o1.state.done).toBe(false);
      // Sign-out ends the owner's stream too.
      expect((await owner.post('/console/api/logout')).statusCode).toBe(204);
      await expect.poll(() => o1.state.done, { timeout: 5000 }).toBe(true);
      expect(o1.state.text).toContain('"reason":"signed_out"');
    } finally {
      for (const s of streams) s.close();
    }
  });

  it('6. member changes and a second factor turned on are recorded in their own transaction', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const { owner, admin } = await ownerAndAdmin('r6');
    const adminId = json<{ user: { id: string } }>(await admin.get('/console/api/session')).user.id;
    // An audit insert that fails must take its change with it.
    await h.db.query(`CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'audit refused'; END $$`);
    await h.db.query(`CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW
      WHEN (NEW.action IN ('member.invited', 'member.role_changed', 'member.removed',
                           'two_factor.enabled'))
      EXECUTE FUNCTION refuse_audit()`);
    expect(
      (await owner.post('/console/api/members', { email: 'n-r6@example.com', role: 'viewer' }))
        .statusCode,
    ).toBe(500);
    expect(
      (await owner.post(`/console/api/members/${adminId}/role`, { role: 'viewer' })).statusCode,
    ).toBe(500);
    expect((await owner.del(`/console/api/members/${adminId}`)).statusCode).toBe(500);
    const setup = await owner.post('/console/api/two-factor/setup', { password: PASSWORD });
    const on = await owner.post('/console/api/two-factor/enable', {
      code: codeOf(json<{ secret: string }>(setup).secret),
    });
    expect(on.statusCode).toBe(500);
    const members = json<{ data: Array<{ email: string; role: string; two_factor: boolean }> }>(
      await owner.get('/console/api/members'),
    );
    expect(members.data.map((m) => [m.email, m.role, m.two_factor])).toEqual([
      ['owner-r6@example.com', 'owner', false],
      ['admin-r6@example.com', 'admin', false],
    ]);
  });

  it('7. new recovery codes need a current code and send an e-mail; a reset waits for the code before changing anything', async () => {
    h = await withMail();
    const b = new Browser(h.app);
    await b.signUp('tf-r7@example.com');
    const { secret } = await enrol(b);
    const noCode = await b.post('/console/api/two-factor/recovery-codes', { password: PASSWORD });
    expect(noCode.statusCode).toBe(400);
    const wrong = await b.post('/console/api/two-factor/recovery-codes', {
      password: PASSWORD,
      code: wrongCodeOf(secret),
    });
    expect(wrong.statusCode).toBe(401);
    const ok = await b.post('/console/api/two-factor/recovery-codes', {
      password: PASSWORD,
      code: codeOf(secret, 1),
    });
    expect(ok.statusCode, ok.body).toBe(200);
    await smtp.waitFor('tf-r7@example.com', /recovery codes/);

    // A reset link with the new password, then no code: the old password and sessions stand.
    const { rows } = await h.db.query<{ id: string }>(
      "SELECT id FROM console_users WHERE email = 'tf-r7@example.com'",
    );
    const token = await createPasswordReset(h.db, rows[0]?.id as string);
    const thief = new Browser(h.app, 'localhost', '198.51.100.70');
    await thief.get('/console/api/config');
    const step = await thief.post('/console/api/password-reset/confirm', {
      token,
      password: 'the thief chose this one',
    });
    expect(step.statusCode, step.body).toBe(200);
    expect(json(step).second_factor_required).toBe(true);
    expect((await b.get('/console/api/keys')).statusCode).toBe(200);
    expect((await new Browser(h.app).login('tf-r7@example.com')).statusCode).toBe(200);
    expect(
      (await new Browser(h.app).login('tf-r7@example.com', 'the thief chose this one')).statusCode,
    ).toBe(401);
    // With the code: the password changes, every earlier session ends, the user is told.
    const done = await thief.post('/console/api/login/second-factor', {
      challenge: json<{ challenge: string }>(step).challenge,
      code: json<{ recovery_codes: string[] }>(ok).recovery_codes[0],
    });
    expect(done.statusCode, done.body).toBe(200);
    expect((await b.get('/console/api/keys')).statusCode).toBe(401);
    await smtp.waitFor('tf-r7@example.com', /password .*reset/);
    // The link is used up.
    const again = await new Browser(h.app, 'localhost', '198.51.100.71').post(
      '/console/api/password-reset/confirm',
      { token, password: 'yet another passphrase' },
    );
    expect(again.statusCode).not.toBe(200);
  });

  it('7b. a password change e-mails the user "your password was changed" (issue 29)', async () => {
    h = await withMail();
    const b = new Browser(h.app, 'localhost', '198.51.100.80');
    await b.signUp('pw-r7b@example.com');
    const changed = await b.post('/console/api/password', {
      current_password: PASSWORD,
      new_password: 'a new and long passphrase',
    });
    expect(changed.statusCode, changed.body).toBe(200);
    const mail = await smtp.waitFor('pw-r7b@example.com', /password .*was changed/);
    expect(mail.text).toContain('198.51.100.80');
    expect(mail.text).not.toContain('a new and long passphrase');
  });
});
