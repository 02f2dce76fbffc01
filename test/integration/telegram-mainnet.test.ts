/**
 * Chat deliveries on the real mainnet block 79072107 (issue 13): chat watches on addresses of that
 * block (two accounts, a private chat and a group), the block served by a real replay node, the
 * ingester and the chat worker against the Bot API stand-in. The messages the stand-in received
 * must be exactly the oracle's: the transfers are extractTransfers over the block's files, matched
 * by the test's own loop (test/helpers/chain.ts expectedEvents: direction, asset filter,
 * activation block), and each message's text is computed here from the transfer alone (the amount
 * by string arithmetic on the integer, never through a Number; the block time in UTC from the
 * block's header; the tronscan link). Skipped with a message when TRON_FIXTURES_DIR is unset;
 * mandatory under CI=true (test/helpers/fixtures.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import { loadConfig } from '../../src/config.js';
import type { Queryable } from '../../src/db/pool.js';
import { ChatDeliveryWorker } from '../../src/delivery/chat-worker.js';
import { dirSource, type ReplayNode, startReplayNode } from '../../src/devnet/replay-node.js';
import { startTelegramStandIn, type TelegramStandIn } from '../../src/devnet/telegram-stand-in.js';
import { Ingester } from '../../src/ingest/loop.js';
import { openBot } from '../../src/telegram/bot.js';
import { MemoryPacer } from '../../src/telegram/pacing.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { extractTransfers } from '../../src/tron/extract.js';
import { parseGrpcTarget } from '../../src/tron/grpc.js';
import { parseNodeJson } from '../../src/tron/json.js';
import { NodeClient } from '../../src/tron/node-client.js';
import type { BlockJson, TransactionInfoJson, Transfer } from '../../src/tron/types.js';
import { type ExpectedEvent, expectedEvents, type TestWatch } from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import { chainDir, fixtureText } from '../helpers/fixtures.js';

const BLOCK = 79_072_107;

/** `amount_raw / 10^6` as its exact shortest decimal, by string arithmetic only. */
function exactDecimal(raw: string): string {
  expect(raw).toMatch(/^[1-9][0-9]*$/);
  const digits = raw.padStart(7, '0');
  const whole = digits.slice(0, -6).replace(/^0+(?=\d)/, '');
  const frac = digits.slice(-6).replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : whole;
}

/** `2026-01-08 13:36:54 UTC` from a block timestamp (ms, UTC). */
function utc(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} UTC`;
}

/** The message the chat must get for one expected event (what docs/integrating.md promises it shows). */
function expectedText(e: ExpectedEvent, t: Transfer, watched: string, blockTimeMs: number): string {
  const incoming = e.direction === 'incoming';
  const counterparty = incoming ? t.from : t.to;
  return [
    `<b>${incoming ? '⬇️ Incoming' : '⬆️ Outgoing'} ${exactDecimal(e.amountRaw)} ${e.asset}</b>`,
    `Address: <code>${hexToBase58(watched)}</code>`,
    `${incoming ? 'From' : 'To'}: <code>${hexToBase58(counterparty)}</code>`,
    `Time: ${utc(blockTimeMs)}`,
    `Block: ${BLOCK}`,
    `<a href="https://tronscan.org/#/transaction/${e.txId}">Transaction ${e.txId.slice(0, 16)}…</a>`,
  ].join('\n');
}

/** Addresses of `transfers` by how often `pick` names them, busiest first. */
function busiest(transfers: readonly Transfer[], pick: (t: Transfer) => string | null): string[] {
  const m = new Map<string, number>();
  for (const t of transfers) {
    const a = pick(t);
    if (a) m.set(a, (m.get(a) ?? 0) + 1);
  }
  return [...m.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([a]) => a);
}

async function bindAccount(db: Queryable, chatId: string, type: string): Promise<string> {
  const id = newId('acc');
  await db.query(
    `INSERT INTO accounts (id, email, plan, telegram_chat_id, telegram_chat_type, telegram_bound_at)
     VALUES ($1, $2, 'pro', $3, $4, now())`,
    [id, `${id}@example.com`, chatId, type],
  );
  return id;
}

async function insertChatWatch(db: Queryable, accountId: string, w: TestWatch): Promise<void> {
  await db.query(
    `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                          channel, active_from_block)
     VALUES ($1, $2, 'mainnet', $3, $4, $5, $6, 'telegram', $7)`,
    [w.id, accountId, hexToBase58(w.addressHex), w.addressHex, w.asset, w.direction, w.activeFrom],
  );
}

describe.each(dbEngines)('chat messages of real block 79072107 on %s', (engine) => {
  let t: TestDb | undefined;
  let node: ReplayNode | undefined;
  let standIn: TelegramStandIn | undefined;
  const stops: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const s of stops.splice(0).reverse()) await s();
    await node?.close();
    await standIn?.close();
    await t?.drop();
    t = node = standIn = undefined;
  });

  it('every chat gets exactly the oracle’s messages, and nothing else', async () => {
    const block = parseNodeJson(fixtureText(`chain/block-${BLOCK}.json`)) as BlockJson;
    const infos = parseNodeJson(fixtureText(`chain/txinfo-${BLOCK}.json`)) as TransactionInfoJson[];
    const transfers = extractTransfers(block, infos);
    const blockTimeMs = Number(block.block_header?.raw_data?.timestamp);

    t = await migratedDb(engine);
    const db = t.db;
    const chats = { private: '5001', group: '-1005002' };
    const accPrivate = await bindAccount(db, chats.private, 'private');
    const accGroup = await bindAccount(db, chats.group, 'group');
    const usdtIn = busiest(transfers, (x) => (x.asset === 'USDT' ? x.to : null))[0];
    const trxOut = busiest(transfers, (x) => (x.asset === 'TRX' ? x.from : null))[0];
    const anyBoth = busiest(transfers, (x) => x.from).find((a) => a !== trxOut && a !== usdtIn);
    const usdtOut = busiest(transfers, (x) => (x.asset === 'USDT' ? x.from : null)).find(
      (a) => a !== anyBoth,
    );
    const lateTo = busiest(transfers, (x) => x.to).find((a) => a !== usdtIn);
    const plan: Array<
      [string, string | undefined, TestWatch['asset'], TestWatch['direction'], number]
    > = [
      [accPrivate, usdtIn, 'USDT', 'incoming', BLOCK - 1],
      [accPrivate, trxOut, 'TRX', 'outgoing', BLOCK - 1],
      [accGroup, anyBoth, 'ALL', 'both', BLOCK - 1],
      [accGroup, usdtOut, 'USDT', 'outgoing', BLOCK - 5],
      // Created when the chain head was the block itself: it matches nothing of it.
      [accGroup, lateTo, 'ALL', 'incoming', BLOCK],
    ];
    const watches: Array<TestWatch & { accountId: string }> = [];
    for (const [accountId, hex, asset, direction, activeFrom] of plan) {
      expect(hex, `an address for ${asset}/${direction}`).toBeDefined();
      const w = {
        id: newId('wh'),
        addressHex: hex as string,
        asset,
        direction,
        activeFrom,
        accountId,
      };
      await insertChatWatch(db, accountId, w);
      watches.push(w);
    }

    // The oracle: the test's own matching loop over the reader's transfers.
    const expected = expectedEvents(transfers, watches);
    expect(expected.length).toBeGreaterThan(5); // the block really exercises the watches
    expect(expected.some((e) => e.direction === 'outgoing')).toBe(true);
    expect(expected.some((e) => e.asset === 'TRX')).toBe(true);
    expect(expected.filter((e) => e.watchId === watches[4]?.id)).toEqual([]);
    const byChat = new Map<string, string[]>([
      [chats.private, []],
      [chats.group, []],
    ]);
    for (const e of expected) {
      const w = watches.find((x) => x.id === e.watchId);
      const tr = transfers.find((x) => x.txId === e.txId && x.eventIndex === e.eventIndex);
      if (!w || !tr) throw new Error(`no watch or transfer for ${e.txId}#${e.eventIndex}`);
      const chat = w.accountId === accPrivate ? chats.private : chats.group;
      byChat.get(chat)?.push(expectedText(e, tr, w.addressHex, blockTimeMs));
    }

    // The block, served by a replay node; the ingester; the chat worker against the stand-in.
    // The real block's root is proven from its exact gRPC bytes only (docs/trusting-the-node.md).
    node = await startReplayNode({ source: dirSource(chainDir()), instant: true, grpc: true });
    const client = new NodeClient({
      url: node.url,
      retries: 3,
      ...(node.grpcUrl ? { grpc: parseGrpcTarget(node.grpcUrl) } : {}),
    });
    stops.push(() => client.close());
    const ingester = new Ingester({
      db,
      client,
      logger: silentLogger,
      config: {
        network: 'mainnet',
        node: { concurrency: 4 },
        ingest: { startBlock: BLOCK, blockIntervalMs: 50 },
      },
    });
    standIn = await startTelegramStandIn();
    const si = standIn;
    const cfg = loadConfig({
      TELEGRAM_BOT_TOKEN: si.token,
      TELEGRAM_API_ROOT: si.url,
      TELEGRAM_PACING_SCALE: '0.01',
      DELIVERY_POLL_MS: '20',
    });
    const bot = await openBot(cfg.telegram);
    const worker = new ChatDeliveryWorker({
      db,
      telegram: bot,
      pacer: new MemoryPacer(),
      config: cfg,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const runs = [ingester.run(ac.signal), worker.start(ac.signal)];
    stops.push(async () => {
      ac.abort();
      await Promise.all(runs);
    });

    const deadline = Date.now() + 90_000;
    const settled = async () => {
      if (ingester.stats.cursor < BLOCK) return false;
      const { rows } = await db.query<{ n: number }>(
        "SELECT count(*)::int8 AS n FROM notifications WHERE status <> 'DELIVERED'",
      );
      return Number(rows[0]?.n) === 0;
    };
    while (!(await settled())) {
      if (Date.now() > deadline) throw new Error('timed out waiting for the chat deliveries');
      await new Promise((r) => setTimeout(r, 50));
    }

    // Exactly the oracle's messages in each chat: same texts, same counts, nothing else anywhere.
    expect(si.sent.every((m) => m.status === 200 && m.parseMode === 'HTML')).toBe(true);
    expect(si.sent).toHaveLength(expected.length);
    for (const [chat, texts] of byChat) {
      expect(texts.length, `chat ${chat} expects messages`).toBeGreaterThan(0);
      expect(
        si
          .delivered(chat)
          .map((m) => m.text)
          .sort(),
        `messages of chat ${chat}`,
      ).toEqual([...texts].sort());
    }
    const { rows: attempts } = await db.query<{ n: number }>(
      'SELECT count(*)::int8 AS n FROM attempts WHERE http_status = 200 AND attempt = 1',
    );
    expect(Number(attempts[0]?.n)).toBe(expected.length);
  }, 150_000);
});
