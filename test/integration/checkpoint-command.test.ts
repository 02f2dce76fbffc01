/**
 * `tronwatch checkpoint` (src/tron/light-client/checkpoint-build.ts) against devnet nodes
 * (src/devnet/sr-node.ts) serving a signed synthetic chain and its SR set over real HTTP: honest
 * providers give the devnet's checkpoint, which a light client then follows; a provider that
 * reports another signing key or another active set is refused (by the quorum, or with one
 * provider by the chain's own signatures). Also the real command, as a child process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SrNode, startSrNode } from '../../src/devnet/sr-node.js';
import { DEVNET_SRS, syntheticBlock, syntheticCheckpoint } from '../../src/devnet/synthetic.js';
import {
  buildCheckpoint,
  witnessKeyFromProviders,
} from '../../src/tron/light-client/checkpoint-build.js';
import { LightClient } from '../../src/tron/light-client/finality.js';
import { signedHeaderFromJson } from '../../src/tron/light-client/header.js';
import { CheckpointError } from '../../src/tron/light-client/sr-set.js';
import { runCli } from '../helpers/cli.js';

const CHAIN = { seed: 28, firstBlock: 9000, txPerBlock: 2 };
const HEAD = 9060;
const SR21 = DEVNET_SRS[21]?.address as string;
const OTHER_KEY = `41${'77'.repeat(20)}`;

const nodes: SrNode[] = [];
let honestA: SrNode;
let honestB: SrNode;
let wrongKey: SrNode;
let hiding: SrNode;

beforeAll(async () => {
  honestA = await startSrNode({ chain: CHAIN, head: HEAD });
  honestB = await startSrNode({ chain: CHAIN, head: HEAD + 2 });
  wrongKey = await startSrNode({
    chain: CHAIN,
    head: HEAD,
    reportKey: (a) => (a === SR21 ? OTHER_KEY : undefined),
  });
  hiding = await startSrNode({ chain: CHAIN, head: HEAD, hide: [SR21] });
  nodes.push(honestA, honestB, wrongKey, hiding);
});

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.close()));
});

const provider = (n: SrNode, name: string) => ({ url: n.url, name });

async function refusal(p: Promise<unknown>): Promise<CheckpointError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof CheckpointError) return err;
    throw err;
  }
  throw new Error('expected a CheckpointError');
}

describe('tronwatch checkpoint', () => {
  it('builds the devnet checkpoint from two agreeing providers, and a light client follows it', async () => {
    const cp = await buildCheckpoint([provider(honestA, 'a'), provider(honestB, 'b')], {
      quorum: 2,
      network: 'devnet',
    });
    const expected = syntheticCheckpoint(CHAIN);
    // The lowest solidified head of the two, the devnet SRs in schedule order with their keys.
    expect(cp.block.number).toBe(HEAD);
    expect(cp.block.id).toBe(syntheticBlock(CHAIN, HEAD).block.blockID);
    expect(cp.witnesses).toEqual(expected.witnesses);
    expect(cp.nextMaintenanceTime).toBe(expected.nextMaintenanceTime);
    expect(cp.witnesses.filter((w) => w.address !== w.signingKey)).toHaveLength(7);
    const lc = new LightClient(cp);
    for (let n = HEAD + 1; n <= HEAD + 25; n++) {
      expect(lc.submit(signedHeaderFromJson(syntheticBlock(CHAIN, n).block)).status).toBe(
        'verified',
      );
    }
    expect(lc.finalBlock.number).toBe(HEAD + 25 - 18);
  });

  it('refuses when a provider reports another signing key (quorum 2)', async () => {
    const e = await refusal(
      buildCheckpoint([provider(honestA, 'honest'), provider(wrongKey, 'liar')], { quorum: 2 }),
    );
    expect(e.message).toContain(`signing key of ${SR21}`);
    expect(e.message).toContain('providers disagree');
  });

  it('with one lying provider, the chain itself refuses the key it reports', async () => {
    const e = await refusal(buildCheckpoint([provider(wrongKey, 'liar')], { quorum: 1 }));
    expect(e.message).toContain(`but the providers report key ${OTHER_KEY}`);
  });

  it('refuses an active set that the providers disagree on, or that is not 27', async () => {
    const both = await refusal(
      buildCheckpoint([provider(honestA, 'honest'), provider(hiding, 'liar')], { quorum: 2 }),
    );
    expect(both.message).toContain('active SRs');
    const alone = await refusal(buildCheckpoint([provider(hiding, 'liar')]));
    expect(alone.message).toContain('26 active SRs, expected 27');
  });

  it("a newcomer's key after a maintenance: agreed by the quorum, refused on a disagreement", async () => {
    const honest = [provider(honestA, 'a'), provider(honestB, 'b')];
    expect(await witnessKeyFromProviders(honest, SR21, { quorum: 2 })).toBe(
      DEVNET_SRS[21]?.signingKey,
    );
    const e = await refusal(
      witnessKeyFromProviders([provider(honestA, 'a'), provider(wrongKey, 'liar')], SR21, {
        quorum: 2,
      }),
    );
    expect(e.message).toContain('providers disagree');
  });

  it('refuses fewer answering providers than the quorum', async () => {
    const e = await refusal(buildCheckpoint([provider(honestA, 'a')], { quorum: 2 }));
    expect(e.message).toContain('quorum 2');
  });

  it('the real command prints it for review, and exits 1 with the reason on a disagreement', async () => {
    const ok = await runCli(['checkpoint', '--network', 'devnet'], {
      TRON_NODE_URL: `${honestA.url},${honestB.url}`,
      TRON_NODE_QUORUM: '2',
    });
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    const printed = JSON.parse(ok.stdout);
    expect(printed.block.number).toBe(HEAD);
    expect(printed.witnesses).toEqual(syntheticCheckpoint(CHAIN).witnesses);
    const bad = await runCli(['checkpoint'], {
      TRON_NODE_URL: `${honestA.url},${wrongKey.url}`,
      TRON_NODE_QUORUM: '2',
    });
    expect(bad.code).toBe(1);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toContain('providers disagree');
  });
});
