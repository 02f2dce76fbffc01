/**
 * Issue 26: a configuration that cannot prove anything (one provider, no gRPC) is refused when a
 * role that ingests starts (`serve`, `ingest`), with a message saying what to add; the
 * development opt-out (TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1) starts it with a warning, and
 * ingest then runs on that provider's JSON. Real processes (`tronwatch …` through tsx), a real
 * replay node serving a synthetic chain over HTTP only, PostgreSQL.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointFile, serveSynthetic } from '../helpers/chain.js';
import { runCli, startLogged, terminate, untilOrExit } from '../helpers/cli.js';
import { emptyDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

function tmpDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-unproven-'));
  cleanup.push(() => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

const WHAT_TO_ADD =
  /TRON_NODE_URL has one provider \(http:\/\/127\.0\.0\.1:\d+\) and no gRPC for it.*#grpc=grpc:\/\/host:port.*a second provider with TRON_NODE_QUORUM=2.*TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1/;

describe('one provider without gRPC', { timeout: 120_000 }, () => {
  it('serve and ingest refuse to start, exit non-zero and say what to add', async () => {
    const dataDir = tmpDir();
    for (const role of ['serve', 'ingest']) {
      const r = await runCli([role], {
        DATA_DIR: dataDir,
        TRON_NODE_URL: 'http://127.0.0.1:9',
        PORT: '0',
      });
      expect(r.code, `${role}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toMatch(WHAT_TO_ADD);
    }
    // Nothing was opened: no embedded database was created.
    expect(fs.existsSync(path.join(dataDir, 'pgdata'))).toBe(false);
  });

  it.skipIf(!POSTGRES_URL)(
    'TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1 starts with a warning, and ingests the JSON-only chain',
    async () => {
      const t: TestDb = await emptyDb('postgres');
      cleanup.push(() => t.drop());
      const chain = await serveSynthetic(
        { seed: 7, firstBlock: 75_000_000, txPerBlock: 40, addresses: 50, count: 6 },
        { instant: true, grpc: false },
      );
      cleanup.push(() => chain.node.close());
      expect(chain.node.grpcUrl).toBeUndefined();
      const p = startLogged('ingest', ['ingest'], {
        DATABASE_URL: t.url ?? '',
        DATA_DIR: tmpDir(),
        TRON_NODE_URL: chain.node.url,
        TRON_LIGHT_CLIENT_CHECKPOINT: checkpointFile(chain.node),
        TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER: '1',
        INGEST_START_BLOCK: String(chain.first),
        TRON_BLOCK_INTERVAL_MS: '100',
      });
      cleanup.push(() => (p.child.exitCode === null ? terminate(p) : undefined));
      // The process migrates the empty database itself: no table before it did.
      const cursor = async () => {
        try {
          const { rows } = await t.db.query<{ block_number: string }>(
            'SELECT block_number FROM chain_cursor',
          );
          return Number(rows[0]?.block_number ?? 0);
        } catch {
          return 0;
        }
      };
      await untilOrExit('the last block committed', async () => (await cursor()) >= chain.last, [
        p,
      ]);
      const warning = p.logs.find(
        (l) =>
          typeof l.msg === 'string' && l.msg.startsWith('TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1:'),
      );
      expect(warning?.level).toBe(40); // warn
      expect(String(warning?.msg)).toMatch(/ONE provider WITHOUT gRPC \(development only\)/);
      expect(p.has('tronwatch running')).toBe(true);
      expect(await terminate(p)).toBe(0);
    },
  );
});
