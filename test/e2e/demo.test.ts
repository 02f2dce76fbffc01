/**
 * The README's main job: the demo exits 0 on the real mainnet block (every matching transfer
 * delivered, signed, reconciled) and on the offline synthetic chain, also with `--telegram` (chat
 * deliveries through the Bot API stand-in); a recorded folder without the blocks' exact bytes is
 * refused before anything starts, naming the file it lacks.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runDemo } from '../../src/devnet/demo.js';
import { chainDir } from '../helpers/fixtures.js';

describe('npm run demo', () => {
  it('delivers every matching transfer of real block 79072107', async () => {
    const out: string[] = [];
    const code = await runDemo({ blocks: chainDir(), out: (l) => out.push(l) });
    expect(out.join('\n')).toMatch(/OK: every expected transfer was delivered/);
    expect(code, out.join('\n')).toBe(0);
    expect(out.join('\n')).toMatch(/expected events: +67 /);
  }, 180_000);

  it('says before it starts which file a recorded folder lacks (blockext-<n>.bin), and exits 1', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-demo-noext-'));
    try {
      for (const f of ['block-79072107.json', 'txinfo-79072107.json']) {
        fs.copyFileSync(path.join(chainDir(), f), path.join(dir, f));
      }
      const out: string[] = [];
      const code = await runDemo({ blocks: dir, out: (l) => out.push(l) });
      const text = out.join('\n');
      expect(code, text).toBe(1);
      expect(text).toMatch(/lacks blockext-79072107\.bin: each recorded block-<n>\.json needs/);
      // Before it starts: that one line, no chain, no service, no watch.
      expect(out).toHaveLength(1);
      expect(text.startsWith(`tronwatch demo: ${dir} lacks blockext-79072107.bin:`)).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs offline on the synthetic chain', async () => {
    const out: string[] = [];
    const code = await runDemo({ offline: true, out: (l) => out.push(l) });
    expect(out.join('\n')).toMatch(/synthetic chain/);
    expect(code, out.join('\n')).toBe(0);
  }, 180_000);

  it('runs --testnet: test mode on a Nile-shaped chain, every event marked test', async () => {
    const out: string[] = [];
    const code = await runDemo({ testnet: true, out: (l) => out.push(l) });
    const text = out.join('\n');
    expect(code, text).toBe(0);
    expect(text).toMatch(/nile chain/);
    expect(text).toMatch(/API key tw_test_/);
    // Events were delivered (not a vacuous pass) and each said it was a test event.
    const m =
      /test mode: (\d+) events say network "nile", livemode false; (\d+) deliveries carried Tronwatch-Test-Mode: true/.exec(
        text,
      );
    expect(m, text).not.toBeNull();
    expect(Number(m?.[1])).toBeGreaterThan(0);
    expect(Number(m?.[2])).toBeGreaterThan(0);
  }, 180_000);

  it('runs offline with --telegram: a chat connected through the console gets every expected message', async () => {
    const out: string[] = [];
    const code = await runDemo({ offline: true, telegram: true, out: (l) => out.push(l) });
    const text = out.join('\n');
    expect(code, text).toBe(0);
    expect(text).toMatch(
      /telegram: chat 777000001 \(private, Demo\) connected through the console/,
    );
    expect(text).toMatch(/OK: every expected chat message was received/);
    const m = /chat messages: +(\d+) received, (\d+) expected \(0 missing, 0 unexpected\)/.exec(
      text,
    );
    expect(m, text).not.toBeNull();
    expect(Number(m?.[2])).toBeGreaterThan(0);
    expect(m?.[1]).toBe(m?.[2]);
  }, 180_000);
});
