/**
 * `tronwatch checkpoint`: a fresh SR-set checkpoint from the configured providers, checked
 * against each other and against the chain's own signatures, for an operator to review and pin.
 *
 * Per provider (java-tron HTTP API, JSON with hex addresses):
 * - `/walletsolidity/getnowblock`: its solidified head; the checkpoint block is the lowest head
 *   any provider reports (or `at`, which must be at or below every head), and
 *   `/walletsolidity/getblockbynum` must give the same blockID from every provider;
 * - `/wallet/listwitnesses`: the SRs with `isJobs` true are the active set (java-tron sets isJobs
 *   on the active SRs at each maintenance, `MaintenanceManager.doMaintenance`);
 * - `/wallet/getaccount` of each active SR: its signing key, `witness_permission.keys[0].address`,
 *   or its own address without one (`AccountCapsule.getWitnessPermissionAddress`);
 * - `/wallet/getnextmaintenancetime`: `{num}`, ms;
 * - `/wallet/getchainparameters`: `getMaintenanceTimeInterval`, ms (6 h on mainnet and Nile).
 * Every provider that answers must agree on each of these (one that fails does not count), and at
 * least `quorum` must answer. Unanimity, not a majority, because a checkpoint is trusted once and
 * then never checked again (trust on first use, or a file an operator pins): a provider that
 * disagrees then is a reason for an operator to look before anything rests on it, and costs
 * only a delayed first start (the gate retries). What the light client asks later, while it
 * follows the chain (an SR new after a maintenance: newSrKeyFromProviders), is taken by majority
 * instead (issue 36 item 2), since one provider must not stall ingest at every maintenance, and
 * the SRs' signatures check what it learns (a newcomer counts only once 19 known SRs built on
 * its blocks).
 * Then the chain itself is asked: the 40 blocks up to the checkpoint block
 * (`/wallet/getblockbylimitnext`, one provider), chained by parent hashes to the agreed blockID,
 * must each be signed by its producer's reported key, and their slots give the schedule order
 * (checkpoint.ts recoverSigners). A window that crosses a maintenance is refused: ask again later.
 */
import { request } from 'undici';
import { parseNodeJson } from '../json.js';
import type { BlockJson } from '../types.js';
import { recoverSigners } from './checkpoint.js';
import { type SignedHeader, signedHeaderFromJson } from './header.js';
import {
  ACTIVE_SR_COUNT,
  type Checkpoint,
  CheckpointError,
  parseCheckpoint,
  type SrEntry,
} from './sr-set.js';

/** A provider to ask: base URL, a name for messages, an optional TronGrid key. */
export interface CheckpointProvider {
  url: string;
  name: string;
  apiKey?: string | undefined;
}

/** Options of buildCheckpoint. */
export interface BuildCheckpointOptions {
  /** Providers that must answer (and agree). Default 1. */
  quorum?: number;
  /** Deadline of one request, ms. Default 10,000. */
  timeoutMs?: number;
  /** Network name written into the checkpoint. Default `mainnet`. */
  network?: string;
  /** Blocks read back to learn the schedule order. Default 40 (27 slots plus missed ones). */
  window?: number;
  /**
   * The checkpoint block's number (ingest's cursor, when tronwatch takes a checkpoint at its
   * first start): it must be solidified on every provider and in the current maintenance epoch
   * (the SR list the providers report is the current one). Default: the lowest solidified head.
   */
  at?: number;
  /**
   * The chain's maintenance interval, ms, written into the checkpoint. Default: the providers'
   * `getMaintenanceTimeInterval` chain parameter (agreed as the rest).
   */
  maintenanceIntervalMs?: number;
  /** Written before the checkpoint's `source` (why it was built). */
  sourcePrefix?: string;
  signal?: AbortSignal;
}

/** How a provider's answer was read, for the error messages. */
async function post(
  p: CheckpointProvider,
  path: string,
  body: unknown,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<unknown> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (p.apiKey) headers['TRON-PRO-API-KEY'] = p.apiKey;
  const timeout = AbortSignal.timeout(timeoutMs);
  const res = await request(`${p.url}${path}`, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) {
    throw new CheckpointError(`${p.name} ${path}: HTTP ${res.statusCode}`);
  }
  try {
    return parseNodeJson(text);
  } catch {
    throw new CheckpointError(`${p.name} ${path}: not JSON`);
  }
}

function obj(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : {};
}

function hex41(v: unknown): string | undefined {
  return typeof v === 'string' && /^41[0-9a-fA-F]{40}$/.test(v) ? v.toLowerCase() : undefined;
}

function num(v: unknown): number | undefined {
  const n = typeof v === 'bigint' ? Number(v) : v;
  return typeof n === 'number' && Number.isSafeInteger(n) ? n : undefined;
}

/**
 * The value every answering provider agrees on: unanimity, for what is taken on trust once and
 * then never checked again (the first-start checkpoint, buildCheckpoint; the confirmation of a
 * halt, agreedBlockId). One different answer there stops it, naming both answers: an operator
 * looks before the root of all later proofs rests on a vote.
 * @throws CheckpointError naming the disagreement, or fewer than `quorum` answers.
 */
function agreed<T>(what: string, answers: Array<[string, T]>, quorum: number): T {
  if (answers.length < quorum) {
    throw new CheckpointError(`${what}: ${answers.length} provider(s) answered, quorum ${quorum}`);
  }
  const first = answers[0];
  if (!first) throw new CheckpointError(`${what}: no provider answered`);
  const key = JSON.stringify(first[1]);
  for (const [name, v] of answers) {
    if (JSON.stringify(v) !== key) {
      throw new CheckpointError(
        `${what}: providers disagree (${first[0]}: ${key}; ${name}: ${JSON.stringify(v)})`,
      );
    }
  }
  return first[1];
}

/**
 * A provider whose answer about the SR set differs from the one a majority of the answering
 * providers agreed on (majority): it is wrong, or on another chain, and its caller sets it aside
 * (finality-gate.ts finalityGateFor: NodeGroup.distrust, check `sr_answer`).
 */
export interface ProviderDissent {
  /** The provider's name (TRON_NODE_URL's, as the node group names it). */
  provider: string;
  /** What was asked: the endpoint and the question (`signing key of 41… (/wallet/getaccount …)`). */
  what: string;
  /** Its answer and the agreed one, as JSON. */
  answer: string;
  agreed: string;
  /** The providers that gave the agreed answer. */
  agreedBy: string[];
}

/**
 * Where majority reports each provider outvoted (ProviderDissent), as soon as the value is taken.
 */
export type DissentSink = (d: ProviderDissent) => void;

/**
 * The value a majority of the answering providers give (issue 36 item 2), for what the light
 * client asks while it follows the chain (newSrKeyFromProviders, witnessKeyFromProviders): taken
 * when at least `quorum` providers give it AND they are more than half of the answers; each
 * provider that answered something else is reported to `onDissent` (set aside by the caller), so
 * one provider of three can never stall a maintenance. Without such a majority nothing is taken:
 * one of two against the other (a split at quorum 1), or a largest group below the quorum, is a
 * CheckpointError (the caller retries: ingest records the stall and asks again), and nobody is
 * reported, since nothing says which side is honest. Providers that failed do not count.
 * @throws CheckpointError naming every answer, when there is no such majority.
 */
function majority<T>(
  what: string,
  answers: Array<[string, T]>,
  quorum: number,
  onDissent?: DissentSink,
): T {
  const groups = new Map<string, { value: T; names: string[] }>();
  for (const [name, v] of answers) {
    const k = JSON.stringify(v);
    const g = groups.get(k);
    if (g) g.names.push(name);
    else groups.set(k, { value: v, names: [name] });
  }
  let top: [string, { value: T; names: string[] }] | undefined;
  for (const e of groups) if (!top || e[1].names.length > top[1].names.length) top = e;
  const all = answers.map(([name, v]) => `${name}: ${JSON.stringify(v)}`).join('; ');
  if (!top) throw new CheckpointError(`${what}: no provider answered`);
  const [key, won] = top;
  if (won.names.length < quorum) {
    throw new CheckpointError(
      `${what}: ${won.names.length} provider(s) agree, quorum ${quorum}${groups.size > 1 ? `; providers disagree (${all})` : ''}`,
    );
  }
  if (2 * won.names.length <= answers.length) {
    throw new CheckpointError(`${what}: providers disagree, no majority (${all})`);
  }
  for (const [k, g] of groups) {
    if (k === key) continue;
    for (const provider of g.names) {
      onDissent?.({ provider, what, answer: k, agreed: key, agreedBy: [...won.names] });
    }
  }
  return won.value;
}

/**
 * `fn` asked of every provider at once; the answers of those that answered. Providers that fail
 * do not count (one provider down must not stop what the others agree on), but at least `quorum`
 * must answer: fewer, and the first failure is thrown.
 * @throws the first provider's error when fewer than `quorum` answered.
 */
async function answering<T>(
  providers: readonly CheckpointProvider[],
  quorum: number,
  fn: (p: CheckpointProvider) => Promise<T>,
): Promise<Array<[string, T]>> {
  const settled = await Promise.allSettled(
    providers.map(async (p): Promise<[string, T]> => [p.name, await fn(p)]),
  );
  const answers = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (answers.length < quorum && failed) throw failed.reason;
  return answers;
}

/**
 * The providers agree that an account is no SR a block may be signed by (newSrKeyFromProviders):
 * the block that named it as its producer is refused like any lie, not waited on.
 */
export class NotAnSrError extends CheckpointError {
  constructor(message: string) {
    super(message);
    this.name = 'NotAnSrError';
  }
}

/**
 * Options of the questions the light client asks while it follows the chain
 * (newSrKeyFromProviders, witnessKeyFromProviders).
 */
export interface SrAnswerOptions
  extends Pick<BuildCheckpointOptions, 'quorum' | 'timeoutMs' | 'signal'> {
  /**
   * How the answers are combined: `majority` (at least the quorum, and more than half of the
   * answers: majority) or `all` (every answering provider, at least the quorum: agreed).
   * newSrKeyFromProviders always takes the majority; witnessKeyFromProviders defaults to `all`
   * (the checkpoint's keys).
   */
  rule?: 'majority' | 'all';
  /** Each provider outvoted (rule `majority`), reported once its value is taken. */
  onDissent?: DissentSink | undefined;
}

/**
 * The signing key of an SR that produced a block after a maintenance without being in the set
 * the light client held (a newcomer, finality.ts rule 7), once the providers confirm it may sign:
 * `/wallet/listwitnesses` must list it as a witness (an account that registered as one,
 * `WitnessCreateContract`), and, when the block is in the providers' current maintenance epoch
 * (`epochEnd` = `/wallet/getnextmaintenancetime`), with `isJobs` true: one of the 27 active SRs
 * now. A block of an earlier epoch (ingest catching up) cannot be checked against today's active
 * set; a registered witness is then enough. The key itself is witnessKeyFromProviders'. Each of
 * the three answers (witness state, next maintenance time, key) is taken by majority (issue 36
 * item 2): at least `opts.quorum` providers agree and they are more than half of those that
 * answer; each provider that answered otherwise is reported to `opts.onDissent` (the service sets
 * it aside), so one lying provider of three cannot stall a maintenance that brings a new SR
 * (an SR silent for one epoch comes back as one). Without a majority (one of two against the
 * other) nothing is taken and nobody is reported. Without the witness check, one provider could
 * name any ordinary account (whose key is its own address) as the producer of a side block and
 * have the light client learn it as a newcomer.
 * @param address the producer, 42 hex. @param epochEnd the block's epoch's next maintenance time, ms.
 * @returns its key, 42 lowercase hex.
 * @throws NotAnSrError when a majority says it is not a witness, or not an active SR in the
 *   current epoch; CheckpointError when there is no majority, too few answer, or the providers
 *   have not reached that epoch yet; network errors as undici throws them.
 */
export async function newSrKeyFromProviders(
  providers: readonly CheckpointProvider[],
  address: string,
  epochEnd: number,
  opts: SrAnswerOptions = {},
): Promise<string> {
  const a = address.toLowerCase();
  const quorum = opts.quorum ?? 1;
  const ask = (p: CheckpointProvider, path: string) =>
    post(p, path, {}, opts.timeoutMs ?? 10_000, opts.signal);
  const [listed, next] = await Promise.all([
    answering(providers, quorum, async (p) => {
      const ws = obj(await ask(p, '/wallet/listwitnesses')).witnesses;
      if (!Array.isArray(ws)) throw new CheckpointError(`${p.name}: listwitnesses has no list`);
      const w = ws.map(obj).find((x) => hex41(x.address) === a);
      return w === undefined ? 'none' : w.isJobs === true ? 'active' : 'witness';
    }),
    answering(providers, quorum, async (p) => {
      const t = num(obj(await ask(p, '/wallet/getnextmaintenancetime')).num);
      if (t === undefined) throw new CheckpointError(`${p.name}: no next maintenance time`);
      return t;
    }),
  ]);
  const state = majority(
    `witness ${a} (/wallet/listwitnesses isJobs)`,
    listed,
    quorum,
    opts.onDissent,
  );
  const current = majority(
    'next maintenance time (/wallet/getnextmaintenancetime)',
    next,
    quorum,
    opts.onDissent,
  );
  if (state === 'none') {
    throw new NotAnSrError(`${a} is not a witness (the providers' /wallet/listwitnesses)`);
  }
  if (epochEnd > current) {
    throw new CheckpointError(
      `the block's epoch ends at ${new Date(epochEnd).toISOString()}, after the providers' current one (${new Date(current).toISOString()}): they have not reached its maintenance yet`,
    );
  }
  if (epochEnd === current && state !== 'active') {
    throw new NotAnSrError(
      `${a} is a witness but not one of the active SRs of the current epoch (the providers' /wallet/listwitnesses isJobs)`,
    );
  }
  return witnessKeyFromProviders(providers, a, { ...opts, rule: 'majority' });
}

/**
 * An SR's signing key as the providers report it: `/wallet/getaccount` `witness_permission
 * .keys[0].address`, or the account's own address without one
 * (`AccountCapsule.getWitnessPermissionAddress`), from at least `opts.quorum` answering providers
 * (one that fails does not count): every one of them must agree (`opts.rule` `all`, the default:
 * the checkpoint's keys, trusted once and for all), or a majority of them (`majority`: an SR new
 * after a maintenance, through newSrKeyFromProviders and the finality gate; the outvoted ones
 * are reported to `opts.onDissent`).
 * @param address the SR's account, 42 hex.
 * @returns its key, 42 lowercase hex.
 * @throws CheckpointError when they disagree (rule `all`) or no majority agrees (`majority`),
 *   too few answer, or the account is missing.
 */
export async function witnessKeyFromProviders(
  providers: readonly CheckpointProvider[],
  address: string,
  opts: SrAnswerOptions = {},
): Promise<string> {
  const a = address.toLowerCase();
  const quorum = opts.quorum ?? 1;
  const answers = await answering(providers, quorum, async (p): Promise<string> => {
    const acc = obj(
      await post(
        p,
        '/wallet/getaccount',
        { address: a, visible: false },
        opts.timeoutMs ?? 10_000,
        opts.signal,
      ),
    );
    if (hex41(acc.address) !== a) throw new CheckpointError(`${p.name}: no account ${a}`);
    const list = obj(acc.witness_permission).keys;
    return (Array.isArray(list) ? hex41(obj(list[0]).address) : undefined) ?? a;
  });
  const what = `signing key of ${a} (/wallet/getaccount witness_permission)`;
  return opts.rule === 'majority'
    ? majority(what, answers, quorum, opts.onDissent)
    : agreed(what, answers, quorum);
}

/**
 * Build a checkpoint from `providers` (see the module doc).
 * @returns the checked checkpoint (sr-set.ts parseCheckpoint), to print for review.
 * @throws CheckpointError when providers disagree or too few answer, an answer is malformed, the
 *   active set is not 27, a recent block is not signed by its producer's reported key, or the
 *   window crosses a maintenance; network errors as undici throws them.
 */
export async function buildCheckpoint(
  providers: readonly CheckpointProvider[],
  opts: BuildCheckpointOptions = {},
): Promise<Checkpoint> {
  const quorum = opts.quorum ?? 1;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const window = opts.window ?? 40;
  const ask = (p: CheckpointProvider, path: string, body: unknown = {}) =>
    post(p, path, body, timeoutMs, opts.signal);
  // Every answering provider must agree; one that fails does not count, the quorum must answer.
  const each = <T>(fn: (p: CheckpointProvider) => Promise<T>): Promise<Array<[string, T]>> =>
    answering(providers, quorum, fn);

  // 1. The block: the lowest solidified head (or `at`, below every head), the same id everywhere.
  const heads = await each(async (p) => {
    const b = obj(await ask(p, '/walletsolidity/getnowblock'));
    const n = num(obj(obj(obj(b).block_header).raw_data).number);
    if (n === undefined) throw new CheckpointError(`${p.name}: no solidified head`);
    return n;
  });
  const lowest = Math.min(...heads.map(([, n]) => n));
  if (opts.at !== undefined && opts.at > lowest) {
    throw new CheckpointError(
      `block ${opts.at} is not solidified on every provider yet (lowest solidified head ${lowest}): try again in a few seconds`,
    );
  }
  const number = opts.at ?? lowest;
  const blocks = await each(async (p) => {
    const b = (await ask(p, '/walletsolidity/getblockbynum', { num: number })) as BlockJson;
    return signedHeaderFromJson(b);
  });
  const header = agreed(
    `block ${number}`,
    blocks.map(([n, h]): [string, string] => [n, h.id]),
    quorum,
  );
  const anchor = blocks[0]?.[1];
  if (!anchor || anchor.id !== header) throw new CheckpointError(`block ${number}: no answer`);

  // 2. The active set, 3. their keys, 4. the next maintenance.
  const active = agreed(
    'active SRs (/wallet/listwitnesses isJobs)',
    await each(async (p) => {
      const ws = obj(await ask(p, '/wallet/listwitnesses')).witnesses;
      if (!Array.isArray(ws)) throw new CheckpointError(`${p.name}: listwitnesses has no list`);
      return ws
        .filter((w) => obj(w).isJobs === true)
        .map((w) => hex41(obj(w).address))
        .filter((a): a is string => a !== undefined)
        .sort();
    }),
    quorum,
  );
  if (active.length !== ACTIVE_SR_COUNT) {
    throw new CheckpointError(`${active.length} active SRs, expected ${ACTIVE_SR_COUNT}`);
  }
  const keys = new Map<string, string>();
  for (const address of active) {
    keys.set(address, await witnessKeyFromProviders(providers, address, { ...opts, quorum }));
  }
  const nextMaintenanceTime = agreed(
    'next maintenance time (/wallet/getnextmaintenancetime)',
    await each(async (p) => {
      const t = num(obj(await ask(p, '/wallet/getnextmaintenancetime')).num);
      if (t === undefined) throw new CheckpointError(`${p.name}: no next maintenance time`);
      return t;
    }),
    quorum,
  );
  const interval =
    opts.maintenanceIntervalMs ??
    agreed(
      'maintenance interval (/wallet/getchainparameters getMaintenanceTimeInterval)',
      await each(async (p) => {
        const list = obj(await ask(p, '/wallet/getchainparameters')).chainParameter;
        const entry = Array.isArray(list)
          ? list.map(obj).find((e) => e.key === 'getMaintenanceTimeInterval')
          : undefined;
        const t = num(entry?.value);
        if (t === undefined || t <= 0) {
          throw new CheckpointError(`${p.name}: no getMaintenanceTimeInterval chain parameter`);
        }
        return t;
      }),
      quorum,
    );
  if (opts.at !== undefined && anchor.timestamp < nextMaintenanceTime - interval) {
    throw new CheckpointError(
      `block ${number} (${new Date(anchor.timestamp).toISOString()}) is from before the last maintenance (${new Date(nextMaintenanceTime - interval).toISOString()}): the SR list the providers report now may not be the one in force then; pin a checkpoint built at that time, or start from a recent block`,
    );
  }

  // 5. The chain: recent blocks chained to the agreed id, each signed by its reported key.
  const first = providers[0];
  if (!first) throw new CheckpointError('no provider configured');
  const list = obj(
    await ask(first, '/wallet/getblockbylimitnext', {
      startNum: Math.max(1, number - window + 1),
      endNum: number + 1,
    }),
  ).block;
  if (!Array.isArray(list))
    throw new CheckpointError(`${first.name}: getblockbylimitnext: no list`);
  const recent = (list as BlockJson[])
    .map(signedHeaderFromJson)
    .sort((a, b) => a.number - b.number)
    .filter((h) => h.number <= number);
  if (recent[recent.length - 1]?.id !== header) {
    throw new CheckpointError(`${first.name}: recent blocks do not end at block ${number}`);
  }
  let recovered: ReturnType<typeof recoverSigners>;
  try {
    recovered = recoverSigners(recent);
  } catch (err) {
    if (!(err instanceof CheckpointError)) throw err;
    throw new CheckpointError(
      `${err.message} (the last ${window} blocks cross a maintenance?): try again in a few minutes`,
    );
  }
  const { keys: signers, slots } = recovered;
  for (const [sr, signer] of signers) {
    if (keys.get(sr) !== signer) {
      throw new CheckpointError(
        `block of ${sr} signed by ${signer}, but the providers report key ${keys.get(sr) ?? 'none (not active)'}`,
      );
    }
  }
  const witnesses: SrEntry[] = [];
  for (let i = 0; i < ACTIVE_SR_COUNT; i++) {
    const address = slots.get(i);
    const signingKey = address ? keys.get(address) : undefined;
    if (!address || !signingKey) {
      throw new CheckpointError(
        `slot ${i} has no block in the last ${window} (a missed round or a maintenance): try again in a few minutes`,
      );
    }
    witnesses.push({ address, signingKey });
  }
  return parseCheckpoint({
    network: opts.network ?? 'mainnet',
    block: { number, id: header, timestamp: anchor.timestamp },
    witnesses,
    nextMaintenanceTime,
    maintenanceIntervalMs: interval,
    source: `${opts.sourcePrefix ?? 'tronwatch checkpoint'} from ${providers.map((p) => p.name).join(', ')} at ${new Date().toISOString()}`,
  });
}

/** What the providers say of a block tronwatch holds (checkBlockId). */
export interface BlockIdCheck {
  /**
   * `confirmed`: at least the quorum of the answering providers give `id`, more than give any
   * other blockID; `other`: at least the quorum answer, none gives `id`, and all give the same
   * other blockID (`other`); `undecided`: anything else (too few answers, or a split without such
   * a majority).
   */
  verdict: 'confirmed' | 'other' | 'undecided';
  /** The blockID the providers agree on instead (verdict `other`). */
  other?: string;
  /** Providers that answered another blockID (with verdict `confirmed`: outvoted). */
  dissent: string[];
  /** Each answer (`name: id`) and how many failed, for logs and stall reasons. */
  detail: string;
}

/**
 * Whether the providers still hold block `number` as the block `id` tronwatch holds
 * (java-tron `/wallet/getblockbynum`, the full-node view): the light client's restart check.
 * Providers that fail do not count (a restart must not wait for every provider). A majority of
 * the answers, and at least `opts.quorum` (default 1), is enough to confirm: one provider of
 * three that lies cannot stop a restart; one of two can only make it wait (`undecided`).
 * @param id 64 lowercase hex.
 * @returns the verdict (BlockIdCheck).
 * @throws the first provider's error when none answers.
 */
export async function checkBlockId(
  providers: readonly CheckpointProvider[],
  number: number,
  id: string,
  opts: Pick<BuildCheckpointOptions, 'quorum' | 'timeoutMs' | 'signal'> = {},
): Promise<BlockIdCheck> {
  const { answers, failed } = await blockIdAnswers(providers, number, opts);
  if (answers.length === 0 && failed[0] !== undefined) throw failed[0];
  const quorum = opts.quorum ?? 1;
  const groups = new Map<string, string[]>();
  for (const [name, v] of answers) groups.set(v, [...(groups.get(v) ?? []), name]);
  const confirm = groups.get(id)?.length ?? 0;
  const others = [...groups].filter(([v]) => v !== id);
  const largestOther = Math.max(0, ...others.map(([, names]) => names.length));
  const dissent = others.flatMap(([, names]) => names);
  const detail = `${answers.map(([name, v]) => `${name}: ${v}`).join('; ')}${failed.length > 0 ? `; ${failed.length} failed` : ''}`;
  if (confirm >= quorum && confirm > largestOther) return { verdict: 'confirmed', dissent, detail };
  const only = others.length === 1 ? others[0] : undefined;
  if (confirm === 0 && only && answers.length >= quorum) {
    return { verdict: 'other', other: only[0], dissent, detail };
  }
  return {
    verdict: 'undecided',
    dissent,
    detail: `${answers.length < quorum ? `${answers.length} provider(s) answered, quorum ${quorum}` : 'providers disagree'} (${detail})`,
  };
}

/** One provider's block at a height (blockHeadersAt): its signed header, or why there is none. */
export interface BlockHeaderAnswer {
  /** The provider's name (CheckpointProvider.name, as the node group names it). */
  provider: string;
  /** The block's signed header (header.ts), when the provider served one that can be read. */
  header?: SignedHeader;
  /** Why there is no header: no such block, a transport error, a header that cannot be read. */
  error?: string;
}

/**
 * Every provider's block `number` as a signed header (java-tron `/wallet/getblockbynum`, the
 * full-node view), asked at once: the light client's restart check reads the stored final block's
 * child from each, and the signatures decide whose chain continues it (finality-gate.ts open).
 * Never throws for one provider: its failure is its answer's `error`.
 * @returns one answer per provider, in the providers' order.
 * @throws the abort of `opts.signal` only.
 */
export async function blockHeadersAt(
  providers: readonly CheckpointProvider[],
  number: number,
  opts: Pick<BuildCheckpointOptions, 'timeoutMs' | 'signal'> = {},
): Promise<BlockHeaderAnswer[]> {
  const settled = await Promise.allSettled(
    providers.map(async (p): Promise<SignedHeader> => {
      const b = (await post(
        p,
        '/wallet/getblockbynum',
        { num: number, visible: false },
        opts.timeoutMs ?? 10_000,
        opts.signal,
      )) as BlockJson;
      if (!b || typeof b !== 'object' || !obj(b).block_header) {
        throw new CheckpointError(`no block ${number}`);
      }
      return signedHeaderFromJson(b);
    }),
  );
  opts.signal?.throwIfAborted();
  return settled.map((r, i) => {
    const provider = providers[i]?.name ?? `provider ${i + 1}`;
    if (r.status === 'fulfilled') return { provider, header: r.value };
    const e = r.reason as unknown;
    return { provider, error: e instanceof Error ? e.message : String(e) };
  });
}

/** Each answering provider's blockID for block `number`, and the errors of those that failed. */
async function blockIdAnswers(
  providers: readonly CheckpointProvider[],
  number: number,
  opts: Pick<BuildCheckpointOptions, 'timeoutMs' | 'signal'>,
): Promise<{ answers: Array<[string, string]>; failed: unknown[] }> {
  const settled = await Promise.allSettled(
    providers.map(async (p): Promise<[string, string]> => {
      const b = (await post(
        p,
        '/wallet/getblockbynum',
        { num: number, visible: false },
        opts.timeoutMs ?? 10_000,
        opts.signal,
      )) as BlockJson;
      if (!b || typeof b !== 'object' || !obj(b).block_header) {
        throw new CheckpointError(`${p.name}: no block ${number}`);
      }
      return [p.name, signedHeaderFromJson(b).id];
    }),
  );
  return {
    answers: settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : [])),
    failed: settled.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : [])),
  };
}

/**
 * The blockID every answering provider gives for block `number` (java-tron
 * `/wallet/getblockbynum`, the full-node view: any block up to the node's head), agreed by all
 * that answer and at least `opts.quorum` (default 1). What confirms a halt for a stale
 * checkpoint (finality-gate.ts submitUnchained): unanimity, not a majority, is the safe side
 * there, since a disagreement makes the block refused (its provider set aside) instead of halting.
 * @param number block number.
 * @returns the blockID, 64 lowercase hex.
 * @throws CheckpointError when they disagree, too few answer, or one has no such block.
 */
export async function agreedBlockId(
  providers: readonly CheckpointProvider[],
  number: number,
  opts: Pick<BuildCheckpointOptions, 'quorum' | 'timeoutMs' | 'signal'> = {},
): Promise<string> {
  // A provider that fails does not count; the ones that answer must agree, and be at least the
  // quorum.
  const { answers, failed } = await blockIdAnswers(providers, number, opts);
  if (answers.length < (opts.quorum ?? 1) && failed.length > 0) throw failed[0];
  return agreed(`block ${number} (/wallet/getblockbynum)`, answers, opts.quorum ?? 1);
}
