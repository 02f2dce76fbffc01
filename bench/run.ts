/**
 * `npm run bench`: every benchmark, each printing its figures next to a baseline measured in the
 * same run, and the ratio. Select parts with BENCH=scan,delivery,… (default: all).
 * Parts: scan (issue 2), e2e, delivery and watches (issue 3), api (issue 4), telegram (issues 13
 * and 21: chat deliveries against the Bot API limits enforced on arrival, the share of each limit
 * used and the 429 count; BENCH_TG_SCALE, BENCH_TG_CHATS, BENCH_TG_GROUP_SCALE, …).
 * Sizes: BENCH_BLOCKS (scan, 300), BENCH_E2E_BLOCKS (510), BENCH_INTERVAL_MS (150),
 * BENCH_PACE_LATENCY_BLOCKS (e2e at mainnet's pace, 75; 0 skips it), BENCH_PACE_SECONDS (45),
 * BENCH_WATCH_BLOCKS (100), BENCH_WATCHES (1,000,000),
 * BENCH_EVENTS (api, 1,000,000), BENCH_SECONDS (api, 8 per autocannon run).
 * ingest-rate (issue 14: node requests per block at mainnet pace, a day caught up under a cap):
 * BENCH_RATE_COMPRESSION (10), BENCH_RATE_BLOCKS (300), BENCH_STALL_BLOCKS (100), BENCH_CATCHUP_BLOCKS (28,800),
 * BENCH_CATCHUP_RPS (200).
 * hot (issue 17 item 5: the webhook claim behind 300,000 due chat rows, the dead letters page at
 * 10,000,000 events with 1,000 DEAD, each next to the query or index before migration 023):
 * BENCH_HOT_EVENTS (10,000,000), BENCH_HOT_CHAT_ROWS (300,000), BENCH_HOT_DEAD (1,000),
 * BENCH_HOT_CLAIMS (20), BENCH_HOT_KEEP=1 (keep the database). PostgreSQL only.
 * console-docs (issue 19 item 7: the API docs page's time to usable, goal under 1.5 s, next to
 * the Overview page's; headless Chromium, `npm run build:web` first): BENCH_DOCS_RUNS (7).
 * endpoints (issue 30 item 5: watches/s through the batch API onto one endpoint next to one
 * request per watch; a burst of deliveries to an endpoint at its rate limit next to one without,
 * the most arrivals in a second and in service at once next to the limits): BENCH_EP_WATCHES
 * (100,000), BENCH_EP_SINGLE (1,000), BENCH_EP_BURST (10,000), BENCH_EP_RATE (500), BENCH_EP_CAP (16).
 * light-client (issue 28: witness-signature checks per second on real and devnet headers, and the
 * light client's share of a 600-transaction block's in-process cost): BENCH_LC_BLOCKS (200).
 * PostgreSQL parts use DATABASE_URL when set (a fresh database each), else PGlite.
 */
import { benchApi } from './api.js';
import { benchConsoleDocs } from './console-docs.js';
import { benchDelivery } from './delivery.js';
import { benchE2e } from './e2e.js';
import { benchEndpoints } from './endpoints.js';
import { benchHotQueries } from './hot-queries.js';
import { benchIngestRate } from './ingest-rate.js';
import { benchIngestWatches } from './ingest-watches.js';
import { benchLightClient } from './light-client.js';
import { benchScan } from './scan.js';
import { benchTelegram } from './telegram.js';

type Part = { name: string; run: () => Promise<string[]> };

const env = (k: string, d: number) => Number(process.env[k] ?? d);
const parts: Part[] = [
  { name: 'scan', run: () => benchScan({ blocks: env('BENCH_BLOCKS', 300) }) },
  {
    name: 'e2e',
    run: () =>
      benchE2e({
        blocks: env('BENCH_E2E_BLOCKS', 510),
        intervalMs: env('BENCH_INTERVAL_MS', 150),
        paceLatencyBlocks: env('BENCH_PACE_LATENCY_BLOCKS', 75),
        paceSeconds: env('BENCH_PACE_SECONDS', 45),
      }),
  },
  {
    name: 'api',
    run: () =>
      benchApi({ events: env('BENCH_EVENTS', 1_000_000), seconds: env('BENCH_SECONDS', 8) }),
  },
  { name: 'delivery', run: async () => (await benchDelivery({})).lines },
  {
    name: 'telegram',
    run: () =>
      benchTelegram({
        scale: env('BENCH_TG_SCALE', 1),
        chats: env('BENCH_TG_CHATS', 100),
        perChat: env('BENCH_TG_PER_CHAT', 3),
        burst: env('BENCH_TG_BURST', 20),
        group: env('BENCH_TG_GROUP', 41),
        groupScale: env('BENCH_TG_GROUP_SCALE', 0.1),
      }),
  },
  {
    name: 'watches',
    run: () =>
      benchIngestWatches({
        blocks: env('BENCH_WATCH_BLOCKS', 100),
        watches: env('BENCH_WATCHES', 1_000_000),
      }),
  },
];

parts.push({
  name: 'hot',
  run: () =>
    benchHotQueries({
      events: env('BENCH_HOT_EVENTS', 10_000_000),
      chatRows: env('BENCH_HOT_CHAT_ROWS', 300_000),
      dead: env('BENCH_HOT_DEAD', 1_000),
      claims: env('BENCH_HOT_CLAIMS', 20),
      keep: process.env.BENCH_HOT_KEEP === '1',
    }),
});

parts.push({
  name: 'ingest-rate',
  run: () =>
    benchIngestRate({
      compression: env('BENCH_RATE_COMPRESSION', 10),
      blocks: env('BENCH_RATE_BLOCKS', 300),
      stallBlocks: env('BENCH_STALL_BLOCKS', 100),
      catchUpBlocks: env('BENCH_CATCHUP_BLOCKS', 28_800),
      catchUpRps: env('BENCH_CATCHUP_RPS', 200),
    }),
});

parts.push({
  name: 'endpoints',
  run: () =>
    benchEndpoints({
      watches: env('BENCH_EP_WATCHES', 100_000),
      single: env('BENCH_EP_SINGLE', 1_000),
      burst: env('BENCH_EP_BURST', 10_000),
      rate: env('BENCH_EP_RATE', 500),
      cap: env('BENCH_EP_CAP', 16),
    }),
});

parts.push({
  name: 'light-client',
  run: () => benchLightClient({ blocks: env('BENCH_LC_BLOCKS', 200) }),
});

parts.push({
  name: 'console-docs',
  run: () => benchConsoleDocs({ runs: env('BENCH_DOCS_RUNS', 7) }),
});

const wanted = (process.env.BENCH ?? '').split(',').filter(Boolean);
for (const p of parts) {
  if (wanted.length && !wanted.includes(p.name)) continue;
  console.log(`\n== ${p.name} ==`);
  const started = performance.now();
  for (const line of await p.run()) console.log(line);
  console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s)`);
}
