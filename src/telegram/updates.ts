/**
 * The bot's updates (issue 13 item 2): what the bot does with a message, and the two ways updates
 * arrive.
 *
 * - `/start <token>` (also `/start@<bot> <token>`, in a private chat or a group): bindChat; the
 *   bot answers in the chat whether the chat is now connected or the link was unknown, used or
 *   expired. `/start` alone answers how to connect. Every answer takes its turn in the chat's
 *   pacing windows, like a delivery (src/telegram/paced-send.ts).
 * - A message with `migrate_to_chat_id` (a group that became a supergroup): migrateChat, so
 *   deliveries follow the chat. (The delivery worker also follows a sendMessage refused with
 *   `migrate_to_chat_id`: whichever comes first.)
 * - Anything else is ignored.
 *
 * Long polling ({@link runUpdatePolling}): exactly one process at a time reads updates, under a
 * PostgreSQL advisory lock held like the ingester's (src/db/leader.ts; lock
 * "tronwatch:telegram-updates:<bot id>"), standbys taking over within about a second. The next
 * update_id is kept in telegram_bot_state (migration 010) after each batch, so a standby that takes
 * over does not handle a batch again (an update handled but not yet recorded when its process died
 * is handled again: binding with a used token then answers "already used", nothing worse).
 * Webhook mode (config.telegram.webhookUrl): {@link setUpdateWebhook} registers the URL with a
 * secret token derived from the bot token ({@link webhookSecretToken}); the API route checks the
 * `X-Telegram-Bot-Api-Secret-Token` header and calls {@link handleUpdate}.
 */
import { createHash } from 'node:crypto';
import type { Update } from 'grammy/types';
import { recordAudit, TELEGRAM_ACTOR } from '../audit/audit.js';
import type { Logger } from '../common/logger.js';
import { backoffDelay, sleep } from '../common/retry.js';
import { runWhileLeader } from '../db/leader.js';
import type { Db } from '../db/pool.js';
import { bindChat, type ChatType, migrateChat } from './binding.js';
import { botSignal, describeTelegramError, type TelegramBot } from './bot.js';
import { sendPacedMessage } from './paced-send.js';
import type { Pacer } from './pacing.js';

export interface UpdateDeps {
  db: Db;
  telegram: TelegramBot;
  /** The process's chat pacer: the bot's replies are paced like deliveries (paced-send.ts). */
  pacer: Pacer;
  logger: Logger;
}

/** The header Telegram sends with the webhook's secret_token. */
export const WEBHOOK_SECRET_HEADER = 'x-telegram-bot-api-secret-token';

/** Updates the bot asks for (a smaller answer, and nothing we would ignore anyway). */
const ALLOWED_UPDATES = ['message'] as const;

/**
 * The webhook's secret_token: 64 hex digits of SHA-256 over the bot token (Telegram allows
 * A-Z a-z 0-9 _ -, 1–256 characters). Derived, so every API replica agrees without configuration;
 * it reveals nothing of the token.
 */
export function webhookSecretToken(botToken: string): string {
  return createHash('sha256').update(`tronwatch:telegram-webhook:${botToken}`).digest('hex');
}

const START = /^\/start(?:@([A-Za-z0-9_]+))?(?:\s+(\S+))?\s*$/;

/**
 * Handle one update (see the file's comment). Never throws: failures are logged.
 * @returns what was done, for logs and tests.
 */
export async function handleUpdate(
  deps: UpdateDeps,
  update: Update,
): Promise<'bound' | 'invalid_token' | 'help' | 'migrated' | 'ignored'> {
  const msg = update.message;
  if (!msg) return 'ignored';
  const chatId = String(msg.chat.id);
  try {
    if (msg.migrate_to_chat_id !== undefined) {
      const to = String(msg.migrate_to_chat_id);
      const n = await migrateChat(deps.db, chatId, to);
      deps.logger.info(
        { chat_id: chatId, new_chat_id: to, accounts: n },
        'telegram chat migrated to a supergroup; binding followed',
      );
      return 'migrated';
    }
    const m = START.exec(msg.text ?? '');
    if (!m) return 'ignored';
    const [, addressee, token] = m;
    if (addressee && addressee.toLowerCase() !== deps.telegram.identity.username.toLowerCase()) {
      return 'ignored'; // a /start for another bot in the same group
    }
    if (!token) {
      await reply(deps, chatId, HELP, 'reply_help');
      return 'help';
    }
    const chat = msg.chat as { id: number; type: ChatType; title?: string; first_name?: string };
    const title =
      chat.title ?? ([msg.from?.first_name, msg.from?.last_name].filter(Boolean).join(' ') || null);
    const accountId = await bindChat(
      deps.db,
      token,
      { id: chatId, type: chat.type, title },
      (tx, account) =>
        recordAudit(
          tx,
          { accountId: account, actor: TELEGRAM_ACTOR, clientIp: null },
          {
            action: 'telegram.bound',
            targetId: chatId,
            detail: { chat_type: chat.type, chat_title: title, from_user_id: msg.from?.id },
          },
        ),
    );
    if (!accountId) {
      await reply(deps, chatId, INVALID, 'reply_invalid_link');
      return 'invalid_token';
    }
    deps.logger.info(
      { account_id: accountId, chat_id: chatId, chat_type: chat.type },
      'telegram chat bound',
    );
    await reply(deps, chatId, BOUND, 'reply_connected');
    return 'bound';
  } catch (err) {
    deps.logger.error(
      { chat_id: chatId, update_id: update.update_id, err: describeTelegramError(err) },
      'telegram update failed',
    );
    return 'ignored';
  }
}

const HELP =
  'To receive your confirmed TRON transfers here, open the tronwatch console, choose “Connect Telegram” and follow the link it shows.';
const INVALID =
  'This link is unknown, already used or expired. Make a new one in the tronwatch console (“Connect Telegram”): links are valid for 10 minutes.';
const BOUND =
  'Connected. Confirmed transfers of your chat watches will appear in this chat (create them in the console or with “telegram”: true in POST /v1/watches).';

/**
 * Answer in the chat, in its turn in the chat's pacing windows (src/telegram/paced-send.ts); a
 * failure (bot blocked, network, no slot in time) is logged, not thrown.
 */
async function reply(deps: UpdateDeps, chatId: string, text: string, what: string): Promise<void> {
  await sendPacedMessage(deps, chatId, text, what);
}

/**
 * Register the webhook (config.telegram.webhookUrl) with its secret token. Called by each API
 * process at start (idempotent on Telegram's side).
 * @throws Error when the Bot API refuses it.
 */
export async function setUpdateWebhook(telegram: TelegramBot): Promise<void> {
  const url = telegram.config.webhookUrl;
  const token = telegram.config.token;
  if (!url || !token) throw new Error('TELEGRAM_WEBHOOK_URL and TELEGRAM_BOT_TOKEN are needed');
  await telegram.bot.api.setWebhook(
    url,
    { secret_token: webhookSecretToken(token), allowed_updates: [...ALLOWED_UPDATES] },
    botSignal(AbortSignal.timeout(telegram.config.timeoutMs)),
  );
}

/** Counters of a polling process (tests, logs). */
export interface PollingStats {
  /** getUpdates answers received. */
  polls: number;
  /** Updates handled. */
  handled: number;
}

/**
 * Read updates by long polling while this process holds the bot's polling lock, until `signal`
 * aborts (see the file's comment). Resolves once stopped. Never rejects: Bot API and database
 * errors are logged and retried with backoff (exponential, full jitter, up to 10 s).
 * @param databaseUrl PostgreSQL URL for the lock (config.database.url); undefined = PGlite, where
 *   this process is the only one.
 */
export async function runUpdatePolling(
  deps: UpdateDeps & { databaseUrl: string | undefined; network: string },
  signal: AbortSignal,
  stats: PollingStats = { polls: 0, handled: 0 },
): Promise<PollingStats> {
  const { telegram, logger, db } = deps;
  const botId = telegram.identity.id;
  await runWhileLeader(
    {
      url: deps.databaseUrl,
      network: `${deps.network}:${botId}`,
      logger,
      role: { lock: 'telegram-updates', label: 'telegram updates' },
    },
    signal,
    async (term) => {
      let failures = 0;
      let webhookCleared = false;
      while (!term.aborted) {
        try {
          if (!webhookCleared) {
            // getUpdates is refused (409) while a webhook is set: polling mode owns the updates.
            await telegram.bot.api.deleteWebhook({}, botSignal(term));
            webhookCleared = true;
          }
          const offset = await readOffset(db, botId);
          const updates = await telegram.bot.api.getUpdates(
            {
              offset,
              timeout: telegram.config.pollTimeoutSeconds,
              allowed_updates: [...ALLOWED_UPDATES],
            },
            botSignal(term),
          );
          stats.polls++;
          failures = 0;
          let next = offset;
          for (const u of updates) {
            await handleUpdate(deps, u);
            stats.handled++;
            next = Math.max(next, u.update_id + 1);
          }
          if (next !== offset) await saveOffset(db, botId, next);
        } catch (err) {
          if (term.aborted) break;
          failures++;
          const delay = backoffDelay(failures, { baseMs: 500, capMs: 10_000 });
          logger.warn(
            { err: describeTelegramError(err), retry_in_ms: delay, consecutive: failures },
            'telegram getUpdates failed; retrying',
          );
          await sleep(delay, term);
        }
      }
    },
  );
  return stats;
}

async function readOffset(db: Db, botId: string): Promise<number> {
  const { rows } = await db.query<{ next_update_id: string | number }>(
    'SELECT next_update_id FROM telegram_bot_state WHERE bot_id = $1',
    [botId],
  );
  return Number(rows[0]?.next_update_id ?? 0);
}

async function saveOffset(db: Db, botId: string, next: number): Promise<void> {
  await db.query(
    `INSERT INTO telegram_bot_state (bot_id, next_update_id) VALUES ($1, $2)
     ON CONFLICT (bot_id) DO UPDATE
       SET next_update_id = GREATEST(telegram_bot_state.next_update_id, excluded.next_update_id),
           updated_at = now()`,
    [botId, next],
  );
}
