/**
 * Forged copies of synthetic blocks, as a lying node would serve them (ReplayLies.blocks): each
 * function takes the honest block and infos and returns forged JSON texts, plus what a credulous
 * reader would then report, so tests can check it never is.
 */
import { createHash } from 'node:crypto';
import { USDT_CONTRACT_HEX } from '../../src/tron/address.js';
import { TRANSFER_TOPIC } from '../../src/tron/extract.js';
import type { BlockJson, TransactionInfoJson, TransactionJson } from '../../src/tron/types.js';

export interface Forgery {
  block: string;
  infos: string;
  /** The check of src/tron/verify.ts that refuses it, or 'quorum' when only providers can. */
  caughtBy: string;
  /** The tx id a credulous reader would report an event for. */
  txId: string;
}

const USDT20 = USDT_CONTRACT_HEX.slice(2);
const clone = <T>(x: T): T => structuredClone(x);
const word = (v: bigint) => v.toString(16).padStart(64, '0');

function usdtTransferIndex(b: BlockJson): number {
  const i = (b.transactions ?? []).findIndex((t) => {
    const v = t.raw_data?.contract?.[0]?.parameter?.value;
    return (
      v?.contract_address === USDT_CONTRACT_HEX &&
      String(v.data ?? '').startsWith('a9059cbb') &&
      t.ret?.[0]?.contractRet === 'SUCCESS'
    );
  });
  if (i < 0) throw new Error('no USDT transfer in the block to forge');
  return i;
}

/** A USDT transfer paid to `to` instead (JSON only: the signed bytes say otherwise). */
export function forgeRecipientInJson(
  block: BlockJson,
  infos: TransactionInfoJson[],
  to41: string,
): Forgery {
  const b = clone(block);
  const tx = b.transactions?.[usdtTransferIndex(b)] as TransactionJson;
  const v = tx.raw_data?.contract?.[0]?.parameter?.value as { data: string };
  v.data = `a9059cbb${'0'.repeat(24)}${to41.slice(2)}${v.data.slice(8 + 64)}`;
  const i = clone(infos);
  const info = i.find((x) => x.id === tx.txID) as TransactionInfoJson;
  const log = info.log?.[0] as { topics: string[] };
  log.topics[2] = `${'0'.repeat(24)}${to41.slice(2)}`;
  return {
    block: JSON.stringify(b),
    infos: JSON.stringify(i),
    caughtBy: 'tx_fields',
    txId: tx.txID,
  };
}

/**
 * A USDT transfer re-signed to pay `to`: call data, raw_data_hex, txID, info id and log all made
 * consistent. Only the transaction root (not checkable from JSON once it differs) and the other
 * providers can tell.
 */
export function forgeConsistentTransfer(
  block: BlockJson,
  infos: TransactionInfoJson[],
  to41: string,
): Forgery {
  const b = clone(block);
  const tx = b.transactions?.[usdtTransferIndex(b)] as TransactionJson;
  const v = tx.raw_data?.contract?.[0]?.parameter?.value as { data: string };
  const data = `a9059cbb${'0'.repeat(24)}${to41.slice(2)}${v.data.slice(8 + 64)}`;
  tx.raw_data_hex = tx.raw_data_hex?.replace(v.data, data);
  v.data = data;
  const oldId = tx.txID;
  tx.txID = createHash('sha256')
    .update(Buffer.from(tx.raw_data_hex ?? '', 'hex'))
    .digest('hex');
  const i = clone(infos);
  const info = i.find((x) => x.id === oldId) as TransactionInfoJson;
  info.id = tx.txID;
  const log = info.log?.[0] as { topics: string[] };
  log.topics[2] = `${'0'.repeat(24)}${to41.slice(2)}`;
  return { block: JSON.stringify(b), infos: JSON.stringify(i), caughtBy: 'quorum', txId: tx.txID };
}

/** A TRX transfer's receipt given a USDT Transfer log to `to` (it runs no code: transfer_log). */
export function forgeLogOnTrxTransfer(
  block: BlockJson,
  infos: TransactionInfoJson[],
  to41: string,
): Forgery {
  const tx = (block.transactions ?? []).find(
    (t) => t.raw_data?.contract?.[0]?.type === 'TransferContract',
  );
  if (!tx) throw new Error('no TRX transfer in the block to forge');
  const i = clone(infos);
  const info = i.find((x) => x.id === tx.txID) as TransactionInfoJson;
  const from = String(tx.raw_data?.contract?.[0]?.parameter?.value?.owner_address).slice(2);
  info.log = [
    {
      address: USDT20,
      topics: [TRANSFER_TOPIC, `${'0'.repeat(24)}${from}`, `${'0'.repeat(24)}${to41.slice(2)}`],
      data: word(1_000_000_000n),
    },
  ];
  return {
    block: JSON.stringify(block),
    infos: JSON.stringify(i),
    caughtBy: 'transfer_log',
    txId: tx.txID,
  };
}

/**
 * A USDT Transfer log to `to` added to a successful call of ANOTHER contract (a DEX router): no
 * single answer can refute it (receipts are not hashed into the header); only the quorum can.
 */
export function forgeLogOnContractCall(
  block: BlockJson,
  infos: TransactionInfoJson[],
  to41: string,
): Forgery {
  const tx = (block.transactions ?? []).find((t) => {
    const v = t.raw_data?.contract?.[0]?.parameter?.value;
    return (
      t.raw_data?.contract?.[0]?.type === 'TriggerSmartContract' &&
      v?.contract_address !== USDT_CONTRACT_HEX &&
      t.ret?.[0]?.contractRet === 'SUCCESS'
    );
  });
  if (!tx) throw new Error('no call of another contract in the block to forge');
  const i = clone(infos);
  const info = i.find((x) => x.id === tx.txID) as TransactionInfoJson;
  const from = String(tx.raw_data?.contract?.[0]?.parameter?.value?.contract_address).slice(2);
  info.log = [
    ...(info.log ?? []),
    {
      address: USDT20,
      topics: [TRANSFER_TOPIC, `${'0'.repeat(24)}${from}`, `${'0'.repeat(24)}${to41.slice(2)}`],
      data: word(7_000_000_000n),
    },
  ];
  if (info.receipt) info.receipt.result = 'SUCCESS';
  return {
    block: JSON.stringify(block),
    infos: JSON.stringify(i),
    caughtBy: 'quorum',
    txId: tx.txID,
  };
}

// ---------------------------------------------------------------------------------------------
// Issue 26: the forged-deposit paths a single provider still had on 0c09a4b.

const sha256hex = (hex: string) =>
  createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex');
const pad = (a41: string) => `${'0'.repeat(24)}${a41.slice(2)}`;

function usdtCallIndex(b: BlockJson, selector: string, ret: 'SUCCESS' | 'FAILED'): number {
  const i = (b.transactions ?? []).findIndex((t) => {
    const v = t.raw_data?.contract?.[0]?.parameter?.value;
    const ok = t.ret?.[0]?.contractRet === 'SUCCESS';
    return (
      v?.contract_address === USDT_CONTRACT_HEX &&
      String(v.data ?? '').startsWith(selector) &&
      (ret === 'SUCCESS' ? ok : !ok)
    );
  });
  if (i < 0) throw new Error(`no USDT ${selector} call (${ret}) in the block to forge`);
  return i;
}

/**
 * Path 1: a made-up USDT transfer of `amount` to `to` ADDED to the block, its raw_data_hex and
 * txID consistent (re-signed by nobody: the signatures are copied), with a matching info. Only
 * the transaction root can tell: from JSON it no longer re-encodes to the header's.
 */
export function forgeAddedTransaction(
  block: BlockJson,
  infos: TransactionInfoJson[],
  to41: string,
  amount: bigint,
): Forgery {
  const b = clone(block);
  const model = b.transactions?.[usdtTransferIndex(b)] as TransactionJson;
  const tx = clone(model);
  const v = tx.raw_data?.contract?.[0]?.parameter?.value as { data: string };
  const data = `a9059cbb${pad(to41)}${word(amount)}`;
  tx.raw_data_hex = tx.raw_data_hex?.replace(v.data, data);
  v.data = data;
  tx.txID = sha256hex(tx.raw_data_hex ?? '');
  b.transactions?.push(tx);
  const i = clone(infos);
  const info = clone(i.find((x) => x.id === model.txID) as TransactionInfoJson);
  info.id = tx.txID;
  const log = info.log?.[0] as { topics: string[]; data: string };
  log.topics[2] = pad(to41);
  log.data = word(amount);
  i.push(info);
  return { block: JSON.stringify(b), infos: JSON.stringify(i), caughtBy: 'tx_root', txId: tx.txID };
}

/**
 * Path 2: a real direct USDT transfer whose receipt pays its recipient 1 base unit and `to` the
 * rest, both logs from the real sender (the logs still sum to the signed amount).
 */
export function forgeSplitTransferLogs(
  block: BlockJson,
  infos: TransactionInfoJson[],
  to41: string,
): Forgery {
  const tx = block.transactions?.[usdtTransferIndex(block)] as TransactionJson;
  const i = clone(infos);
  const info = i.find((x) => x.id === tx.txID) as TransactionInfoJson;
  const real = info.log?.[0] as { address: string; topics: string[]; data: string };
  const amount = BigInt(`0x${real.data}`);
  info.log = [
    { ...real, topics: [...real.topics], data: word(1n) },
    {
      address: real.address,
      topics: [TRANSFER_TOPIC, real.topics[1] as string, pad(to41)],
      data: word(amount - 1n),
    },
  ];
  return {
    block: JSON.stringify(block),
    infos: JSON.stringify(i),
    caughtBy: 'transfer_log',
    txId: tx.txID,
  };
}

/**
 * Path 3: a real FAILED USDT transfer (signed ret REVERT / OUT_OF_ENERGY) reported as a success:
 * receipt SUCCESS, no `result`, and the Transfer log its call data implies.
 * @returns the forgery and the call's recipient (41-hex), to be watched.
 */
export function forgeFailedAsSuccess(
  block: BlockJson,
  infos: TransactionInfoJson[],
): Forgery & { recipient: string } {
  const tx = block.transactions?.[usdtCallIndex(block, 'a9059cbb', 'FAILED')] as TransactionJson;
  const v = tx.raw_data?.contract?.[0]?.parameter?.value as { data: string; owner_address: string };
  const recipient = `41${v.data.slice(8 + 24, 8 + 64)}`;
  const i = clone(infos);
  const info = i.find((x) => x.id === tx.txID) as TransactionInfoJson;
  delete info.result;
  delete info.resMessage;
  info.receipt = { ...(info.receipt ?? {}), result: 'SUCCESS' };
  info.log = [
    {
      address: USDT20,
      topics: [TRANSFER_TOPIC, pad(v.owner_address), pad(recipient)],
      data: v.data.slice(8 + 64, 8 + 128),
    },
  ];
  return {
    block: JSON.stringify(block),
    infos: JSON.stringify(i),
    caughtBy: 'receipts',
    txId: tx.txID,
    recipient,
  };
}

/** Path 4: a Transfer log to `to` added to a real successful USDT `approve`. */
export function forgeLogOnApprove(
  block: BlockJson,
  infos: TransactionInfoJson[],
  to41: string,
): Forgery {
  const tx = block.transactions?.[usdtCallIndex(block, '095ea7b3', 'SUCCESS')] as TransactionJson;
  const owner = String(tx.raw_data?.contract?.[0]?.parameter?.value?.owner_address);
  const i = clone(infos);
  const info = i.find((x) => x.id === tx.txID) as TransactionInfoJson;
  info.log = [
    ...(info.log ?? []),
    {
      address: USDT20,
      topics: [TRANSFER_TOPIC, pad(owner), pad(to41)],
      data: word(5_000_000_000n),
    },
  ];
  return {
    block: JSON.stringify(block),
    infos: JSON.stringify(i),
    caughtBy: 'transfer_log',
    txId: tx.txID,
  };
}

/**
 * Path 5: every USDT Transfer log of calls to OTHER contracts rewritten with its topics joined
 * as `["t0,t1","t2"]` (the same text once joined with commas): not a Transfer log any more.
 * @returns the forgery and how many logs were rewritten.
 */
export function forgeJoinedTopics(
  block: BlockJson,
  infos: TransactionInfoJson[],
): Forgery & { rewritten: number } {
  const i = clone(infos);
  let rewritten = 0;
  let txId = '';
  for (const tx of block.transactions ?? []) {
    const v = tx.raw_data?.contract?.[0]?.parameter?.value;
    if (tx.raw_data?.contract?.[0]?.type !== 'TriggerSmartContract') continue;
    if (v?.contract_address === USDT_CONTRACT_HEX) continue;
    const info = i.find((x) => x.id === tx.txID);
    for (const l of info?.log ?? []) {
      const t = l.topics ?? [];
      if (l.address !== USDT20 || t.length !== 3 || t[0] !== TRANSFER_TOPIC) continue;
      if (BigInt(`0x${l.data || '0'}`) === 0n) continue;
      l.topics = [`${t[0]},${t[1]}`, t[2] as string];
      rewritten++;
      txId = tx.txID;
    }
  }
  if (rewritten === 0) throw new Error('no USDT log of another contract in the block to forge');
  return {
    block: JSON.stringify(block),
    infos: JSON.stringify(i),
    caughtBy: 'quorum',
    txId,
    rewritten,
  };
}

/**
 * Path 10a: the header's timestamp + 2^64 (and the infos' blockTimeStamp with it): the same
 * header bytes once truncated to 64 bits, so the same blockID, but a time no database takes.
 */
export function forgeTimestampWrap(
  blockText: string,
  infosText: string,
  timestamp: number,
): Forgery {
  const wrapped = (BigInt(timestamp) + 2n ** 64n).toString();
  const block = blockText.replace(`"timestamp":${timestamp}`, `"timestamp":${wrapped}`);
  const infos = infosText
    .split(`"blockTimeStamp":${timestamp}`)
    .join(`"blockTimeStamp":${wrapped}`);
  if (block === blockText) throw new Error('no header timestamp to wrap');
  return { block, infos, caughtBy: 'header', txId: '' };
}

/** Path 10b: the infos without blockNumber and blockTimeStamp. */
export function forgeInfosWithoutBlock(infos: TransactionInfoJson[]): Forgery {
  const i = clone(infos).map((x) => {
    delete x.blockNumber;
    delete x.blockTimeStamp;
    return x;
  });
  return { block: '', infos: JSON.stringify(i), caughtBy: 'receipts', txId: '' };
}

/** Path 10c: every id (blockID, txIDs, info ids) in upper-case hex. */
export function forgeUpperCaseIds(block: BlockJson, infos: TransactionInfoJson[]): Forgery {
  const b = clone(block);
  b.blockID = b.blockID?.toUpperCase();
  for (const t of b.transactions ?? []) t.txID = t.txID.toUpperCase();
  const i = clone(infos).map((x) => ({ ...x, id: x.id.toUpperCase() }));
  return { block: JSON.stringify(b), infos: JSON.stringify(i), caughtBy: 'none', txId: '' };
}
