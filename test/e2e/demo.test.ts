/**
 * The README's main job: the demo exits 0 on the real mainnet block (every matching transfer
 * delivered, signed, reconciled) and on the offline synthetic chain.
 */
import { describe, expect, it } from 'vitest';
import { runDemo } from '../../src/devnet/demo.js';
import { chainDir, fixturesDir } from '../helpers/fixtures.js';

describe('npm run demo', () => {
  it.skipIf(!fixturesDir)(
    'delivers every matching transfer of real block 79072107',
    async () => {
      const out: string[] = [];
      const code = await runDemo({ blocks: chainDir(), out: (l) => out.push(l) });
      expect(out.join('\n')).toMatch(/OK: every expected transfer was delivered/);
      expect(code, out.join('\n')).toBe(0);
      expect(out.join('\n')).toMatch(/expected events: +67 /);
    },
    180_000,
  );

  it('runs offline on the synthetic chain', async () => {
    const out: string[] = [];
    const code = await runDemo({ offline: true, out: (l) => out.push(l) });
    expect(out.join('\n')).toMatch(/synthetic chain/);
    expect(code, out.join('\n')).toBe(0);
  }, 180_000);
});
