/**
 * What the console's browser tests share: the requirements check (Debian's Chromium and the built
 * app), the browser launch, a whole service on its own database, and screenshots.
 *
 * Requirements: /usr/bin/chromium (Debian package chromium; playwright-core never downloads a
 * browser) and dist/web/ (npm run build:web). Under CI=true a missing one fails the test file with
 * a message saying how to get it (CI makes the mandatory tests mandatory, as test/helpers/db.ts
 * does for DATABASE_URL); elsewhere the file is skipped with that message.
 *
 * Database: PostgreSQL when DATABASE_URL is set (a fresh database per service on that server,
 * dropped at stop, through test/helpers/db.ts), else the embedded PGlite in the service's DATA_DIR.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { silentLogger } from '../../src/common/logger.js';
import { loadConfig } from '../../src/config.js';
import { type Role, type Service, startService } from '../../src/service.js';
import { emptyDb, POSTGRES_URL, type TestDb } from './db.js';

export const CHROMIUM = '/usr/bin/chromium';
export const SHOTS = path.resolve('test-output/screenshots');
const BUILT_INDEX = path.resolve('dist/web/index.html');

/**
 * True when the browser tests can run. Under CI=true a missing requirement throws (the file
 * fails); otherwise it is reported once and the caller skips.
 */
export function browserTestsReady(): boolean {
  const missing: string[] = [];
  if (!fs.existsSync(CHROMIUM)) {
    missing.push(`${CHROMIUM} is missing (apt-get install chromium)`);
  }
  if (!fs.existsSync(BUILT_INDEX)) {
    missing.push('dist/web/ is not built (npm run build:web)');
  }
  if (missing.length === 0) return true;
  if (process.env.CI === 'true') {
    throw new Error(`CI=true but the console's browser tests cannot run: ${missing.join('; ')}`);
  }
  console.warn(`browser tests skipped: ${missing.join('; ')}`);
  return false;
}

/** Headless Chromium with the flags the CI container needs; nothing fetched from the network. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * Wait until the first element of `l` is visible (Playwright's own wait, without its runner). The
 * bound is generous: the CI host runs these beside other suites on two cores.
 */
export async function visible(l: Locator, timeout = 20_000): Promise<void> {
  await l.first().waitFor({ state: 'visible', timeout });
}

/**
 * A full-page screenshot into test-output/screenshots/<name>.png (git-ignored); with `from`, one
 * viewport's height of the page starting just above that element instead.
 */
export async function shot(page: Page, name: string, from?: Locator): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true });
  const file = path.join(SHOTS, `${name}.png`);
  const box = from ? await from.first().boundingBox() : null;
  const size = page.viewportSize();
  if (box && size) {
    // boundingBox is relative to the viewport; the clip of a full-page shot to the page.
    const scrollY = Number(await page.evaluate('window.scrollY'));
    const top = Math.max(0, scrollY + box.y - 16);
    const clip = { x: 0, y: top, width: size.width, height: size.height };
    await page.screenshot({ path: file, fullPage: true, clip });
  } else {
    await page.screenshot({ path: file, fullPage: true });
  }
}

export interface ConsoleService {
  svc: Service;
  /** http://127.0.0.1:PORT (no trailing slash). */
  base: string;
  dir: string;
  engine: 'postgres' | 'pglite';
  stop(): Promise<void>;
}

/**
 * Start the service (console sign-up open) on a fresh database: PostgreSQL when DATABASE_URL is
 * set, else PGlite. `env` adds or overrides variables (TRON_NODE_URL, CONSOLE_SESSION_TTL_SECONDS…);
 * `caPem` (a local receiver's certificate) is written into DATA_DIR and trusted (WEBHOOK_CA_FILE).
 */
export async function startConsoleService(opts: {
  roles: Role[];
  env?: Record<string, string>;
  caPem?: string;
}): Promise<ConsoleService> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-browser-'));
  const ca: Record<string, string> = {};
  if (opts.caPem !== undefined) {
    ca.WEBHOOK_CA_FILE = path.join(dir, 'ca.pem');
    fs.writeFileSync(ca.WEBHOOK_CA_FILE, opts.caPem);
  }
  let database: TestDb | undefined;
  if (POSTGRES_URL) database = await emptyDb('postgres');
  const env: Record<string, string> = {
    DATA_DIR: dir,
    HOST: '127.0.0.1',
    PORT: '0',
    METRICS_PORT: '0',
    // Never the public default: a role that asks a node by mistake fails here, offline.
    TRON_NODE_URL: 'http://127.0.0.1:9',
    CONSOLE_SIGNUP: 'open',
    ...(database?.url ? { DATABASE_URL: database.url } : {}),
    ...ca,
    ...opts.env,
  };
  let svc: Service;
  try {
    svc = await startService(loadConfig(env), { roles: opts.roles, logger: silentLogger });
  } catch (err) {
    await database?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    svc,
    base: (svc.url as string).replace(/\/$/, ''),
    dir,
    engine: database ? 'postgres' : 'pglite',
    async stop() {
      await svc.stop();
      await database?.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
