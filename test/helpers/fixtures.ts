/**
 * The real mainnet fixtures (test/fixtures/tron-mainnet/, with their provenance in its README):
 * part of the repository, so every real-data test runs on a fresh clone. TRON_FIXTURES_DIR may
 * point elsewhere (a folder of the same layout); it must hold chain/block-79072107.json.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The fixtures folder in the repository. */
export const REPO_FIXTURES_DIR = path.resolve(
  import.meta.dirname,
  '..',
  'fixtures',
  'tron-mainnet',
);

function check(): string {
  const dir = process.env.TRON_FIXTURES_DIR || REPO_FIXTURES_DIR;
  if (!fs.existsSync(path.join(dir, 'chain', 'block-79072107.json'))) {
    throw new Error(`fixtures folder ${dir} does not hold chain/block-79072107.json`);
  }
  return dir;
}

/** The fixtures folder (always set: the repository carries it). */
export const fixturesDir: string = check();

/** Read a fixture as text (path relative to the fixtures folder). */
export function fixtureText(rel: string): string {
  return fs.readFileSync(path.join(fixturesDir, rel), 'utf8');
}

export function fixtureJson<T = unknown>(rel: string): T {
  return JSON.parse(fixtureText(rel)) as T;
}

/** Folder of the replayable chain (block + txinfo pairs, and the block's gRPC bytes). */
export function chainDir(): string {
  return path.join(fixturesDir, 'chain');
}
