/**
 * A devnet node that answers what `tronwatch checkpoint` asks (tron/light-client/
 * checkpoint-build.ts) about a synthetic chain (synthetic.ts) and its 27 devnet SRs: the
 * solidified head and blocks, recent blocks by range, the SR list with `isJobs`, each SR account's
 * `witness_permission`, and the next maintenance time, in java-tron's JSON shapes (visible=false).
 * It can lie, for tests: report another signing key for an SR, or another active set.
 *
 * Endpoints (POST, JSON body): `/walletsolidity/getnowblock`, `/wallet(solidity)/getblockbynum
 * {num}` (both end at the head served), `/wallet/getblockbylimitnext {startNum, endNum}` (endNum exclusive, at most 100, as
 * java-tron), `/wallet/listwitnesses`, `/wallet/getaccount {address}`,
 * `/wallet/getnextmaintenancetime`, `/wallet/getchainparameters` (the maintenance interval).
 * Anything else: 404. The SR answers are sr-answers.ts's (the replay node serves the same for its
 * devnet set).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SrEntry } from '../tron/light-client/sr-set.js';
import { chainParametersAnswer, getAccountAnswer, listWitnessesAnswer } from './sr-answers.js';
import {
  devnetSrs,
  type SyntheticChainOptions,
  syntheticBlock,
  syntheticCheckpoint,
} from './synthetic.js';

/** Options of startSrNode. */
export interface SrNodeOptions {
  /** The synthetic chain served (its firstBlock must be ≤ head). */
  chain: SyntheticChainOptions;
  /** The solidified head served. */
  head: number;
  /** Lie: the signing key reported for an SR (return undefined for the truth). */
  reportKey?: (address: string) => string | undefined;
  /** Lie: drop SRs from the active list. */
  hide?: readonly string[];
  /**
   * More SR accounts (SRs voted in at a maintenance): `/wallet/getaccount` answers for them and
   * `/wallet/listwitnesses` lists them as active.
   */
  accounts?: readonly SrEntry[];
  /** Ordinary accounts (42 hex, lowercase) `/wallet/getaccount` answers for: no witnesses. */
  plainAccounts?: readonly string[];
  /**
   * `/wallet/getnextmaintenancetime`, ms: the end of the epoch the node is in. Default the
   * synthetic checkpoint's (the chain's first epoch).
   */
  nextMaintenanceTime?: number;
}

/** A running devnet SR node. */
export interface SrNode {
  url: string;
  /** Requests answered, per path. */
  requests: Map<string, number>;
  close(): Promise<void>;
}

/**
 * Start the node on 127.0.0.1 (a free port).
 * @returns its URL, a request count per path, and close().
 */
export async function startSrNode(opts: SrNodeOptions): Promise<SrNode> {
  const requests = new Map<string, number>();
  const next = opts.nextMaintenanceTime ?? syntheticCheckpoint(opts.chain).nextMaintenanceTime;
  const srs = devnetSrs(opts.chain);
  const first = opts.chain.firstBlock ?? 70_000_000;
  const block = (n: number) => syntheticBlock(opts.chain, n).block;

  function answer(path: string, body: Record<string, unknown>): unknown {
    switch (path) {
      case '/walletsolidity/getnowblock':
        return block(opts.head);
      case '/walletsolidity/getblockbynum':
      case '/wallet/getblockbynum': {
        const n = Number(body.num);
        return Number.isSafeInteger(n) && n >= first && n <= opts.head ? block(n) : {};
      }
      case '/wallet/getblockbylimitnext': {
        const start = Math.max(first, Number(body.startNum));
        const end = Math.min(opts.head + 1, Number(body.endNum), start + 100);
        const out = [];
        for (let n = start; n < end; n++) out.push(block(n));
        return { block: out };
      }
      case '/wallet/listwitnesses':
        return listWitnessesAnswer(srs, opts.hide, opts.accounts);
      case '/wallet/getaccount':
        return getAccountAnswer(
          srs,
          String(body.address ?? ''),
          opts.accounts,
          opts.reportKey,
          opts.plainAccounts,
        );
      case '/wallet/getnextmaintenancetime':
        return { num: next };
      case '/wallet/getchainparameters':
        return chainParametersAnswer();
      default:
        return undefined;
    }
  }

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (d: Buffer) => {
      raw += d.toString();
    });
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0] ?? '';
      requests.set(path, (requests.get(path) ?? 0) + 1);
      let body: Record<string, unknown> = {};
      try {
        body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
      } catch {
        res.writeHead(400).end('{"Error":"bad json"}');
        return;
      }
      const out = answer(path, body);
      if (out === undefined) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
    });
  });
  // Idle connections are closed by the client, never by this server: a server that closes them
  // after Node's default 5 s races a client (undici) that picks one for its next request while
  // the event loop was busy (a test's PGlite start), and that request fails with ECONNRESET.
  server.keepAliveTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) =>
        server.close((err) => (err ? reject(err) : resolve())),
      ),
  };
}
