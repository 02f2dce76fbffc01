/**
 * The real mainnet fixtures live outside the repository (their provenance forbids copying them):
 * TRON_FIXTURES_DIR points at shared/fixtures/tron-mainnet. Unset on a user's clone: the tests
 * that need them are skipped with a message. In CI (CI=true) they must run: unset or missing fails.
 */
import fs from 'node:fs';
import path from 'node:path';

export const FIXTURES_DIR = process.env.TRON_FIXTURES_DIR;

function check(): string | undefined {
  if (!FIXTURES_DIR) {
    if (process.env.CI === 'true')
      throw new Error('CI=true but TRON_FIXTURES_DIR is unset: the real-data tests must run in CI');
    console.warn('TRON_FIXTURES_DIR is unset: tests on real mainnet fixtures are skipped');
    return undefined;
  }
  if (!fs.existsSync(path.join(FIXTURES_DIR, 'chain', 'block-79072107.json'))) {
    throw new Error(`TRON_FIXTURES_DIR=${FIXTURES_DIR} does not hold chain/block-79072107.json`);
  }
  return FIXTURES_DIR;
}

/** The fixtures folder, or undefined (tests skip) when not configured outside CI. */
export const fixturesDir = check();

/** Read a fixture as text (path relative to the fixtures folder). */
export function fixtureText(rel: string): string {
  if (!fixturesDir) throw new Error('fixtures not configured');
  return fs.readFileSync(path.join(fixturesDir, rel), 'utf8');
}

export function fixtureJson<T = unknown>(rel: string): T {
  return JSON.parse(fixtureText(rel)) as T;
}

/** Folder of the replayable chain (block + txinfo pairs). */
export function chainDir(): string {
  if (!fixturesDir) throw new Error('fixtures not configured');
  return path.join(fixturesDir, 'chain');
}
