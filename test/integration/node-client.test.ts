/**
 * NodeClient against a real replay node: consistency checks on transaction infos and the refusal
 * to read past the solidified head (fault recovery is covered in replay-node.test.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { NodeClient, NodeError } from '../../src/tron/node-client.js';
import { memorySource, type ReplayNode, startReplayNode } from '../../src/tron/replay-node.js';
import { syntheticBlock } from '../../src/tron/synthetic.js';

const OPTS = { seed: 3, firstBlock: 500, txPerBlock: 20 };

describe('NodeClient consistency checks', () => {
  let node: ReplayNode | undefined;
  let client: NodeClient | undefined;
  afterEach(async () => {
    await client?.close();
    await node?.close();
  });

  it('refuses infos that belong to other transactions (same count), and accepts the right ones', async () => {
    const a = syntheticBlock(OPTS, 500);
    const b = syntheticBlock(OPTS, 501);
    node = await startReplayNode({
      instant: true,
      source: memorySource(
        new Map([
          [500, { block: JSON.stringify(a.block), infos: JSON.stringify(b.infos) }], // wrong infos
          [501, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) }],
        ]),
      ),
    });
    client = new NodeClient({ url: node.url, retries: 1 });
    await client.getSolidifiedHead();
    const err = await client.getSolidifiedBlock(500).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NodeError);
    expect((err as NodeError).kind).toBe('inconsistent');
    const ok = await client.getSolidifiedBlock(501);
    expect(ok.infos).toHaveLength(20);
    // Two requests per attempt for 500 (block once + infos twice) and two for 501.
    expect(node.stats.requests.byPath['/walletsolidity/getblockbynum']).toBe(2);
  });

  it('never requests a block above the solidified head', async () => {
    const a = syntheticBlock(OPTS, 500);
    node = await startReplayNode({
      intervalMs: 0,
      startBefore: 5,
      source: memorySource(
        new Map([[500, { block: JSON.stringify(a.block), infos: JSON.stringify(a.infos) }]]),
      ),
    });
    client = new NodeClient({ url: node.url, retries: 0 });
    const heads = await client.getHeads();
    expect(heads.solidified).toBe(494);
    expect(heads.head).toBe(494 + 18);
    const err = await client.getSolidifiedBlock(495).catch((e: unknown) => e);
    expect((err as NodeError).kind).toBe('beyond_solidified');
    expect(node.stats.requests.byPath['/walletsolidity/getblockbynum'] ?? 0).toBe(0);
  });
});
