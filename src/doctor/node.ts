/**
 * `tronwatch doctor`: the node checks (every provider of TRON_NODE_URL) and the clock check.
 *
 * Per provider, one request at a time, one retry, and the provider's own max_rps:
 * - `node.reachable`: both heads answer (`/wallet/getnodeinfo`, or the two block headers where a
 *   provider does not serve it: NodeClient.getHeads).
 * - `node.mainnet`: the network, told by block ids (a block id is its number and the hash of its
 *   header, so no other chain serves the same id at the same height):
 *   1. block 0's id is mainnet's genesis id ({@link MAINNET_GENESIS_ID}): a live mainnet node;
 *      the Nile or Shasta genesis is named as such;
 *   2. otherwise, if a recorded mainnet block ({@link MAINNET_CHECKPOINTS}, the real blocks of
 *      test/fixtures/tron-mainnet/) at or below the node's solidified head has its mainnet id:
 *      a replay of recorded mainnet blocks (`tronwatch replay-node`, whose blocks outside the
 *      recording, block 0 included, are filler): passes, flagged as a replay;
 *   3. otherwise: another network (or a synthetic chain): fails.
 * - `node.solidified_head`: its number and time. On a live node, a head older than the expected
 *   solidification lag (19 blocks × TRON_BLOCK_INTERVAL_MS) by more than {@link NODE_BEHIND_MS}
 *   fails: the node is not in sync. A replay's blocks keep their recorded times: not judged.
 * - `node.budget`: its request budget (max_rps): a remote provider without a cap warns, as does
 *   TronGrid without a key; a refusal (429/403) during the checks fails.
 * - `node.grpc`: when the provider has `#grpc=`, the solidified head over gRPC GetBlockByNum2 must
 *   hash to the id the HTTP API gave. A single provider without it fails (the ingest role refuses
 *   to start: ingest/provable.ts), or warns with TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1.
 *
 *
 * The providers of TRON_TESTNET_NODE_URL (the test environment's chain, issue 32) get the same
 * checks as `testnet.reachable`, `testnet.network`, `testnet.solidified_head`, `testnet.budget`
 * and `testnet.grpc` (fixes name that variable; TronGrid without a key does not warn: its
 * testnets take none). `testnet.network` tells the network by block 0 the same way
 * (whichTestnet): Nile's genesis ({@link NILE_GENESIS_ID}) passes; mainnet's genesis, or a
 * recorded mainnet block at its id, fails ("TRON_TESTNET_NODE_URL points at mainnet"); Shasta's
 * fails (test watches read Nile's USDT contract); a tronwatch replay node (block 0 its filler)
 * whose solidified head is more than {@link REPLAY_LEAD_BLOCKS} below the recorded mainnet blocks
 * passes as the devnet's Nile-shaped chain (`npm run demo -- --testnet`), and warns nearer them
 * (it may be a mainnet replay before its recording); any other block 0 warns.
 *
 * The clock rule (`clock`, once, against the first reachable mainnet node, a live one first):
 * - the node's own time, its HTTP `Date` header (whole seconds): this machine's clock may differ
 *   from it by at most {@link CLOCK_DATE_TOLERANCE_MS} (plus the request's round trip);
 * - the chain's block times, on a live node only: the solidified head's timestamp plus the
 *   expected solidification lag estimates the time now; a head more than
 *   {@link CLOCK_CHAIN_TOLERANCE_MS} in this machine's future means the clock is behind (fail);
 *   one as far in its past means the clock is ahead OR the node is behind: when the node's Date
 *   agreed with our clock, it is the node (reported by `node.solidified_head`), otherwise fail;
 * - a replay's blocks carry their recorded (old) times, so there only the Date header counts;
 *   without one the clock cannot be checked (warn).
 * Why the clock matters: webhook signatures carry our timestamps, which receivers compare with
 * theirs (Standard Webhooks: 5 minutes), and event and attempt times are ours.
 */
import type { Config } from '../config.js';
import { unprovableReason } from '../ingest/provable.js';
import { NodeClient } from '../tron/node-client.js';
import { syntheticId } from '../tron/replay-ids.js';
import type { BlockRef } from '../tron/types.js';
import { blockIdFromRaw } from '../tron/verify.js';
import type { CheckResult } from './types.js';

/** Block 0 of TRON mainnet (java-tron's genesis; its number and timestamp are 0). */
export const MAINNET_GENESIS_ID =
  '00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc';

/** Block 0 of TRON's Nile testnet, the test environment's chain (TRON_TESTNET_NODE_URL). */
export const NILE_GENESIS_ID = '0000000000000000d698d4192c56cb6be724a558448e2684802de4d6cd8690dc';

/** Genesis ids of the public test networks, to name them when a node serves one. */
export const OTHER_GENESIS_IDS: Readonly<Record<string, string>> = {
  [NILE_GENESIS_ID]: 'the Nile testnet',
  '0000000000000000de1aa88295e1fcf982742f773e0419c5a9c134c994a9059e': 'the Shasta testnet',
};

/**
 * Real mainnet blocks with their ids, from the recorded data of test/fixtures/tron-mainnet/
 * (headers-78000000-78000099.json and chain/block-79072107.json, whose ids re-hash from their
 * headers: test/unit/fixtures.test.ts; test/unit/doctor.test.ts checks these against the files).
 */
export const MAINNET_CHECKPOINTS: ReadonlyArray<{ number: number; id: string }> = [
  { number: 78_000_000, id: '0000000004a62f80ea298b0e6cb1b59ef44234dee436a904127b5a412c5a4341' },
  { number: 78_000_099, id: '0000000004a62fe32f53b49b135166ce13fd718773406c1a367109f7742c88c1' },
  { number: 79_072_107, id: '0000000004b68b6be6d7223b1ecf2850f00f700292beeead2810c18e9e1548e2' },
];

/**
 * A replay node (block 0 its filler) whose solidified head is at most this many blocks below a
 * recorded mainnet block is taken as the replay of that recording before it starts (it starts
 * `--start-before` blocks early: 28 by default); farther below, its chain is something else (a
 * synthetic chain) and fails as not mainnet. 10,000 blocks: about 8 hours of mainnet.
 */
export const REPLAY_LEAD_BLOCKS = 10_000;

/** Blocks between mainnet's head and its solidified head (2/3 + 1 of 27 super representatives). */
export const SOLIDIFICATION_LAG_BLOCKS = 19;
/** Beyond the expected lag, how much older a live node's solidified head may be, ms. */
export const NODE_BEHIND_MS = 120_000;
/** The clock against the node's Date header: largest difference, ms (beyond the round trip). */
export const CLOCK_DATE_TOLERANCE_MS = 5_000;
/** The clock against the chain's block times: largest difference, ms. */
export const CLOCK_CHAIN_TOLERANCE_MS = 30_000;

/** What the node checks learnt of one provider, for the clock check. */
export interface NodeFindings {
  name: string;
  /** 'live': block 0 is mainnet's genesis; 'replay': recorded mainnet blocks; undefined: neither. */
  mainnet: 'live' | 'replay' | undefined;
  head: BlockRef | undefined;
  /** The node's HTTP Date header (NodeClient.serverDate), when it sent one. */
  serverDate: NodeClient['serverDate'];
}

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

function ago(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7_200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} days`;
}

function isLoopback(url: string): boolean {
  try {
    const h = new URL(url).hostname;
    return h === 'localhost' || h === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(h);
  } catch {
    return false;
  }
}

/**
 * Which network `client` serves (see the module doc).
 * @returns the verdict and its one-line reason.
 * @throws NodeError when the node cannot be asked.
 */
async function whichNetwork(
  client: NodeClient,
  solidified: number,
  signal: AbortSignal,
): Promise<{ mainnet: 'live' | 'replay' | undefined; detail: string; pending?: boolean }> {
  const genesis = await client.getSolidifiedHeader(0, signal);
  if (genesis?.id === MAINNET_GENESIS_ID) {
    return { mainnet: 'live', detail: "block 0 is mainnet's genesis block" };
  }
  const other = genesis ? OTHER_GENESIS_IDS[genesis.id] : undefined;
  if (other) return { mainnet: undefined, detail: `block 0 is the genesis block of ${other}` };
  for (const cp of MAINNET_CHECKPOINTS) {
    if (cp.number > solidified) continue;
    const b = await client.getSolidifiedHeader(cp.number, signal);
    if (b?.id === cp.id) {
      return {
        mainnet: 'replay',
        detail: `block ${cp.number} is mainnet's (recorded id), block 0 is not mainnet's genesis: a replay of recorded mainnet blocks`,
      };
    }
  }
  const next = MAINNET_CHECKPOINTS.find((cp) => cp.number > solidified);
  if (
    genesis?.id === syntheticId(0) &&
    next !== undefined &&
    next.number - solidified <= REPLAY_LEAD_BLOCKS
  ) {
    // A tronwatch replay node before its recording: its served blocks are fillers so far.
    return {
      mainnet: 'replay',
      pending: true,
      detail: `a tronwatch replay node (block 0 is its filler block, not mainnet's genesis) whose recorded blocks are not solidified yet: its solidified head ${solidified} is below the recorded mainnet block ${next.number}, so nothing it serves can be checked against mainnet's ids until then`,
    };
  }
  return {
    mainnet: undefined,
    detail: `block 0 is ${genesis ? genesis.id : 'not served'} (mainnet's genesis is ${MAINNET_GENESIS_ID}) and no recorded mainnet block matches`,
  };
}

/**
 * Which network a provider of TRON_TESTNET_NODE_URL serves (the module doc, "testnet.network"):
 * Nile's genesis passes; mainnet's genesis, or a recorded mainnet block at its id, fails (it
 * points at mainnet); Shasta's fails (test watches read Nile's USDT contract); a tronwatch
 * replay node (block 0 its filler) serving a chain far below the recorded mainnet blocks passes,
 * as the devnet's stand-in for Nile; near them it warns (it may be a mainnet replay before its
 * recording); any other block 0 warns.
 * @throws NodeError when the node cannot be asked.
 */
async function whichTestnet(
  client: NodeClient,
  solidified: number,
  signal: AbortSignal,
): Promise<{
  kind: 'live' | 'replay' | undefined;
  status: CheckResult['status'];
  detail: string;
  fix?: string;
}> {
  const toNile =
    'point TRON_TESTNET_NODE_URL at a Nile node (https://nile.trongrid.io, or your own java-tron on Nile), or unset it';
  const genesis = await client.getSolidifiedHeader(0, signal);
  if (genesis?.id === NILE_GENESIS_ID) {
    return { kind: 'live', status: 'pass', detail: "block 0 is the Nile testnet's genesis block" };
  }
  if (genesis?.id === MAINNET_GENESIS_ID) {
    return {
      kind: undefined,
      status: 'fail',
      detail:
        "TRON_TESTNET_NODE_URL points at mainnet: block 0 is mainnet's genesis block (test watches would see real deposits as test events)",
      fix: toNile,
    };
  }
  const other = genesis ? OTHER_GENESIS_IDS[genesis.id] : undefined;
  if (other) {
    return {
      kind: undefined,
      status: 'fail',
      detail: `block 0 is the genesis block of ${other}, not Nile's: test watches read USDT at Nile's contract, so no USDT deposit would be seen`,
      fix: toNile,
    };
  }
  for (const cp of MAINNET_CHECKPOINTS) {
    if (cp.number > solidified) continue;
    const b = await client.getSolidifiedHeader(cp.number, signal);
    if (b?.id === cp.id) {
      return {
        kind: undefined,
        status: 'fail',
        detail: `TRON_TESTNET_NODE_URL points at mainnet: block ${cp.number} is mainnet's (recorded id), a replay of recorded mainnet blocks`,
        fix: toNile,
      };
    }
  }
  if (genesis?.id === syntheticId(0)) {
    const next = MAINNET_CHECKPOINTS.find((cp) => cp.number > solidified);
    if (next !== undefined && next.number - solidified <= REPLAY_LEAD_BLOCKS) {
      return {
        kind: 'replay',
        status: 'warn',
        detail: `a tronwatch replay node (block 0 is its filler block) whose solidified head ${solidified} is just below the recorded mainnet block ${next.number}: it may be a replay of mainnet before its recording`,
        fix: `run doctor again once its solidified head passes ${next.number} (a mainnet replay then fails); ${toNile}`,
      };
    }
    return {
      kind: 'replay',
      status: 'pass',
      detail:
        'a tronwatch replay node (block 0 is its filler block, not a real genesis) serving a chain far from the recorded mainnet blocks: the devnet standing in for Nile (demo --testnet, tests), not Nile itself',
    };
  }
  return {
    kind: undefined,
    status: 'warn',
    detail: `block 0 is ${genesis ? genesis.id : 'not served'}: neither Nile's genesis (${NILE_GENESIS_ID}) nor a tronwatch replay node`,
    fix: `test watches read USDT at Nile's contract; ${toNile}`,
  };
}

/** The chain whose providers {@link checkProvider} checks. */
export type CheckedChain = 'mainnet' | 'testnet';

/**
 * The checks of one provider (see the module doc), in order: reachable, network, solidified
 * head, budget, gRPC. After a failure to reach it, the rest are skipped.
 * @param chain `mainnet`: a provider of TRON_NODE_URL, checks `node.*`; `testnet`: one of
 *   TRON_TESTNET_NODE_URL (cfg.testnetNode), checks `testnet.*` (the network check is
 *   `testnet.network`). The findings' `mainnet` is only set for mainnet.
 */
export async function checkProvider(
  cfg: Config,
  p: Config['node']['providers'][number],
  index: number,
  timeoutMs: number,
  chain: CheckedChain = 'mainnet',
): Promise<{ results: CheckResult[]; findings: NodeFindings }> {
  const testnet = chain === 'testnet';
  const pre = testnet ? 'testnet' : 'node';
  const netCheck = testnet ? 'testnet.network' : 'node.mainnet';
  const variable = testnet ? 'TRON_TESTNET_NODE_URL' : 'TRON_NODE_URL';
  const target = p.name;
  const results: CheckResult[] = [];
  const add = (r: Omit<CheckResult, 'target'>) => results.push({ ...r, target });
  const findings: NodeFindings = {
    name: p.name,
    mainnet: undefined,
    head: undefined,
    serverDate: undefined,
  };
  const client = new NodeClient({
    url: p.url,
    apiKey: p.apiKey,
    timeoutMs,
    // One retry: a refusal (429/403) pauses as the provider asks, then the retry shows whether
    // the budget holds (node.budget); a node that is down costs one more short attempt.
    retries: 1,
    connections: 1,
    maxRps: p.maxRps,
    grpc: p.grpc,
    grpcFull: p.grpcFull,
    name: p.name,
  });
  const signal = AbortSignal.timeout(timeoutMs * 8);
  const which = `provider ${index + 1} of ${variable}`;
  const noGrpc = () => withoutGrpc(cfg, chain);
  try {
    let heads: { head: number; solidified: number };
    let head: BlockRef;
    try {
      heads = await client.getHeads(signal);
      head = await client.getSolidifiedHead(signal);
    } catch (err) {
      add({
        check: `${pre}.reachable`,
        status: 'fail',
        detail: `no answer: ${errText(err)}`,
        fix: `start the node or correct ${which}; a refused key (401/403) needs its own #key=`,
      });
      for (const check of [netCheck, `${pre}.solidified_head`, `${pre}.budget`]) {
        add({ check, status: 'skip', detail: 'the node did not answer' });
      }
      add(
        noGrpc() ?? {
          check: `${pre}.grpc`,
          status: 'skip',
          detail: 'the node did not answer',
        },
      );
      return { results, findings };
    }
    findings.head = head;
    findings.serverDate = client.serverDate;
    add({
      check: `${pre}.reachable`,
      status: 'pass',
      detail: `answers: head ${heads.head}, solidified head ${heads.solidified} (${heads.head - heads.solidified} blocks behind it)`,
    });

    // What the network check found: a live node of the expected network, a replay, or neither.
    let kind: 'live' | 'replay' | undefined;
    try {
      if (testnet) {
        const net = await whichTestnet(client, head.number, signal);
        kind = net.kind;
        add({
          check: netCheck,
          status: net.status,
          detail: net.detail,
          ...(net.fix ? { fix: net.fix } : {}),
        });
      } else {
        const net = await whichNetwork(client, head.number, signal);
        findings.mainnet = net.mainnet;
        kind = net.mainnet;
        add(
          net.pending
            ? {
                check: netCheck,
                status: 'warn',
                detail: net.detail,
                fix: 'let the replay node reach its recorded blocks (or start it with a smaller --start-before), then run doctor again',
              }
            : net.mainnet
              ? { check: netCheck, status: 'pass', detail: net.detail }
              : {
                  check: netCheck,
                  status: 'fail',
                  detail: `not TRON mainnet: ${net.detail}`,
                  fix: `point ${which} at a mainnet node (https://api.trongrid.io, or your own java-tron on mainnet)`,
                },
        );
      }
    } catch (err) {
      add({
        check: netCheck,
        status: 'fail',
        detail: `could not read block 0: ${errText(err)}`,
        fix: `the node must serve /walletsolidity/getblock; check ${which}`,
      });
    }

    const lagMs = SOLIDIFICATION_LAG_BLOCKS * cfg.ingest.blockIntervalMs;
    const when = new Date(head.timestamp).toISOString();
    const age = Date.now() - head.timestamp;
    if (kind === 'replay') {
      add({
        check: `${pre}.solidified_head`,
        status: 'pass',
        detail: `block ${head.number} of ${when} (a replay: its blocks keep their recorded times)`,
      });
    } else if (kind === 'live' && age - lagMs > NODE_BEHIND_MS) {
      const dated =
        findings.serverDate && Math.abs(dateOffset(findings.serverDate)) <= CLOCK_DATE_TOLERANCE_MS;
      add({
        check: `${pre}.solidified_head`,
        status: 'fail',
        detail: `block ${head.number} of ${when} is ${ago(age)} old (about ${ago(lagMs)} expected): the node is behind${dated ? '' : ", or this machine's clock is ahead (see the clock check)"}`,
        fix: `wait until the node has synced, or put another provider first in ${variable}`,
      });
    } else {
      add({
        check: `${pre}.solidified_head`,
        status: kind ? 'pass' : 'skip',
        detail: `block ${head.number} of ${when} (${ago(age)} ${age >= 0 ? 'ago' : 'ahead'})${kind ? '' : `; not judged: not ${testnet ? 'Nile' : 'mainnet'}`}`,
      });
    }

    const remote = !isLoopback(p.url);
    const trongrid = /(^|\.)trongrid\.io$/.test(new URL(p.url).hostname);
    if (client.refusedCount > 0) {
      add({
        check: `${pre}.budget`,
        status: 'fail',
        detail: `refused ${client.refusedCount} of our ${client.requestCount} requests (HTTP 429/403) at max_rps ${p.maxRps || 'unlimited'}`,
        fix: `lower #max_rps= of ${which} to the provider's limit, or give it a key with a higher one (#key=)`,
      });
    } else if (p.maxRps === 0 && remote) {
      add({
        check: `${pre}.budget`,
        status: 'warn',
        detail:
          'no request cap (max_rps 0) on a remote provider: catching up, its limit will refuse requests',
        fix: `set #max_rps=N on ${which}${testnet ? '' : ' (or TRON_NODE_MAX_RPS)'} to the provider's limit`,
      });
    } else if (trongrid && !p.apiKey && !testnet) {
      // TronGrid's testnets (Nile, Shasta) take no API key.
      add({
        check: `${pre}.budget`,
        status: 'warn',
        detail: `TronGrid without an API key (max_rps ${p.maxRps}): keyless requests get the lowest limits`,
        fix: `create a key at trongrid.io and add it as #key= (or TRON_API_KEY with a single provider)`,
      });
    } else {
      // Two requests per block (the block and its receipts); the client's window is 1.1 s.
      const hours = p.maxRps > 0 ? (28_800 * 2 * 1.1) / p.maxRps / 3600 : 0;
      add({
        check: `${pre}.budget`,
        status: 'pass',
        detail:
          p.maxRps > 0
            ? `max_rps ${p.maxRps}: a day of ${testnet ? 'blocks' : 'mainnet'} (28,800 blocks) is caught up in about ${hours.toFixed(1)} h`
            : 'no request cap (a node on this machine)',
      });
    }

    if (!p.grpc) {
      add(
        noGrpc() ?? {
          check: `${pre}.grpc`,
          status: 'skip',
          detail: 'no #grpc=: transaction roots are checked from JSON, or by the quorum',
        },
      );
    } else {
      const at = `${p.grpc.tls ? 'grpcs' : 'grpc'}://${p.grpc.host}:${p.grpc.port}`;
      const full = p.grpcFull ?? p.grpc;
      const fullAt = `${full.tls ? 'grpcs' : 'grpc'}://${full.host}:${full.port}`;
      try {
        const exact = await client.getExactBlock(head.number, signal);
        const id = blockIdFromRaw(BigInt(head.number), exact.headerRaw);
        // The light client reads above the solidified head from the full node's service
        // (protocol.Wallet, #grpc_full=): it must serve the same block.
        const fullId =
          id === head.id
            ? await client.getFullNodeBlock(head.number, false, signal).then(
                (b) =>
                  b?.exact
                    ? blockIdFromRaw(BigInt(head.number), b.exact.headerRaw)
                    : new Error(`no block ${head.number} as exact bytes`),
                (err: unknown) => err as Error,
              )
            : undefined;
        add(
          fullId instanceof Error
            ? {
                check: `${pre}.grpc`,
                status: 'fail',
                detail: `${fullAt} (the full node's protocol.Wallet, read above the solidified head): ${errText(fullId)}`,
                fix: `give ${which} its full node's gRPC address with #grpc_full=grpc://host:port (50051 on java-tron; TronGrid's is the default)`,
              }
            : fullId !== undefined && fullId !== id
              ? {
                  check: `${pre}.grpc`,
                  status: 'fail',
                  detail: `${fullAt} (the full node's protocol.Wallet) serves block ${head.number} as ${fullId}, the HTTP API as ${head.id}`,
                  fix: `#grpc_full= of ${which} must be the same node's full node gRPC address`,
                }
              : id === head.id
                ? {
                    check: `${pre}.grpc`,
                    status: 'pass',
                    detail: `${at} serves block ${head.number} with the id the HTTP API gave${fullAt === at ? '' : `, and so does the full node's ${fullAt}`}`,
                  }
                : {
                    check: `${pre}.grpc`,
                    status: 'fail',
                    detail: `${at} serves block ${head.number} as ${id}, the HTTP API as ${head.id}`,
                    fix: `#grpc= of ${which} must be the same node's gRPC address`,
                  },
        );
      } catch (err) {
        add({
          check: `${pre}.grpc`,
          status: 'fail',
          detail: `${at}: ${errText(err)}`,
          fix: `correct #grpc= of ${which} (the node's gRPC host:port; grpcs:// for TLS), or remove it`,
        });
      }
    }
    return { results, findings };
  } finally {
    await client.close();
  }
}

/**
 * `node.grpc` (`testnet.grpc`) of a configuration that cannot prove blocks (one provider, no gRPC:
 * ingest/provable.ts; the ingest role checks TRON_TESTNET_NODE_URL's providers the same way):
 * fail, or warn when TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1 lets the ingest role start with it
 * anyway; undefined when the providers can prove blocks.
 */
function withoutGrpc(
  cfg: Config,
  chain: CheckedChain = 'mainnet',
): Omit<CheckResult, 'target'> | undefined {
  const node = chain === 'testnet' ? cfg.testnetNode : cfg.node;
  if (!node) return undefined;
  let why = unprovableReason(node);
  if (!why) return undefined;
  const check = chain === 'testnet' ? 'testnet.grpc' : 'node.grpc';
  const variable = chain === 'testnet' ? 'TRON_TESTNET_NODE_URL' : 'TRON_NODE_URL';
  // unprovableReason names TRON_NODE_URL: the same rule, said of the test network's variable.
  if (chain === 'testnet') {
    why = `TRON_TESTNET_NODE_URL has one provider (${node.providers[0]?.name}) and no gRPC for it: one provider's JSON cannot prove a block whose JSON hides bytes`;
  }
  const fix =
    chain === 'testnet'
      ? `add #grpc=grpc://host:port to ${variable} (its gRPC address; nile.trongrid.io gets grpc.nile.trongrid.io:50052 by default), or a second provider`
      : 'add #grpc=grpc://host:port to TRON_NODE_URL (its gRPC address), or a second provider with TRON_NODE_QUORUM=2';
  return node.allowUnprovenSingleProvider
    ? {
        check,
        status: 'warn',
        detail: `TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1 (development only): ${why}`,
        fix,
      }
    : {
        check,
        status: 'fail',
        detail: `the ingest role refuses to start: ${why}`,
        fix,
      };
}

/**
 * `node.providers` (issue 36 item 5; docs/trusting-the-node.md#held-events), from the config
 * alone: a USDT Transfer inside another contract's call rests on receipts no header commits to
 * (`proof: provider` when one provider read it), and its delivery is held until max(2,
 * TRON_NODE_QUORUM) providers report the same log. Warns when that can never happen (one
 * provider: such deliveries stay held) or when TRON_DELIVER_PROVIDER_PROOF=1 sends them on one
 * provider's word; passes otherwise.
 */
export function checkProviderProof(cfg: Config): CheckResult {
  const check = 'node.providers';
  const n = cfg.node.providers.length;
  const needed = Math.max(2, cfg.node.quorum);
  const what =
    "a USDT transfer made inside another contract's call (routers, batch senders, contract wallets) rests on receipts no block header commits to";
  if (cfg.node.deliverProviderProof) {
    return {
      check,
      status: 'warn',
      detail: `TRON_DELIVER_PROVIDER_PROOF=1: ${what}, and one provider's word is delivered as it is (proof: provider): a dishonest or broken provider can make a receiver credit a deposit that does not exist`,
      fix:
        n < needed
          ? 'add a second provider to TRON_NODE_URL and unset TRON_DELIVER_PROVIDER_PROOF: such deliveries then wait for the second provider to confirm them (docs/trusting-the-node.md#held-events)'
          : 'unset TRON_DELIVER_PROVIDER_PROOF: such deliveries then wait for a second provider to confirm them (docs/trusting-the-node.md#held-events)',
    };
  }
  if (n < needed) {
    return {
      check,
      status: 'warn',
      detail: `one provider (TRON_NODE_URL): ${what}; with one provider nothing can confirm it, so such an event is stored and listed but its delivery stays held, never sent`,
      fix: "add a second provider to TRON_NODE_URL (your own java-tron beside TronGrid, or two public providers): held deliveries are then confirmed and sent; TRON_DELIVER_PROVIDER_PROOF=1 sends them on one provider's word instead (the risk: docs/trusting-the-node.md#held-events)",
    };
  }
  return {
    check,
    status: 'pass',
    detail: `${n} providers: a transfer that rests on receipts is delivered once ${needed} of them report the same Transfer log (held until then)`,
  };
}

/**
 * How far this machine's clock is ahead of the node's (negative: behind), ms, from its Date
 * header: the header has whole seconds, so in sync, local − server lies in [0, 1 s + round trip),
 * which counts as 0.
 */
function dateOffset(d: NonNullable<NodeClient['serverDate']>): number {
  const skew = d.localMs - d.serverMs;
  return skew < 0 ? skew : Math.max(0, skew - 1000 - d.rttMs);
}

/** The clock check (see the module doc) against the first reachable mainnet node. */
export function checkClock(cfg: Config, nodes: readonly NodeFindings[]): CheckResult {
  const ref =
    nodes.find((n) => n.mainnet === 'live' && n.head) ??
    nodes.find((n) => n.mainnet === 'replay' && n.head);
  if (!ref?.head) {
    return {
      check: 'clock',
      status: 'skip',
      detail: 'no reachable mainnet node to compare with',
    };
  }
  const target = ref.name;
  const notes: string[] = [];
  const fix = 'synchronise the clock (NTP: timedatectl set-ntp true, or chrony)';
  let dateAgrees = false;
  const d = ref.serverDate;
  if (d) {
    const off = dateOffset(d);
    if (Math.abs(off) > CLOCK_DATE_TOLERANCE_MS) {
      return {
        check: 'clock',
        target,
        status: 'fail',
        detail: `this machine's clock is ${ago(off)} ${off > 0 ? 'ahead of' : 'behind'} the node's (its HTTP Date header)`,
        fix,
      };
    }
    dateAgrees = true;
    notes.push(
      `agrees with the node's time (HTTP Date) within ${CLOCK_DATE_TOLERANCE_MS / 1000} s`,
    );
  }
  if (ref.mainnet === 'live') {
    const lagMs = SOLIDIFICATION_LAG_BLOCKS * cfg.ingest.blockIntervalMs;
    const off = Date.now() - ref.head.timestamp - lagMs;
    if (off < -CLOCK_CHAIN_TOLERANCE_MS) {
      return {
        check: 'clock',
        target,
        status: 'fail',
        detail: `the solidified head (block ${ref.head.number}) is dated ${ago(-off)} in this machine's future: the clock is behind the chain`,
        fix,
      };
    }
    if (off > CLOCK_CHAIN_TOLERANCE_MS && !dateAgrees) {
      return {
        check: 'clock',
        target,
        status: 'fail',
        detail: `the clock is ${ago(off)} ahead of the chain's block times (or the node is behind; it sent no Date header to tell)`,
        fix: `${fix}; if the clock is right, see the node's solidified head`,
      };
    }
    if (off <= CLOCK_CHAIN_TOLERANCE_MS) {
      notes.push(
        `agrees with the chain's block times within ${CLOCK_CHAIN_TOLERANCE_MS / 1000} s (solidification lag ${SOLIDIFICATION_LAG_BLOCKS} blocks)`,
      );
    }
  } else if (!d) {
    return {
      check: 'clock',
      target,
      status: 'warn',
      detail:
        "not checked: the node replays recorded blocks (their times are the recording's) and sent no Date header",
      fix: 'check against a live mainnet node',
    };
  } else {
    notes.push('block times not compared: the node replays recorded blocks');
  }
  return { check: 'clock', target, status: 'pass', detail: notes.join('; ') };
}
