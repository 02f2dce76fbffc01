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
