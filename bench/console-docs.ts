/**
 * The API docs page's time to usable (issue 19 item 7: goal under 1.5 s), next to the console's
 * Overview page measured in the same run, in Debian's headless Chromium (playwright-core,
 * /usr/bin/chromium; `npm run build:web` first) against the service's api role on a fresh
 * database (DATABASE_URL's server, else PGlite).
 *
 * "Usable", measured inside the page from its navigation start (performance.now(), whose origin
 * is the navigation's start), so the figures hold the whole load: request, HTML, scripts, styles,
 * the API calls a page makes before it shows anything, rendering:
 * - docs (/console/docs/): the reference's first operation heading (`main` "API reference",
 *   first h3) is visible, then a real click on "Open the interactive explorer" is answered (its
 *   handler ran: the button says "Loading the explorer…"). Swagger UI's bundle, which that click
 *   asks for, is held unanswered at the network: it is loaded only on request, not part of this
 *   page.
 * - overview (/console/, signed in): the "Overview" heading is visible with its cards rendered
 *   (the "Plan" card: the overview's data fetched), then a real click on the "Events" link of the navigation is
 *   answered (the "Events" heading is shown, client-side).
 * "visible" is the first figure alone (the heading seen), "usable" the click answered. Apart,
 * not in the goal: how long the explorer (Swagger UI) takes to show its first operation once
 * asked for (3 first visits).
 *
 * The process's first load of each page is printed apart (the docs page writes its reference at
 * its first request). Each run opens a new browser context (empty HTTP cache: a first visit), loads the page, and
 * loads it once more in the same context (cached: a return visit). Runs alternate the two pages.
 * Bytes: what the page's load transferred (Resource Timing transferSize of the document and its
 * resources, cold). The machine's load average is printed before and after: the figures depend
 * on it (2 cores, shared). BENCH_DOCS_RUNS (default 7) runs per page.
 */
import fs from 'node:fs';
import os from 'node:os';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { CHROMIUM, launchBrowser, startConsoleService } from '../test/helpers/browser.js';

export interface BenchConsoleDocsOptions {
  /** Runs per page (each a cold and a warm load). Default 7. */
  runs?: number;
}

interface Load {
  /** ms from navigation start: the page's heading (and for Overview its data) visible. */
  visible: number;
  /** ms from navigation start: a click answered. */
  usable: number;
  /** Bytes transferred by the load (document and resources). */
  bytes: number;
}

type Storage = Awaited<ReturnType<BrowserContext['storageState']>>;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
const sec = (x: number) => `${(x / 1000).toFixed(2)} s`;
const fmt = (xs: number[]) =>
  `median ${sec(median(xs))} (min ${sec(Math.min(...xs))}, max ${sec(Math.max(...xs))})`;
const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

/** Bytes the current document's load transferred (0 for what came from the cache). */
async function transferred(page: Page): Promise<number> {
  // A string: this project's TypeScript has no DOM types (it runs in the page).
  return Number(
    await page.evaluate(
      `[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]
         .reduce((sum, e) => sum + (e.transferSize || 0), 0)`,
    ),
  );
}

/** The little of the DOM the page-side functions below use (this project has no DOM types). */
interface PageGlobals {
  document: {
    getElementById(id: string): { textContent: string | null } | null;
    querySelectorAll(selector: string): ArrayLike<{ textContent: string | null }>;
  };
}

/**
 * Poll the page every 5 ms until `probe` (run in the page) answers a number: performance.now()
 * when its condition held. Polled from here through the DevTools protocol because the console's
 * Content-Security-Policy forbids the string evaluation page.waitForFunction relies on; the poll
 * adds at most its 5 ms and one round trip to a figure.
 */
async function nowWhen(page: Page, probe: () => number | false): Promise<number> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const t = await page.evaluate(probe);
    if (t !== false) return t;
    if (Date.now() > deadline) throw new Error('the page did not answer within 60 s');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Load the docs page in `page` and measure it (see module doc). */
async function docsLoad(page: Page, base: string): Promise<Load> {
  await page.goto(`${base}/console/docs/`, { waitUntil: 'commit' });
  const heading = page
    .getByRole('main', { name: 'API reference' })
    .getByRole('heading', { level: 3 })
    .first();
  await heading.waitFor({ state: 'visible', timeout: 60_000 });
  const visible = await page.evaluate(() => performance.now());
  await page.getByRole('button', { name: 'Open the interactive explorer' }).click();
  const usable = await nowWhen(page, () =>
    (globalThis as unknown as PageGlobals).document
      .getElementById('open-explorer')
      ?.textContent?.startsWith('Loading')
      ? performance.now()
      : false,
  );
  return { visible, usable, bytes: await transferred(page) };
}

/**
 * The interactive explorer, on request: load the docs page, press "Open the interactive explorer"
 * and wait for Swagger UI's first operation; ms from the click's answer to that (Swagger UI's
 * 1.7 MB bundle fetched, compiled and run, the OpenAPI document fetched and rendered).
 */
async function explorerLoad(page: Page, base: string): Promise<number> {
  await page.goto(`${base}/console/docs/`);
  await page.getByRole('button', { name: 'Open the interactive explorer' }).click();
  const clicked = await nowWhen(page, () =>
    (globalThis as unknown as PageGlobals).document
      .getElementById('open-explorer')
      ?.textContent?.startsWith('Loading')
      ? performance.now()
      : false,
  );
  await page.locator('.opblock-summary').first().waitFor({ state: 'visible', timeout: 60_000 });
  return (await page.evaluate(() => performance.now())) - clicked;
}

/** Load the console's Overview in `page` (signed in) and measure it (see module doc). */
async function overviewLoad(page: Page, base: string): Promise<Load> {
  await page.goto(`${base}/console/`, { waitUntil: 'commit' });
  await page
    .getByRole('heading', { level: 1, name: 'Overview' })
    .waitFor({ state: 'visible', timeout: 60_000 });
  await page
    .getByRole('heading', { level: 2, name: 'Plan' })
    .waitFor({ state: 'visible', timeout: 60_000 });
  const visible = await page.evaluate(() => performance.now());
  await page
    .getByRole('navigation', { name: 'Console' })
    .getByRole('link', { name: 'Events', exact: true })
    .click();
  const usable = await nowWhen(page, () =>
    Array.from((globalThis as unknown as PageGlobals).document.querySelectorAll('h1')).some(
      (h) => h.textContent?.trim() === 'Events',
    )
      ? performance.now()
      : false,
  );
  await page.waitForLoadState('load');
  return { visible, usable, bytes: await transferred(page) };
}

/** One cold load and one warm load of a page, in a new context. */
async function measure(
  browser: Browser,
  storage: Storage | undefined,
  fn: (page: Page) => Promise<Load>,
): Promise<{ cold: Load; warm: Load }> {
  const context = await browser.newContext({
    viewport: { width: 1440, height: 900 },
    ...(storage ? { storageState: storage } : {}),
  });
  try {
    // Swagger UI is loaded on request only: the click that asks for it is measured, its 1.7 MB
    // bundle is not part of the page.
    // It is held unanswered (until the context closes), so the button stays "Loading…".
    await context.route('**/console/docs/assets/swagger-ui*', () => undefined);
    const page = await context.newPage();
    const cold = await fn(page);
    const warm = await fn(page);
    return { cold, warm };
  } finally {
    await context.close();
  }
}

export async function benchConsoleDocs(opts: BenchConsoleDocsOptions = {}): Promise<string[]> {
  const runs = opts.runs ?? 7;
  if (!fs.existsSync(CHROMIUM))
    return [`skipped: ${CHROMIUM} is missing (apt-get install chromium)`];
  if (!fs.existsSync('dist/web/index.html')) return ['skipped: run npm run build:web first'];
  const lines: string[] = [`load average before: ${load()} (${os.cpus().length} cores)`];
  const service = await startConsoleService({ roles: ['api'] });
  const browser = await launchBrowser();
  try {
    const base = service.base;
    // A signed-in session for the Overview (sign-up through the page, as a person would).
    const setup = await browser.newContext();
    const p = await setup.newPage();
    await p.goto(`${base}/console/signup`);
    await p.getByLabel('E-mail').fill('bench@docs.example');
    await p.getByLabel('Password').fill('correct horse battery staple');
    await p.getByRole('button', { name: 'Create account' }).click();
    await p.getByRole('heading', { level: 1, name: 'Overview' }).waitFor({ timeout: 60_000 });
    const storage = await setup.storageState();
    await setup.close();
    // The process's first answers, apart: the docs page writes its reference from the OpenAPI
    // document at its first request (then keeps it); one sample each, not in the medians.
    const firstDocs = await measure(browser, undefined, (page) => docsLoad(page, base));
    const firstOverview = await measure(browser, storage, (page) => overviewLoad(page, base));
    lines.push(
      `first request after start (one sample): docs usable ${sec(firstDocs.cold.usable)}, overview usable ${sec(firstOverview.cold.usable)}`,
    );

    const docs: Array<{ cold: Load; warm: Load }> = [];
    const overview: Array<{ cold: Load; warm: Load }> = [];
    for (let i = 0; i < runs; i++) {
      // Alternate which goes first, so a burst of load elsewhere is shared.
      const order = i % 2 === 0 ? ['docs', 'overview'] : ['overview', 'docs'];
      for (const which of order) {
        if (which === 'docs')
          docs.push(await measure(browser, undefined, (pg) => docsLoad(pg, base)));
        else overview.push(await measure(browser, storage, (pg) => overviewLoad(pg, base)));
      }
    }
    const col = (xs: Array<{ cold: Load; warm: Load }>, k: 'cold' | 'warm', f: keyof Load) =>
      xs.map((x) => x[k][f]);
    const kb = (b: number) => `${(b / 1024).toFixed(0)} kB`;
    for (const [name, xs] of [
      ['docs    ', docs],
      ['overview', overview],
    ] as const) {
      lines.push(
        `${name} first visit: visible ${fmt(col(xs, 'cold', 'visible'))}; usable ${fmt(col(xs, 'cold', 'usable'))}; ${kb(median(col(xs, 'cold', 'bytes')))} transferred`,
      );
      lines.push(
        `${name} return visit: visible ${fmt(col(xs, 'warm', 'visible'))}; usable ${fmt(col(xs, 'warm', 'usable'))}`,
      );
    }
    const explorer: number[] = [];
    for (let i = 0; i < Math.min(3, runs); i++) {
      const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
      try {
        explorer.push(await explorerLoad(await context.newPage(), base));
      } finally {
        await context.close();
      }
    }
    lines.push(
      `docs, the interactive explorer (Swagger UI) after its button, first visit: ${fmt(explorer)}`,
    );
    const ratio = median(col(docs, 'cold', 'usable')) / median(col(overview, 'cold', 'usable'));
    lines.push(
      `docs / overview, usable on a first visit: ${ratio.toFixed(2)}× (goal: docs under 1.5 s: ${median(col(docs, 'cold', 'usable')) < 1500 ? 'met' : 'NOT met'})`,
    );
    lines.push(`load average after: ${load()}`);
    return lines;
  } finally {
    await browser.close();
    await service.stop();
  }
}
