/**
 * `npm run dev` (issue 29 item 5): the real CLI (`tronwatch dev`, what the npm script runs)
 * prints the console's URL, the demo account's credentials and the mailbox; signing in with them
 * through the console's API shows events flowing (delivered to the local receiver), the console
 * links to the mailbox, and the failing receiver's alert e-mail is captured there and listed on
 * its page; SIGTERM stops everything (exit 0) and removes the data folder. The time from start to the first event is printed, not asserted.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { consoleSession } from '../../src/devnet/console-client.js';
import { spawnCli } from '../helpers/cli.js';

let child: ChildProcess | undefined;
afterAll(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
});

/** Wait for `cond` (polled every 250 ms), failing after `ms` or when the process exits. */
async function until<T>(
  what: string,
  cond: () => Promise<T | undefined> | T | undefined,
  ms: number,
  log: () => string,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v !== undefined) return v;
    if (child?.exitCode !== null || Date.now() > end) {
      throw new Error(`${child?.exitCode !== null ? 'exited' : 'timed out'}: ${what}\n${log()}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('npm run dev', () => {
  it('shows events flowing in the console with the printed credentials, then stops cleanly', async () => {
    const t0 = Date.now();
    const p = spawnCli(['dev', '--port', '0', '--interval-ms', '300']);
    child = p;
    let stdout = '';
    let stderr = '';
    p.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    p.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const exit = new Promise<number | null>((r) => p.on('exit', (code) => r(code)));
    const log = () => `stdout:\n${stdout}\nstderr (tail):\n${stderr.slice(-3000)}`;

    const banner = await until(
      'the banner',
      () => (/Ctrl-C stops everything/.test(stdout) ? stdout : undefined),
      180_000,
      log,
    );
    const consoleUrl = /console +(http:\/\/127\.0\.0\.1:\d+\/console\/)/.exec(banner)?.[1];
    const signIn = /sign in +(\S+) +\/ +(\S+)/.exec(banner);
    const mailbox = /e-mail +(http:\/\/127\.0\.0\.1:\d+\/)/.exec(banner)?.[1];
    const dataDir = /data +(\S+) \(embedded PostgreSQL/.exec(banner)?.[1];
    expect(consoleUrl, banner).toBeDefined();
    expect(signIn?.[1]).toBe('demo@example.com');
    expect(mailbox, banner).toBeDefined();
    expect(dataDir && fs.existsSync(dataDir), banner).toBe(true);
    const origin = new URL(consoleUrl as string).origin;

    // The console page itself is served, and its config links to the mailbox.
    expect((await fetch(consoleUrl as string)).status).toBe(200);
    const call = await consoleSession(origin);
    const config = await call<{ dev_mailbox: string | null; email: boolean }>(
      'GET',
      '/console/api/config',
    );
    expect(config.json).toMatchObject({ dev_mailbox: mailbox, email: true });
    const login = await call('POST', '/console/api/login', {
      email: signIn?.[1],
      password: signIn?.[2],
    });
    expect(login.status, JSON.stringify(login.json)).toBe(200);

    const watches = await call<{ data: Array<{ label: string | null }> }>(
      'GET',
      '/console/api/watches',
    );
    expect(watches.status).toBe(200);
    expect(watches.json.data.map((w) => w.label)).toContain('Exchange deposits (USDT in)');

    // Events flow: at least one delivered event listed by the console's API.
    const delivered = await until(
      'a delivered event in the console',
      async () => {
        const r = await call<{
          data: Array<{ event_id: string; delivery: { status: string } | null }>;
        }>('GET', '/console/api/events?limit=50');
        return r.json.data.find((e) => e.delivery?.status === 'DELIVERED');
      },
      120_000,
      log,
    );
    process.stdout.write(
      `npm run dev: first delivered event in the console ${((Date.now() - t0) / 1000).toFixed(1)} s after start (${delivered.event_id})\n`,
    );

    // E-mail captured locally and shown: the failing receiver's alert reaches the mailbox, whose
    // page lists it with its link back to the console.
    const alert = await until(
      'the failing alert in the mailbox',
      async () => {
        const r = await fetch(`${mailbox}messages.json`);
        const list = (await r.json()) as Array<{ to: string[]; subject: string; text: string }>;
        return list.find((m) => /failing/i.test(m.subject));
      },
      120_000,
      log,
    );
    expect(alert.to).toEqual(['demo@example.com']);
    expect(alert.text).toContain(`${origin}/console/watches/`);
    const page = await fetch(mailbox as string);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toMatch(/Development mailbox/);
    expect(html).toContain(alert.subject);

    p.kill('SIGTERM');
    expect(await exit, log()).toBe(0);
    expect(fs.existsSync(dataDir as string)).toBe(false);
  }, 300_000);
});
