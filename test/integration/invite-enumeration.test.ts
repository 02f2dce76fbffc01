/**
 * No enumeration through invitations (issue 40 item 8), through the real app on both engines,
 * e-mail off (the links are in the answers, as an admin passes them on): an admin who invites an
 * address that already has a user and one that has none, then opens both links' public preview
 * (GET /console/api/invite?token=), gets the same answer for both (who, which role, which
 * account, invited by whom, until when) — also for a re-sent link. Only using the link tells
 * them apart: the new address joins; the registered one is refused as an invalid link (400
 * invalid_invite, the link then reads as used) and its user's login and account are untouched.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type ApiHarness, apiHarness, json } from '../helpers/api.js';
import { Browser, PASSWORD } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';

function tokenOf(link: string | null | undefined): string {
  const t = new URL(link ?? 'http://x/').hash.replace(/^#token=/, '');
  if (!t) throw new Error(`no token in ${link}`);
  return t;
}

describe.each(dbEngines)('invitation links of registered and new addresses on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('preview alike until the link is used', { timeout: 300_000 }, async () => {
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' } });
    const victim = new Browser(h.app, 'localhost', '198.51.100.40');
    expect((await victim.signUp('known-i8@example.com')).statusCode).toBe(201);
    const prober = new Browser(h.app, 'localhost', '198.51.100.41');
    expect((await prober.signUp('prober-i8@example.com')).statusCode).toBe(201);

    const invite = async (email: string) => {
      const r = await prober.post('/console/api/members', { email, role: 'developer' });
      expect(r.statusCode, r.body).toBe(201);
      return json<{ member: { id: string }; link: string }>(r);
    };
    const known = await invite('known-i8@example.com');
    const fresh = await invite('nobody-i8@example.com');

    const anonymous = new Browser(h.app, 'localhost', '198.51.100.42');
    const preview = async (link: string) => {
      const r = await anonymous.get(
        `/console/api/invite?token=${encodeURIComponent(tokenOf(link))}`,
      );
      const b = json<Record<string, unknown>>(r);
      return {
        status: r.statusCode,
        body: { ...b, email: typeof b.email, expires_at: typeof b.expires_at },
        email: b.email,
      };
    };
    const pk = await preview(known.link);
    const pf = await preview(fresh.link);
    expect(pf.status).toBe(200);
    expect(pf.email).toBe('nobody-i8@example.com');
    expect(pk.status).toBe(200);
    expect(pk.email).toBe('known-i8@example.com');
    expect(pk.body).toEqual(pf.body);
    expect(pf.body).toMatchObject({
      role: 'developer',
      account_email: 'prober-i8@example.com',
      invited_by: 'prober-i8@example.com',
    });

    // A re-sent link previews alike too (and replaces the earlier one of each).
    const resend = async (id: string) => {
      const r = await prober.post(`/console/api/members/${id}/invite`);
      expect(r.statusCode, r.body).toBe(200);
      return json<{ link: string }>(r).link;
    };
    const known2 = await resend(known.member.id);
    const fresh2 = await resend(fresh.member.id);
    const pk2 = await preview(known2);
    const pf2 = await preview(fresh2);
    expect(pk2.status).toBe(200);
    expect(pk2.body).toEqual(pf2.body);
    expect((await preview(known.link)).status).toBe((await preview(fresh.link)).status);

    // Used: the new address joins; the registered one's link is refused as invalid and spent.
    const joiner = new Browser(h.app, 'localhost', '198.51.100.43');
    await joiner.get('/console/api/config');
    const joined = await joiner.post('/console/api/invite/accept', {
      token: tokenOf(fresh2),
      password: PASSWORD,
    });
    expect(joined.statusCode, joined.body).toBe(200);
    const taker = new Browser(h.app, 'localhost', '198.51.100.44');
    await taker.get('/console/api/config');
    const refused = await taker.post('/console/api/invite/accept', {
      token: tokenOf(known2),
      password: 'the prober picks this one',
    });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(json(refused).code).toBe('invalid_invite');
    expect(taker.jar.has('tw_session')).toBe(false);
    // Both used links now answer alike (400 invalid_invite).
    const usedK = await preview(known2);
    const usedF = await preview(fresh2);
    expect(usedK.status).toBe(400);
    expect(usedK.body).toEqual(usedF.body);
    // The registered user's login and account are untouched.
    expect((await victim.get('/console/api/session')).statusCode).toBe(200);
    expect(
      (await new Browser(h.app).login('known-i8@example.com', 'the prober picks this one'))
        .statusCode,
    ).toBe(401);
    expect((await new Browser(h.app).login('known-i8@example.com')).statusCode).toBe(200);
  });
});
