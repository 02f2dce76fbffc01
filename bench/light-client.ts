/**
 * Light-client benchmark (issue 28): witness-signature checks per second (secp256k1 recovery over
 * SHA-256 of the header, src/tron/light-client/witness-signature.ts) on the 100 real mainnet
 * headers and on devnet-signed synthetic headers, and the light client's share of a block's cost:
 * per 600-transaction synthetic block, `LightClient.submit` (header decode, signature, slot,
 * finality walk) next to the baseline measured in the same run, what a block already costs
 * without it in process (parse the block and receipts JSON, verifyBlock, extractTransfers).
 * No network: node requests are unchanged by the light client (it reads the header of the block
 * ingest already fetched). Size: BENCH_LC_BLOCKS (200).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { syntheticBlock, syntheticCheckpoint } from '../src/devnet/synthetic.js';
import { extractTransfers } from '../src/tron/extract.js';
import { parseNodeJson } from '../src/tron/json.js';
import { LightClient } from '../src/tron/light-client/finality.js';
import { type SignedHeader, signedHeaderFromJson } from '../src/tron/light-client/header.js';
import { recoverWitnessSigner } from '../src/tron/light-client/witness-signature.js';
import type { BlockJson, TransactionInfoJson } from '../src/tron/types.js';
import { verifyBlock } from '../src/tron/verify.js';

const HEADERS = path.join(
  import.meta.dirname,
  '../test/fixtures/tron-mainnet/headers-78000000-78000099.json',
);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

/**
 * Recoveries per second over `headers`, from the median time of one recovery (`rounds` × each
 * header): on a shared machine the median is the uninterrupted cost, a throughput loop would
 * mostly measure the other processes.
 */
function recoveriesPerSecond(headers: readonly SignedHeader[], rounds: number): number {
  for (const h of headers) recoverWitnessSigner(h.raw, h.signature); // warm-up
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const h of headers) {
      const started = performance.now();
      recoverWitnessSigner(h.raw, h.signature);
      times.push(performance.now() - started);
    }
  }
  return 1000 / median(times);
}

/** Run the benchmark; @returns the lines to print. */
export async function benchLightClient(opts: { blocks: number }): Promise<string[]> {
  const real = (parseNodeJson(fs.readFileSync(HEADERS, 'utf8')) as BlockJson[]).map(
    signedHeaderFromJson,
  );
  const chain = { seed: 11, firstBlock: 20_000, txPerBlock: 600 };
  const texts: Array<{ block: string; infos: string }> = [];
  for (let n = chain.firstBlock; n < chain.firstBlock + opts.blocks; n++) {
    const b = syntheticBlock(chain, n);
    texts.push({ block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
  }

  // Per block, interleaved so both see the same machine load: the baseline (what a block costs
  // in process today) then the light client on the same block, in order, from the checkpoint.
  const lc = new LightClient(syntheticCheckpoint(chain));
  const base: number[] = [];
  const light: number[] = [];
  const parsed: BlockJson[] = [];
  let final = 0;
  for (const t of texts) {
    let started = performance.now();
    const block = parseNodeJson(t.block) as BlockJson;
    const infos = parseNodeJson(t.infos) as TransactionInfoJson[];
    verifyBlock(block, infos);
    extractTransfers(block, infos);
    base.push(performance.now() - started);
    parsed.push(block);
    started = performance.now();
    const r = lc.submit(signedHeaderFromJson(block));
    light.push(performance.now() - started);
    if (r.status !== 'verified') throw new Error(`bench: block not verified: ${r.status}`);
    final += r.final.length;
  }

  const devnet = parsed.slice(0, 100).map(signedHeaderFromJson);
  const realRate = recoveriesPerSecond(real, 5);
  const devRate = recoveriesPerSecond(devnet, 5);
  const b = median(base);
  const l = median(light);
  const load = os.loadavg()[0]?.toFixed(1);
  return [
    `load average ${load} on ${os.cpus().length} cores (figures scale with it; compare within the run)`,
    `signature checks (secp256k1 recovery): ${realRate.toFixed(0)}/s on the 100 real mainnet headers, ${devRate.toFixed(0)}/s on devnet headers (mainnet needs 0.33/s)`,
    `per 600-tx block, median: baseline (parse + verifyBlock + extract) ${b.toFixed(2)} ms; light client submit ${l.toFixed(3)} ms`,
    `light client share of a block's in-process cost: ${((100 * l) / (b + l)).toFixed(1)} % (${opts.blocks} blocks, ${final} proven final)`,
  ];
}
