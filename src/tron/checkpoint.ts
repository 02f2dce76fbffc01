/**
 * Checkpoints: a block number with the blockID it must have, so that what tronwatch reads is
 * anchored to a chain it already knows rather than to whatever the first answer says.
 *
 * - `INGEST_START_BLOCK=number:blockID` (parseStartBlock): the first block ingested must have that
 *   id, or it is refused (ingest/loop.ts); every later block then follows it by parentHash.
 * - MAINNET_CHECKPOINT, shipped in the repository: a real mainnet block with its time. It bounds
 *   the heads a provider may report before anything is committed (mainnet makes at most one
 *   block per 3 s slot: a head above checkpoint + elapsed slots + slack is impossible), so a fresh
 *   installation never starts where a liar says.
 *
 * Provenance of MAINNET_CHECKPOINT: block 79,072,107 of TRON mainnet (2026-01-08 13:36:54 UTC),
 * from java-tron's gRPC `GetBlockByNum2` answer recorded in ultrasoundlabs/untron-v3's public test
 * data (crates/tron/testdata/fixtures, commit 8b076fd9abbd4ccd0ce75b16219e3de6e3d1fd3a), kept in
 * test/fixtures/tron-mainnet/chain/ (blockext-79072107.bin). Its blockID re-hashes from its
 * header bytes and its txTrieRoot from its transactions (test/unit/fixtures.test.ts checks both,
 * and that this constant is that block's). Anyone can compare it with a block explorer
 * (tronscan.org/#/block/79072107, the block hash) or with two providers'
 * `/walletsolidity/getblock {"id_or_num":"79072107","detail":false}` (`blockID`).
 */

/** A block number and the blockID (64 lower-case hex) it must have. */
export interface Checkpoint {
  number: number;
  id: string;
}

/** The shipped mainnet checkpoint, with its block time (ms since epoch). See the module doc. */
export const MAINNET_CHECKPOINT: Readonly<Checkpoint & { timestamp: number }> = Object.freeze({
  number: 79_072_107,
  id: '0000000004b68b6be6d7223b1ecf2850f00f700292beeead2810c18e9e1548e2',
  timestamp: 1_767_879_414_000,
});

/** Mainnet's block interval, ms: one block per 3 s slot at most. */
export const MAINNET_BLOCK_INTERVAL_MS = 3000;

const START_RE = /^(0|[1-9]\d{0,15})(?::([0-9a-fA-F]{64}))?$/;

/**
 * Parse INGEST_START_BLOCK: `number` or `number:blockID`. A blockID must start with the number
 * as 8 big-endian bytes (java-tron's BlockId), which catches a pasted id of another block.
 * @returns the number and, when given, the lower-case id.
 * @throws TypeError with a message that says the expected form.
 */
export function parseStartBlock(s: string): { number: number; id?: string } {
  const m = START_RE.exec(s.trim());
  const n = m?.[1] === undefined ? Number.NaN : Number(m[1]);
  if (!m || !Number.isSafeInteger(n)) {
    throw new TypeError(
      `INGEST_START_BLOCK must be a block number or number:blockID (64 hex), got ${JSON.stringify(s)}`,
    );
  }
  if (m[2] === undefined) return { number: n };
  const id = m[2].toLowerCase();
  if (BigInt(`0x${id.slice(0, 16)}`) !== BigInt(n)) {
    throw new TypeError(
      `INGEST_START_BLOCK: blockID ${id.slice(0, 16)}… is not the id of block ${n} (a blockID starts with its number as 16 hex digits)`,
    );
  }
  return { number: n, id };
}
