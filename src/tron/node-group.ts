/**
 * Several node providers read as one, so that no single node answer decides what tronwatch
 * believes (TRON_NODE_URL lists them, TRON_NODE_QUORUM = k):
 *
 * - Every block is verified (tron/verify.ts) before it counts; a provider whose answer fails a
 *   check, errors after its retries, or stalls past its timeout is set aside (1 s doubling to
 *   60 s) and the next provider serves, with no gap and no block twice (the ingester still takes
 *   blocks strictly in order; only where they come from changes). A provider whose block the
 *   caller refused (distrust: the light client) pauses 1 s doubling per refusal in a row, which
 *   its later answers passing verification do not undo; only a block of its that the caller
 *   accepts does (noteRead).
 * - A block is returned only when k providers returned it with the same `fingerprint` (its
 *   blockID and what matching reads of its transactions and receipts). A block whose transaction
 *   root could not be checked (JSON only, see verify.ts item 4) also needs a second provider's
 *   agreement when one is configured and answering. Providers that disagree stall the block
 *   (QuorumDisagreementError: logged, reported, retried until they agree again).
 * - The heads are asked of every provider; an impossible head (below the committed cursor, or
 *   beyond what the chain can have produced since the last committed block's timestamp, one block
 *   per interval, with HEAD_SLACK_BLOCKS of slack; with the light client, since the newest block
 *   it accepted) is ignored and logged; the heads read up to are the k-th highest of the rest
 *   (k = 1: the highest), and the head a new watch activates at is the lowest of the rest near it
 *   (GroupHeads.activation): one provider cannot push it past the chain. A lagging provider is
 *   not asked for blocks it does not have.
 * - A provider whose 403s outlast the pauses they asked for is unhealthy (NodeClient.health) and
 *   not asked until its set-aside time runs out, then after the healthy ones.
 * Providers are preferred in the order given (your own java-tron first, say).
 *
 * - With the light client on, blocks are also read from the full node's view, above the
 *   solidified head (getFullNodeBlock, getBlockIfProduced): verified and agreed the same way, but
 *   their finality is not taken from the providers' heads (no solidFor check; the light client
 *   proves it, ingest/finality-gate.ts), and providers disagreeing on such a block while it is
 *   young is a fork being settled: asked again, not stalled.
 *
 * With one provider and k = 1 this is the plain client plus verification, as before.
 * Source for the failure model: issue "No false deposits"; README "Trusting the node".
 */
import type { Logger } from '../common/logger.js';
import type { Metrics } from '../common/metrics.js';
import { USDT_CONTRACT_HEX } from './address.js';
import {
  type ChainHeads,
  type NodeClient,
  type NodeSettings,
  nodeClientFor,
  type ProviderOptions,
  type SolidifiedBlock,
} from './node-client.js';
import { NodeError } from './node-error.js';
import { BlockCheckError, type VerifiedBlock, verifyBlock } from './verify.js';

/**
 * A head may run this many blocks (30 s on mainnet) past what chain time allows: block-time
 * jitter, and this host's clock running behind the chain's (keep it NTP-synced: a clock more than
 * ~30 s behind makes true heads look impossible and holds ingest until it is fixed; ahead only
 * loosens the bound).
 */
export const HEAD_SLACK_BLOCKS = 10;
/**
 * A block above a provider's last read solidified head is taken as solidified between head
 * polls only when it is at least this many block intervals old (NodeGroup.solidFor).
 */
export const SOLID_AGE_BLOCKS = 15;
/**
 * How far below the group's head (the k-th highest) a plausible head still counts for a new
 * watch's activation (getHeads `activation`), blocks (60 s on mainnet): twice HEAD_SLACK_BLOCKS,
 * so it covers what a lie can add within the plausibility bound (the slack, plus a block of
 * rounding and the slots missed since the bound's block) and an honest provider's usual lag of a
 * block or two. A provider further behind is lagging, not the truth under a lie: it is left out,
 * so it cannot make watches activate minutes early.
 */
export const ACTIVATION_WINDOW_BLOCKS = 2 * HEAD_SLACK_BLOCKS;
/** Set-aside backoff: 1 s doubling per consecutive failure, up to 60 s. */
const ASIDE_BASE_MS = 1_000;
const ASIDE_CAP_MS = 60_000;

/** The heads as the group stands by them (getHeads). */
export interface GroupHeads extends ChainHeads {
  /**
   * The head a watch created now activates at (ingest/chain-head.ts, stored as the chain head):
   * the LOWEST plausible head within ACTIVATION_WINDOW_BLOCKS below `head`, raised to the newest
   * block the caller accepted (noteRead). `head` (how far to read) is the k-th highest: one
   * provider at quorum 1 could otherwise claim a head up to the slack past the real one and move
   * every new watch's activation past its first transfers (a watch matches blocks strictly above
   * it: missed money). A head too low makes a watch activate a little early instead, which reports
   * a transfer made just before it existed (accepted: chain-head.ts MAX_EXTRAPOLATED_BLOCKS).
   */
  activation: number;
}

/** A block as the group returns it: verified, and which provider's answer it is. */
export interface VerifiedSolidifiedBlock extends SolidifiedBlock {
  verified: VerifiedBlock;
  /** The provider whose answer this is (NodeClient.name). */
  provider: string;
}

/** Providers returned different versions of one block: it stalls until they agree. */
export class QuorumDisagreementError extends Error {
  readonly retryable = false;
  constructor(
    readonly blockNumber: number,
    readonly versions: ReadonlyArray<{ providers: string[]; id: string }>,
  ) {
    super(
      `block ${blockNumber}: providers disagree (${versions
        .map((v) => `${v.providers.join('+')} say ${v.id.slice(16, 28)}…`)
        .join('; ')})`,
    );
    this.name = 'QuorumDisagreementError';
  }
}

/** One provider's state as health, status and the console show it. */
export interface ProviderState {
  /** Position in TRON_NODE_URL, from 0. */
  index: number;
  name: string;
  /** ok, set aside after failures (until `until`), or unhealthy (403s past their pauses). */
  state: 'ok' | 'set_aside' | 'unhealthy';
  /** Why, when not ok: a short class (network, verification: tx_id, impossible_head, …). */
  reason?: string;
  /** Epoch ms since when it is not ok. */
  since?: number;
  /** Epoch ms until which it is set aside. */
  until?: number;
  /** Last heads it reported that were accepted; -1 before. */
  solidified: number;
  head: number;
}

interface Member {
  index: number;
  client: NodeClient;
  /** Last accepted heads; -1 before any. */
  solidified: number;
  head: number;
  /** now() when those heads were accepted (0: never). */
  headsAt: number;
  /** performance.now() until which it is not asked (0: not set aside). */
  asideUntil: number;
  /** Consecutive failures (the set-aside backoff). */
  failures: number;
  /**
   * Consecutive refusals by the caller (distrust: the light client refused its block, or a check
   * only the caller makes failed). Unlike `failures`, an answer that passes verification does
   * not reset it (the refused block passed it too): only a block of this provider that the
   * caller accepts does (noteRead). Without that, a provider serving the true block with a
   * garbage signature would be set aside for 1 s after each refusal, forever, and asked first
   * again on every retry.
   */
  distrusts: number;
  /** The current episode's reason class and start, epoch ms (undefined: ok). */
  reason: string | undefined;
  since: number | undefined;
}

export interface NodeGroupOptions {
  /** The providers, in order of preference (at least one). */
  clients: NodeClient[];
  /** k: providers that must agree on a block and its receipts (1 … clients.length). Default 1. */
  quorum?: number;
  /** The chain's block interval, ms (3000 on mainnet): bounds plausible heads. */
  blockIntervalMs: number;
  logger?: Logger | undefined;
  metrics?: Metrics | undefined;
  /** Clock of the set-aside times, ms (monotonic). Default performance.now. */
  now?: () => number;
  /**
   * First set-aside pause, ms, doubling per consecutive failure up to 60 s. Default 1000. Tests
   * set 0 so that a lying provider is asked (and caught) on every block.
   */
  asideBaseMs?: number;
  /**
   * The chain's USDT contract, 41-hex (tron/address.ts usdtContractHexOf): mainnet's by default,
   * Nile's for the test network's ingester (issue 32 item 2).
   */
  usdtContractHex?: string;
}

/**
 * With several providers a failing one is retried at most this many times before the next one
 * serves (TRON_NODE_RETRIES is for a provider that is alone: it has no one to fail over to).
 */
const GROUP_RETRIES = 2;

/**
 * The one place the node group is built from the config (serve, ingest): one client per
 * TRON_NODE_URL provider (its own key, request cap and gRPC address), quorum TRON_NODE_QUORUM.
 */
export function nodeGroupFor(
  node: NodeSettings & { providers: ProviderOptions[]; quorum: number },
  opts: {
    blockIntervalMs: number;
    logger: Logger;
    metrics?: Metrics | undefined;
    /** The chain's USDT contract (41-hex); default mainnet's. */
    usdtContractHex?: string | undefined;
  },
): NodeGroup {
  const several = node.providers.length > 1;
  return new NodeGroup({
    clients: node.providers.map((provider) =>
      nodeClientFor(node, opts.logger, {
        provider,
        ...(several ? { retries: Math.min(node.retries, GROUP_RETRIES) } : {}),
      }),
    ),
    quorum: node.quorum,
    blockIntervalMs: opts.blockIntervalMs,
    logger: opts.logger,
    metrics: opts.metrics,
    ...(opts.usdtContractHex ? { usdtContractHex: opts.usdtContractHex } : {}),
  });
}

/**
 * How a block is read: from the solidity view (the default) or the full node's (`full`: the light
 * client's finality gate proves it), and whether "not there yet" is an answer (`ifPresent`:
 * caught up, the next block asked for directly) or a transient fault (catching up).
 */
interface ReadMode {
  full: boolean;
  ifPresent: boolean;
}

/** One version of a block and the providers that returned it. */
interface Vote {
  block: VerifiedSolidifiedBlock;
  members: Member[];
}

/** The version most providers returned (the first of equals). */
function largest(votes: Map<string, Vote>): Vote | undefined {
  let top: Vote | undefined;
  for (const v of votes.values()) if (!top || v.members.length > top.members.length) top = v;
  return top;
}

/** The k-th highest of `values` (k from 1). */
function kthHighest(values: number[], k: number): number {
  const sorted = [...values].sort((a, b) => b - a);
  return sorted[Math.min(k, sorted.length) - 1] ?? -1;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The short class of a failure, safe to show without authentication (no host, no key). */
function reasonClass(err: unknown): string {
  if (err instanceof BlockCheckError) return `verification: ${err.check}`;
  if (err instanceof QuorumDisagreementError) return 'disagreement';
  if (err instanceof NodeError) return err.kind;
  return 'error';
}

export class NodeGroup {
  private readonly members: Member[];
  readonly quorum: number;
  private readonly interval: number;
  private readonly logger: Logger | undefined;
  /** The chain's USDT contract, 41-hex (NodeGroupOptions.usdtContractHex). */
  private readonly usdt: string;
  private readonly metrics: Metrics | undefined;
  private readonly now: () => number;
  private readonly asideBaseMs: number;
  /** The heads last accepted, and when (performance.now()). */
  private lastHeads: { solidified: number; head: number; at: number } | undefined;
  /** The last committed block (noteCommitted): its number and timestamp (epoch ms). */
  private committed: { number: number; timestampMs: number } | undefined;
  /**
   * A known block and its time (noteAnchor: the cursor's block, the shipped mainnet checkpoint),
   * bounding heads before anything is committed, at `intervalMs` per block at most.
   */
  private anchor: { number: number; timestampMs: number; intervalMs: number } | undefined;
  /** Bumped whenever a provider's state changes (callers store the states when it moved). */
  stateVersion = 0;
  /**
   * Votes already collected for the block asked next while caught up (getBlockIfSolidified,
   * getBlockIfProduced: `full`).
   */
  private pending: { n: number; full: boolean; votes: Map<string, Vote> } | undefined;

  constructor(opts: NodeGroupOptions) {
    if (opts.clients.length === 0) throw new RangeError('a node group needs at least one provider');
    const k = opts.quorum ?? 1;
    if (!Number.isInteger(k) || k < 1 || k > opts.clients.length) {
      throw new RangeError(`quorum ${k} is not between 1 and ${opts.clients.length} providers`);
    }
    this.quorum = k;
    this.interval = opts.blockIntervalMs;
    this.logger = opts.logger;
    this.metrics = opts.metrics;
    this.now = opts.now ?? (() => performance.now());
    this.asideBaseMs = opts.asideBaseMs ?? ASIDE_BASE_MS;
    this.usdt = opts.usdtContractHex ?? USDT_CONTRACT_HEX;
    this.members = opts.clients.map((client, index) => ({
      index,
      client,
      solidified: -1,
      head: -1,
      headsAt: 0,
      asideUntil: 0,
      failures: 0,
      distrusts: 0,
      reason: undefined,
      since: undefined,
    }));
    for (const m of this.members) this.metrics?.nodeProvider(m.index, true);
  }

  /** Node requests sent by every provider's client (metrics, benches). */
  get requestCount(): number {
    return this.members.reduce((sum, m) => sum + m.client.requestCount, 0);
  }

  /** The providers' clients, in order. */
  get clients(): NodeClient[] {
    return this.members.map((m) => m.client);
  }

  /** The solidified head the group stands by: the k-th highest accepted (-1 before). */
  get solidifiedHead(): number {
    return this.lastHeads?.solidified ?? -1;
  }

  /** Every provider's state, in order. */
  states(): ProviderState[] {
    const now = this.now();
    const epoch = Date.now();
    return this.members.map((m) => {
      const h = m.client.health();
      const aside = m.asideUntil > now;
      const s: ProviderState = {
        index: m.index,
        name: m.client.name,
        state: !h.healthy ? 'unhealthy' : aside ? 'set_aside' : 'ok',
        solidified: m.solidified,
        head: m.head,
      };
      if (!h.healthy) {
        s.reason = 'forbidden';
        if (h.since !== undefined) s.since = h.since;
      } else if (aside) {
        if (m.reason !== undefined) s.reason = m.reason;
        if (m.since !== undefined) s.since = m.since;
        s.until = epoch + (m.asideUntil - now);
      }
      return s;
    });
  }

  /**
   * The ingester committed `number` (timestamp in epoch ms): heads below it are impossible, and
   * its time bounds how far the chain can be now.
   */
  noteCommitted(number: number, timestampMs: number, id = ''): void {
    this.committed = { number, timestampMs };
    this.committedId = { number, id: id.toLowerCase() };
  }

  /**
   * The block the chain goes on from, as far as the group checks it itself: block `number` + 1
   * must name `id` as its parent ('' = unknown: a new cursor). Checked on every provider's
   * answer (a failed check, so the next provider is asked at once), and again by the ingester.
   */
  private committedId: { number: number; id: string } | undefined;

  /**
   * A checkpoint (INGEST_START_BLOCK=number:blockID): a provider's answer for that block with
   * another id fails the 'checkpoint' check, and the next provider is asked.
   */
  expectCheckpoint(cp: { number: number; id: string } | undefined): void {
    this.checkpoint = cp ? { number: cp.number, id: cp.id.toLowerCase() } : undefined;
  }

  private checkpoint: { number: number; id: string } | undefined;

  /**
   * The highest head the chain can have now: the newest block committed or accepted by the caller
   * (noteCommitted, noteRead: with the light client the block read at the head, ~18 blocks above
   * the committed one, whose signed timestamp is fresher) plus one block per interval since its
   * timestamp, plus HEAD_SLACK_BLOCKS; undefined before a block is committed or read.
   * Chain time, not the last head seen: a provider that was behind and catches up jumps ahead of
   * its own last report, never ahead of the chain (on a replayed recording, whose timestamps are
   * old, the bound is loose, never wrong). The slack still lets a provider claim a head up to
   * ~10 blocks past the real one: what a new watch activates at is therefore not the highest
   * plausible head (getHeads `activation`).
   */
  private headBound(): number | undefined {
    const known =
      this.read && (!this.committed || this.read.number > this.committed.number)
        ? this.read
        : this.committed;
    const base = known ? { ...known, intervalMs: this.interval } : this.anchor;
    if (!base) return undefined;
    const ms = Math.max(0, Date.now() - base.timestampMs);
    return base.number + Math.ceil(ms / base.intervalMs) + HEAD_SLACK_BLOCKS;
  }

  /**
   * A block known to exist at `timestampMs` (epoch ms), with the chain making at most one block
   * per `intervalMs`: bounds the heads before the first commit (the first poll included), so a
   * fresh cursor never starts where a liar says. The ingester notes the shipped mainnet
   * checkpoint (tron/checkpoint.ts) before its first poll.
   */
  noteAnchor(number: number, timestampMs: number, intervalMs: number): void {
    this.anchor = { number, timestampMs, intervalMs };
  }

  /** Why `h` cannot be true, or undefined when it can. */
  private impossible(h: ChainHeads): string | undefined {
    if (h.solidified > h.head) return `solidified head ${h.solidified} above the head ${h.head}`;
    if (this.committed && h.head < this.committed.number) {
      return `head ${h.head} below the committed block ${this.committed.number}`;
    }
    const bound = this.headBound();
    if (bound !== undefined && h.head > bound) {
      return `head ${h.head} beyond what the chain can have produced (at most ${bound})`;
    }
    return undefined;
  }

  /**
   * Members to ask now, in order: those not set aside, the healthy ones first and then the
   * unhealthy ones (403s past their pauses) whose set-aside time ran out, so that a provider
   * that accepts requests again is seen to (its next refusal sets it aside again, up to 60 s);
   * if none, every one. An unhealthy provider left out for good would never be healthy again,
   * and a quorum that needs it would stall for ever (provider 3 dying after provider 2's 403s
   * ended, as in the soak's node phases).
   */
  private usable(): Member[] {
    const now = this.now();
    const free = this.members.filter((m) => m.asideUntil <= now);
    const ok = [
      ...free.filter((m) => m.client.health().healthy),
      ...free.filter((m) => !m.client.health().healthy),
    ];
    if (ok.length > 0) return ok;
    return [...this.members].sort((a, b) => a.asideUntil - b.asideUntil);
  }

  /**
   * A provider failed: set it aside with backoff, log the episode's first failure. `distrusted`
   * (the caller refused its block: distrust) also counts a refusal that verified answers do not
   * reset (Member.distrusts); the pause doubles with whichever count is higher. `reason`: the
   * state's reason class instead of reasonClass(err).
   */
  private setAside(m: Member, err: unknown, distrusted = false, reason?: string): void {
    m.failures++;
    if (distrusted) m.distrusts++;
    // An unhealthy provider (a ban, a revoked key) is asked again at 1 s doubling to 60 s even
    // when asideBaseMs is smaller: that setting is for liars, asked again on every block.
    const base = m.client.health().healthy
      ? this.asideBaseMs
      : Math.max(this.asideBaseMs, ASIDE_BASE_MS);
    const times = Math.max(m.failures, m.distrusts);
    const delay = Math.min(ASIDE_CAP_MS, base * 2 ** Math.min(16, times - 1));
    m.asideUntil = this.now() + delay;
    const cls = reason ?? reasonClass(err);
    if (m.reason === undefined || m.reason !== cls) {
      this.logger?.warn(
        { provider: m.client.name, reason: cls, err: message(err), retry_in_ms: delay },
        this.members.length > 1
          ? 'node provider set aside; the next provider serves'
          : 'node provider failed; asking again after a pause',
      );
    }
    m.reason = cls;
    m.since ??= Date.now();
    this.stateVersion++;
    this.metrics?.nodeProvider(m.index, false);
  }

  /**
   * A provider answered well (its answer passed verification): end its episode. Its distrusts
   * stay (Member.distrusts): what the caller refused passed verification too.
   */
  private restored(m: Member): void {
    m.failures = 0;
    m.asideUntil = 0;
    if (m.reason !== undefined) {
      this.logger?.info({ provider: m.client.name, was: m.reason }, 'node provider serves again');
      m.reason = undefined;
      m.since = undefined;
      this.stateVersion++;
      this.metrics?.nodeProvider(m.index, true);
    }
  }

  /**
   * The provider that served a block whose parent did not follow the cursor, or that the light
   * client refused (or that is wrong in another way only the caller sees): set it aside, so the
   * next attempt asks others first. The pause doubles per refusal in a row (1 s, 2 s, … 60 s)
   * even though the provider's next answers pass verification (the refused one did too), until
   * the caller accepts a block of this provider again (noteRead): a provider that serves the
   * true block with a garbage signature is thus asked less and less often, instead of first
   * again on every retry.
   * @param provider its name (NodeClient.name: TRON_NODE_URL's, as finalityGateFor names it too).
   * @param check the `check` label of tronwatch_node_answers_refused_total and the state's reason
   *   (`verification: <check>`), for a refusal that is no BlockCheckError (`sr_answer`: outvoted
   *   on the SR set, finality-gate.ts finalityGateFor). Default: the BlockCheckError's check, else
   *   `other`.
   */
  distrust(provider: string, err: unknown, check?: string): void {
    const m = this.members.find((x) => x.client.name === provider);
    if (m) {
      const label = check ?? (err instanceof BlockCheckError ? err.check : 'other');
      this.metrics?.nodeAnswerRefused(m.index, label);
      this.setAside(m, err, true, check === undefined ? undefined : `verification: ${check}`);
    }
  }

  /**
   * The caller accepted block `number` (timestamp epoch ms) that `provider` served: the light
   * client checked its SR signature (ingest/finality-gate.ts add), or, without it, it was
   * committed. Ends that provider's distrusts (distrust). The newest such block also bounds the
   * heads (headBound: the chain cannot be past it by more than one block per interval since its
   * timestamp, plus the slack) and is a floor of the activation head (getHeads): it exists, so
   * the chain's head is at least there.
   */
  noteRead(provider: string, number: number, timestampMs: number): void {
    const m = this.members.find((x) => x.client.name === provider);
    if (m) m.distrusts = 0;
    if (!this.read || number >= this.read.number) this.read = { number, timestampMs };
  }

  /** The newest block the caller accepted (noteRead), if any. */
  private read: { number: number; timestampMs: number } | undefined;

  /**
   * Both heads as the group stands by them: every usable provider is asked at once; failures
   * set it aside; impossible answers are ignored (logged, counted); of the rest, the k-th
   * highest solidified head and head (how far to read), and the head a new watch activates at
   * (GroupHeads.activation: the lowest of them near the head, never below the newest block the
   * caller accepted).
   * @throws NodeError('quorum', retryable) when fewer than k providers gave a plausible answer.
   */
  async getHeads(signal?: AbortSignal): Promise<GroupHeads> {
    const asked = this.usable();
    const results = await Promise.allSettled(asked.map((m) => m.client.getHeads(signal)));
    signal?.throwIfAborted();
    const accepted: ChainHeads[] = [];
    const failures: string[] = [];
    for (let i = 0; i < asked.length; i++) {
      const m = asked[i] as Member;
      const r = results[i] as PromiseSettledResult<ChainHeads>;
      if (r.status === 'rejected') {
        this.setAside(m, r.reason);
        failures.push(`${m.client.name}: ${message(r.reason)}`);
        continue;
      }
      const why = this.impossible(r.value);
      if (why) {
        this.metrics?.nodeHeadIgnored(m.index);
        this.setAside(m, new NodeError('malformed', `impossible head: ${why}`, false));
        failures.push(`${m.client.name}: ${why}`);
        continue;
      }
      m.solidified = r.value.solidified;
      m.head = r.value.head;
      m.headsAt = this.now();
      this.restored(m);
      accepted.push(r.value);
    }
    if (accepted.length < this.quorum) {
      throw new NodeError(
        'quorum',
        `heads: ${accepted.length} of ${this.quorum} providers needed answered (${failures.join('; ')})`,
        true,
      );
    }
    const solidified = kthHighest(
      accepted.map((h) => h.solidified),
      this.quorum,
    );
    const head = Math.max(
      solidified,
      kthHighest(
        accepted.map((h) => h.head),
        this.quorum,
      ),
    );
    this.lastHeads = { solidified, head, at: this.now() };
    const near = accepted.map((h) => h.head).filter((h) => h >= head - ACTIVATION_WINDOW_BLOCKS);
    const activation = Math.max(Math.min(head, ...near), this.read?.number ?? -1);
    return { solidified, head, activation };
  }

  /**
   * Solidified block `n`, verified and agreed by the quorum (module doc). Providers are asked in
   * order of preference, k at a time, more when some fail or disagree.
   * @throws BlockCheckError (permanent) when every answer failed verification; QuorumDisagreementError
   *   (permanent) when answers differ; NodeError('quorum', retryable) when too few providers answered.
   */
  async getSolidifiedBlock(n: number, signal?: AbortSignal): Promise<VerifiedSolidifiedBlock> {
    const b = await this.collect(n, new Map(), { full: false, ifPresent: false }, signal);
    if (!b) throw new NodeError('empty', `block ${n}: no provider has it solidified`, true);
    return b;
  }

  /**
   * Block `n` as the providers' full nodes have it, solidified or not (NodeClient
   * .getFullNodeBlock), verified and agreed by the quorum like a solidified one, but with no
   * check of the providers' solidified heads: for the light client's finality gate only
   * (ingest/finality-gate.ts), which proves from the SRs' signatures whether it is final. Used
   * while catching up (a block at or below the heads seen).
   * @throws as getSolidifiedBlock, except that providers disagreeing on a block younger than
   *   SOLID_AGE_BLOCKS intervals is NodeError('quorum', retryable): above the solidified head,
   *   providers on different branches is a fork being settled, not a lie.
   */
  async getFullNodeBlock(n: number, signal?: AbortSignal): Promise<VerifiedSolidifiedBlock> {
    const b = await this.collect(n, new Map(), { full: true, ifPresent: false }, signal);
    if (!b) throw new NodeError('empty', `block ${n}: no provider has it`, true);
    return b;
  }

  /**
   * Block `n` if the providers' full nodes have it (caught up with the light client on: the block
   * above the full-node head seen, asked for directly); undefined while fewer than k have it.
   * Answers collected for `n` are kept across calls, as getBlockIfSolidified does.
   * @throws as getFullNodeBlock.
   */
  async getBlockIfProduced(
    n: number,
    signal?: AbortSignal,
  ): Promise<VerifiedSolidifiedBlock | undefined> {
    return this.collectPending(n, true, signal);
  }

  /** getBlockIfSolidified and getBlockIfProduced: the next block, votes kept across calls. */
  private async collectPending(
    n: number,
    full: boolean,
    signal?: AbortSignal,
  ): Promise<VerifiedSolidifiedBlock | undefined> {
    if (this.pending?.n !== n || this.pending.full !== full) {
      this.pending = { n, full, votes: new Map() };
    }
    let b: VerifiedSolidifiedBlock | undefined;
    try {
      b = await this.collect(n, this.pending.votes, { full, ifPresent: true }, signal);
    } catch (err) {
      // A disagreement (or any failure) starts the next attempt afresh: votes kept from it would
      // block the block for good once the providers agree again.
      this.pending = undefined;
      throw err;
    }
    if (b) this.pending = undefined;
    return b;
  }

  /**
   * Block `n` if the providers have solidified it (caught up: asked for directly, see
   * NodeClient.getBlockIfSolidified); undefined while fewer than k have it. Answers already
   * collected for `n` are kept across calls, so a provider that had it is not asked again.
   * @throws as getSolidifiedBlock.
   */
  async getBlockIfSolidified(
    n: number,
    signal?: AbortSignal,
  ): Promise<VerifiedSolidifiedBlock | undefined> {
    return this.collectPending(n, false, signal);
  }

  /**
   * The block a transaction was packed into (NodeClient.getTransactionBlock), asked of the usable
   * providers in order of preference until one answers; a failing one is set aside as usual.
   * One provider's word is enough: it only says where to look, and that block is then read
   * through getSolidifiedBlock (verified, agreed by the quorum).
   * @returns undefined when the provider that answered does not know the transaction.
   * @throws NodeError('quorum', retryable) when no provider answered.
   */
  async getTransactionBlock(txId: string, signal?: AbortSignal): Promise<number | undefined> {
    const failures: string[] = [];
    for (const m of this.usable()) {
      try {
        const n = await m.client.getTransactionBlock(txId, signal);
        this.restored(m);
        return n;
      } catch (err) {
        signal?.throwIfAborted();
        this.setAside(m, err);
        failures.push(`${m.client.name}: ${message(err)}`);
      }
    }
    throw new NodeError(
      'quorum',
      `transaction ${txId}: no provider answered (${failures.join('; ')})`,
      true,
    );
  }

  /**
   * Read the heads of `members` now (failures ignored here: the next poll sets them aside) and
   * record the plausible ones.
   */
  private async refreshHeads(members: Member[], signal?: AbortSignal): Promise<void> {
    const results = await Promise.allSettled(members.map((m) => m.client.getHeads(signal)));
    signal?.throwIfAborted();
    results.forEach((r, i) => {
      const m = members[i] as Member;
      if (r.status !== 'fulfilled' || this.impossible(r.value)) return;
      m.solidified = r.value.solidified;
      m.head = r.value.head;
      m.headsAt = this.now();
    });
  }

  /**
   * How far `m`'s solidified head can be now: its last accepted solidified head plus one block
   * per interval since it was read (rounded up: the head moves on a fixed grid, so a block
   * solidified since is always covered); -1 when never read.
   */
  private solidClaim(m: Member): number {
    if (m.headsAt === 0 || m.solidified < 0) return -1;
    return m.solidified + Math.ceil(Math.max(0, this.now() - m.headsAt) / this.interval);
  }

  /**
   * Whether k of the providers that returned `won` have solidified block n by their own heads
   * (a non-empty answer of a solidity endpoint is not enough: a provider, or a proxy in front of
   * one, may serve a block before it is final). A provider covers n when its last read
   * solidified head reaches it, or, between head polls, when its head extrapolated at one block
   * per interval reaches it AND the block is at least SOLID_AGE_BLOCKS intervals old by its own
   * timestamp (mainnet solidifies a block once 19 of its 27 SRs built on it: 18 blocks, 54 s;
   * 15 leaves room for clock skew). When the claims fall short, their heads are read once more;
   * a provider whose head still does not reach n served the block early: set aside.
   * @returns those providers (none: the block is solid for the quorum).
   * With the light client on (TRON_LIGHT_CLIENT_CHECKPOINT), this check still runs and a block
   * must also pass ingest/finality-gate.ts: committed only once 19 of the 27 super
   * representatives have signed blocks on top of it, whatever the providers' heads say.
   */
  private async solidFor(won: Vote, n: number, signal?: AbortSignal): Promise<Member[]> {
    const oldEnough = won.block.ref.timestamp <= Date.now() - SOLID_AGE_BLOCKS * this.interval;
    const covers = (m: Member) => m.solidified >= n || (oldEnough && this.solidClaim(m) >= n);
    const covering = () => won.members.filter(covers).length;
    if (covering() >= this.quorum) return [];
    await this.refreshHeads(
      won.members.filter((m) => !covers(m)),
      signal,
    );
    if (covering() >= this.quorum) return [];
    const early: Member[] = [];
    for (const m of won.members) {
      if (covers(m)) continue;
      early.push(m);
      this.metrics?.nodeAnswerRefused(m.index, 'early_block');
      this.logger?.error(
        { provider: m.client.name, block_number: n, solidified: m.solidified },
        'node answer refused: a block served before the provider’s own solidified head reached it',
      );
      this.setAside(
        m,
        new NodeError(
          'inconsistent',
          `block ${n} served above its solidified head ${m.solidified}`,
          false,
        ),
      );
    }
    return early;
  }

  /** Ask one provider for block n and verify its answer. */
  private async ask(
    m: Member,
    n: number,
    mode: ReadMode,
    signal?: AbortSignal,
  ): Promise<VerifiedSolidifiedBlock | undefined> {
    const b = mode.full
      ? await m.client.getFullNodeBlock(n, mode.ifPresent, signal)
      : mode.ifPresent
        ? await m.client.getBlockIfSolidified(n, signal)
        : await m.client.getSolidifiedBlock(n, signal);
    if (!b) return undefined;
    const verified = verifyBlock(b.block, b.infos, b.exact, this.usdt);
    this.metrics?.blockVerified(verified.root);
    const cp = this.checkpoint;
    if (cp && n === cp.number && verified.id !== cp.id) {
      throw new BlockCheckError(
        'checkpoint',
        n,
        `blockID ${verified.id} is not the checkpoint's ${cp.id} (INGEST_START_BLOCK)`,
      );
    }
    const prev = this.committedId;
    if (prev && prev.id !== '' && n === prev.number + 1 && verified.parentHash !== prev.id) {
      throw new BlockCheckError(
        'parent',
        n,
        `parentHash ${verified.parentHash} is not the committed blockID of block ${prev.number} (${prev.id})`,
      );
    }
    return { ...b, verified, provider: m.client.name };
  }

  /**
   * Ask providers for block n until k of them agree (module doc). From the full node's view
   * (`mode.full`) the providers' solidified heads are not checked (the finality gate proves the
   * block), and a disagreement on a young block is retryable (getFullNodeBlock).
   * @returns the agreed block, or undefined when `mode.ifPresent` and too few have it yet.
   */
  private async collect(
    n: number,
    votes: Map<string, Vote>,
    mode: ReadMode,
    signal?: AbortSignal,
  ): Promise<VerifiedSolidifiedBlock | undefined> {
    const ifSolidified = mode.ifPresent;
    const headOf = (m: Member) => (mode.full ? m.client.fullHead : m.client.solidifiedHead);
    const asked = new Set<Member>();
    for (const v of votes.values()) for (const m of v.members) asked.add(m);
    const errors: Array<{ m: Member; err: unknown }> = [];
    let notYet = 0;
    let refreshed = false;
    for (;;) {
      const won = this.winner(votes);
      if (won) {
        const early = mode.full ? [] : await this.solidFor(won, n, signal);
        if (early.length === 0) return this.decided(n, votes, won, mode.full);
        // Served before those providers' solidified heads reached it: never committed early.
        // Their votes go; the others are asked.
        won.members = won.members.filter((m) => !early.includes(m));
        if (won.members.length === 0) votes.delete(won.block.verified.fingerprint);
        for (const m of early) {
          errors.push({
            m,
            err: new NodeError('inconsistent', `block ${n} served above its solidified head`, true),
          });
        }
        continue;
      }
      // How many more answers could settle it: the quorum's missing votes, or one more
      // confirmation of an unverifiable root.
      const top = largest(votes);
      const more = Math.max(1, this.quorum - (top?.members.length ?? 0));
      // A provider can serve n if it is not behind: its solidified head reaches n (or n - 1,
      // caught up: the block right after its head is asked for directly).
      const floor = ifSolidified ? n - 1 : n;
      const usable = this.usable().filter((m) => !asked.has(m));
      let candidates = usable.filter((m) => headOf(m) >= floor);
      if (candidates.length === 0 && usable.length > 0 && !refreshed) {
        // The others' heads are older than the block (they were not the ones asked lately):
        // read them once now rather than fail over a minute late, at the next head poll.
        refreshed = true;
        await this.refreshHeads(usable, signal);
        candidates = usable.filter((m) => headOf(m) >= floor);
      }
      if (candidates.length === 0) break;
      const batch = candidates.slice(0, more);
      const results = await Promise.allSettled(batch.map((m) => this.ask(m, n, mode, signal)));
      signal?.throwIfAborted();
      for (let i = 0; i < batch.length; i++) {
        const m = batch[i] as Member;
        const r = results[i] as PromiseSettledResult<VerifiedSolidifiedBlock | undefined>;
        asked.add(m);
        if (r.status === 'rejected') {
          if (r.reason instanceof BlockCheckError) {
            this.metrics?.nodeAnswerRefused(m.index, r.reason.check);
            this.logger?.error(
              {
                provider: m.client.name,
                block_number: n,
                check: r.reason.check,
                err: r.reason.message,
              },
              'node answer refused: it failed verification',
            );
          }
          this.setAside(m, r.reason);
          errors.push({ m, err: r.reason });
          continue;
        }
        if (!r.value) {
          notYet++;
          asked.delete(m); // asked again on the next call, when it may have it
          continue;
        }
        this.restored(m);
        const v = votes.get(r.value.verified.fingerprint);
        if (v) v.members.push(m);
        else votes.set(r.value.verified.fingerprint, { block: r.value, members: [m] });
      }
      if (notYet > 0 && ifSolidified) break;
    }
    const top = largest(votes);
    if (votes.size > 1 && mode.full) {
      // Above the solidified head providers may follow different branches for a slot or two (a
      // fork being settled): asked again, unless the block is old enough to be solid by now.
      const ts = Math.min(...[...votes.values()].map((v) => v.block.ref.timestamp));
      if (ts > Date.now() - SOLID_AGE_BLOCKS * this.interval) {
        throw new NodeError(
          'quorum',
          `block ${n}: providers follow different branches (${[...votes.values()]
            .map(
              (v) =>
                `${v.members.map((m) => m.client.name).join('+')} say ${v.block.verified.id.slice(16, 28)}…`,
            )
            .join('; ')}); not final, asking again`,
          true,
        );
      }
    }
    if (votes.size > 1) {
      this.metrics?.quorumDisagreement();
      throw new QuorumDisagreementError(
        n,
        [...votes.values()].map((v) => ({
          providers: v.members.map((m) => `provider ${m.index}`),
          id: v.block.verified.id,
        })),
      );
    }
    if (top && top.members.length >= this.quorum && errors.length + notYet === 0) {
      // A root that could not be proven (JSON only) and no second provider to vouch for it: never
      // committed on one provider's word. The block stalls (logged once, /healthz, metrics) until
      // exact bytes (gRPC) or a second provider's agreement can prove it.
      throw new BlockCheckError(
        'tx_root',
        n,
        `its transaction root cannot be proven from ${top.block.provider}'s JSON, and no second provider agrees: configure gRPC (#grpc=) for exact bytes, or a second provider`,
      );
    }
    if (ifSolidified && notYet > 0) return undefined;
    const checks = errors.filter((e) => e.err instanceof BlockCheckError);
    if (checks.length > 0 && checks.length === errors.length) throw checks[0]?.err;
    throw new NodeError(
      'quorum',
      `block ${n}: ${top?.members.length ?? 0} of ${this.quorum} providers needed agree (${errors
        .map((e) => `${e.m.client.name}: ${message(e.err)}`)
        .join('; ')})`,
      true,
    );
  }

  /**
   * The version that settles block n, if one does: k providers gave it, and its transaction
   * root was checked (exact bytes or JSON), or a second provider confirms it, or there is no
   * other provider to ask. The largest such version wins.
   */
  private winner(votes: Map<string, Vote>): Vote | undefined {
    let won: Vote | undefined;
    for (const v of votes.values()) {
      const count = v.members.length;
      if (count < this.quorum) continue;
      const proven = v.block.verified.root !== 'unverifiable' || count >= 2;
      if (proven && (!won || count > won.members.length)) won = v;
    }
    return won;
  }

  /**
   * Return the winning version; providers that gave another one are outvoted: set aside (a pause,
   * then asked again), so that they cost no request per block meanwhile. Above the solidified
   * head (`full`), a provider that gave ANOTHER block (another blockID) while it is young (under
   * SOLID_AGE_BLOCKS intervals old) is on another branch of a fork being settled, which is normal
   * there: counted as `other_branch` and logged as a warning, not as a lie. Everything else (the
   * same blockID with other contents, or a block old enough to be solid) is `outvoted`: an error.
   */
  private decided(
    n: number,
    votes: Map<string, Vote>,
    won: Vote,
    full = false,
  ): VerifiedSolidifiedBlock {
    for (const v of votes.values()) {
      if (v === won) continue;
      const otherBranch =
        full &&
        v.block.verified.id !== won.block.verified.id &&
        v.block.ref.timestamp > Date.now() - SOLID_AGE_BLOCKS * this.interval;
      for (const m of v.members) {
        const fields = {
          provider: m.client.name,
          block_number: n,
          id: v.block.verified.id,
          agreed: won.block.verified.id,
        };
        if (otherBranch) {
          this.metrics?.nodeAnswerRefused(m.index, 'other_branch');
          this.logger?.warn(
            fields,
            'node answer not used: the provider is on another branch at the tip (a fork being settled); the block the others agree on is read',
          );
        } else {
          this.metrics?.nodeAnswerRefused(m.index, 'outvoted');
          this.logger?.error(
            fields,
            'node answer refused: outvoted by the providers that agree on this block',
          );
        }
        this.setAside(
          m,
          new NodeError(
            'inconsistent',
            otherBranch ? `on another branch at block ${n}` : `outvoted on block ${n}`,
            false,
          ),
        );
      }
    }
    // What no header commits to is worth what the agreement is: k >= 2 providers, or one.
    const level = won.members.length >= 2 ? 'quorum' : 'provider';
    for (const t of won.block.verified.transfers) if (t.proof !== 'signed') t.proof = level;
    return won.block;
  }

  /** Close every provider's connections. */
  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.client.close()));
  }
}
