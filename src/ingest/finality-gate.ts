/**
 * The finality gate (issue 28): with the light client on (TRON_LIGHT_CLIENT_CHECKPOINT), a block
 * is committed (its events stored, its deliveries queued) only once tronwatch has proven it final
 * itself, from the SRs' signatures: ≥ 19 distinct SRs of the current set have signed blocks at or
 * above it on its chain (tron/light-client/finality.ts, java-tron `DposService.updateSolidBlock`).
 * The providers' heads only say how far there is to read.
 *
 * How ingest uses it (ingest/loop.ts): the loop reads blocks up to the providers' full-node head,
 * above their solidified head (node-group.ts getFullNodeBlock, getBlockIfProduced: one block read
 * and its receipts, the same reads as without the gate), and every block goes to `add`, in height
 * order above `readHeight`; its signed header is checked by the light client and the block waits
 * in a small look-ahead (about 18 blocks: the ones above the last final block) until the light
 * client proves it final; `next`/`shift` hand the final ones out in chain order, and the loop
 * commits them. A node that switches to another branch above the final block is followed by
 * parent hash (`add`): the heights that changed are read again, nothing else.
 * The light client's state (store.ts, migration 065) is written in the transaction of the commit
 * that reaches its final block, so a restart resumes from there: it is restored, cross-checked
 * against the cursor (the block the cursor holds must be the one the SRs made final), and the
 * blocks between its final block and the cursor are read again (proven again, not committed
 * twice).
 *
 * Refusals: a block whose signature, signer, slot or chain fails (LightClientError, not `halt`),
 * or whose branch does not meet the final chain, is refused like any failed check: the loop
 * sets its provider aside and stalls on that height until a provider serves a block that passes.
 * A `halt` (more than 8 new SRs at one maintenance, a stale checkpoint, a cursor below the
 * checkpoint, a committed block the SRs did not make final) stops ingest until an operator acts.
 * None is taken on one provider's word: a stale checkpoint halts only when the providers agree
 * that the block showing it is the chain's (otherwise that block is refused as a lie), and the
 * restart check halts only when every answering provider holds another block; a majority that
 * confirms the stored final block lets it go on (the others are named in the log), and a split
 * without one is decided by the signatures: the provider whose chain does not continue the stored
 * final block with a block the light client verifies is set aside, and ingest goes on from the
 * others (retried only when none shows one).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../common/logger.js';
import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import {
  agreedBlockId,
  type BlockHeaderAnswer,
  type BlockIdCheck,
  blockHeadersAt,
  buildCheckpoint,
  checkBlockId,
  NotAnSrError,
  newSrKeyFromProviders,
  type ProviderDissent,
  witnessKeyFromProviders,
} from '../tron/light-client/checkpoint-build.js';
import {
  FINALITY_THRESHOLD,
  type FinalBlock,
  LightClient,
  LightClientError,
  type LightClientStatus,
} from '../tron/light-client/finality.js';
import {
  blockHasType46,
  keyRotationsOfBlock,
  signedHeaderOf,
} from '../tron/light-client/follow.js';
import type { SignedHeader } from '../tron/light-client/header.js';
import {
  ACTIVE_SR_COUNT,
  type Checkpoint,
  CheckpointError,
  type KeyRotation,
  parseCheckpoint,
} from '../tron/light-client/sr-set.js';
import { loadLightClientState } from '../tron/light-client/store.js';
import type { NodeGroup, VerifiedSolidifiedBlock } from '../tron/node-group.js';
import { BlockCheckError } from '../tron/verify.js';

/** Where the shipped checkpoints are (`checkpoints/` at the package root, beside src/ and dist/). */
export const SHIPPED_CHECKPOINTS_DIR = fileURLToPath(
  new URL('../../checkpoints/', import.meta.url),
);

/**
 * A state the light client cannot go on from without an operator (a halt): never retried into
 * success by waiting, so the loop stalls on it (logged, /healthz, metrics).
 */
export class FinalityHaltError extends Error {
  readonly retryable = false;
  constructor(
    readonly blockNumber: number,
    message: string,
  ) {
    super(`block ${blockNumber}: ${message}`);
    this.name = 'FinalityHaltError';
  }
}

/**
 * The checkpoint TRON_LIGHT_CLIENT_CHECKPOINT names: `number:blockID` of a checkpoint shipped in
 * `checkpoints/`, or the path of a checkpoint file (JSON, sr-set.ts `Checkpoint`; relative paths
 * from `cwd`).
 * @throws CheckpointError when no shipped checkpoint has that block, the file cannot be read or
 *   is not JSON, or the checkpoint is malformed (parseCheckpoint's list of problems).
 */
export async function loadCheckpointSetting(
  value: string,
  cwd = process.cwd(),
  shippedDir = SHIPPED_CHECKPOINTS_DIR,
): Promise<Checkpoint> {
  const m = /^(\d{1,16}):([0-9a-fA-F]{64})$/.exec(value.trim());
  if (m) {
    const number = Number(m[1]);
    const id = (m[2] as string).toLowerCase();
    const names = (await readdir(shippedDir)).filter((f) => f.endsWith('.json')).sort();
    const seen: string[] = [];
    for (const name of names) {
      const cp = parseCheckpoint(JSON.parse(await readFile(path.join(shippedDir, name), 'utf8')));
      seen.push(`${cp.block.number}:${cp.block.id}`);
      if (cp.block.number === number && cp.block.id === id) return cp;
    }
    throw new CheckpointError(
      `TRON_LIGHT_CLIENT_CHECKPOINT: no shipped checkpoint is block ${number}:${id} (shipped: ${seen.join(', ') || 'none'}); give a checkpoint file's path instead`,
    );
  }
  const file = path.resolve(cwd, value);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new CheckpointError(
      `TRON_LIGHT_CLIENT_CHECKPOINT: cannot read ${file}: ${(err as Error).message}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CheckpointError(
      `TRON_LIGHT_CLIENT_CHECKPOINT: ${file} is not JSON: ${(err as Error).message}`,
    );
  }
  return parseCheckpoint(json);
}

/** What /v1/status, /healthz, metrics and the console show of the light client. */
export interface FinalityGateStatus extends LightClientStatus {
  /** SRs whose blocks make a block final (19), and the set's size (27). */
  threshold: number;
  activeSrs: number;
  /** The checkpoint followed: its block number and id. */
  checkpoint: { number: number; id: string };
  /** Blocks read and waiting for finality (the look-ahead). */
  waiting: number;
  /** The highest block read (the look-ahead's top). */
  readHeight: number;
}

/** Options of FinalityGate. */
export interface FinalityGateOptions {
  /**
   * The pinned checkpoint (TRON_LIGHT_CLIENT_CHECKPOINT through loadCheckpointSetting, or a devnet
   * chain's). Without one, the gate follows the checkpoint it stored, or takes one from the
   * providers at the cursor the first time (`bootstrap`).
   */
  checkpoint?: Checkpoint | undefined;
  /**
   * A checkpoint at block `at` (the cursor) from a quorum of providers (checkpoint-build.ts
   * buildCheckpoint with `at`): how a gate without a pinned checkpoint and without a stored state
   * starts. Required when `checkpoint` is absent.
   */
  bootstrap?: (at: number, signal?: AbortSignal) => Promise<Checkpoint>;
  /**
   * The blockID the providers agree on at a height (checkpoint-build.ts agreedBlockId: every
   * answering provider): a halt for a stale checkpoint needs the providers to confirm the block
   * that shows it (submitUnchained). Without it, that check is skipped (tests of the gate alone).
   */
  blockIdAt?: (number: number, signal?: AbortSignal) => Promise<string>;
  /**
   * What the providers say of a block tronwatch holds (checkpoint-build.ts checkBlockId: a
   * majority of the answers, at least the quorum): at open, a restored final block above its
   * checkpoint must still be the providers' block there. Without it, that check is skipped.
   */
  checkBlockId?: (number: number, id: string, signal?: AbortSignal) => Promise<BlockIdCheck>;
  /**
   * Each provider's block at a height, as a signed header (checkpoint-build.ts blockHeadersAt):
   * when `checkBlockId` does not decide (a split without a majority, too few answers), the
   * restart check reads the stored final block's child from every provider and lets the light
   * client's signature checks decide whose chain continues it (open). Without it, such a split
   * is retried (a CheckpointError) as before.
   */
  headersAt?: (number: number, signal?: AbortSignal) => Promise<BlockHeaderAnswer[]>;
  /**
   * The signing key of an SR new after a maintenance, taken by a majority of the providers (at
   * least the quorum, more than half of those that answer) once they confirm it may sign in the
   * block's epoch (`epochEnd`, its next maintenance time, ms; checkpoint-build.ts
   * newSrKeyFromProviders, issue 36 item 2). The providers outvoted are set aside by whoever
   * builds it (finalityGateFor: in the ingester's node group), not by the gate.
   * NotAnSrError: the block is refused (outside-set). CheckpointError (no majority, too few
   * answers, an epoch the providers have not reached): the block waits; the loop records the
   * stall and reads it again.
   */
  keyOf: (address: string, signal?: AbortSignal, epochEnd?: number) => Promise<string>;
}

/** See the module doc. One per Ingester; not thread-safe (the loop is sequential). */
export class FinalityGate {
  /** The checkpoint the operator pinned (undefined: taken from the providers or stored). */
  readonly pinned: Checkpoint | undefined;
  private readonly keyOf: FinalityGateOptions['keyOf'];
  private readonly bootstrap: FinalityGateOptions['bootstrap'];
  private readonly blockIdAt: FinalityGateOptions['blockIdAt'];
  private readonly checkBlockId: FinalityGateOptions['checkBlockId'];
  private readonly headersAt: FinalityGateOptions['headersAt'];
  /** The light client (undefined before open() when no checkpoint is pinned). */
  private lc: LightClient | undefined;
  /** The block read last: the next block read must be its child. */
  private tip: { number: number; id: string };
  /** Blocks read and not final yet, by blockID. */
  private readonly ahead = new Map<string, VerifiedSolidifiedBlock>();
  /** Blocks proven final and not committed yet, in chain order. */
  private readonly ready: VerifiedSolidifiedBlock[] = [];
  /**
   * Blocks read whose parent is not a block read before (the node switched to another branch
   * above the final block), the lowest last: they wait while the heights below them are read
   * again from that branch (fork following, `add`).
   */
  private readonly orphans: VerifiedSolidifiedBlock[] = [];
  /** The cursor as this gate knows it: final blocks at or below it are not committed again. */
  private committed: { number: number; id: string } | undefined;

  /** @throws Error when neither a checkpoint nor a bootstrap is given. */
  constructor(opts: FinalityGateOptions) {
    if (!opts.checkpoint && !opts.bootstrap) {
      throw new Error('finality gate: a pinned checkpoint or a bootstrap is required');
    }
    this.pinned = opts.checkpoint;
    this.keyOf = opts.keyOf;
    this.bootstrap = opts.bootstrap;
    this.blockIdAt = opts.blockIdAt;
    this.checkBlockId = opts.checkBlockId;
    this.headersAt = opts.headersAt;
    this.lc = opts.checkpoint ? new LightClient(opts.checkpoint) : undefined;
    this.tip = opts.checkpoint
      ? { number: opts.checkpoint.block.number, id: opts.checkpoint.block.id }
      : { number: -1, id: '' };
  }

  /** The light client in force. @throws Error before open() when no checkpoint is pinned. */
  private get client(): LightClient {
    if (!this.lc) throw new Error('finality gate: not opened');
    return this.lc;
  }

  /** The checkpoint followed: the pinned one, or the one open() restored or took. */
  get checkpoint(): Checkpoint | undefined {
    return this.lc?.checkpoint ?? this.pinned;
  }

  /** Whether open() ran since the gate was made (or the cursor moved under it). */
  get opened(): boolean {
    return this.committed !== undefined;
  }

  /** The committed block as the gate knows it (undefined before open). */
  get committedNumber(): number | undefined {
    return this.committed?.number;
  }

  /** The last block the light client proved final. @throws Error before open() (unpinned). */
  get finalBlock(): FinalBlock {
    return this.client.finalBlock;
  }

  /** The highest block read: the loop reads `readHeight + 1` next. */
  get readHeight(): number {
    return this.tip.number;
  }

  /**
   * Start (or start again) from the stored state and the cursor: the stored light client when it
   * follows the pinned checkpoint (any, when none is pinned) and its final block is not above the
   * cursor; else a fresh one at the pinned checkpoint, or, with none pinned, at a checkpoint the
   * providers agree on at the cursor's block (`bootstrap`: trust on first use, logged). A
   * restored final block above its checkpoint is checked against the providers' block at that
   * height (`checkBlockId`): confirmed by a majority of the answering providers (at least the
   * quorum), it goes on, naming the providers outvoted (`dissent`); all of them on one other
   * block, it halts; anything else (a split without a majority, too few answers: one liar of two
   * at quorum 1) is decided by the signatures (`headersAt`, `continuation`): every provider's
   * child of the final block is checked by the light client, ingest goes on when at least one
   * provider shows one it verifies, and those that do not (a block on another parent, a bad
   * signature, none while they named another block) are returned to be set aside (`setAside`);
   * when none shows one, it is a CheckpointError: the loop records the stall and tries again.
   * The look-ahead starts empty: reading resumes at the final block's child.
   * @param cursor the cursor row (block_number, block_id; '' when no block was committed yet).
   * @returns what was done, for the log: 'restored', 'fresh' (the pinned checkpoint) or 'taken'
   *   (from the providers), why a stored state was left, the providers that gave another block at
   *   the restored final height while a majority (or the signatures) confirmed it, and the
   *   providers whose chain does not continue it (the loop sets them aside: NodeGroup.distrust).
   * @throws FinalityHaltError when the cursor is below the checkpoint (those blocks cannot be
   *   proven), when the stored final block is the cursor's height with another blockID, when the
   *   providers' block at the restored final height is another one, or when no checkpoint can be
   *   taken from the providers (CheckpointError's reason); CheckpointError when the providers
   *   neither confirm nor agree against the restored final block and none shows a signed child
   *   of it; the providers' errors as thrown.
   */
  async open(
    db: Queryable,
    network: string,
    cursor: { block_number: number; block_id: string },
    signal?: AbortSignal,
  ): Promise<{
    from: 'restored' | 'fresh' | 'taken';
    final: number;
    discarded?: string;
    dissent?: { providers: string[]; detail: string };
    setAside?: Array<{ provider: string; reason: string }>;
  }> {
    const stored = await loadLightClientState(db, network);
    let discarded: string | undefined;
    let lc: LightClient | undefined;
    if (stored) {
      const s = stored.snapshot;
      if (this.pinned && s.checkpoint.block.id !== this.pinned.block.id) {
        discarded = `it follows checkpoint ${s.checkpoint.block.number}, not the pinned ${this.pinned.block.number}`;
      } else if (s.final.number > cursor.block_number) {
        discarded = `its final block ${s.final.number} is above the cursor ${cursor.block_number}`;
      } else {
        lc = LightClient.restore(s);
      }
    }
    let from: 'restored' | 'fresh' | 'taken' = lc ? 'restored' : 'fresh';
    if (!lc) {
      let cp = this.pinned;
      if (!cp) {
        cp = await this.take(cursor.block_number, signal);
        from = 'taken';
      }
      lc = new LightClient(cp);
    }
    const f = lc.finalBlock;
    if (f.number > cursor.block_number) {
      throw new FinalityHaltError(
        cursor.block_number + 1,
        `the cursor (block ${cursor.block_number}) is below the light client's checkpoint (block ${f.number}): the blocks between cannot be proven final; pin a checkpoint at or below the cursor`,
      );
    }
    const cid = cursor.block_id.toLowerCase();
    if (f.number === cursor.block_number && cid !== '' && cid !== f.id) {
      throw new FinalityHaltError(
        f.number,
        `the committed block ${cid} is not the block ${f.id} the light client holds final there`,
      );
    }
    let dissent: { providers: string[]; detail: string } | undefined;
    let setAside: Array<{ provider: string; reason: string }> | undefined;
    if (from === 'restored' && this.checkBlockId && f.number > lc.checkpoint.block.number) {
      // The providers must still hold the final block stored (a long-range fork, signed with
      // keys the SRs used long ago, would show here). The checkpoint's own block is trusted.
      const v = await this.checkBlockId(f.number, f.id, signal);
      if (v.verdict === 'other') {
        throw new FinalityHaltError(
          f.number,
          `the providers' block ${f.number} is ${v.other}, not the block ${f.id} the light client proved final and stored: a fork below tronwatch's final block, or providers on another chain; check the providers, then pin a checkpoint (tronwatch checkpoint)`,
        );
      }
      if (v.verdict === 'undecided') {
        // The answers do not decide; the signatures do: whose block f + 1 continues the stored
        // final block with a block the light client verifies (a provider holds no SR key).
        const c = this.headersAt ? await this.continuation(lc, f, v.dissent, signal) : undefined;
        if (!c || c.shown.length === 0) {
          throw new CheckpointError(
            `the light client's final block ${f.number} (${f.id}) is neither confirmed nor denied by the providers: ${v.detail}` +
              (c
                ? `; and no provider shows a block ${f.number + 1} on it that the SRs signed (${c.refused.map((r) => `${r.provider}: ${r.reason}`).join('; ')})`
                : '') +
              '; trying again',
          );
        }
        if (c.refused.length > 0) setAside = c.refused;
        if (v.dissent.length > 0) {
          dissent = {
            providers: v.dissent,
            detail: `${v.detail}; decided by the signatures: ${c.shown.join(', ')} continue it`,
          };
        }
      } else if (v.dissent.length > 0) dissent = { providers: v.dissent, detail: v.detail };
    }
    this.lc = lc;
    this.committed = { number: cursor.block_number, id: cid };
    this.tip = { number: f.number, id: f.id };
    this.ahead.clear();
    this.ready.length = 0;
    this.orphans.length = 0;
    return {
      from,
      final: f.number,
      ...(discarded === undefined ? {} : { discarded }),
      ...(dissent === undefined ? {} : { dissent }),
      ...(setAside === undefined ? {} : { setAside }),
    };
  }

  /**
   * Whose chain continues the final block `f` of `lc` (restored, not in force yet): block
   * f + 1 as each provider serves it (`headersAt`), checked by a copy of the light client (its
   * parent must be `f`, its producer an SR of the set in its slot, its signature that SR's key;
   * an SR new after a maintenance gets its key from `keyOf` as in `check`). The restart check's
   * tie-breaker when the providers' answers about `f` do not decide: a provider holds no SR key,
   * so a provider on another chain cannot show such a block.
   * @param dissent the providers that answered another block at `f`'s height: set aside also
   *   when they serve no block f + 1 at all.
   * @returns the providers that showed one (`shown`), and those to set aside, with why.
   * @throws the providers' errors from keyOf (CheckpointError: retried by the loop).
   */
  private async continuation(
    lc: LightClient,
    f: FinalBlock,
    dissent: readonly string[],
    signal?: AbortSignal,
  ): Promise<{ shown: string[]; refused: Array<{ provider: string; reason: string }> }> {
    const answers = this.headersAt ? await this.headersAt(f.number + 1, signal) : [];
    const shown: string[] = [];
    const refused: Array<{ provider: string; reason: string }> = [];
    for (const a of answers) {
      if (!a.header) {
        if (dissent.includes(a.provider)) {
          refused.push({ provider: a.provider, reason: `no block ${f.number + 1}: ${a.error}` });
        }
        continue;
      }
      const why = await this.continues(lc, f, a.header, signal);
      if (why === undefined) shown.push(a.provider);
      else refused.push({ provider: a.provider, reason: why });
    }
    return { shown, refused };
  }

  /**
   * Whether `header` (block f + 1) continues the final block `f` of `lc` with a block the light
   * client verifies, checked on a copy of `lc` (nothing of it is kept).
   * @returns undefined when it does, else why not.
   */
  private async continues(
    lc: LightClient,
    f: FinalBlock,
    header: SignedHeader,
    signal?: AbortSignal,
  ): Promise<string | undefined> {
    if (header.number !== f.number + 1) return `it answered block ${header.number}`;
    if (header.parentId !== f.id) {
      return `its block ${header.number} (${header.id}) has parent ${header.parentId}, not the final block ${f.id}`;
    }
    const copy = LightClient.restore(lc.snapshot());
    try {
      let r = copy.submit(header, []);
      if (r.status === 'need-key') {
        let key: string;
        try {
          key = await this.keyOf(r.witness, signal, r.epochEnd);
        } catch (err) {
          if (err instanceof NotAnSrError) return `producer ${r.witness}: ${err.message}`;
          throw err;
        }
        copy.addCandidateKey(r.witness, key);
        r = copy.submit(header, []);
      }
      return r.status === 'verified' || r.status === 'known'
        ? undefined
        : `the light client answered ${r.status}`;
    } catch (err) {
      if (err instanceof LightClientError) return err.message;
      throw err;
    }
  }

  /**
   * A checkpoint at block `at` from the providers (no pinned one, nothing stored).
   * @throws FinalityHaltError with the CheckpointError's reason (retried by the loop's stall).
   */
  private async take(at: number, signal?: AbortSignal): Promise<Checkpoint> {
    if (!this.bootstrap) throw new Error('finality gate: no checkpoint and no bootstrap');
    try {
      return await this.bootstrap(at, signal);
    } catch (err) {
      if (!(err instanceof CheckpointError)) throw err;
      throw new FinalityHaltError(
        at + 1,
        `no checkpoint is pinned (TRON_LIGHT_CLIENT_CHECKPOINT) and none could be taken from the providers at block ${at}: ${err.message}`,
      );
    }
  }

  /** Forget the open() state: the next cursor read opens the gate again. */
  close(): void {
    this.committed = undefined;
  }

  /**
   * Drop the look-ahead: reading starts again at the last final block's child (after a block
   * that did not follow the one read below it). Final blocks not committed yet are kept.
   */
  private rewind(): void {
    const f = this.client.finalBlock;
    const top = this.ready[this.ready.length - 1];
    this.tip = top
      ? { number: top.ref.number, id: top.verified.id }
      : { number: f.number, id: f.id };
    this.ahead.clear();
    this.orphans.length = 0;
  }

  /** Whether heights below the tip are being read again for a branch switch (`add`). */
  get rereading(): boolean {
    return this.orphans.length > 0;
  }

  /**
   * Whether `add` takes block `n` next: the tip's child, or, while heights below are read again
   * for a branch switch, the child of the highest block kept aside (read ahead meanwhile).
   */
  takes(n: number): boolean {
    const top = this.orphans[0];
    return n === this.tip.number + 1 || (top !== undefined && n === top.ref.number + 1);
  }

  /**
   * Check block `readHeight + 1` (read and verified by the node group) with the light client and
   * keep it until it is final; the blocks it makes final join the ready queue (next/shift).
   *
   * Forks (blocks are read up to the node's head, above anything final): a block whose parent is
   * not the block read below it is the node's switch to another branch, which is normal above the
   * final block. It attaches where its parent is a block read before (a branch seen earlier, or
   * the final block); otherwise it is kept aside and the tip steps back one height, so the loop
   * reads the heights below it again, from the branch the node now follows, until its branch meets
   * a block held (fork following by parent hash: one read per height that changed). Blocks read
   * ahead meanwhile (the loop's read-ahead) are kept aside with them when they follow them. The
   * blocks kept aside are then checked in order. Each branch is checked by the light client like any
   * block; only what 19 SRs built on becomes final, so a branch the node left never is. A branch
   * that leaves the final chain is no fork switch: refused.
   * @throws BlockCheckError('parent') when its branch does not meet the final chain (the
   *   look-ahead is dropped: the heights above the final block are read again);
   *   LightClientError when the light client refuses it (halt false) or ingest must halt;
   *   HeaderError for a header that cannot be read; FinalityHaltError when the light client makes
   *   final, at the cursor's height, another block than the committed one.
   */
  async add(b: VerifiedSolidifiedBlock, signal?: AbortSignal): Promise<void> {
    const n = b.ref.number;
    const top = this.orphans[0];
    if (top && n === top.ref.number + 1) {
      // Read ahead above the blocks kept aside: kept with them if it follows them; if not, the
      // node moved again and they all go (those heights are read anew after the ones below).
      if (signedHeaderOf(b.block, b.exact).parentId === top.verified.id) this.orphans.unshift(b);
      else this.orphans.length = 0;
      return;
    }
    if (n !== this.tip.number + 1) {
      throw new Error(`finality gate: block ${n} read, expected ${this.tip.number + 1}`);
    }
    const header = signedHeaderOf(b.block, b.exact);
    if (header.parentId !== this.tip.id) {
      const f = this.client.finalBlock;
      const held = this.ahead.get(header.parentId);
      if (held && held.ref.number === n - 1) {
        this.tip = { number: n - 1, id: header.parentId }; // a branch read before
      } else if (header.parentId === f.id && f.number === n - 1) {
        this.tip = { number: f.number, id: f.id };
      } else {
        const under = this.ahead.get(this.tip.id);
        if (!under) {
          // The tip is final: the node's branch leaves the final chain. Right at the final block
          // with nothing held, the light client names the case itself: a checkpoint older than
          // the chain served halts (stale-checkpoint, once the providers confirm the block),
          // anything else is refused (not-chained).
          if (this.ahead.size === 0 && this.tip.id === f.id) {
            await this.submitUnchained(header, signal);
          }
          this.rewind();
          throw new BlockCheckError(
            'parent',
            n,
            `parentHash ${header.parentId} is not the blockID of block ${n - 1} read before (${this.tip.id}), and its branch does not meet the final chain; reading again from the last final block`,
          );
        }
        // The node switched branches: read the height below again, from its branch.
        if (
          this.orphans.length > 0 &&
          this.orphans[this.orphans.length - 1]?.ref.number !== n + 1
        ) {
          this.orphans.length = 0;
        }
        this.orphans.push(b);
        this.tip = { number: n - 2, id: under.verified.parentHash };
        return;
      }
    }
    await this.check(b, header, signal);
    // Blocks kept aside for a branch switch, now that the heights below them are read again.
    for (let o = this.orphans.pop(); o; o = this.orphans.pop()) {
      const h = signedHeaderOf(o.block, o.exact);
      if (o.ref.number !== this.tip.number + 1 || h.parentId !== this.tip.id) {
        this.orphans.length = 0; // the node moved on again: those heights are read anew
        break;
      }
      try {
        await this.check(o, h, signal);
      } catch (err) {
        this.orphans.length = 0;
        throw err;
      }
    }
  }

  /** The light client's check of block `b` (child of the tip): held, and made final in time. */
  private async check(
    b: VerifiedSolidifiedBlock,
    header: ReturnType<typeof signedHeaderOf>,
    signal?: AbortSignal,
  ): Promise<void> {
    const n = b.ref.number;
    let rotations: KeyRotation[] = [];
    if (blockHasType46(b.block, b.exact)) {
      // A key change counts only from a transaction list the header commits to (follow.ts).
      if (b.verified.root === 'unverifiable') {
        throw new BlockCheckError(
          'tx_root',
          n,
          'an SR key change (type 46) in a transaction list whose root is not proven: configure gRPC (#grpc=) for exact bytes',
        );
      }
      rotations = keyRotationsOfBlock(b.block, b.exact);
    }
    const lc = this.client;
    let r = lc.submit(header, rotations);
    if (r.status === 'need-key') {
      let key: string;
      try {
        key = await this.keyOf(r.witness, signal, r.epochEnd);
      } catch (err) {
        // The providers agree the producer may not sign (an ordinary account, or a witness that
        // is not an active SR now): the block is refused like any lie, and its provider set aside.
        if (!(err instanceof NotAnSrError)) throw err;
        throw new LightClientError('outside-set', n, `producer ${r.witness}: ${err.message}`);
      }
      lc.addCandidateKey(r.witness, key);
      r = lc.submit(header, rotations);
    }
    if (r.status === 'held' || r.status === 'need-key') {
      // Its parent is the tip, which the light client holds: cannot happen; never go on blindly.
      throw new LightClientError('not-chained', n, `the light client answered ${r.status}`);
    }
    this.ahead.set(header.id, b);
    this.tip = { number: n, id: header.id };
    if (r.status !== 'verified') return;
    for (const f of r.final) this.finalised(f);
    for (const [id, x] of this.ahead)
      if (x.ref.number <= lc.finalBlock.number) this.ahead.delete(id);
  }

  /**
   * Submit `header`, read right above the final block with nothing held and not chained to it, so
   * the light client names the case: a checkpoint older than the chain served (a halt) or a block
   * off the final chain (refused). A halt stops ingest until an operator acts, so it is never
   * taken on one provider's word: the block must also be the one the providers agree on at its
   * height (`blockIdAt`: every answering provider, at least the quorum). When they do not (another
   * id, a disagreement), the block is refused like any lie and its provider set aside; the honest
   * ones are read next. Without `blockIdAt` (tests of the gate alone) the light client's answer
   * stands.
   * @throws LightClientError: the light client's (its halt confirmed by the providers), or
   *   `not-chained` (halt false) when the providers do not confirm the block; the providers'
   *   transport errors as thrown (the loop retries the step).
   */
  private async submitUnchained(header: SignedHeader, signal?: AbortSignal): Promise<void> {
    try {
      this.client.submit(header, []);
    } catch (err) {
      if (!(err instanceof LightClientError) || !err.halt || !this.blockIdAt) throw err;
      let theirs: string;
      try {
        theirs = await this.blockIdAt(header.number, signal);
      } catch (e) {
        if (!(e instanceof CheckpointError)) throw e;
        throw new LightClientError(
          'not-chained',
          header.number,
          `not chained to the final block, and the providers do not confirm it (${e.message}): refused, not a halt (${err.message})`,
        );
      }
      if (theirs === header.id) throw err;
      throw new LightClientError(
        'not-chained',
        header.number,
        `block ${header.id} is not chained to the final block, and the providers' block there is ${theirs}: refused, not a halt`,
      );
    }
  }

  /** A block the light client made final: queue it, or check it against what is committed. */
  private finalised(f: FinalBlock): void {
    const c = this.committed;
    if (c && f.number <= c.number) {
      // Read again after a restart: committed already, never twice. The cursor's own block must
      // be the one the SRs made final.
      if (f.number === c.number && c.id !== '' && f.id !== c.id) {
        throw new FinalityHaltError(
          f.number,
          `the committed block ${c.id} is not the block ${f.id} the SRs made final`,
        );
      }
      return;
    }
    const b = this.ahead.get(f.id);
    if (!b) throw new Error(`finality gate: final block ${f.number} ${f.id} was not read`);
    this.ready.push(b);
  }

  /** The next block to commit (proven final, in chain order), or undefined. */
  next(): VerifiedSolidifiedBlock | undefined {
    return this.ready[0];
  }

  /** The block returned by next() was committed (its number and blockID). */
  shift(): void {
    const b = this.ready.shift();
    if (b) this.committed = { number: b.ref.number, id: b.verified.id };
  }

  /**
   * Whether committing `b` (the block next() returned) reaches the light client's final block:
   * then the light client's state is what a restart resumes from, stored in that commit
   * (store.ts saveLightClientState).
   */
  isFinalTip(b: VerifiedSolidifiedBlock): boolean {
    return (
      this.ready.length === 1 &&
      this.ready[0] === b &&
      b.ref.number === this.client.finalBlock.number
    );
  }

  /** The state to store (store.ts): the light client at its final block. */
  snapshot(): ReturnType<LightClient['snapshot']> {
    return this.client.snapshot();
  }

  /** For /v1/status, /healthz, metrics and the console. @throws Error before open() (unpinned). */
  status(): FinalityGateStatus {
    const lc = this.client;
    const cp = lc.checkpoint;
    return {
      ...lc.status(),
      threshold: FINALITY_THRESHOLD,
      activeSrs: ACTIVE_SR_COUNT,
      checkpoint: { number: cp.block.number, id: cp.block.id },
      waiting: this.ahead.size + this.ready.length + this.orphans.length,
      readHeight: this.tip.number,
    };
  }
}

/** Whom finalityGateFor reports a provider outvoted on the SR set to. */
export interface SrDissentHandling {
  /**
   * The node group ingest reads blocks from: a provider outvoted is set aside there
   * (NodeGroup.distrust, check `sr_answer`), like any provider whose answer was refused. Its
   * providers' names are TRON_NODE_URL's, the same as the ones asked here.
   */
  group?: Pick<NodeGroup, 'distrust'> | undefined;
  /** Where the dissent is logged (warn). */
  logger?: Pick<Logger, 'warn'> | undefined;
}

/**
 * The finality gate of an ingester: the light client is always on (issue 28: no off switch). At
 * the checkpoint TRON_LIGHT_CLIENT_CHECKPOINT pins; without one, at the checkpoint stored by an
 * earlier run, or else one the providers agree on at the cursor's block the first time ingest
 * starts (buildCheckpoint with `at`, quorum TRON_NODE_QUORUM and every provider that answers:
 * trust on first use, logged and shown in /v1/status; pin one to remove that trust; unanimity
 * there, see checkpoint-build.ts). The same providers answer the key of an SR new after a
 * maintenance (newSrKeyFromProviders: by majority, issue 36 item 2; each provider outvoted is
 * logged at warn with what was asked and both answers, counted in
 * tronwatch_node_answers_refused_total{check="sr_answer"} and set aside in `dissent.group`, the
 * ingester's node group) and the restart check of the stored final block.
 * @param network the chain followed (`mainnet`, or `nile` for the test network's ingester),
 *   written into a checkpoint taken from the providers.
 * @param dissent where a provider outvoted on the SR set is set aside and logged (default:
 *   nowhere; the value is still taken by majority).
 * @throws CheckpointError as loadCheckpointSetting (a start with a bad pin fails, never runs
 *   without the checkpoint it asked for).
 */
export async function finalityGateFor(
  cfg: {
    ingest: Pick<Config['ingest'], 'lightClientCheckpoint'>;
    node: Pick<Config['node'], 'providers' | 'quorum' | 'timeoutMs'>;
  },
  network = 'mainnet',
  dissent: SrDissentHandling = {},
): Promise<FinalityGate> {
  const pin = cfg.ingest.lightClientCheckpoint;
  const checkpoint = pin === undefined ? undefined : await loadCheckpointSetting(pin);
  const providers = cfg.node.providers.map((p) => ({ url: p.url, name: p.name, apiKey: p.apiKey }));
  const ask = (signal?: AbortSignal) => ({
    quorum: cfg.node.quorum,
    timeoutMs: cfg.node.timeoutMs,
    ...(signal ? { signal } : {}),
  });
  const onDissent = (d: ProviderDissent): void => {
    dissent.logger?.warn(
      {
        provider: d.provider,
        asked: d.what,
        answer: d.answer,
        agreed: d.agreed,
        agreed_by: d.agreedBy,
        network,
      },
      'light client: a provider’s answer about the SR set differs from the majority’s; the majority’s is taken and that provider is set aside',
    );
    dissent.group?.distrust(
      d.provider,
      new CheckpointError(
        `${d.what}: answered ${d.answer}, but ${d.agreedBy.join(', ')} answered ${d.agreed}`,
      ),
      'sr_answer',
    );
  };
  return new FinalityGate({
    checkpoint,
    bootstrap: (at, signal) =>
      buildCheckpoint(providers, {
        ...ask(signal),
        at,
        network,
        sourcePrefix: 'taken by tronwatch at its first start (not pinned)',
      }),
    blockIdAt: (number, signal) => agreedBlockId(providers, number, ask(signal)),
    checkBlockId: (number, id, signal) => checkBlockId(providers, number, id, ask(signal)),
    headersAt: (number, signal) => blockHeadersAt(providers, number, ask(signal)),
    keyOf: (address, signal, epochEnd) =>
      epochEnd === undefined
        ? witnessKeyFromProviders(providers, address, {
            ...ask(signal),
            rule: 'majority',
            onDissent,
          })
        : newSrKeyFromProviders(providers, address, epochEnd, { ...ask(signal), onDissent }),
  });
}
