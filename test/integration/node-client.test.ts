/**
 * NodeClient against a real replay node: consistency checks on transaction infos, the refusal
 * to read past the solidified head (fault recovery is covered in replay-node.test.ts), and the
 * heads of a node that does not serve /wallet/getnodeinfo.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { memorySource, type ReplayNode, startReplayNode } from '../../src/devnet/replay-node.js';
import { syntheticBlock } from '../../src/devnet/synthetic.js';
import { NodeClient, NodeError } from '../../src/tron/node-client.js';
import { fetchBlocks } from '../../src/tron/scan.js';

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

  /** A paused replay node of one block (500, solidified head 494) that answers 404 to getnodeinfo. */
  const nodeWithoutNodeInfo = () => {
    const a = syntheticBlock(OPTS, 500);
    return startReplayNode({
      intervalMs: 0,
      startBefore: 5,
      disabledPaths: ['/wallet/getnodeinfo'],
      source: memorySource(
        new Map([[500, { block: JSON.stringify(a.block), infos: JSON.stringify(a.infos) }]]),
      ),
    });
  };

  it('reads both heads from the newest blocks when /wallet/getnodeinfo is not served, then only so', async () => {
    node = await nodeWithoutNodeInfo();
    client = new NodeClient({ url: node.url, retries: 2 });
    expect(await client.getHeads()).toEqual({ solidified: 494, head: 494 + 18 });
    expect(client.solidifiedHead).toBe(494); // the solidified head, not the full node's
    node.advanceTo(497);
    expect(await client.getHeads()).toEqual({ solidified: 497, head: 497 + 18 });
    const byPath = node.stats.requests.byPath;
    // One 404 (not retried), then two requests per poll and no more getnodeinfo.
    expect(byPath['/wallet/getnodeinfo']).toBe(1);
    expect(byPath['/wallet/getblock']).toBe(2);
    expect(byPath['/walletsolidity/getblock']).toBe(2);
    expect(client.requestCount).toBe(5);
    const block = await client.getSolidifiedBlock(497);
    expect(block.ref.number).toBe(497);
  });

  it('asks /wallet/getnodeinfo again every nodeInfoRetryMs, once, and goes back to it when served', async () => {
    node = await nodeWithoutNodeInfo();
    // A period long enough that two polls surely fit in it on a loaded machine.
    client = new NodeClient({ url: node.url, retries: 2, nodeInfoRetryMs: 1_000 });
    const byPath = node.stats.requests.byPath;
    const counts = () => [
      byPath['/wallet/getnodeinfo'] ?? 0,
      byPath['/wallet/getblock'] ?? 0,
      byPath['/walletsolidity/getblock'] ?? 0,
    ];
    expect(await client.getHeads()).toEqual({ solidified: 494, head: 494 + 18 });
    expect(await client.getHeads()).toEqual({ solidified: 494, head: 494 + 18 });
    expect(counts()).toEqual([1, 2, 2]); // within the period: block headers only
    await new Promise((r) => setTimeout(r, 1_050));
    expect(await client.getHeads()).toEqual({ solidified: 494, head: 494 + 18 });
    expect(counts()).toEqual([2, 3, 3]); // one more try (404, not retried), then the headers
    expect(await client.getHeads()).toEqual({ solidified: 494, head: 494 + 18 });
    expect(counts()).toEqual([2, 4, 4]); // the period starts again
    node.setDisabledPaths([]);
    node.advanceTo(497);
    await new Promise((r) => setTimeout(r, 1_050));
    expect(await client.getHeads()).toEqual({ solidified: 497, head: 497 + 18 });
    expect(await client.getHeads()).toEqual({ solidified: 497, head: 497 + 18 });
    expect(counts()).toEqual([4, 4, 4]); // served again: one request per poll from now on
  });

  it.each([503, 403, 429])(
    'keeps asking /wallet/getnodeinfo through HTTP %i (transient, or about every endpoint)',
    async (status) => {
      let nodeInfoCalls = 0;
      const server: Server = createServer((req, res) => {
        req.resume();
        if (req.url === '/wallet/getnodeinfo') nodeInfoCalls++;
        res.writeHead(status).end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      try {
        const port = (server.address() as AddressInfo).port;
        client = new NodeClient({ url: `http://127.0.0.1:${port}`, retries: 1 });
        for (let i = 0; i < 2; i++) {
          const err = await client.getHeads().catch((e: unknown) => e);
          expect((err as NodeError).status).toBe(status);
        }
        // Every request went to getnodeinfo (its retries included): never switched. A 403 is
        // retried like a 429 (how TronGrid refuses a key over its limits).
        expect(nodeInfoCalls).toBe(4);
        expect(client.requestCount).toBe(nodeInfoCalls);
      } finally {
        await new Promise<void>((r) => server.close(() => r()));
      }
    },
  );
});

describe('fetchBlocks read-ahead', () => {
  it('aborts the requests still in flight for later blocks when a block fails', async () => {
    const blocks = new Map(
      [500, 501, 502, 503].map((n) => {
        const b = syntheticBlock(OPTS, n);
        return [n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) }] as const;
      }),
    );
    const node = await startReplayNode({ instant: true, source: memorySource(new Map(blocks)) });
    // In front of the node: block 500 is refused (java-tron's error answer, not retried), the
    // later blocks get no answer at all; everything else is the node's.
    const held = new Set<IncomingMessage>();
    const front: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => {
        body += d.toString();
      });
      req.on('end', async () => {
        if (req.url === '/walletsolidity/getblockbynum') {
          const num = (JSON.parse(body) as { num: number }).num;
          if (num === 500) {
            // Refused once the later blocks' requests are all held here.
            await vi.waitFor(() => expect(held.size).toBe(3), { timeout: 5_000, interval: 5 });
            return void res.end(JSON.stringify({ Error: 'refused by the test' }));
          }
          held.add(req);
          res.on('close', () => held.delete(req));
          return;
        }
        const answer = await fetch(`${node.url}${req.url}`, { method: 'POST', body });
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(await answer.text());
      });
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    const client = new NodeClient({
      url: `http://127.0.0.1:${(front.address() as AddressInfo).port}`,
      retries: 3,
      timeoutMs: 30_000,
    });
    try {
      await client.getSolidifiedHead();
      const got: number[] = [];
      const err = await (async () => {
        for await (const b of fetchBlocks(client, 500, 503, 4)) got.push(b.ref.number);
      })().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NodeError);
      expect(got).toEqual([]);
      // The three held requests (sent before 500 was refused) are given up at once, not at the
      // client's 30 s timeout nor after their retries.
      await vi.waitFor(() => expect(held.size).toBe(0), { timeout: 5_000, interval: 20 });
    } finally {
      await client.close();
      front.closeAllConnections();
      await new Promise<void>((r) => front.close(() => r()));
      await node.close();
    }
  });
});
