/**
 * A synthetic TRON mainnet: deterministic, seeded blocks and transaction infos shaped exactly like
 * java-tron's `getblockbynum` (visible=false) and `gettransactioninfobyblocknum` answers, for the
 * demo, the replay node, tests and benchmarks. Each block also carries the list of transfers the
 * generator knows it put in (`transfers`), an expectation independent of extract.ts.
 *
 * What it models (from mainnet block 79072107, 619 txs: 230 TransferContract, 152 USDT transfer,
 * 2 transferFrom, 2 approve, 2 calls to another contract, 125 DelegateResource, 66
 * UnDelegateResource, 38 TransferAsset, 1 AccountCreate, 1 FreezeBalanceV2), in about the same
 * proportions (see MIX), plus what that block lacked but mainnet has every day:
 * - TRX `TransferContract` (always SUCCESS: java-tron rejects a failing one before it is packed);
 * - USDT `transfer`, `transferFrom` (one Transfer log each; TRON USDT's transfer() returns false,
 *   so its contractResult is 32 zero bytes) and `approve` (an Approval log, not a transfer);
 *   address-poisoning USDT transfers of 0 (a log, but not a transfer: extract.ts drops zero amounts);
 *   now and then an amount above 2^53 base units (10^16+), to exercise exact parsing;
 * - calls to other contracts that move USDT: a DEX swap (a Transfer log of another TRC-20 token,
 *   the USDT Transfer log, Sync and Swap events, so the USDT log may sit at event_index 1) and a
 *   disperse (several USDT Transfer logs, occasionally one of 0, then a custom event);
 * - transfers of other TRC-20 tokens, calls that emit no log, TRC-10 `TransferAssetContract`,
 *   resource delegation, staking and account creation: none of them is a transfer for tronwatch;
 * - failed calls (`failedRate` of all txs): USDT transfers that REVERT or run OUT_OF_ENERGY and
 *   swaps that revert with an Error(string); `ret[0].contractRet` says so, the info has
 *   `result: "FAILED"`, `receipt.result` and a hex `resMessage`, and no `log`.
 *
 * Fidelity: `raw_data_hex` is the real protobuf encoding of `raw_data` (encodeRawData) and `txID`
 * is its sha256, as on mainnet; `receipt.net_usage` follows java-tron's bandwidth rule (size of the
 * signed transaction + 64 bytes). Fields holding protobuf defaults are omitted as java-tron omits
 * them (no `log` without logs, no `result` on success, `contractResult: [""]` for non-calls, no
 * `resource` key for BANDWIDTH, no `transactions` key in an empty block). The block passes every
 * check of tron/verify.ts, computed here independently of it: `txTrieRoot` is java-tron's Merkle
 * root over SHA-256 of each transaction's whole protobuf bytes (raw_data, signatures, ret), and
 * `blockID` is the number followed by bytes 8–31 of SHA-256 of the encoded header; `parentHash` is
 * the blockID of the block before, so the chain is chained from `firstBlock`, whose parent (like
 * that of any block below it) is a seeded id: the chain's checkpoint, where a reader must start. Block n therefore needs the
 * ids of the blocks before it: they are memoised per chain (generated in order, as the demo and
 * the tests do, each block is generated once; asked out of order, the missing ones are generated
 * to compute their ids). Each header is signed, as on mainnet, by the SR its time schedules
 * (`(t/3000) mod 27`) in the chain's set (devnetSrs: DEVNET_SRS, or NILE_DEVNET_SRS for a
 * Nile-shaped chain), with that SR's key, so the light client (tron/light-client) follows a
 * synthetic chain from syntheticCheckpoint. Not real: transaction signatures are random
 * bytes (they sign nothing); fees use an energy price of 100 sun and a bandwidth price of 1000 sun per byte.
 *
 * Knobs (SyntheticChainOptions): `seed` (default 1), `firstBlock` (70,000,000), `txPerBlock`
 * (600), `addresses` (10,000), `startTimestamp` (1,767,000,000,000 ms; one block every 3,000 ms),
 * `failedRate` (0.02). Amounts are integers in sun (TRX, 10^-6) or USDT base units (10^-6 USDT).
 * Every JSON integer is a JS number below 2^53 (TRX amounts stay below 10^15); USDT amounts only
 * live in hex `data` strings, so JSON.stringify of a block or its infos is exact.
 *
 * Addresses: accounts are drawn from a population of `addresses` seeded addresses
 * (syntheticAddress), 30% of the time from its first 1% ("hot wallets" such as exchanges), so
 * watches registered on the population see traffic. Contracts (routers, pairs, other tokens),
 * witnesses, accounts created by AccountCreateContract and poisoning look-alikes are outside it.
 *
 * Cost (Node 20, one core): a 600-tx block takes ~5 ms once warm (median; p95 ~10 ms with GC),
 * ~11 ms while the seed's addresses are not yet memoised, and ~50-70 ms for the very first call
 * of a process (JIT). Block n is generated from (options, n) alone: random access costs the same
 * as sequential access.
 */
import { createHash } from 'node:crypto';
import { NILE_USDT_CONTRACT_HEX } from '../tron/address.js';
import type { Checkpoint, SrEntry } from '../tron/light-client/sr-set.js';
import { addressOfPrivateKey, signWitnessHeader } from '../tron/light-client/witness-signature.js';
import type {
  BlockJson,
  LogJson,
  TransactionInfoJson,
  TransactionJson,
  Transfer,
} from '../tron/types.js';

/** Options of a synthetic chain. Two chains with equal options are byte-identical. */
export interface SyntheticChainOptions {
  /** PRNG seed (safe integer). Default 1. Also decides the address population. */
  seed?: number;
  /** Number of the chain's first block; only anchors timestamps. Default 70,000,000. */
  firstBlock?: number;
  /** Transactions in every block (integer ≥ 0). Default 600 (mainnet averages ~200-700). */
  txPerBlock?: number;
  /** Size of the account population (integer ≥ 2). Default 10,000. */
  addresses?: number;
  /** Timestamp of `firstBlock`, ms since epoch; block n's is this + (n - firstBlock) × 3000. */
  startTimestamp?: number;
  /** Fraction of transactions that are failed contract calls, in [0, 1]. Default 0.02. */
  failedRate?: number;
  /**
   * The chain's USDT contract, 41-hex. Default mainnet's (TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t);
   * a Nile-shaped chain (issue 32 item 5) passes Nile's, 41eca9bc…5f
   * (TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf), and its blocks are then signed by the Nile-shaped
   * chain's own SRs (NILE_DEVNET_SRS, devnetSrs), not the mainnet-shaped devnet's.
   */
  usdtContract?: string;
}

/** One synthetic block: the node's two answers and the transfers it contains, in block order. */
export interface SyntheticBlock {
  block: BlockJson;
  infos: TransactionInfoJson[];
  transfers: Transfer[];
}

interface Resolved {
  seed: number;
  firstBlock: number;
  txPerBlock: number;
  addresses: number;
  startTimestamp: number;
  failedRate: number;
  /** The USDT contract, 41-hex. */
  usdt: string;
  /** Every option, so two chains that differ in anything get different block ids. */
  key: string;
}

/** Mainnet produces a block every 3 s. */
const BLOCK_INTERVAL_MS = 3000;

// Constants written out here rather than imported from address.ts / extract.ts: `transfers` is
// the independent expectation the extractor is tested against, so it must not share its inputs.
/** USDT (TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t) as 41-hex. */
const USDT = '41a614f803b6fd780986a42c78ec9c7f77e6ded13c';
/** keccak256("Transfer(address,address,uint256)"). */
const TOPIC_TRANSFER = 'ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';
/** keccak256("Approval(address,address,uint256)"). */
const TOPIC_APPROVAL = '8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925';
/** keccak256("Sync(uint112,uint112)"), Uniswap-V2-style pairs (SunSwap V2). */
const TOPIC_SYNC = '1c411e9a96e071241c2f21f7726b17ae89e3cab4c78be50e062b03a9fffbbad1';
/** keccak256("Swap(address,uint256,uint256,uint256,uint256,address)"). */
const TOPIC_SWAP = 'd78ad95fa46c994b6551d0da85fc275fe613ce37657fb8d5e3d130840159d822';

/** Stand-in topic of the disperse contract's own event (sha256 of a name: no real ABI behind it). */
const TOPIC_DISPERSED = sha256('Dispersed(address,address,uint256)').toString('hex');

const SEL_TRANSFER = 'a9059cbb';
const SEL_TRANSFER_FROM = '23b872dd';
const SEL_APPROVE = '095ea7b3';
/** swapExactTokensForTokens(uint256,uint256,address[],address,uint256). */
const SEL_SWAP = '38ed1739';
/** disperseToken(address,address[],uint256[]). */
const SEL_DISPERSE = 'c73a2d60';

const ZERO_WORD = '0'.repeat(64);
const TRUE_WORD = `${'0'.repeat(63)}1`;
const MAX_UINT256 = 'f'.repeat(64);
/** Energy price (sun per unit) and bandwidth price (sun per byte) used for burned fees. */
const ENERGY_PRICE = 100;
const BANDWIDTH_PRICE = 1000;
/** A USDT transfer costs 64,285 energy, or 130,285 when the recipient holds no USDT yet. */
const USDT_ENERGY = [64_285, 130_285] as const;
/** hex("REVERT opcode executed"), java-tron's resMessage of a reverted call. */
const RES_REVERT = hexUtf8('REVERT opcode executed');
/** TRC-10 token ids seen in TransferAssetContract, as the hex of their decimal string. */
const ASSET_NAMES = ['1002000', '1005114', '1004031', '1000226'].map(hexUtf8);

// ---------------------------------------------------------------------------------------------
// Options, hashing, PRNG

function resolve(opts: SyntheticChainOptions): Resolved {
  const r = {
    seed: opts.seed ?? 1,
    firstBlock: opts.firstBlock ?? 70_000_000,
    txPerBlock: opts.txPerBlock ?? 600,
    addresses: opts.addresses ?? 10_000,
    startTimestamp: opts.startTimestamp ?? 1_767_000_000_000,
    failedRate: opts.failedRate ?? 0.02,
  };
  if (!Number.isSafeInteger(r.seed)) throw new RangeError('seed must be a safe integer');
  if (!Number.isSafeInteger(r.firstBlock) || r.firstBlock < 1) {
    throw new RangeError('firstBlock must be an integer ≥ 1');
  }
  if (!Number.isSafeInteger(r.txPerBlock) || r.txPerBlock < 0) {
    throw new RangeError('txPerBlock must be an integer ≥ 0');
  }
  if (!Number.isSafeInteger(r.addresses) || r.addresses < 2) {
    throw new RangeError('addresses must be an integer ≥ 2');
  }
  if (!Number.isSafeInteger(r.startTimestamp) || r.startTimestamp < 0) {
    throw new RangeError('startTimestamp must be an integer ≥ 0 (ms)');
  }
  if (!(r.failedRate >= 0 && r.failedRate <= 1))
    throw new RangeError('failedRate must be in [0, 1]');
  const usdt = (opts.usdtContract ?? USDT).toLowerCase();
  if (!/^41[0-9a-f]{40}$/.test(usdt)) throw new RangeError('usdtContract must be 41-hex');
  // Mainnet's USDT leaves the key (so the ids) as they were before the option existed.
  const key = `${r.seed}/${r.firstBlock}/${r.txPerBlock}/${r.addresses}/${r.startTimestamp}/${r.failedRate}${usdt === USDT ? '' : `/${usdt}`}`;
  return { ...r, usdt, key };
}

function sha256(data: string | Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
}

function hexUtf8(s: string): string {
  return Buffer.from(s, 'utf8').toString('hex');
}

/** 41-hex of an address derived from a label (contracts, witnesses): stable across seeds. */
function labelAddress(label: string): string {
  return `41${sha256(`tronwatch/synthetic/${label}`).toString('hex', 0, 20)}`;
}

const ROUTERS = [labelAddress('router/0'), labelAddress('router/1')];
const DISPERSE = labelAddress('disperse');
const TOKENS = [labelAddress('token/0'), labelAddress('token/1'), labelAddress('token/2')];
/** One USDT pair per other token. */
const PAIRS = TOKENS.map((_, k) => labelAddress(`pair/${k}`));
const OPAQUE = [labelAddress('opaque/0'), labelAddress('opaque/1')];
/** One SR of the devnet: its account, the key that signs its blocks, and that key's secret. */
export interface DevnetSr extends SrEntry {
  /** 32-byte secp256k1 private key of `signingKey` (devnet only: derived from a public label). */
  privateKey: Uint8Array;
}

/**
 * The devnet's 27 super representatives, in schedule order: SR k produces the slots whose
 * `(t/3000) mod 27` is k (sr-set.ts scheduleIndex). Like mainnet's (78,000,000–78,000,099: 20 of 27
 * sign with their own address), SRs 0–19 sign with their own account's key and SRs 20–26 with a
 * separate witness-permission key. Keys are derived from public labels: never use them elsewhere.
 */
export const DEVNET_SRS: readonly DevnetSr[] = srSet('');

/**
 * The Nile-shaped chain's own 27 SRs (issue 32 item 5), built as DEVNET_SRS from other public
 * labels (`nile/sr-key/k`, `nile/witness/k`): SRs 0–19 sign with their own account's key, 20–26
 * with a separate witness-permission key. None of them is in DEVNET_SRS, so a light client
 * following the mainnet-shaped devnet refuses a Nile-shaped block, and the reverse.
 */
export const NILE_DEVNET_SRS: readonly DevnetSr[] = srSet('nile/');

/** 27 SRs from the labels `${prefix}sr-key/k` (keys) and `${prefix}witness/k` (accounts 20–26). */
function srSet(prefix: string): DevnetSr[] {
  return Array.from({ length: 27 }, (_, k) => {
    const privateKey = new Uint8Array(sha256(`tronwatch/synthetic/${prefix}sr-key/${k}`));
    const signingKey = addressOfPrivateKey(privateKey);
    const address = k < 20 ? signingKey : labelAddress(`${prefix}witness/${k}`);
    return { address, signingKey, privateKey };
  });
}

/**
 * The SR set that signs a synthetic chain, in schedule order: NILE_DEVNET_SRS when its
 * `usdtContract` is Nile's (a Nile-shaped chain, issue 32), else DEVNET_SRS.
 * @throws RangeError on invalid options.
 */
export function devnetSrs(opts: SyntheticChainOptions): readonly DevnetSr[] {
  return srsOf(resolve(opts));
}

function srsOf(r: Resolved): readonly DevnetSr[] {
  return r.usdt === NILE_USDT_CONTRACT_HEX ? NILE_DEVNET_SRS : DEVNET_SRS;
}

/**
 * The devnet's maintenance interval: longer than any devnet run, so the SR set never changes in a
 * synthetic chain (the maintenance rules are tested on chains built for that, test/helpers).
 */
export const DEVNET_MAINTENANCE_INTERVAL_MS = 2 ** 40;

/**
 * The checkpoint a light client follows a synthetic chain from: the block before `firstBlock`
 * (the chain's seeded anchor), its time, and the chain's SRs (devnetSrs) in schedule order.
 */
export function syntheticCheckpoint(opts: SyntheticChainOptions): Checkpoint {
  const r = resolve(opts);
  const timestamp = r.startTimestamp - BLOCK_INTERVAL_MS;
  const interval = DEVNET_MAINTENANCE_INTERVAL_MS;
  return {
    network: 'devnet',
    block: { number: r.firstBlock - 1, id: chainedId(r, r.firstBlock - 1), timestamp },
    witnesses: srsOf(r).map((s) => ({ address: s.address, signingKey: s.signingKey })),
    nextMaintenanceTime: (Math.floor(timestamp / interval) + 1) * interval,
    maintenanceIntervalMs: interval,
    source: `synthetic chain ${r.key}`,
  };
}

/** A recorded mainnet block's producer in the devnet set: its real address is its key. */
export interface RecordedSr extends SrEntry {
  /** No private key: it signs only its recorded block(s); its other slots are missed. */
  privateKey: undefined;
}

/**
 * The devnet set around a recorded mainnet block: DEVNET_SRS with the block's real SR in the slot
 * its timestamp schedules (`(t/3000) mod 27`), signing with its own address (block 79,072,107's
 * does, as do 20 of mainnet's 27). The recorded block keeps its real signature; a devnet block in
 * that SR's other slots cannot be signed, so those slots are missed, as slots are on mainnet.
 * @param recorded the recorded block's producer (42 hex) and time (ms).
 */
export function devnetSrsAround(recorded: {
  witness: string;
  timestamp: number;
}): ReadonlyArray<DevnetSr | RecordedSr> {
  const k = Math.floor(recorded.timestamp / BLOCK_INTERVAL_MS) % DEVNET_SRS.length;
  const real: RecordedSr = {
    address: recorded.witness,
    signingKey: recorded.witness,
    privateKey: undefined,
  };
  return DEVNET_SRS.map((s, i) => (i === k ? real : s));
}

/** The SR of `srs` scheduled at `timestamp` (ms): srs[(t/3000) mod 27]. */
function scheduledSr(srs: readonly DevnetSr[], timestamp: number): DevnetSr {
  return srs[Math.floor(timestamp / BLOCK_INTERVAL_MS) % srs.length] as DevnetSr;
}

const RNG_SCRATCH = Buffer.alloc(256);

/** sfc32 (Chris Doty-Humphrey's Small Fast Counting PRNG): 128-bit state, passes PractRand. */
class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: Buffer) {
    this.a = seed.readUInt32BE(0);
    this.b = seed.readUInt32BE(4);
    this.c = seed.readUInt32BE(8);
    this.d = seed.readUInt32BE(12);
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** Uniform integer in [0, 2^32). */
  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1) with 53 bits. */
  float(): number {
    return ((this.u32() >>> 5) * 67108864 + (this.u32() >>> 6)) / 9007199254740992;
  }

  /** Uniform integer in [lo, hi] (both below 2^53). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  /** Log-uniform integer in [lo, hi): as many amounts of 1-10 as of 10^6-10^7, like real traffic. */
  logUniform(lo: number, hi: number): number {
    return Math.floor(Math.exp(Math.log(lo) + this.float() * (Math.log(hi) - Math.log(lo))));
  }

  pick<T>(items: readonly T[]): T {
    const v = items[Math.floor(this.float() * items.length)];
    if (v === undefined) throw new Error('pick from an empty list');
    return v;
  }

  /** `bytes` random bytes as lowercase hex. */
  hex(bytes: number): string {
    if (bytes > RNG_SCRATCH.length) throw new RangeError('at most 256 random bytes at a time');
    for (let i = 0; i < bytes; i += 4) RNG_SCRATCH.writeUInt32BE(this.u32(), i);
    return RNG_SCRATCH.toString('hex', 0, bytes);
  }
}

// ---------------------------------------------------------------------------------------------
// Addresses and block ids

/**
 * The i-th address of the seeded population, as lowercase 41-hex (42 chars): 0x41 followed by the
 * first 20 bytes of sha256("tronwatch/synthetic/address/<seed>/<i>"). Depends only on `seed`.
 * @throws RangeError unless 0 ≤ i < `addresses`.
 */
export function syntheticAddress(opts: SyntheticChainOptions, i: number): string {
  const r = resolve(opts);
  if (!Number.isInteger(i) || i < 0 || i >= r.addresses) {
    throw new RangeError(`address index ${i} outside [0, ${r.addresses})`);
  }
  return populationAddress(r.seed, i);
}

/**
 * The whole population, index i holding syntheticAddress(opts, i): a fresh array. 10,000 take
 * 20-40 ms the first time for a seed (one sha256 each), little once memoised.
 */
export function syntheticAddresses(opts: SyntheticChainOptions): string[] {
  const r = resolve(opts);
  return Array.from({ length: r.addresses }, (_, i) => populationAddress(r.seed, i));
}

/**
 * Addresses already derived, per seed: a block draws ~1,500 accounts and a sha256 each would be
 * half the cost of a block. A memo only (results do not depend on it); at most 8 seeds are kept.
 */
const populations = new Map<number, Array<string | undefined>>();

function populationAddress(seed: number, i: number): string {
  let memo = populations.get(seed);
  if (!memo) {
    if (populations.size >= 8) populations.clear();
    memo = [];
    populations.set(seed, memo);
  }
  let a = memo[i];
  if (a === undefined) {
    a = `41${sha256(`tronwatch/synthetic/address/${seed}/${i}`).toString('hex', 0, 20)}`;
    memo[i] = a;
  }
  return a;
}

/**
 * The id of block n: its number as 8 big-endian bytes, then bytes 8–31 of SHA-256 of its encoded
 * header (as java-tron); 64 lowercase hex, so `parseInt(id.slice(0, 16), 16)` is the number.
 * Block n+1's `parentHash` is this id. Below `firstBlock` (unchained blocks) the 24 bytes are
 * seeded instead. May generate the blocks from `firstBlock` to n (see the module doc).
 */
export function syntheticBlockId(opts: SyntheticChainOptions, n: number): string {
  const r = resolve(opts);
  return n >= r.firstBlock ? chainedId(r, n) : (generate(r, n).block.blockID as string);
}

/** Ids of generated blocks, per chain (Resolved.key); a few chains per process at most. */
const chainIds = new Map<string, Map<number, string>>();

function idsOf(r: Resolved): Map<number, string> {
  let ids = chainIds.get(r.key);
  if (!ids) {
    if (chainIds.size >= 8) chainIds.clear();
    ids = new Map();
    chainIds.set(r.key, ids);
  }
  return ids;
}

/**
 * The blockID of block n ≥ firstBlock (see syntheticBlockId), generating what is missing below it;
 * below firstBlock, the seeded checkpoint id (what firstBlock names as its parent).
 */
function chainedId(r: Resolved, n: number): string {
  if (n < r.firstBlock) return blockIdOf(r, n);
  const ids = idsOf(r);
  const hit = ids.get(n);
  if (hit !== undefined) return hit;
  // The highest id known below n, then generate upwards (each block records its own id).
  let k = n - 1;
  while (k >= r.firstBlock && !ids.has(k)) k--;
  for (let m = Math.max(k + 1, r.firstBlock); m <= n; m++) generate(r, m);
  return ids.get(n) as string;
}

/** The checkpoint id of a block below firstBlock (its children's parentHash): number ‖ 24 seeded bytes. */
function blockIdOf(r: Resolved, n: number): string {
  if (!Number.isSafeInteger(n) || n < 0)
    throw new RangeError(`block number ${n} is not an integer ≥ 0`);
  const num = n.toString(16).padStart(16, '0');
  return num + sha256(`tronwatch/synthetic/block/${r.key}/${n}`).toString('hex', 8, 32);
}

// ---------------------------------------------------------------------------------------------
// Protobuf encoding of Transaction.raw (java-tron protocol/Tron.proto, core/contract/*.proto)

type Wire = 'bytes' | 'int' | 'bool' | 'resource';

/** Contract message schemas: JSON key, field number, wire form, in field order. */
const CONTRACTS: Record<
  string,
  { code: number; fields: ReadonlyArray<readonly [string, number, Wire]> }
> = {
  AccountCreateContract: {
    code: 0,
    fields: [
      ['owner_address', 1, 'bytes'],
      ['account_address', 2, 'bytes'],
      ['type', 3, 'int'],
    ],
  },
  TransferContract: {
    code: 1,
    fields: [
      ['owner_address', 1, 'bytes'],
      ['to_address', 2, 'bytes'],
      ['amount', 3, 'int'],
    ],
  },
  TransferAssetContract: {
    code: 2,
    fields: [
      ['asset_name', 1, 'bytes'],
      ['owner_address', 2, 'bytes'],
      ['to_address', 3, 'bytes'],
      ['amount', 4, 'int'],
    ],
  },
  TriggerSmartContract: {
    code: 31,
    fields: [
      ['owner_address', 1, 'bytes'],
      ['contract_address', 2, 'bytes'],
      ['call_value', 3, 'int'],
      ['data', 4, 'bytes'],
      ['call_token_value', 5, 'int'],
      ['token_id', 6, 'int'],
    ],
  },
  FreezeBalanceV2Contract: {
    code: 54,
    fields: [
      ['owner_address', 1, 'bytes'],
      ['frozen_balance', 2, 'int'],
      ['resource', 3, 'resource'],
    ],
  },
  DelegateResourceContract: {
    code: 57,
    fields: [
      ['owner_address', 1, 'bytes'],
      ['resource', 2, 'resource'],
      ['balance', 3, 'int'],
      ['receiver_address', 4, 'bytes'],
      ['lock', 5, 'bool'],
      ['lock_period', 6, 'int'],
    ],
  },
  UnDelegateResourceContract: {
    code: 58,
    fields: [
      ['owner_address', 1, 'bytes'],
      ['resource', 2, 'resource'],
      ['balance', 3, 'int'],
      ['receiver_address', 4, 'bytes'],
    ],
  },
};

const RESOURCE_CODES: Record<string, number> = { BANDWIDTH: 0, ENERGY: 1, TRON_POWER: 2 };

/** Transaction.raw fields: JSON key, field number, wire form (contract, 11, is special). */
const RAW_FIELDS: ReadonlyArray<readonly [string, number, Wire | 'contract']> = [
  ['ref_block_bytes', 1, 'bytes'],
  ['ref_block_num', 3, 'int'],
  ['ref_block_hash', 4, 'bytes'],
  ['expiration', 8, 'int'],
  ['data', 10, 'bytes'],
  ['contract', 11, 'contract'],
  ['scripts', 12, 'bytes'],
  ['timestamp', 14, 'int'],
  ['fee_limit', 18, 'int'],
];

/**
 * A growable protobuf byte writer. Nested messages are written into the writer one level down
 * and copied in with their length, so encoding allocates nothing per field.
 */
class PbWriter {
  buf = Buffer.allocUnsafe(1024);
  pos = 0;

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  varint(value: number | bigint): void {
    this.ensure(10);
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) {
      let v = value;
      while (v >= 128) {
        this.buf[this.pos++] = (v % 128) | 128;
        v = Math.floor(v / 128);
      }
      this.buf[this.pos++] = v;
      return;
    }
    let v = BigInt.asUintN(64, BigInt(value)); // int64: negatives as two's complement, 10 bytes
    while (v >= 128n) {
      this.buf[this.pos++] = Number(v & 127n) | 128;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
  }

  /** Field `field` as varint; the proto3 default (0) is not written. */
  int(field: number, v: number | bigint): void {
    if (v === 0 || v === 0n) return;
    this.varint(field << 3);
    this.varint(v);
  }

  /** Field `field` as bytes given in hex; empty is the default and not written. */
  hex(field: number, hex: string): void {
    if (hex === '') return;
    const len = hex.length >>> 1;
    this.varint((field << 3) | 2);
    this.varint(len);
    this.ensure(len);
    this.buf.write(hex, this.pos, len, 'hex');
    this.pos += len;
  }

  /** Field `field` as a string (ASCII). */
  ascii(field: number, s: string): void {
    this.varint((field << 3) | 2);
    this.varint(s.length);
    this.ensure(s.length);
    this.buf.write(s, this.pos, s.length, 'latin1');
    this.pos += s.length;
  }

  /** Field `field` holding the bytes written so far into `inner` (which is then emptied). */
  message(field: number, inner: PbWriter): void {
    const len = inner.pos;
    this.varint((field << 3) | 2);
    this.varint(len);
    this.ensure(len);
    inner.buf.copy(this.buf, this.pos, 0, len);
    this.pos += len;
    inner.pos = 0;
  }
}

/** One writer per nesting level: raw ← Contract ← Any ← the contract message. */
const WRITERS = [new PbWriter(), new PbWriter(), new PbWriter(), new PbWriter()] as const;
const HEX = /^[0-9a-fA-F]*$/;

function writeField(w: PbWriter, field: number, wire: Wire, value: unknown, key: string): void {
  switch (wire) {
    case 'bytes':
      if (typeof value !== 'string' || value.length % 2 !== 0 || !HEX.test(value)) {
        throw new TypeError(`${key} is not hex`);
      }
      w.hex(field, value);
      return;
    case 'bool':
      w.int(field, value === true ? 1 : 0);
      return;
    case 'resource': {
      const code = typeof value === 'string' ? RESOURCE_CODES[value] : undefined;
      if (code === undefined) throw new TypeError(`${key}: unknown resource ${String(value)}`);
      w.int(field, code);
      return;
    }
    case 'int':
      if (typeof value !== 'number' && typeof value !== 'bigint') {
        throw new TypeError(`${key} is not an integer`);
      }
      w.int(field, value);
      return;
  }
}

function writeContract(out: PbWriter, c: unknown): void {
  const [, contractW, anyW, msgW] = WRITERS;
  const contract = c as {
    type?: unknown;
    parameter?: { value?: unknown; type_url?: unknown };
    Permission_id?: unknown;
  };
  const schema = typeof contract.type === 'string' ? CONTRACTS[contract.type] : undefined;
  if (!schema) throw new TypeError(`cannot encode contract type ${String(contract.type)}`);
  const value = (contract.parameter?.value ?? {}) as Record<string, unknown>;
  for (const k of Object.keys(value)) {
    if (!schema.fields.some(([name]) => name === k)) throw new TypeError(`unknown field ${k}`);
  }
  for (const [name, no, wire] of schema.fields) {
    if (value[name] !== undefined) writeField(msgW, no, wire, value[name], name);
  }
  anyW.ascii(1, String(contract.parameter?.type_url ?? ''));
  anyW.message(2, msgW);
  contractW.int(1, schema.code);
  contractW.message(2, anyW);
  if (contract.Permission_id !== undefined) {
    writeField(contractW, 5, 'int', contract.Permission_id, 'Permission_id');
  }
  out.message(11, contractW);
}

/**
 * The protobuf bytes of a transaction's `raw_data` (java-tron's Transaction.raw), whose sha256 is
 * the txID and whose hex is `raw_data_hex`. Covers the contract types this module generates
 * (TransferContract, TransferAssetContract, TriggerSmartContract, AccountCreateContract,
 * FreezeBalanceV2Contract, Delegate/UnDelegateResourceContract) and the raw fields ref_block_*,
 * expiration, data, scripts, timestamp and fee_limit. Integers may be number or bigint.
 * Checked against mainnet block 79072107: all 619 raw_data_hex and txIDs reproduce.
 * @throws TypeError on another contract type or an unknown field.
 */
export function encodeRawData(raw: Record<string, unknown>): Buffer {
  for (const k of Object.keys(raw)) {
    if (!RAW_FIELDS.some(([name]) => name === k)) {
      throw new TypeError(`unknown raw_data field ${k}`);
    }
  }
  for (const w of WRITERS) w.pos = 0; // a previous call may have thrown half-way
  const [out] = WRITERS;
  for (const [name, no, wire] of RAW_FIELDS) {
    const v = raw[name];
    if (v === undefined) continue;
    if (wire === 'contract') {
      if (!Array.isArray(v)) throw new TypeError('contract is not a list');
      for (const c of v) writeContract(out, c);
    } else writeField(out, no, wire, v, name);
  }
  return Buffer.from(out.buf.subarray(0, out.pos)); // a copy: the writer is reused
}

// ---------------------------------------------------------------------------------------------
// The mix

type Kind =
  | 'trx'
  | 'usdtTransfer'
  | 'usdtTransferFrom'
  | 'usdtApprove'
  | 'usdtPoison'
  | 'routerSwap'
  | 'routerDisperse'
  | 'otherToken'
  | 'opaqueCall'
  | 'delegate'
  | 'undelegate'
  | 'transferAsset'
  | 'accountCreate'
  | 'freezeV2';

/**
 * Relative weights of successful transactions. The first ten are block 79072107's counts
 * (opaqueCall = its 2 calls to contract 417b7d90…, which left no known log); the last four are
 * our guess of everyday mainnet traffic that block happened to lack: poisoning, swaps, disperses
 * and other tokens, about 2% together.
 */
const MIX: ReadonlyArray<readonly [Kind, number]> = [
  ['trx', 230],
  ['usdtTransfer', 152],
  ['usdtTransferFrom', 2],
  ['usdtApprove', 2],
  ['opaqueCall', 2],
  ['delegate', 125],
  ['undelegate', 66],
  ['transferAsset', 38],
  ['accountCreate', 1],
  ['freezeV2', 1],
  ['usdtPoison', 3],
  ['routerSwap', 4],
  ['routerDisperse', 2],
  ['otherToken', 4],
];
const MIX_TOTAL = MIX.reduce((s, [, w]) => s + w, 0);

/** One USDT transfer in 400 carries 10^16+ base units (> 2^53): about one every 3 blocks. */
const BIG_USDT_RATE = 1 / 400;

interface Ctx {
  r: Resolved;
  n: number;
  ts: number;
  rng: Rng;
  refIds: Map<number, string>;
}

/** A transfer before the transaction id is known. */
interface Leg {
  eventIndex: number;
  asset: 'USDT' | 'TRX';
  from: string;
  to: string;
  amountRaw: bigint;
}

interface Outcome {
  contractRet: 'SUCCESS' | 'REVERT' | 'OUT_OF_ENERGY';
  /** For calls: the return data (hex, '' for none) and the energy bill. */
  call?: {
    result: string;
    energyTotal: number;
    /** Energy units paid from staked or rented energy; the rest is burned at ENERGY_PRICE. */
    energyStaked: number;
  };
  /** How bandwidth was paid: from free/staked bandwidth, burned, or a fixed fee (sun). */
  net: 'usage' | 'burn' | { fee: number };
  /** Fee beyond energy and bandwidth, sun (account creation). */
  extraFee?: number;
  log?: LogJson[];
  resMessage?: string;
}

interface Draft {
  type: string;
  value: Record<string, string | number | boolean>;
  permissionId?: number;
  feeLimit?: number;
  outcome: Outcome;
  legs: Leg[];
}

function account(ctx: Ctx): string {
  const { r, rng } = ctx;
  const hot = Math.max(1, Math.ceil(r.addresses / 100));
  const i = rng.chance(0.3) ? rng.int(0, hot - 1) : rng.int(0, r.addresses - 1);
  return populationAddress(r.seed, i);
}

function twoAccounts(ctx: Ctx): [string, string] {
  const a = account(ctx);
  let b = account(ctx);
  while (b === a) b = account(ctx); // TRON rejects a transfer to oneself
  return [a, b];
}

function word(v: bigint | number): string {
  return v.toString(16).padStart(64, '0');
}

/** An address as a calldata word; wallets often leave the 0x41 byte inside the padding. */
function addressWord(addr41: string, with41 = false): string {
  return with41 ? `${'0'.repeat(22)}${addr41}` : `${'0'.repeat(24)}${addr41.slice(2)}`;
}

function topicOf(addr41: string): string {
  return `${'0'.repeat(24)}${addr41.slice(2)}`;
}

function transferLog(token: string, from: string, to: string, amount: bigint): LogJson {
  return {
    address: token.slice(2),
    topics: [TOPIC_TRANSFER, topicOf(from), topicOf(to)],
    data: word(amount),
  };
}

function usdtAmount(ctx: Ctx): bigint {
  const { rng } = ctx;
  if (rng.chance(BIG_USDT_RATE)) return 10n ** 16n + BigInt(rng.int(0, 10 ** 15)); // > 2^53
  if (rng.chance(0.05)) return BigInt(rng.int(1, 1000)); // dust, often poisoning too
  const v = rng.logUniform(100_000, 100_000_000_000); // 0.1 to 100,000 USDT
  return BigInt(rng.chance(0.4) ? Math.max(1, Math.round(v / 1e6)) * 1e6 : v);
}

function trxAmount(ctx: Ctx): number {
  const { rng } = ctx;
  if (rng.chance(0.25)) return rng.int(1, 10); // dust and poisoning
  const v = rng.logUniform(100_000, 500_000_000_000); // 0.1 to 500,000 TRX
  return rng.chance(0.5) ? Math.max(1, Math.round(v / 1e6)) * 1e6 : v;
}

function feeLimit(ctx: Ctx): number {
  return ctx.rng.pick([30_000_000, 50_000_000, 50_000_000, 100_000_000, 15_000_000, 150_000_000]);
}

function usdtCallEnergy(ctx: Ctx): { energyTotal: number; energyStaked: number } {
  const { rng } = ctx;
  const energyTotal = rng.pick(USDT_ENERGY);
  const mode = rng.float();
  // Most USDT senders rent or stake energy (hence all the DelegateResource traffic), some burn TRX.
  const energyStaked = mode < 0.45 ? energyTotal : mode < 0.6 ? rng.int(1, energyTotal - 1) : 0;
  return { energyTotal, energyStaked };
}

function netMode(ctx: Ctx): 'usage' | 'burn' {
  return ctx.rng.chance(0.3) ? 'burn' : 'usage';
}

function trxTransfer(ctx: Ctx): Draft {
  const [from, to] = twoAccounts(ctx);
  const amount = trxAmount(ctx);
  // Activating a new account costs 1 TRX plus a fixed 0.1 TRX of bandwidth.
  const activates = ctx.rng.chance(0.05);
  return {
    type: 'TransferContract',
    value: { owner_address: from, to_address: to, amount },
    outcome: {
      contractRet: 'SUCCESS',
      net: activates ? { fee: 100_000 } : netMode(ctx),
      ...(activates ? { extraFee: 1_000_000 } : {}),
    },
    legs: [{ eventIndex: 0, asset: 'TRX', from, to, amountRaw: BigInt(amount) }],
  };
}

function usdtCall(
  ctx: Ctx,
  owner: string,
  data: string,
  result: string,
  log: LogJson,
  legs: Leg[],
): Draft {
  return {
    type: 'TriggerSmartContract',
    value: { owner_address: owner, contract_address: ctx.r.usdt, data },
    feeLimit: feeLimit(ctx),
    outcome: {
      contractRet: 'SUCCESS',
      call: { result, ...usdtCallEnergy(ctx) },
      net: netMode(ctx),
      log: [log],
    },
    legs,
  };
}

function usdtTransfer(ctx: Ctx): Draft {
  const amount = usdtAmount(ctx);
  const [from, to] = twoAccounts(ctx);
  const data = SEL_TRANSFER + addressWord(to, ctx.rng.chance(0.6)) + word(amount);
  const legs: Leg[] = [{ eventIndex: 0, asset: 'USDT', from, to, amountRaw: amount }];
  return usdtCall(ctx, from, data, ZERO_WORD, transferLog(ctx.r.usdt, from, to, amount), legs);
}

function usdtTransferFrom(ctx: Ctx): Draft {
  const amount = usdtAmount(ctx);
  const [spender, from] = twoAccounts(ctx);
  let dest = account(ctx);
  while (dest === from) dest = account(ctx);
  const data = SEL_TRANSFER_FROM + addressWord(from) + addressWord(dest) + word(amount);
  const legs: Leg[] = [{ eventIndex: 0, asset: 'USDT', from, to: dest, amountRaw: amount }];
  return usdtCall(ctx, spender, data, TRUE_WORD, transferLog(ctx.r.usdt, from, dest, amount), legs);
}

function usdtApprove(ctx: Ctx): Draft {
  const [owner, spender] = twoAccounts(ctx);
  const amount = ctx.rng.chance(0.7) ? MAX_UINT256 : word(usdtAmount(ctx));
  const log: LogJson = {
    address: ctx.r.usdt.slice(2),
    topics: [TOPIC_APPROVAL, topicOf(owner), topicOf(spender)],
    data: amount,
  };
  return usdtCall(ctx, owner, SEL_APPROVE + addressWord(spender) + amount, TRUE_WORD, log, []);
}

/**
 * Address poisoning: a look-alike of the victim's counterparty (same first and last characters)
 * sends the victim 0 USDT, or the scammer calls transferFrom(victim, look-alike, 0), hoping the
 * victim later copies the look-alike from their history. A Transfer log, never a transfer.
 */
function usdtPoison(ctx: Ctx): Draft {
  const [victim, peer] = twoAccounts(ctx);
  const lookalike = `41${peer.slice(2, 8)}${ctx.rng.hex(14)}${peer.slice(-6)}`;
  if (ctx.rng.chance(0.5)) {
    const data = SEL_TRANSFER + addressWord(victim) + ZERO_WORD;
    return usdtCall(
      ctx,
      lookalike,
      data,
      ZERO_WORD,
      transferLog(ctx.r.usdt, lookalike, victim, 0n),
      [],
    );
  }
  const scammer = account(ctx);
  const data = SEL_TRANSFER_FROM + addressWord(victim) + addressWord(lookalike) + ZERO_WORD;
  return usdtCall(
    ctx,
    scammer,
    data,
    TRUE_WORD,
    transferLog(ctx.r.usdt, victim, lookalike, 0n),
    [],
  );
}

function otherTokenAmount(ctx: Ctx): bigint {
  // 18-decimal tokens: up to ~10^24 base units, beyond 2^53, in hex data only.
  return BigInt(ctx.rng.logUniform(1e6, 1e15)) * 10n ** BigInt(ctx.rng.int(0, 9));
}

function swapCalldata(
  ctx: Ctx,
  user: string,
  tokenIn: string,
  tokenOut: string,
  amountIn: bigint,
  minOut: bigint,
): string {
  const deadline = Math.floor(ctx.ts / 1000) + ctx.rng.int(60, 1200);
  return (
    SEL_SWAP +
    word(amountIn) +
    word(minOut) +
    word(0xa0) +
    addressWord(user) +
    word(deadline) +
    word(2) +
    addressWord(tokenIn) +
    addressWord(tokenOut)
  );
}

/**
 * A SunSwap-V2-style swap through a router: tokenIn moves user → pair, tokenOut pair → user, then
 * the pair's Sync and Swap events. One side is USDT, so its Transfer log is at index 0 or 1.
 */
function routerSwap(ctx: Ctx): Draft {
  const { rng } = ctx;
  const user = account(ctx);
  const router = rng.pick(ROUTERS);
  const k = rng.int(0, TOKENS.length - 1);
  const token = TOKENS[k] as string;
  const pair = PAIRS[k] as string;
  const usdtIn = rng.chance(0.5);
  const usdt = usdtAmount(ctx);
  const other = otherTokenAmount(ctx);
  const [tokenIn, tokenOut] = usdtIn ? [ctx.r.usdt, token] : [token, ctx.r.usdt];
  const [amountIn, amountOut] = usdtIn ? [usdt, other] : [other, usdt];
  const reserveUsdt = usdt * BigInt(rng.int(50, 5000));
  const reserveOther = other * BigInt(rng.int(50, 5000));
  // Pair token order is by address; amounts in the Swap event follow it.
  const usdtIsToken0 = ctx.r.usdt < token;
  const [r0, r1] = usdtIsToken0 ? [reserveUsdt, reserveOther] : [reserveOther, reserveUsdt];
  const in0 = tokenIn < tokenOut;
  const swapData =
    (in0 ? word(amountIn) + ZERO_WORD : ZERO_WORD + word(amountIn)) +
    (in0 ? ZERO_WORD + word(amountOut) : word(amountOut) + ZERO_WORD);
  const log: LogJson[] = [
    transferLog(tokenIn, user, pair, amountIn),
    transferLog(tokenOut, pair, user, amountOut),
    { address: pair.slice(2), topics: [TOPIC_SYNC], data: word(r0) + word(r1) },
    {
      address: pair.slice(2),
      topics: [TOPIC_SWAP, topicOf(router), topicOf(user)],
      data: swapData,
    },
  ];
  const legs: Leg[] = [
    usdtIn
      ? { eventIndex: 0, asset: 'USDT', from: user, to: pair, amountRaw: usdt }
      : { eventIndex: 1, asset: 'USDT', from: pair, to: user, amountRaw: usdt },
  ];
  const minOut = (amountOut * 995n) / 1000n;
  return {
    type: 'TriggerSmartContract',
    value: {
      owner_address: user,
      contract_address: router,
      data: swapCalldata(ctx, user, tokenIn, tokenOut, amountIn, minOut),
    },
    feeLimit: feeLimit(ctx),
    outcome: {
      contractRet: 'SUCCESS',
      call: {
        result: word(0x20) + word(2) + word(amountIn) + word(amountOut),
        energyTotal: rng.int(90_000, 220_000),
        energyStaked: rng.chance(0.5) ? 0 : rng.int(0, 90_000),
      },
      net: netMode(ctx),
      log,
    },
    legs,
  };
}

/**
 * A disperse contract paying 2-6 recipients with transferFrom(sender, recipient, value): one USDT
 * Transfer log each (event_index 0..k-1; now and then a value of 0), then the contract's own event.
 */
function routerDisperse(ctx: Ctx): Draft {
  const { rng } = ctx;
  const sender = account(ctx);
  const k = rng.int(2, 6);
  const recipients: string[] = [];
  const values: bigint[] = [];
  for (let j = 0; j < k; j++) {
    let to = account(ctx);
    while (to === sender) to = account(ctx);
    recipients.push(to);
    values.push(j > 0 && rng.chance(0.1) ? 0n : usdtAmount(ctx));
  }
  const log: LogJson[] = recipients.map((to, j) =>
    transferLog(ctx.r.usdt, sender, to, values[j] as bigint),
  );
  const total = values.reduce((s, v) => s + v, 0n);
  log.push({
    address: DISPERSE.slice(2),
    topics: [TOPIC_DISPERSED, topicOf(sender), topicOf(ctx.r.usdt)],
    data: word(total),
  });
  const legs: Leg[] = [];
  recipients.forEach((to, j) => {
    const amountRaw = values[j] as bigint;
    if (amountRaw > 0n) legs.push({ eventIndex: j, asset: 'USDT', from: sender, to, amountRaw });
  });
  const data =
    SEL_DISPERSE +
    addressWord(ctx.r.usdt) +
    word(0x60) +
    word(0x80 + 32 * k) +
    word(k) +
    recipients.map((a) => addressWord(a)).join('') +
    word(k) +
    values.map(word).join('');
  return {
    type: 'TriggerSmartContract',
    value: { owner_address: sender, contract_address: DISPERSE, data },
    feeLimit: feeLimit(ctx),
    outcome: {
      contractRet: 'SUCCESS',
      call: { result: '', energyTotal: 40_000 + 35_000 * k, energyStaked: 0 },
      net: netMode(ctx),
      log,
    },
    legs,
  };
}

/** A transfer of another TRC-20 token: a Transfer log, but not from USDT. */
function otherToken(ctx: Ctx): Draft {
  const [from, to] = twoAccounts(ctx);
  const token = ctx.rng.pick(TOKENS);
  const amount = otherTokenAmount(ctx);
  return {
    type: 'TriggerSmartContract',
    value: {
      owner_address: from,
      contract_address: token,
      data: SEL_TRANSFER + addressWord(to) + word(amount),
    },
    feeLimit: feeLimit(ctx),
    outcome: {
      contractRet: 'SUCCESS',
      call: { result: TRUE_WORD, energyTotal: ctx.rng.int(13_000, 65_000), energyStaked: 0 },
      net: netMode(ctx),
      log: [transferLog(token, from, to, amount)],
    },
    legs: [],
  };
}

/** A call that emits no log (like block 79072107's two calls to 417b7d90…). */
function opaqueCall(ctx: Ctx): Draft {
  const { rng } = ctx;
  return {
    type: 'TriggerSmartContract',
    value: {
      owner_address: account(ctx),
      contract_address: rng.pick(OPAQUE),
      data: rng.hex(4 + 32 * rng.int(0, 2)),
    },
    feeLimit: rng.int(500_000, 2_000_000),
    outcome: {
      contractRet: 'SUCCESS',
      call: { result: '', energyTotal: rng.int(2_000, 7_000), energyStaked: 0 },
      net: 'usage',
    },
    legs: [],
  };
}

function permission(ctx: Ctx, p: number): { permissionId?: number } {
  // Custom permission ids are how rental services sign for their customers' accounts.
  return ctx.rng.chance(p) ? { permissionId: ctx.rng.pick([3, 3, 3, 2, 4, 5, 6]) } : {};
}

function resourceDelegation(ctx: Ctx, undelegate: boolean): Draft {
  const { rng } = ctx;
  const [owner, receiver] = twoAccounts(ctx);
  const value: Record<string, string | number | boolean> = { owner_address: owner };
  if (rng.chance(0.9)) value.resource = 'ENERGY'; // BANDWIDTH is the default: key omitted
  value.balance = rng.int(1_000, 20_000) * 1_000_000;
  value.receiver_address = receiver;
  if (!undelegate && rng.chance(0.1)) {
    if (rng.chance(0.8)) value.lock = true;
    value.lock_period = rng.pick([200, 28_800, 86_400, 92]);
  }
  return {
    type: undelegate ? 'UnDelegateResourceContract' : 'DelegateResourceContract',
    value,
    ...permission(ctx, 0.55),
    outcome: { contractRet: 'SUCCESS', net: 'usage' },
    legs: [],
  };
}

function transferAsset(ctx: Ctx): Draft {
  const [from, to] = twoAccounts(ctx);
  return {
    type: 'TransferAssetContract',
    value: {
      asset_name: ctx.rng.pick(ASSET_NAMES),
      owner_address: from,
      to_address: to,
      amount: ctx.rng.logUniform(1, 1e11),
    },
    outcome: { contractRet: 'SUCCESS', net: netMode(ctx) },
    legs: [],
  };
}

function accountCreate(ctx: Ctx): Draft {
  return {
    type: 'AccountCreateContract',
    value: { owner_address: account(ctx), account_address: `41${ctx.rng.hex(20)}` },
    outcome: { contractRet: 'SUCCESS', net: 'usage', extraFee: 1_000_000 },
    legs: [],
  };
}

function freezeV2(ctx: Ctx): Draft {
  const value: Record<string, string | number> = {
    owner_address: account(ctx),
    frozen_balance: ctx.rng.int(1, 100_000) * 1_000_000,
  };
  if (ctx.rng.chance(0.6)) value.resource = 'ENERGY';
  return {
    type: 'FreezeBalanceV2Contract',
    value,
    outcome: { contractRet: 'SUCCESS', net: 'usage' },
    legs: [],
  };
}

/** Error(string) return data, as Solidity's revert("…") encodes it. */
function errorString(msg: string): string {
  const hex = hexUtf8(msg);
  return `08c379a0${word(0x20)}${word(msg.length)}${hex.padEnd(Math.ceil(hex.length / 64) * 64, '0')}`;
}

/** A failed call: no logs, no transfers; the fee is still paid. */
function failed(ctx: Ctx): Draft {
  const { rng } = ctx;
  const roll = rng.float();
  let d: Draft;
  if (roll < 0.85) {
    d = usdtTransfer(ctx);
    if (roll < 0.65) {
      // Insufficient balance (or a blacklisted sender): the token reverts early.
      const energyTotal = rng.int(8_000, 15_000);
      d.outcome = {
        contractRet: 'REVERT',
        call: { result: '', energyTotal, energyStaked: rng.chance(0.5) ? energyTotal : 0 },
        net: netMode(ctx),
        resMessage: RES_REVERT,
      };
    } else {
      // A fee limit too low for the SSTOREs: every unit the limit buys is burned.
      const limit = rng.int(1, 12) * 1_000_000;
      const energyTotal = limit / ENERGY_PRICE;
      d.feeLimit = limit;
      const used = energyTotal - rng.int(1, 19_999);
      const msg = `Not enough energy for 'SSTORE' operation executing: curInvokeEnergyLimit[${energyTotal}], curOpEnergy[20000], usedEnergy[${used}]`;
      d.outcome = {
        contractRet: 'OUT_OF_ENERGY',
        call: { result: '', energyTotal, energyStaked: 0 },
        net: netMode(ctx),
        resMessage: hexUtf8(msg),
      };
    }
  } else {
    d = routerSwap(ctx);
    d.outcome = {
      contractRet: 'REVERT',
      call: {
        result: errorString('UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT'),
        energyTotal: rng.int(30_000, 80_000),
        energyStaked: 0,
      },
      net: netMode(ctx),
      resMessage: RES_REVERT,
    };
  }
  d.legs = [];
  return d;
}

function draft(ctx: Ctx): Draft {
  const { rng } = ctx;
  if (rng.chance(ctx.r.failedRate)) return failed(ctx);
  let x = rng.float() * MIX_TOTAL;
  let kind: Kind = 'trx';
  for (const [k, w] of MIX) {
    kind = k;
    x -= w;
    if (x < 0) break;
  }
  switch (kind) {
    case 'trx':
      return trxTransfer(ctx);
    case 'usdtTransfer':
      return usdtTransfer(ctx);
    case 'usdtTransferFrom':
      return usdtTransferFrom(ctx);
    case 'usdtApprove':
      return usdtApprove(ctx);
    case 'usdtPoison':
      return usdtPoison(ctx);
    case 'routerSwap':
      return routerSwap(ctx);
    case 'routerDisperse':
      return routerDisperse(ctx);
    case 'otherToken':
      return otherToken(ctx);
    case 'opaqueCall':
      return opaqueCall(ctx);
    case 'delegate':
      return resourceDelegation(ctx, false);
    case 'undelegate':
      return resourceDelegation(ctx, true);
    case 'transferAsset':
      return transferAsset(ctx);
    case 'accountCreate':
      return accountCreate(ctx);
    case 'freezeV2':
      return freezeV2(ctx);
  }
}

// ---------------------------------------------------------------------------------------------
// Assembly

function refBlock(ctx: Ctx): { ref_block_bytes: string; ref_block_hash: string } {
  const { rng } = ctx;
  const roll = rng.float();
  // Wallets mostly reference the solidified head (~19-21 blocks back), some the newest block.
  const back = roll < 0.75 ? rng.int(19, 24) : roll < 0.95 ? rng.int(1, 3) : rng.int(4, 60);
  const ref = Math.max(0, ctx.n - back);
  let id = ctx.refIds.get(ref);
  if (id === undefined) {
    id = chainedId(ctx.r, ref); // seeded below firstBlock: nothing earlier is generated
    ctx.refIds.set(ref, id);
  }
  return {
    ref_block_bytes: (ref & 0xffff).toString(16).padStart(4, '0'),
    ref_block_hash: id.slice(16, 32),
  };
}

function times(ctx: Ctx): { expiration: number; timestamp?: number } {
  const { rng } = ctx;
  const timestamp = ctx.ts - rng.int(300, 7_000);
  const roll = rng.float();
  // Most wallets expire after 60 s; some after an hour, 10 hours or 5 min (block 79072107).
  const life =
    roll < 0.6
      ? 60_000
      : roll < 0.75
        ? rng.int(3_542_000, 3_660_000)
        : roll < 0.85
          ? 36_000_000
          : roll < 0.9
            ? 300_000
            : rng.int(55_000, 59_000);
  if (rng.chance(0.03)) return { expiration: timestamp + life }; // timestamp is optional
  return { expiration: timestamp + life, timestamp };
}

function signature(ctx: Ctx): string {
  const { rng } = ctx;
  const v = rng.chance(0.92) ? rng.pick(['00', '01']) : rng.pick(['1b', '1c']);
  return rng.hex(64) + v;
}

interface BuiltTx {
  tx: TransactionJson;
  info: TransactionInfoJson;
  transfers: Transfer[];
}

function buildTx(ctx: Ctx, d: Draft, seen: Set<string>): BuiltTx {
  const contract: Record<string, unknown> = {
    parameter: { value: d.value, type_url: `type.googleapis.com/protocol.${d.type}` },
    type: d.type,
  };
  if (d.permissionId !== undefined) contract.Permission_id = d.permissionId;
  const t = times(ctx);
  const raw: Record<string, unknown> = {
    contract: [contract],
    ...refBlock(ctx),
    expiration: t.expiration,
  };
  if (t.timestamp !== undefined) raw.timestamp = t.timestamp;
  if (d.feeLimit !== undefined) raw.fee_limit = d.feeLimit;
  const sigs = [signature(ctx)];
  if (ctx.rng.chance(0.003)) sigs.push(signature(ctx)); // multi-signature accounts

  let bytes = encodeRawData(raw);
  let txId = sha256(bytes).toString('hex');
  for (let nudge = 1; seen.has(txId); nudge++) {
    // Two identical transactions cannot both be on chain; nudge the time (deterministically).
    if (t.timestamp !== undefined) raw.timestamp = t.timestamp + nudge;
    else raw.expiration = t.expiration + nudge;
    bytes = encodeRawData(raw);
    txId = sha256(bytes).toString('hex');
  }
  seen.add(txId);

  const tx: TransactionJson = {
    ret: [{ contractRet: d.outcome.contractRet }],
    signature: sigs,
    txID: txId,
    raw_data: raw,
    raw_data_hex: bytes.toString('hex'),
  };

  // java-tron's bandwidth: the signed transaction's size (raw in field 1, each 65-byte signature
  // in field 2) plus 64 bytes for the result it stores.
  const rawLen = bytes.length;
  const netUsage = 1 + (rawLen < 128 ? 1 : 2) + rawLen + 67 * sigs.length + 64;
  const o = d.outcome;
  const receipt: Record<string, unknown> = {};
  let fee = o.extraFee ?? 0;
  if (o.call) {
    const burned = (o.call.energyTotal - o.call.energyStaked) * ENERGY_PRICE;
    if (o.call.energyStaked > 0) receipt.energy_usage = o.call.energyStaked;
    if (burned > 0) receipt.energy_fee = burned;
    receipt.energy_usage_total = o.call.energyTotal;
    fee += burned;
  }
  if (o.net === 'usage') receipt.net_usage = netUsage;
  else {
    const netFee = o.net === 'burn' ? netUsage * BANDWIDTH_PRICE : o.net.fee;
    receipt.net_fee = netFee;
    fee += netFee;
  }
  if (o.call) receipt.result = o.contractRet;

  const info: TransactionInfoJson = { id: txId };
  if (fee > 0) info.fee = fee;
  info.blockNumber = ctx.n;
  info.blockTimeStamp = ctx.ts;
  info.contractResult = [o.call?.result ?? ''];
  if (o.call) info.contract_address = d.value.contract_address as string;
  info.receipt = receipt;
  if (o.log && o.contractRet === 'SUCCESS') info.log = o.log;
  if (o.contractRet !== 'SUCCESS') {
    info.result = 'FAILED';
    if (o.resMessage) info.resMessage = o.resMessage;
  }

  const transfers = d.legs.map(
    (l): Transfer => ({
      blockNumber: ctx.n,
      blockTimestamp: ctx.ts,
      txId,
      eventIndex: l.eventIndex,
      asset: l.asset,
      from: l.from,
      to: l.to,
      amountRaw: l.amountRaw,
      contract: l.asset === 'USDT' ? ctx.r.usdt : null,
    }),
  );
  return { tx, info, transfers };
}

/**
 * Block n of the synthetic chain, its transaction infos (one per transaction, block order) and
 * the transfers the generator put in (block order, then event_index; zero amounts excluded), in
 * extractTransfers' shape. A pure function of (opts, n): equal inputs give byte-identical JSON.
 * A 600-transaction block takes a few milliseconds; no earlier block is generated.
 * @param n block number, integer ≥ 1 (may precede `firstBlock`; timestamps then go back).
 * @throws RangeError on invalid options, a bad n, or a timestamp before the epoch.
 */
export function syntheticBlock(opts: SyntheticChainOptions, n: number): SyntheticBlock {
  const r = resolve(opts);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new RangeError(`block number ${n} is not an integer ≥ 1`);
  return generate(r, n);
}

/** Block n of the chain `r` (syntheticBlock), recording its id for the block after it. */
function generate(r: Resolved, n: number): SyntheticBlock {
  const ts = r.startTimestamp + (n - r.firstBlock) * BLOCK_INTERVAL_MS;
  if (ts < 0) throw new RangeError(`block ${n} would be timestamped before 1970`);
  const rng = new Rng(sha256(`tronwatch/synthetic/rng/${r.key}/${n}`));
  const ctx: Ctx = { r, n, ts, rng, refIds: new Map() };

  const txs: TransactionJson[] = [];
  const infos: TransactionInfoJson[] = [];
  const transfers: Transfer[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < r.txPerBlock; i++) {
    const built = buildTx(ctx, draft(ctx), seen);
    txs.push(built.tx);
    infos.push(built.info);
    for (const t of built.transfers) transfers.push(t);
  }

  const sr = scheduledSr(srsOf(r), ts);
  const raw = {
    number: n,
    txTrieRoot: merkleRoot(txs.map((t) => sha256(transactionBytes(t)))),
    witness_address: sr.address,
    parentHash: chainedId(r, n - 1),
    version: 32,
    timestamp: ts,
  };
  const headerRaw = headerRawBytes(raw);
  const blockID = n.toString(16).padStart(16, '0') + sha256(headerRaw).toString('hex', 8, 32);
  if (n >= r.firstBlock) idsOf(r).set(n, blockID);
  const signature = Buffer.from(signWitnessHeader(headerRaw, sr.privateKey)).toString('hex');
  const block: BlockJson = {
    blockID,
    block_header: { raw_data: raw, witness_signature: signature },
  };
  if (txs.length > 0) block.transactions = txs; // java-tron omits empty lists
  return { block, infos, transfers };
}

/** protocol Transaction.Result.contractResult codes of the outcomes generated here. */
const CONTRACT_RET: Readonly<Record<string, number>> = { SUCCESS: 1, REVERT: 2, OUT_OF_ENERGY: 10 };

/**
 * A transaction's whole protobuf bytes (protocol Transaction: raw_data 1, signature 2 (each),
 * ret 5 {contractRet 3}), what java-tron's Merkle leaves hash.
 */
function transactionBytes(tx: TransactionJson): Buffer {
  const w = new PbWriter();
  w.hex(1, tx.raw_data_hex ?? '');
  for (const sig of tx.signature ?? []) w.hex(2, sig);
  const ret = new PbWriter();
  for (const r of tx.ret ?? []) {
    ret.int(3, CONTRACT_RET[r.contractRet ?? ''] ?? 0);
    w.message(5, ret);
  }
  return Buffer.from(w.buf.subarray(0, w.pos));
}

/**
 * java-tron's Merkle root (MerkleTree.createTree): leaves paired left to right, parent =
 * SHA-256(left ‖ right), an odd node carried up; no leaves = 32 zero bytes. Hex.
 */
function merkleRoot(leaves: Buffer[]): string {
  if (leaves.length === 0) return ZERO_WORD;
  let level = leaves;
  while (level.length > 1) {
    const up: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2) {
      const right = level[i + 1];
      up.push(right ? sha256(Buffer.concat([level[i] as Buffer, right])) : (level[i] as Buffer));
    }
    level = up;
  }
  return (level[0] as Buffer).toString('hex');
}

/**
 * The blockID of a header (protocol BlockHeader.raw: timestamp 1, txTrieRoot 2, parentHash 3,
 * number 7, witness_address 9, version 10): 8-byte number ‖ SHA-256(encoded raw)[8..32], hex.
 * Exported for the replay node's filler blocks.
 */
export function headerBlockId(raw: HeaderFields): string {
  const hash = sha256(headerRawBytes(raw));
  return raw.number.toString(16).padStart(16, '0') + hash.toString('hex', 8, 32);
}

/** The header fields a synthetic or filler block has. */
export interface HeaderFields {
  number: number;
  txTrieRoot: string;
  witness_address: string;
  parentHash: string;
  version: number;
  timestamp: number;
}

/**
 * The `BlockHeader.raw` bytes of a header (timestamp 1, txTrieRoot 2, parentHash 3, number 7,
 * witness_address 9, version 10): what the blockID hashes and the SR signs.
 */
export function headerRawBytes(raw: HeaderFields): Buffer {
  const w = new PbWriter();
  w.int(1, raw.timestamp);
  w.hex(2, raw.txTrieRoot);
  w.hex(3, raw.parentHash);
  w.int(7, raw.number);
  w.hex(9, raw.witness_address);
  w.int(10, raw.version);
  return Buffer.from(w.buf.subarray(0, w.pos));
}

/**
 * Sign a header as the devnet SR scheduled at its time would (DEVNET_SRS or NILE_DEVNET_SRS), for
 * the replay node's filler blocks: `witness_address` must be that SR's. @returns the 65-byte
 * signature as hex.
 */
export function devnetSignHeader(raw: HeaderFields): string {
  const sr = [...DEVNET_SRS, ...NILE_DEVNET_SRS].find((s) => s.address === raw.witness_address);
  if (!sr) throw new RangeError(`${raw.witness_address} is not a devnet SR`);
  return Buffer.from(signWitnessHeader(headerRawBytes(raw), sr.privateKey)).toString('hex');
}
