/**
 * Transfer extraction from one solidified block and its transaction infos (DESIGN §Transfer
 * extraction (mainnet)). What counts as a transfer:
 *
 * - TRX: a transaction whose (only) contract is `TransferContract` and whose `ret[0].contractRet`
 *   is `SUCCESS`. from = owner_address, to = to_address, amount = `amount` in sun, event_index 0.
 * - USDT: every log of a transaction whose signed `ret[0].contractRet` is `SUCCESS` (bound by the
 *   header's txTrieRoot; tron/verify.ts checks that the receipt agrees), emitted by the USDT
 *   contract (TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t), with topics[0] = keccak256
 *   ("Transfer(address,address,uint256)") and three topics. from/to = the low 20 bytes of
 *   topics[1]/topics[2] with 0x41 restored; amount = `data` as uint256; event_index = the log's
 *   position in the transaction's log list. This covers transfer, transferFrom and transfers that
 *   other contracts make.
 *
 * Not transfers: failed transactions; TRX moved by contracts (internal transactions);
 * TRC-10 (`TransferAssetContract`); other TRC-20 tokens; approvals; resource delegation and
 * staking. Zero-amount transfers are dropped: they move nothing, and zero-value USDT transfers
 * are the tool of address-poisoning scams.
 */
import { USDT_CONTRACT_HEX } from './address.js';
import { toBigInt } from './json.js';
import type {
  BlockJson,
  BlockRef,
  LogJson,
  TransactionInfoJson,
  TransactionJson,
  Transfer,
} from './types.js';

/** keccak256("Transfer(address,address,uint256)"). */
export const TRANSFER_TOPIC = 'ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';
const HEX64 = /^[0-9a-fA-F]{64}$/;

/** The node answered something that is not a well-formed block or transaction info. */
export class MalformedBlockError extends Error {
  readonly retryable = false;
  constructor(message: string) {
    super(message);
    this.name = 'MalformedBlockError';
  }
}

/** Number, id and timestamp of a block. @throws MalformedBlockError when absent. */
export function blockRef(block: BlockJson): BlockRef {
  const raw = block.block_header?.raw_data;
  if (raw?.number === undefined || typeof block.blockID !== 'string') {
    throw new MalformedBlockError('block without block_header.raw_data.number or blockID');
  }
  return {
    number: Number(raw.number),
    id: block.blockID.toLowerCase(),
    timestamp: Number(raw.timestamp ?? 0),
  };
}

function addressParam(v: unknown, what: string, txId: string): string {
  if (typeof v !== 'string' || !/^41[0-9a-fA-F]{40}$/.test(v)) {
    throw new MalformedBlockError(`tx ${txId}: ${what} is not a 41-hex address`);
  }
  return v.toLowerCase();
}

/** Which logs a direct USDT call signs for: transfer(to, v) and transferFrom(from, to, v) with full call data. */
const SIGNED_SELECTORS: ReadonlyArray<readonly [string, number]> = [
  ['a9059cbb', 8 + 128],
  ['23b872dd', 8 + 192],
];

/**
 * Whether a transaction's USDT Transfer logs are implied by its signed bytes: one contract, a
 * TriggerSmartContract of USDT whose selector is transfer or transferFrom with complete call data
 * (tron/verify.ts refuses any log of such a call that is not exactly the signed transfer).
 */
export function isDirectUsdtTransfer(tx: TransactionJson, usdt = USDT_CONTRACT_HEX): boolean {
  const c = tx.raw_data?.contract;
  if (c?.length !== 1 || c[0]?.type !== 'TriggerSmartContract') return false;
  const v = c[0].parameter?.value ?? {};
  if (typeof v.contract_address !== 'string' || v.contract_address.toLowerCase() !== usdt) {
    return false;
  }
  const data = typeof v.data === 'string' ? v.data.toLowerCase() : '';
  for (const [sel, len] of SIGNED_SELECTORS)
    if (data.startsWith(sel) && data.length >= len) return true;
  return false;
}

function trxTransfer(tx: TransactionJson, ref: BlockRef): Transfer | null {
  const contract = tx.raw_data?.contract?.[0];
  if (contract?.type !== 'TransferContract') return null;
  if (tx.ret?.[0]?.contractRet !== 'SUCCESS') return null;
  const v = contract.parameter?.value ?? {};
  const amount = v.amount === undefined ? 0n : toBigInt(v.amount);
  if (amount <= 0n) return null;
  return {
    blockNumber: ref.number,
    blockTimestamp: ref.timestamp,
    txId: tx.txID.toLowerCase(),
    eventIndex: 0,
    asset: 'TRX',
    from: addressParam(v.owner_address, 'owner_address', tx.txID),
    to: addressParam(v.to_address, 'to_address', tx.txID),
    amountRaw: amount,
    contract: null,
  };
}

function topicAddress(topic: string): string {
  return `41${topic.slice(24).toLowerCase()}`;
}

/**
 * The USDT Transfer of one log (extraction rules of the module doc), or null when the log is not
 * one (another contract, another event, a zero amount).
 * @param index the log's position in its transaction's log list (the `event_index`).
 * @throws MalformedBlockError on malformed topics or data.
 */
export function usdtTransfer(
  log: LogJson,
  index: number,
  info: TransactionInfoJson,
  ref: BlockRef,
  usdt: string,
): Transfer | null {
  if (log.address?.toLowerCase() !== usdt.slice(2)) return null;
  const topics = log.topics ?? [];
  if (topics.length !== 3 || topics[0]?.toLowerCase() !== TRANSFER_TOPIC) return null;
  const [, fromTopic, toTopic] = topics;
  if (!fromTopic || !toTopic || !HEX64.test(fromTopic) || !HEX64.test(toTopic)) {
    throw new MalformedBlockError(`tx ${info.id}: Transfer log ${index} has malformed topics`);
  }
  const data = log.data ?? '';
  if (data !== '' && !/^[0-9a-fA-F]+$/.test(data)) {
    throw new MalformedBlockError(`tx ${info.id}: Transfer log ${index} has non-hex data`);
  }
  const amount = data === '' ? 0n : BigInt(`0x${data}`);
  if (amount <= 0n) return null;
  return {
    blockNumber: ref.number,
    blockTimestamp: ref.timestamp,
    txId: info.id.toLowerCase(),
    eventIndex: index,
    asset: 'USDT',
    from: topicAddress(fromTopic),
    to: topicAddress(toTopic),
    amountRaw: amount,
    contract: usdt,
  };
}

/**
 * Every transfer of a block, in block order (transaction position, then event_index). Ids are
 * lower-case hex whatever case the node wrote.
 * @param infos the block's transaction infos (any order; matched by id, case-insensitively). May
 *   be empty only when the block has no contract-call transaction; a missing info for a
 *   transaction with logs would be a node fault that the client detects before calling this.
 * @param opts.proof set each transfer's `proof` to what its evidence is worth on its own:
 *   `signed` for a TRX transfer and a direct USDT transfer/transferFrom's log, `provider` for
 *   any other log (the node group raises it to `quorum` when k ≥ 2 providers agreed).
 * @param opts.usdt the USDT contract of the block's chain, 41-hex (logs carry its low 20 bytes):
 *   mainnet's TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t by default, Nile's for the test network
 *   (address.ts usdtContractHexOf).
 * @throws MalformedBlockError on a structurally invalid block or log.
 */
export function extractTransfers(
  block: BlockJson,
  infos: readonly TransactionInfoJson[],
  opts: { proof?: boolean; usdt?: string } = {},
): Transfer[] {
  const usdt = opts.usdt ?? USDT_CONTRACT_HEX;
  const ref = blockRef(block);
  const txs = block.transactions ?? [];
  const out: Transfer[] = [];
  // Infos come in block order; index by id only if that ever fails to hold.
  let byId: Map<string, TransactionInfoJson> | undefined;
  for (let i = 0; i < txs.length; i++) {
    const tx = txs[i] as TransactionJson;
    if (typeof tx.txID !== 'string') throw new MalformedBlockError(`transaction ${i} has no txID`);
    const trx = trxTransfer(tx, ref);
    if (trx) {
      if (opts.proof) trx.proof = 'signed';
      out.push(trx);
      continue;
    }
    // Success is the signed contractRet (the receipt is checked to agree by tron/verify.ts).
    if (tx.ret?.[0]?.contractRet !== 'SUCCESS') continue;
    let info = infos[i];
    const id = tx.txID.toLowerCase();
    if (info?.id?.toLowerCase() !== id) {
      byId ??= new Map(infos.map((x) => [String(x.id).toLowerCase(), x]));
      info = byId.get(id);
    }
    if (!info?.log) continue;
    const proof = opts.proof ? (isDirectUsdtTransfer(tx, usdt) ? 'signed' : 'provider') : undefined;
    const logs = info.log;
    for (let j = 0; j < logs.length; j++) {
      const t = usdtTransfer(logs[j] as LogJson, j, info, ref, usdt);
      if (t) {
        if (proof) t.proof = proof;
        out.push(t);
      }
    }
  }
  return out;
}
