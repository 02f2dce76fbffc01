/**
 * The confirmer (issue 36 item 5: no credit on one provider's word; docs/trusting-the-node.md
 * #held-events). A `provider`-proof event (a USDT Transfer log inside another contract's call,
 * read from one provider: no header commits to receipts) is stored and listed at once, but its
 * notifications are created held (commit.ts, migration 095): no worker claims them. This loop,
 * in the ingest role beside the block loop, asks EVERY configured provider for the transaction's
 * receipt (`/wallet/gettransactioninfobyid`, NodeClient.getTransactionInfo) and compares each
 * answer with the stored event (src/tron/receipt-confirm.ts):
 *
 * - at least max(2, TRON_NODE_QUORUM) providers return the same facts (the original reader, asked
 *   again, counts as one) and none contradicts them: the event's `proof` becomes `quorum` and its
 *   notifications are released (claimable now, schedule from now), in ONE transaction;
 * - a provider contradicts them: the notifications stay held with `held_reason` 'contradicted' and
 *   the provider's words in `held_detail`, logged at warn (nothing deleted); asked again later
 *   (a lagging node, or a liar turned honest, can still confirm it);
 * - too few answers agree yet: 'awaiting_confirmation', asked again later.
 *
 * Each held transaction is asked again after blockInterval × 2^checks (3 s doubling, at most
 * 10 minutes); a round takes at most `batch` transactions (default 8): at most batch × providers
 * requests per block interval, and only while provider-proof deposits wait (none on a chain where
 * they confirm at first ask: one request per provider per such transaction).
 *
 * With ONE provider configured nothing can confirm: held rows say 'single_provider' and nothing is
 * asked; once a second provider is configured (a restart), they are checked at once. With
 * TRON_DELIVER_PROVIDER_PROOF=1 (the operator accepts one provider's word) new notifications are
 * not held (commit.ts) and, when this loop starts, every held notification that no provider
 * contradicted is released as it is (`proof: provider`): contradicted ones stay held.
 *
 * The payload is the event row as it is when a delivery is made (delivery/claim.ts), so a
 * notification released here carries `proof: quorum` on every attempt. The proof of an event is
 * raised only while ALL its notifications are held (none was ever claimable): an event already
 * delivered on one provider's word keeps the bytes it was delivered with, on any redelivery.
 */
import type { Logger } from '../common/logger.js';
import type { Db } from '../db/pool.js';
import { base58ToHex, usdtContractHexOf } from '../tron/address.js';
import type { NodeClient } from '../tron/node-client.js';
import { compareReceipt, type HeldTransfer, type ReceiptVerdict } from '../tron/receipt-confirm.js';
import type { TransactionInfoJson } from '../tron/types.js';

/** Longest wait between two checks of one held transaction, ms (10 minutes). */
const MAX_CHECK_DELAY_MS = 600_000;

/** Why a notification is held (migration 095 `held_reason`, the API's `delivery.held.reason`). */
export type HeldReason = 'awaiting_confirmation' | 'single_provider' | 'contradicted';

export interface ConfirmerOptions {
  db: Db;
  /** The chain whose held notifications are confirmed ('mainnet'). */
  network: string;
  /** Every configured provider, in order (NodeGroup.clients): each is asked. */
  clients: readonly NodeClient[];
  /** TRON_NODE_QUORUM: at least this many providers (and at least 2) must confirm. */
  quorum: number;
  /** TRON_DELIVER_PROVIDER_PROOF=1: release the held notifications no provider contradicted. */
  deliverProviderProof: boolean;
  /** The chain's block interval, ms: the round period and the first backoff step. */
  blockIntervalMs: number;
  logger: Logger;
  /** Transactions checked per round at most. Default 8. */
  batch?: number;
  /** Called with the number of notifications released (wakes the delivery workers). */
  onReleased?: (count: number) => void;
}

/** What one round did (tests, logs). */
export interface ConfirmRound {
  /** Events raised to `quorum` and released. */
  confirmed: number;
  /** Events a provider contradicted in this round. */
  contradicted: number;
  /** Events still waiting for enough confirmations. */
  waiting: number;
}

interface HeldRow {
  id: string;
  tx_id: string;
  event_index: number;
  block_number: string | number;
  block_timestamp: Date;
  from_address: string;
  to_address: string;
  amount_raw: string;
  contract: string | null;
  checks: number;
  reason: HeldReason;
}

/** Release these events' held notifications (claimable now), raising their proof if `raise`. */
const RELEASE_SQL = `
WITH raised AS (
  UPDATE events AS e SET proof = 'quorum'
   WHERE $2::bool AND e.id = ANY($1::text[]) AND e.proof = 'provider'
     AND NOT EXISTS (SELECT 1 FROM notifications AS o
                      WHERE o.event_id = e.id AND o.held_since IS NULL)
  RETURNING e.id
)
UPDATE notifications AS n
   SET held_since = NULL, held_reason = NULL, held_detail = NULL, held_next_check_at = NULL,
       next_attempt_at = now()
 WHERE n.event_id = ANY($1::text[]) AND n.held_since IS NOT NULL`;
// (A data-modifying CTE runs to completion even unreferenced; both parts read the same snapshot,
// so "no notification of the event was ever released" is judged before this release.)

/**
 * `text` as stored in held_detail: printable ASCII other than `"` and `\`, at most 500
 * characters. A node's answer (a transaction id it made up) reaches this text, and the events
 * page writes stored fields into JSON as they are (src/events/event.ts NOT_PLAIN).
 */
function plainText(text: string): string {
  return text.replace(/[^\x20-\x21\x23-\x5b\x5d-\x7e]/g, '?').slice(0, 500);
}

export class Confirmer {
  private readonly o: ConfirmerOptions;
  private readonly usdt: string;
  private wakeUp: (() => void) | undefined;
  private woken = false;

  constructor(opts: ConfirmerOptions) {
    this.o = opts;
    this.usdt = usdtContractHexOf(opts.network);
  }

  /** Providers that must confirm: max(2, quorum). */
  get needed(): number {
    return Math.max(2, this.o.quorum);
  }

  /** Check now (ingest committed held notifications). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /**
   * Run rounds until `signal` aborts: one at start, then every block interval or when woken.
   * Never rejects: a failed round (database, node) is logged and the next one tries again.
   */
  async run(signal: AbortSignal): Promise<void> {
    let started = false;
    while (!signal.aborted) {
      try {
        if (!started) {
          await this.start();
          started = true;
        }
        await this.round(signal);
      } catch (err) {
        if (signal.aborted) return;
        this.o.logger.warn(
          { err: err instanceof Error ? err.message : String(err), network: this.o.network },
          'confirmer: round failed; trying again',
        );
      }
      if (this.woken) {
        this.woken = false;
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.o.blockIntervalMs);
        const onAbort = () => done();
        signal.addEventListener('abort', onAbort, { once: true });
        this.wakeUp = done;
        function done() {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve();
        }
      });
      this.wakeUp = undefined;
      this.woken = false;
    }
  }

  /**
   * What a start decides for the rows held before it: released when the operator opted in
   * (except contradicted ones), marked 'single_provider' with one provider, or due at once
   * with several (a provider was added: check them now).
   */
  async start(): Promise<void> {
    const { db, network, logger } = this.o;
    if (this.o.deliverProviderProof) {
      const { rows } = await db.query<{ event_id: string }>(
        `SELECT DISTINCT event_id FROM notifications
          WHERE network = $1 AND held_since IS NOT NULL AND held_reason <> 'contradicted'`,
        [network],
      );
      const ids = rows.map((r) => r.event_id);
      if (ids.length > 0) {
        const r = await db.query(RELEASE_SQL, [ids, false]);
        logger.warn(
          { network, events: ids.length, notifications: r.rowCount },
          'TRON_DELIVER_PROVIDER_PROOF=1: held provider-proof notifications released unconfirmed (proof: provider)',
        );
        this.o.onReleased?.(r.rowCount);
      }
      return;
    }
    if (this.o.clients.length < this.needed) return;
    await db.query(
      `UPDATE notifications SET held_reason = 'awaiting_confirmation', held_next_check_at = now()
        WHERE network = $1 AND held_since IS NOT NULL AND held_reason = 'single_provider'`,
      [network],
    );
  }

  /** One round: the due held transactions, each asked of every provider. */
  async round(signal?: AbortSignal): Promise<ConfirmRound> {
    const out: ConfirmRound = { confirmed: 0, contradicted: 0, waiting: 0 };
    const { db, network } = this.o;
    if (this.o.clients.length < this.needed) {
      // Nobody to ask: say so on every held row (new ones come in 'awaiting_confirmation').
      const r = await db.query(
        `UPDATE notifications SET held_reason = 'single_provider', held_detail = $2
          WHERE network = $1 AND held_since IS NOT NULL AND held_reason = 'awaiting_confirmation'`,
        [
          network,
          `only ${this.o.clients.length} provider is configured (TRON_NODE_URL); ${this.needed} must report the same Transfer log`,
        ],
      );
      out.waiting = r.rowCount;
      return out;
    }
    const { rows: due } = await db.query<{ tx_id: string }>(
      `SELECT e.tx_id FROM notifications AS n JOIN events AS e ON e.id = n.event_id
        WHERE n.held_since IS NOT NULL AND n.held_next_check_at <= now() AND n.network = $1
        GROUP BY e.tx_id ORDER BY min(n.held_next_check_at) LIMIT $2`,
      [network, this.o.batch ?? 8],
    );
    if (due.length === 0) return out;
    const { rows } = await db.query<HeldRow>(
      `SELECT e.id, e.tx_id, e.event_index, e.block_number, e.block_timestamp, e.from_address,
              e.to_address, e.amount_raw::text AS amount_raw, e.contract,
              max(n.held_checks)::int AS checks, min(n.held_reason) AS reason
         FROM events AS e JOIN notifications AS n ON n.event_id = e.id
        WHERE e.network = $1 AND e.tx_id = ANY($2::text[]) AND n.held_since IS NOT NULL
        GROUP BY e.id`,
      [network, due.map((d) => d.tx_id)],
    );
    const byTx = new Map<string, HeldRow[]>();
    for (const r of rows) byTx.set(r.tx_id, [...(byTx.get(r.tx_id) ?? []), r]);
    for (const [txId, events] of byTx) {
      signal?.throwIfAborted();
      const answers = await this.ask(txId, signal);
      for (const ev of events) {
        const r = await this.decide(ev, answers);
        out[r]++;
      }
    }
    return out;
  }

  /** Every provider's receipt of `txId` (an error is an answer of its own). */
  private async ask(
    txId: string,
    signal?: AbortSignal,
  ): Promise<Array<{ provider: string; info?: TransactionInfoJson; error?: string }>> {
    const settled = await Promise.allSettled(
      this.o.clients.map((c) => c.getTransactionInfo(txId, signal)),
    );
    return settled.map((s, i) => {
      const provider = this.o.clients[i]?.name ?? `provider ${i}`;
      if (s.status === 'rejected') {
        return { provider, error: s.reason instanceof Error ? s.reason.message : String(s.reason) };
      }
      return s.value === undefined ? { provider } : { provider, info: s.value };
    });
  }

  /** Compare, then release, or record why the event stays held. */
  private async decide(
    ev: HeldRow,
    answers: Array<{ provider: string; info?: TransactionInfoJson; error?: string }>,
  ): Promise<keyof ConfirmRound> {
    const { db, network, logger } = this.o;
    const t: HeldTransfer = {
      txId: ev.tx_id,
      eventIndex: Number(ev.event_index),
      blockNumber: Number(ev.block_number),
      blockTimestampMs: new Date(ev.block_timestamp).getTime(),
      from: base58ToHex(ev.from_address),
      to: base58ToHex(ev.to_address),
      amountRaw: BigInt(ev.amount_raw),
      contract: ev.contract === null ? this.usdt : base58ToHex(ev.contract),
    };
    const verdicts = answers.map((a) => ({
      provider: a.provider,
      v: (a.error !== undefined
        ? { kind: 'unknown', why: 'did not answer' }
        : compareReceipt(a.info, t)) as ReceiptVerdict,
    }));
    const confirms = verdicts.filter((x) => x.v.kind === 'confirms');
    const against = verdicts.filter((x) => x.v.kind === 'contradicts');
    const fields = {
      network,
      event_id: ev.id,
      tx_id: ev.tx_id,
      event_index: t.eventIndex,
      confirmations: confirms.length,
      needed: this.needed,
    };
    if (against.length === 0 && confirms.length >= this.needed) {
      await db.transaction(async (tx) => {
        const r = await tx.query(RELEASE_SQL, [[ev.id], true]);
        this.o.onReleased?.(r.rowCount);
      });
      logger.info(
        { ...fields, providers: confirms.map((c) => c.provider) },
        'provider-proof event confirmed by a second provider: proof quorum, delivery released',
      );
      return 'confirmed';
    }
    const words: string[] = [];
    for (const [i, x] of verdicts.entries()) {
      // Shown to the account (API, console): providers by position, never their host.
      if (x.v.kind !== 'confirms') words.push(`provider ${i + 1} ${x.v.why}`);
    }
    const reason: HeldReason = against.length > 0 ? 'contradicted' : 'awaiting_confirmation';
    const detail = plainText(
      `${confirms.length} of ${this.needed} providers needed report this Transfer log` +
        (words.length > 0 ? `; ${words.join('; ')}` : ''),
    );
    const delayMs = Math.min(MAX_CHECK_DELAY_MS, this.o.blockIntervalMs * 2 ** ev.checks);
    await db.query(
      `UPDATE notifications
          SET held_reason = $2, held_detail = $3, held_checks = held_checks + 1,
              held_next_check_at = now() + make_interval(secs => $4::float8 / 1000)
        WHERE event_id = $1 AND held_since IS NOT NULL`,
      [ev.id, reason, detail, delayMs],
    );
    if (reason === 'contradicted') {
      if (ev.reason !== 'contradicted') {
        logger.warn(
          {
            ...fields,
            detail,
            contradicted_by: against.map((x) => x.provider),
            errors: answers
              .filter((a) => a.error !== undefined)
              .map((a) => `${a.provider}: ${a.error}`),
          },
          'provider-proof event contradicted by a provider: it stays held (not delivered)',
        );
      }
      return 'contradicted';
    }
    return 'waiting';
  }
}
