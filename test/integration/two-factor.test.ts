/**
 * Issue 18 item 4 on both engines, through the real app: enrolment (password, QR code, a typed
 * code, ten recovery codes shown once and stored hashed), sign-in in two steps (no session before
 * the code; a code accepted once; recovery codes single-use), wrong codes counted in the login
 * limits and against the sign-in step, turning it off (password and code), an owner requiring it
 * of every member (a member without one reaches only its set-up), an owner resetting a member's
 * lost device, password reset still asking for the code, and `secrets rotate-key` re-sealing the
 * TOTP secrets. Codes are computed here from the secret the set-up returned (otpauth, RFC 6238).
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { Secret, TOTP } from 'otpauth';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { accountsResetTwoFactor } from '../../src/accounts/cli.js';
import { createPasswordReset, setPasswordHash } from '../../src/accounts/credentials.js';
import { verifySecondFactor } from '../../src/accounts/two-factor.js';
import { createUser } from '../../src/accounts/users.js';
import { SecretBox } from '../../src/common/secrets.js';
import { hashPassword } from '../../src/console/passwords.js';
import { reencryptSecrets } from '../../src/secrets/rotate.js';
import { type ApiHarness, apiHarness, json } from '../helpers/api.js';
import { runCli } from '../helpers/cli.js';
import { Browser, PASSWORD } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';
import { startSmtp } from '../helpers/smtp.js';

const OPEN = { CONSOLE_SIGNUP: 'open' };

/** The code an authenticator app shows `offsetSteps` 30-second steps from now. */
function codeOf(secret: string, offsetSteps = 0): string {
  return TOTP.generate({
    secret: Secret.fromBase32(secret),
    timestamp: Date.now() + offsetSteps * 30_000,
  });
}

interface Setup {
  secret: string;
  otpauth_uri: string;
  qr_svg: string;
}

/** Sign in and turn the second factor on. @returns the secret and the recovery codes. */
async function enrol(b: Browser): Promise<{ secret: string; codes: string[] }> {
  const setup = await b.post('/console/api/two-factor/setup', { password: PASSWORD });
  expect(setup.statusCode, setup.body).toBe(200);
  const { secret } = json<Setup>(setup);
  const on = await b.post('/console/api/two-factor/enable', { code: codeOf(secret) });
  expect(on.statusCode, on.body).toBe(200);
  return { secret, codes: json<{ recovery_codes: string[] }>(on).recovery_codes };
}

/** Log in with the password, expect the code step. @returns the challenge. */
async function passwordStep(b: Browser, email: string): Promise<string> {
  const res = await b.login(email);
  expect(res.statusCode, res.body).toBe(200);
  const body = json<{ second_factor_required?: boolean; challenge?: string }>(res);
  expect(body.second_factor_required).toBe(true);
  // No session before the code.
  expect(b.jar.has('tw_session')).toBe(false);
  return body.challenge as string;
}

describe.each(dbEngines)('two-factor sign-in on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('enrols with the password, a QR code and a typed code; shows ten recovery codes once and stores them hashed', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    expect((await b.signUp('tf1@example.com')).statusCode).toBe(201);
    expect(json(await b.get('/console/api/two-factor'))).toMatchObject({
      enabled: false,
      recovery_codes_left: 0,
      required: false,
    });
    // The password first: a stolen session cannot bind the thief's app.
    const wrong = await b.post('/console/api/two-factor/setup', { password: 'not the password' });
    expect(wrong.statusCode).toBe(401);
    expect(json(wrong).code).toBe('invalid_credentials');

    const setup = json<Setup>(
      await b.post('/console/api/two-factor/setup', { password: PASSWORD }),
    );
    expect(setup.secret).toMatch(/^[A-Z2-7]{32}$/);
    const uri = new URL(setup.otpauth_uri);
    expect(uri.protocol).toBe('otpauth:');
    expect(uri.searchParams.get('secret')).toBe(setup.secret);
    expect(uri.searchParams.get('issuer')).toBe('tronwatch');
    expect(uri.searchParams.get('digits')).toBe('6');
    expect(uri.searchParams.get('period')).toBe('30');
    expect(decodeURIComponent(uri.pathname)).toContain('tf1@example.com');
    expect(setup.qr_svg).toMatch(/^<svg[^>]*>/);
    // Not on until a code confirms it: a sign-in still needs only the password.
    expect(json(await b.get('/console/api/session')).user).toMatchObject({ two_factor: false });

    // Wrong codes while confirming are refused, and not counted as failed sign-ins: six of them
    // leave the login open from this address (checked below).
    const wrongEnrol = codeOf(setup.secret) === '000000' ? '000001' : '000000';
    for (let i = 0; i < 6; i++) {
      const bad = await b.post('/console/api/two-factor/enable', { code: wrongEnrol });
      expect(bad.statusCode).toBe(401);
      expect(json(bad).code).toBe('invalid_code');
    }
    const on = await b.post('/console/api/two-factor/enable', { code: codeOf(setup.secret) });
    expect(on.statusCode, on.body).toBe(200);
    const codes = json<{ recovery_codes: string[] }>(on).recovery_codes;
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    for (const c of codes) expect(c).toMatch(/^[a-z2-7]{5}-[a-z2-7]{5}$/);
    expect(json(await b.get('/console/api/two-factor'))).toMatchObject({
      enabled: true,
      recovery_codes_left: 10,
    });
    expect(json(await b.get('/console/api/session')).user).toMatchObject({ two_factor: true });
    // Neither the secret nor a recovery code is stored in the clear.
    const { rows } = await h.db.query<{ totp_ciphertext: Uint8Array }>(
      'SELECT totp_ciphertext FROM console_users WHERE email = $1',
      ['tf1@example.com'],
    );
    expect(Buffer.from(rows[0]?.totp_ciphertext ?? []).toString('latin1')).not.toContain(
      setup.secret,
    );
    const stored = await h.db.query<{ code_hash: string }>(
      'SELECT code_hash FROM console_recovery_codes',
    );
    expect(stored.rows).toHaveLength(10);
    for (const r of stored.rows) {
      expect(codes.map((c) => c.replace('-', ''))).not.toContain(r.code_hash);
      expect(r.code_hash).toMatch(/^[0-9a-f]{64}$/);
    }
    // A second set-up is refused while one is on.
    const again = await b.post('/console/api/two-factor/setup', { password: PASSWORD });
    expect(again.statusCode).toBe(409);
    expect(json(again).code).toBe('two_factor_state');
    // Audited, without the secret or a code.
    const audit = await h.db.query<{ action: string; detail: unknown }>(
      "SELECT action, detail FROM audit_log WHERE action LIKE 'two_factor.%'",
    );
    expect(audit.rows.map((r) => r.action)).toEqual(['two_factor.enabled']);
    expect(JSON.stringify(audit.rows)).not.toContain(setup.secret);
    await b.post('/console/api/logout');
    await passwordStep(b, 'tf1@example.com');
  });

  it('signs in in two steps: a code is accepted once, a recovery code once, a wrong one is audited', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('tf2@example.com');
    const { secret, codes } = await enrol(b);
    expect((await b.post('/console/api/logout')).statusCode).toBe(204);

    const c1 = await passwordStep(b, 'tf2@example.com');
    expect((await b.get('/console/api/session')).statusCode).toBe(401);
    const wrong = await b.post('/console/api/login/second-factor', {
      challenge: c1,
      code: '123456' === codeOf(secret) ? '654321' : '123456',
    });
    expect(wrong.statusCode).toBe(401);
    expect(json(wrong)).toMatchObject({ code: 'invalid_code', attempts_left: 4 });
    // The enrolment used this step's code: the next step's is what the app shows next.
    const next = codeOf(secret, 1);
    const ok = await b.post('/console/api/login/second-factor', { challenge: c1, code: next });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(json(ok)).toMatchObject({ user: { email: 'tf2@example.com', two_factor: true } });
    expect((await b.get('/console/api/keys')).statusCode).toBe(200);
    // The challenge is used up.
    const reuse = await b.post('/console/api/login/second-factor', { challenge: c1, code: next });
    expect(json(reuse).code).toBe('invalid_challenge');

    // The same code again (a replay within its 30 seconds) is refused.
    const other = new Browser(h.app, 'localhost', '198.51.100.20');
    const c2 = await passwordStep(other, 'tf2@example.com');
    const replay = await other.post('/console/api/login/second-factor', {
      challenge: c2,
      code: next,
    });
    expect(replay.statusCode).toBe(401);
    expect(json(replay).code).toBe('invalid_code');
    // …and said to be already used, not wrong (issue 29).
    expect(json(replay)).toMatchObject({ reason: 'code_already_used' });
    // A recovery code works once, typed in upper case with spaces around.
    const rec = await other.post('/console/api/login/second-factor', {
      challenge: c2,
      code: ` ${(codes[3] as string).toUpperCase()} `,
    });
    expect(rec.statusCode, rec.body).toBe(200);
    expect(json(await other.get('/console/api/two-factor'))).toMatchObject({
      recovery_codes_left: 9,
    });
    const third = new Browser(h.app, 'localhost', '198.51.100.21');
    const c3 = await passwordStep(third, 'tf2@example.com');
    const used = await third.post('/console/api/login/second-factor', {
      challenge: c3,
      code: codes[3],
    });
    expect(json(used).code).toBe('invalid_code');

    const audit = await h.db.query<{ action: string; detail: Record<string, unknown> }>(
      `SELECT action, detail FROM audit_log
        WHERE action IN ('session.signed_in', 'session.sign_in_failed', 'two_factor.recovery_code_used')
        ORDER BY at, id`,
    );
    expect(audit.rows.map((r) => [r.action, r.detail.second_factor ?? r.detail.reason])).toEqual([
      ['session.sign_in_failed', 'wrong_code'],
      ['session.signed_in', 'totp'],
      ['session.sign_in_failed', 'code_already_used'],
      ['two_factor.recovery_code_used', undefined],
      ['session.signed_in', 'recovery_code'],
      ['session.sign_in_failed', 'wrong_code'],
    ]);
    expect(JSON.stringify(audit.rows)).not.toContain(codes[3] as string);
  });

  it('counts wrong codes in the login limits and against the sign-in step', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('tf3@example.com');
    const { secret } = await enrol(b);
    await b.post('/console/api/logout');
    const right = codeOf(secret, 1);
    const wrongCode = right === '111111' ? '222222' : '111111';
    const c = await passwordStep(b, 'tf3@example.com');
    const left: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await b.post('/console/api/login/second-factor', { challenge: c, code: wrongCode });
      expect(r.statusCode).toBe(401);
      left.push(json<{ attempts_left: number }>(r).attempts_left);
    }
    expect(left).toEqual([4, 3, 2, 1]);
    // The fifth wrong code locks the user's code step (issue 27 item 3), whatever the address.
    const fifth = await b.post('/console/api/login/second-factor', {
      challenge: c,
      code: wrongCode,
    });
    expect(fifth.statusCode).toBe(429);
    expect(json(fifth).code).toBe('code_locked');
    // The step is void after 5 wrong codes, even with the right one.
    const dead = await b.post('/console/api/login/second-factor', { challenge: c, code: right });
    expect(dead.statusCode).toBe(400);
    expect(json(dead).code).toBe('invalid_challenge');
    // And the 5 wrong codes filled this address's login window for the e-mail: the right
    // password is refused for 15 minutes, as after 5 wrong passwords.
    const locked = await b.login('tf3@example.com');
    expect(locked.statusCode).toBe(429);
    expect(json(locked).code).toBe('login_rate_limited');
    // From another address the password still opens the code step, but the code step is locked
    // for the user everywhere until the lock ends: the right code too.
    const elsewhere = new Browser(h.app, 'localhost', '198.51.100.30');
    const c2 = await passwordStep(elsewhere, 'tf3@example.com');
    const refused = await elsewhere.post('/console/api/login/second-factor', {
      challenge: c2,
      code: right,
    });
    expect(refused.statusCode, refused.body).toBe(429);
    expect(json(refused).code).toBe('code_locked');
    // When the lock has ended (moved into the past here), the right code signs in.
    await h.db.query(
      "UPDATE console_users SET code_locked_until = now() - interval '1 second' WHERE email = 'tf3@example.com'",
    );
    const ok = await elsewhere.post('/console/api/login/second-factor', {
      challenge: c2,
      code: right,
    });
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('turns off only with the password and a code; then the password alone signs in', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('tf4@example.com');
    const { secret, codes } = await enrol(b);
    const code = codeOf(secret, 1);
    const noPw = await b.post('/console/api/two-factor/disable', { password: 'nope', code });
    expect(json(noPw).code).toBe('invalid_credentials');
    const noCode = await b.post('/console/api/two-factor/disable', {
      password: PASSWORD,
      code: code === '000000' ? '000001' : '000000',
    });
    expect(noCode.statusCode).toBe(401);
    expect(json(noCode).code).toBe('invalid_code');
    // New recovery codes need the password and a code (issue 27 item 7); the old ones stop working.
    const regen = await b.post('/console/api/two-factor/recovery-codes', {
      password: PASSWORD,
      code: codes[1],
    });
    expect(regen.statusCode, regen.body).toBe(200);
    const fresh = json<{ recovery_codes: string[] }>(regen).recovery_codes;
    expect(fresh).toHaveLength(10);
    expect(fresh).not.toContain(codes[0]);
    expect(
      await verifySecondFactor(
        h.db,
        h.secrets,
        json<{ user: { id: string } }>(await b.get('/console/api/session')).user.id,
        codes[0] as string,
      ),
    ).toBe(false);
    // Off with the password and a recovery code (the phone is lost, say).
    const off = await b.post('/console/api/two-factor/disable', {
      password: PASSWORD,
      code: fresh[0],
    });
    expect(off.statusCode, off.body).toBe(204);
    expect(json(await b.get('/console/api/two-factor'))).toMatchObject({
      enabled: false,
      recovery_codes_left: 0,
    });
    expect((await h.db.query('SELECT 1 FROM console_recovery_codes')).rows).toHaveLength(0);
    await b.post('/console/api/logout');
    const plain = await b.login('tf4@example.com');
    expect(plain.statusCode).toBe(200);
    expect(json(plain)).toMatchObject({ user: { two_factor: false } });
    const off2 = await b.post('/console/api/two-factor/disable', { password: PASSWORD, code });
    expect(json(off2).code).toBe('two_factor_state');
  });

  it('an owner requires it of every member: a member without one can only set one up; an owner resets a lost device', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const owner = new Browser(h.app);
    await owner.signUp('tf5@example.com');
    const me = json<{ account: { id: string } }>(await owner.get('/console/api/session'));
    // Not before the owner has one.
    const early = await owner.put('/console/api/account/two-factor', { required: true });
    expect(early.statusCode).toBe(409);
    expect(json(early).code).toBe('two_factor_state');
    const { secret: ownerSecret } = await enrol(owner);
    const req = await owner.put('/console/api/account/two-factor', { required: true });
    expect(req.statusCode, req.body).toBe(200);
    expect(json(req)).toMatchObject({ required: true, enabled: true });

    const dev = await createUser(h.db, {
      accountId: me.account.id,
      email: 'tf5-dev@example.com',
      role: 'developer',
    });
    await setPasswordHash(h.db, dev.id, await hashPassword(PASSWORD));
    const d = new Browser(h.app, 'localhost', '198.51.100.40');
    const signed = await d.login('tf5-dev@example.com');
    expect(signed.statusCode).toBe(200);
    expect(json(signed)).toMatchObject({
      user: { two_factor: false, two_factor_setup_required: true },
      account: { require_two_factor: true },
    });
    for (const url of ['/console/api/keys', '/console/api/watches', '/console/api/sessions']) {
      const r = await d.get(url);
      expect(r.statusCode, url).toBe(403);
      expect(json(r).code).toBe('two_factor_setup_required');
    }
    const post = await d.post('/console/api/keys', { name: 'x' });
    expect(json(post).code).toBe('two_factor_setup_required');
    // Its set-up answers; then everything does.
    const { secret: devSecret } = await enrol(d);
    expect((await d.get('/console/api/keys')).statusCode).toBe(200);
    expect(json(await d.get('/console/api/session')).user).toMatchObject({
      two_factor: true,
      two_factor_setup_required: false,
    });
    // Lost device: an owner turns the member's second factor off; the member must set one up
    // again before anything else.
    const reset = await owner.del(`/console/api/members/${dev.id}/two-factor`);
    expect(reset.statusCode, reset.body).toBe(204);
    expect(json(await d.get('/console/api/keys')).code).toBe('two_factor_setup_required');
    expect(json(await owner.del(`/console/api/members/${dev.id}/two-factor`)).code).toBe(
      'two_factor_state',
    );
    expect((await owner.del('/console/api/members/usr_nope/two-factor')).statusCode).toBe(404);
    // A developer may not reset anyone's, nor change the requirement.
    await enrol(d);
    expect(json(await d.put('/console/api/account/two-factor', { required: false })).code).toBe(
      'insufficient_role',
    );
    expect(devSecret).not.toBe(ownerSecret);
    const lifted = await owner.put('/console/api/account/two-factor', { required: false });
    expect(json(lifted)).toMatchObject({ required: false });
    const audit = await h.db.query<{ action: string }>(
      `SELECT action FROM audit_log
        WHERE action LIKE 'account.two_factor%' OR action = 'two_factor.reset_for_member'
        ORDER BY at, id`,
    );
    expect(audit.rows.map((r) => r.action)).toEqual([
      'account.two_factor_required',
      'two_factor.reset_for_member',
      'account.two_factor_not_required',
    ]);
  });

  it('a password reset still asks for the code', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('tf6@example.com');
    const { secret } = await enrol(b);
    const { rows } = await h.db.query<{ id: string }>(
      "SELECT id FROM console_users WHERE email = 'tf6@example.com'",
    );
    const token = await createPasswordReset(h.db, rows[0]?.id as string);
    const other = new Browser(h.app, 'localhost', '198.51.100.50');
    await other.get('/console/api/config');
    const res = await other.post('/console/api/password-reset/confirm', {
      token,
      password: 'another long passphrase',
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = json<{ second_factor_required: boolean; challenge: string }>(res);
    expect(body.second_factor_required).toBe(true);
    expect(other.jar.has('tw_session')).toBe(false);
    // Nothing changed before the code (issue 27 item 1): the earlier session stands.
    expect((await b.get('/console/api/keys')).statusCode).toBe(200);
    const ok = await other.post('/console/api/login/second-factor', {
      challenge: body.challenge,
      code: codeOf(secret, 1),
    });
    expect(ok.statusCode, ok.body).toBe(200);
    // With the code: every earlier session ended with the reset.
    expect((await b.get('/console/api/keys')).statusCode).toBe(401);
    // The reset is recorded with the session it opened, once the code was right.
    const audit = await h.db.query<{ action: string }>(
      `SELECT action FROM audit_log WHERE action IN ('account.password_reset', 'session.signed_in')
        ORDER BY at, id`,
    );
    expect(audit.rows.map((r) => r.action)).toEqual(['account.password_reset']);
  });

  it('the operator turns off a lost second factor from the CLI (audited); the password alone then signs in', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('tf8@example.com');
    await enrol(b);
    await b.post('/console/api/logout');
    if (h.t.url !== undefined) {
      // The real command, in its own process, on this PostgreSQL database.
      const cli = await runCli(['accounts', 'two-factor-reset', '--email', 'tf8@example.com'], {
        DATABASE_URL: h.t.url,
      });
      expect(cli.code, cli.stderr).toBe(0);
      expect(JSON.parse(cli.stdout)).toMatchObject({
        reset: true,
        user: { email: 'tf8@example.com' },
      });
    } else {
      expect(await accountsResetTwoFactor(h.db, { email: 'tf8@example.com' })).toMatchObject({
        reset: true,
      });
    }
    expect(await accountsResetTwoFactor(h.db, { email: 'tf8@example.com' })).toMatchObject({
      reset: false,
    });
    await expect(accountsResetTwoFactor(h.db, { email: 'nobody@example.com' })).rejects.toThrow(
      'no console user',
    );
    const plain = await b.login('tf8@example.com');
    expect(json(plain)).toMatchObject({ user: { two_factor: false } });
    const audit = await h.db.query<{ action: string; actor_type: string }>(
      "SELECT action, actor_type FROM audit_log WHERE action = 'two_factor.reset_for_member'",
    );
    expect(audit.rows).toEqual([{ action: 'two_factor.reset_for_member', actor_type: 'system' }]);
  });

  it('logs no TOTP secret, code, recovery code or sign-in step token, at trace level', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'trace' },
      new Writable({
        write(chunk: Buffer | string, _enc, cb) {
          lines.push(chunk.toString());
          cb();
        },
      }),
    );
    h = await apiHarness(engine, { env: OPEN, logger });
    const b = new Browser(h.app);
    await b.signUp('tf9@example.com');
    const { secret, codes } = await enrol(b);
    await b.post('/console/api/logout');
    const c1 = await passwordStep(b, 'tf9@example.com');
    const wrong = codeOf(secret, 1) === '000000' ? '000001' : '000000';
    await b.post('/console/api/login/second-factor', { challenge: c1, code: wrong });
    const right = codeOf(secret, 1);
    expect(
      (await b.post('/console/api/login/second-factor', { challenge: c1, code: right })).statusCode,
    ).toBe(200);
    const fresh = json<{ recovery_codes: string[] }>(
      await b.post('/console/api/two-factor/recovery-codes', {
        password: PASSWORD,
        code: codes[0],
      }),
    ).recovery_codes;
    await b.post('/console/api/two-factor/disable', { password: PASSWORD, code: fresh[0] });
    const text = lines.join('');
    // The capture works (requests are logged at this level), and holds none of the secrets.
    expect(text).toContain('second factor enabled');
    const secrets = [secret, c1, PASSWORD, ...codes, ...fresh];
    for (const x of secrets) {
      expect(text.includes(x), `"${x.slice(0, 4)}…" in the logs`).toBe(false);
      expect(text.includes(x.replace('-', '')), 'a recovery code without its dash').toBe(false);
    }
    // A 6-digit code, as a number of its own (not inside a timestamp or a duration).
    for (const x of [right, wrong]) {
      expect(new RegExp(`(?<![0-9.])${x}(?![0-9])`).test(text), `code ${x} in the logs`).toBe(
        false,
      );
    }
  });

  it('e-mails the user each change to how they sign in (on, off, off by an owner, a recovery code used), with no secret', async () => {
    const smtp = await startSmtp();
    try {
      h = await apiHarness(engine, {
        env: {
          ...OPEN,
          SMTP_URL: smtp.url,
          MAIL_FROM: 'tronwatch <no-reply@tronwatch.test>',
          PUBLIC_URL: 'https://tw.example.com',
        },
      });
      const owner = new Browser(h.app);
      await owner.signUp('tf10@example.com');
      const { secret, codes } = await enrol(owner);
      const on = await smtp.waitFor('tf10@example.com', /Two-factor sign-in is on/);
      expect(on.text).toContain('203.0.113.7'); // the Browser helper's client address
      expect(on.link).toBe('https://tw.example.com/console/security');
      await owner.post('/console/api/logout');
      const c = await passwordStep(owner, 'tf10@example.com');
      await owner.post('/console/api/login/second-factor', { challenge: c, code: codes[0] });
      const used = await smtp.waitFor('tf10@example.com', /recovery code was used/);
      expect(used.text).toContain('cannot be used again');
      await owner.post('/console/api/two-factor/disable', {
        password: PASSWORD,
        code: codeOf(secret, 1),
      });
      await smtp.waitFor('tf10@example.com', /turned off/);

      // An owner turns a member's off: the member is told.
      const accountId = json<{ account: { id: string } }>(await owner.get('/console/api/session'))
        .account.id;
      const dev = await createUser(h.db, {
        accountId,
        email: 'tf10-dev@example.com',
        role: 'developer',
      });
      await setPasswordHash(h.db, dev.id, await hashPassword(PASSWORD));
      const d = new Browser(h.app, 'localhost', '198.51.100.60');
      await d.login('tf10-dev@example.com');
      await enrol(d);
      expect((await owner.del(`/console/api/members/${dev.id}/two-factor`)).statusCode).toBe(204);
      const reset = await smtp.waitFor('tf10-dev@example.com', /turned off/);
      expect(reset.text).toContain('An owner of your account');

      // Nothing secret in any of them.
      const all = JSON.stringify(smtp.received);
      for (const x of [secret, c, ...codes]) expect(all.includes(x)).toBe(false);
    } finally {
      await h?.close();
      h = undefined;
      await smtp.close();
    }
  });

  it('secrets rotate-key re-seals the TOTP secrets under the new key', async () => {
    h = await apiHarness(engine, { env: OPEN });
    const b = new Browser(h.app);
    await b.signUp('tf7@example.com');
    const { secret } = await enrol(b);
    const userId = json<{ user: { id: string } }>(await b.get('/console/api/session')).user.id;
    const newKey = randomBytes(32);
    const both = new SecretBox([newKey, h.secretKey]);
    const r = await reencryptSecrets(h.db, both);
    expect(r.reencrypted).toBe(1);
    expect(r.unreferenced_old_key_ids).toEqual([h.secrets.currentKeyId]);
    // Only the new key is needed now.
    const onlyNew = new SecretBox([newKey]);
    expect(await verifySecondFactor(h.db, onlyNew, userId, codeOf(secret, 1))).toBe('totp');
  });
});
