/**
 * The bot's own messages, paced like deliveries (issue 29, defect "Telegram: the bot's own
 * messages are not paced"): the replies to /start ("Connected", the help, a refused link) and
 * any notice the bot sends outside the outbox take a slot in the same per-chat, per-group and
 * per-bot windows as chat deliveries (src/telegram/pacing.ts), from the same pacer the chat
 * worker uses (one per process, shared in Redis across processes). Telegram counts every message
 * a bot sends to a chat: a "Connected" sent outside the windows let a group that gets deliveries
 * within the minute receive its 21st message in 60 s, refused with 429.
 *
 * The slot is held in flight and released when the answer arrives, as chat-worker.ts does, so
 * the windows count the message from when Telegram had it. A 429 holds the chat's window for its
 * retry_after (shared, so deliveries wait too) and the message is tried again within the wait
 * budget. Messages here have no outbox: one that cannot get a slot within
 * {@link MAX_NOTICE_WAIT_MS} (scaled like the windows) is logged and dropped, never sent around
 * the windows.
 */
import type { Logger } from '../common/logger.js';
import { sleep } from '../common/retry.js';
import { botSignal, describeTelegramError, type TelegramBot } from './bot.js';
import { chatWindowId, chatWindows, type Pacer } from './pacing.js';

/**
 * The longest a bot message waits for its slot, ms, before TELEGRAM_PACING_SCALE: a group's
 * window (60 s) and then some, so a message to a busy group waits its turn rather than being
 * dropped.
 */
export const MAX_NOTICE_WAIT_MS = 90_000;

/** After its deadline with no answer, a send may still reach Telegram for this long, ms. */
const NO_ANSWER_LINGER_MS = 500;

/** The provisional end of a slot beyond the send's deadline, ms (as chat-worker.ts). */
const FLIGHT_SLACK_MS = 1_000;

/** What {@link sendPacedMessage} needs. */
export interface PacedSendDeps {
  telegram: TelegramBot;
  /** The process's chat pacer (the one the chat worker uses). */
  pacer: Pacer;
  logger: Logger;
}

/**
 * Send `text` (plain text) to `chatId` in its turn. Never throws.
 * @param what the message's name for logs (`reply_connected`, …): never its text.
 * @param signal stops a wait (shutdown).
 * @returns true when the Bot API answered ok; false when it refused, was unreachable, or no slot
 *   came within the budget (logged).
 */
export async function sendPacedMessage(
  deps: PacedSendDeps,
  chatId: string,
  text: string,
  what: string,
  signal?: AbortSignal,
): Promise<boolean> {
  const cfg = deps.telegram.config;
  const budget = Math.max(1_000, MAX_NOTICE_WAIT_MS * cfg.pacingScale);
  const since = Date.now();
  for (;;) {
    const windows = chatWindows(chatId, deps.telegram.identity.id, cfg.pacingScale);
    let slot: Awaited<ReturnType<Pacer['take']>>;
    try {
      slot = await deps.pacer.take(windows, cfg.timeoutMs + FLIGHT_SLACK_MS);
    } catch (err) {
      deps.logger.warn(
        { chat_id: chatId, message: what, err: (err as Error).message },
        'telegram message not sent: pacing unavailable',
      );
      return false;
    }
    if (!slot.granted) {
      if (signal?.aborted || Date.now() - since + slot.waitMs > budget) {
        deps.logger.warn(
          { chat_id: chatId, message: what, wait_ms: slot.waitMs },
          'telegram message not sent: no pacing slot in time',
        );
        return false;
      }
      await sleep(slot.waitMs, signal);
      continue;
    }
    let answered = true;
    try {
      await deps.telegram.bot.api.sendMessage(
        chatId,
        text,
        {},
        botSignal(AbortSignal.timeout(cfg.timeoutMs)),
      );
      await deps.pacer.release(windows, slot.token, 0).catch(() => undefined);
      return true;
    } catch (err) {
      const e = err as { error_code?: unknown; parameters?: { retry_after?: unknown } };
      answered = typeof e.error_code === 'number';
      await deps.pacer
        .release(windows, slot.token, answered ? 0 : NO_ANSWER_LINGER_MS)
        .catch(() => undefined);
      const retryAfter = e.parameters?.retry_after;
      if (e.error_code === 429 && typeof retryAfter === 'number') {
        const ms = Math.max(1, retryAfter) * 1000;
        await deps.pacer.hold(chatWindowId(chatId, deps.telegram.identity.id), ms).catch(() => {
          /* the Bot API answers another 429 */
        });
        if (Date.now() - since + ms <= budget && !signal?.aborted) continue;
      }
      deps.logger.warn(
        { chat_id: chatId, message: what, err: describeTelegramError(err) },
        'telegram message not sent',
      );
      return false;
    }
  }
}
