/**
 * The Telegram bot client (issue 13 item 1; DESIGN "The console and the chat channel"): grammY's
 * Bot API client on `config.telegram.apiRoot` (the public Bot API, a local Bot API server, or the
 * test stand-in src/devnet/telegram-stand-in.ts), with the token of `config.telegram.token`.
 *
 * `openBot` checks the token once with `getMe` (the bot's id and username: the console's deep
 * link t.me/<username>?start=<token>). `sendChatMessage` makes one chat delivery attempt and
 * classifies its outcome; nothing here retries (the outbox's schedule does, delivery/), and
 * grammY is given no auto-retry plugin.
 *
 * The token is a secret: it is part of every Bot API URL, so neither URLs nor grammY's errors
 * (whose messages may carry the method, never the token) are logged with it.
 */
import { Bot, GrammyError, HttpError } from 'grammy';
import type { Config } from '../config.js';

/** What getMe told of the bot. */
export interface BotIdentity {
  /** The bot's numeric id (decimal). */
  id: string;
  /** Its @username without the @, e.g. `tronwatch_bot`. */
  username: string;
}

/** A bot ready to use: its client and identity. */
export interface TelegramBot {
  /** grammY's Bot (its `api` is the raw Bot API client). */
  bot: Bot;
  identity: BotIdentity;
  /** config.telegram as the bot was opened with. */
  config: Config['telegram'];
}

/**
 * The outcome of one sendMessage, as the delivery worker records it.
 * - `ok`: the Bot API answered `ok: true` (acknowledged: DELIVERED).
 * - `retryAfterSeconds`: a 429 (`parameters.retry_after`, s): rescheduled, not an attempt.
 * - `migrateToChatId`: the group became a supergroup (400 with `parameters.migrate_to_chat_id`):
 *   the binding follows it and the message is sent to the new chat.
 * - otherwise a failed attempt: `status` the Bot API's error_code (403: blocked or removed),
 *   absent for a network error or the deadline; `error` one line (no token).
 */
export interface ChatSendResult {
  ok: boolean;
  status?: number;
  error?: string;
  retryAfterSeconds?: number;
  migrateToChatId?: string;
  /** The Bot API's answer body as the attempt row shows it (JSON text, at most 4 KB). */
  responseBody?: string;
  /** When the request was made and how long until the answer, ms. */
  startedAt: Date;
  durationMs: number;
}

/** The AbortSignal type grammY's Node build declares (the abort-controller package's). */
export type BotSignal = Parameters<Bot['api']['getMe']>[0];

/**
 * Node's AbortSignal as grammY's declared type: grammY's Node build types its signals with the
 * abort-controller package, whose declaration differs from Node's global one although grammY
 * only reads `aborted` and listens for 'abort', which Node's signal does.
 */
export function botSignal(signal: AbortSignal): BotSignal {
  return signal as unknown as BotSignal;
}

/** The Bot API's public root. */
export const PUBLIC_API_ROOT = 'https://api.telegram.org';

/**
 * A grammY Bot for `cfg` (no network yet).
 * @throws Error when no token is configured.
 */
export function makeBot(cfg: Config['telegram']): Bot {
  if (!cfg.token) throw new Error('TELEGRAM_BOT_TOKEN is not set');
  return new Bot(cfg.token, {
    client: {
      apiRoot: cfg.apiRoot,
      // getUpdates long-polls for pollTimeoutSeconds; the client's own timeout must exceed it.
      timeoutSeconds: Math.max(cfg.pollTimeoutSeconds + 10, Math.ceil(cfg.timeoutMs / 1000)),
    },
  });
}

/**
 * Open the bot: check the token with getMe.
 * @returns the bot and its identity.
 * @throws Error "telegram: getMe failed: …" (its `cause` grammY's error) when the token is refused
 *   (401) or the Bot API is unreachable (connection.ts retries it in the background).
 */
export async function openBot(cfg: Config['telegram']): Promise<TelegramBot> {
  const bot = makeBot(cfg);
  try {
    const me = await bot.api.getMe(botSignal(AbortSignal.timeout(cfg.timeoutMs)));
    bot.botInfo = me;
    return { bot, identity: { id: String(me.id), username: me.username }, config: cfg };
  } catch (err) {
    throw new Error(`telegram: getMe failed: ${describeTelegramError(err)}`, { cause: err });
  }
}

/**
 * One line for a Bot API or network error (never the token: a network error's message names the
 * request's URL, `…/bot<token>/getMe`, so the path segment is masked).
 */
export function describeTelegramError(err: unknown): string {
  if (err instanceof GrammyError) return maskToken(`Bot API ${err.error_code}: ${err.description}`);
  if (err instanceof HttpError) {
    const cause = err.error instanceof Error ? err.error.message : String(err.error);
    return maskToken(`network: ${cause}`).slice(0, 500);
  }
  return maskToken(err instanceof Error ? err.message : String(err)).slice(0, 500);
}

/** `…/bot123:AA…/method` → `…/bot<token>/method`. */
function maskToken(s: string): string {
  return s.replace(/\/bot[^/\s]+\//g, '/bot<token>/');
}

/**
 * Send one HTML message to `chatId` (one chat delivery attempt). Never throws.
 * @param chatId the Bot API chat id, decimal text (negative for groups).
 * @param html the message (parse_mode HTML; every value escaped by message.ts).
 * @param timeoutMs the attempt's deadline, ms (config.telegram.timeoutMs).
 */
export async function sendChatMessage(
  bot: Bot,
  chatId: string,
  html: string,
  timeoutMs: number,
): Promise<ChatSendResult> {
  const startedAt = new Date();
  const t0 = performance.now();
  const duration = () => Math.round(performance.now() - t0);
  try {
    const msg = await bot.api.sendMessage(
      chatId,
      html,
      { parse_mode: 'HTML', link_preview_options: { is_disabled: true } },
      botSignal(AbortSignal.timeout(timeoutMs)),
    );
    return {
      ok: true,
      status: 200,
      responseBody: JSON.stringify({ ok: true, result: { message_id: msg.message_id } }),
      startedAt,
      durationMs: duration(),
    };
  } catch (err) {
    const durationMs = duration();
    if (err instanceof GrammyError) {
      const body = JSON.stringify({
        ok: false,
        error_code: err.error_code,
        description: err.description,
        ...(err.parameters && Object.keys(err.parameters).length
          ? { parameters: err.parameters }
          : {}),
      }).slice(0, 4096);
      const base = {
        ok: false,
        status: err.error_code,
        error: `Bot API ${err.error_code}: ${err.description}`.slice(0, 500),
        responseBody: body,
        startedAt,
        durationMs,
      };
      const retryAfter = err.parameters?.retry_after;
      if (err.error_code === 429 && typeof retryAfter === 'number') {
        return { ...base, retryAfterSeconds: Math.max(1, retryAfter) };
      }
      const migrated = err.parameters?.migrate_to_chat_id;
      if (typeof migrated === 'number') return { ...base, migrateToChatId: String(migrated) };
      return base;
    }
    if (err instanceof HttpError && isTimeout(err.error)) {
      return {
        ok: false,
        error: `timeout: no answer from the Bot API within ${timeoutMs} ms`,
        startedAt,
        durationMs,
      };
    }
    return { ok: false, error: describeTelegramError(err), startedAt, durationMs };
  }
}

function isTimeout(err: unknown): boolean {
  return err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
}
