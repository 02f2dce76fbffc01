/**
 * `npm run bench`: every benchmark, each printing its figures next to a baseline measured in the
 * same run, and the ratio. Select parts with BENCH=scan,delivery,… (default: all).
 * Sizes: BENCH_BLOCKS (scan, default 300).
 */
import { benchScan } from './scan.js';

type Part = { name: string; run: () => Promise<string[]> };

const parts: Part[] = [
  { name: 'scan', run: () => benchScan({ blocks: Number(process.env.BENCH_BLOCKS ?? 300) }) },
];

const wanted = (process.env.BENCH ?? '').split(',').filter(Boolean);
for (const p of parts) {
  if (wanted.length && !wanted.includes(p.name)) continue;
  console.log(`\n== ${p.name} ==`);
  const started = performance.now();
  for (const line of await p.run()) console.log(line);
  console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s)`);
}
