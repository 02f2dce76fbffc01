/**
 * The bot's connection to the Bot API, made in the background (issue 13): a service with
 * TELEGRAM_BOT_TOKEN starts whether or not the Bot API answers, so a Telegram outage (or a
 * mistyped token) never takes webhooks, the API or ingest down with it.
 *
 * {@link BotConnection.run} calls getMe until it succeeds: exponential backoff with full jitter,
 * 1 s doubling up to 60 s. The first failure of an episode is logged as an error (a refused token,
 * 401, says so: it will not fix itself); the retries after it at debug; success is logged at info
 * (`telegram bot ready`, with how many attempts failed before). Until then {@link current} is
 * undefined: the console's Telegram endpoints answer 503 telegram_unavailable and no chat worker
 * runs, so chat notifications wait in the outbox, PENDING, without an attempt (service.ts starts the
 * worker and the update reader once {@link ready} resolves).
 */
import { GrammyError } from 'grammy';
import type { Logger } from '../common/logger.js';
import { backoffDelay, sleep } from '../common/retry.js';
import type { Config } from '../config.js';
import { describeTelegramError, openBot, type TelegramBot } from './bot.js';
import type { Pacer } from './pacing.js';

/** What the API needs of the bot: the bot once getMe has answered, and the configuration. */
export interface TelegramAccess {
  /** config.telegram (the token is set). */
  readonly config: Config['telegram'];
  /** The bot once getMe has succeeded; undefined until then. */
  current(): TelegramBot | undefined;
  /**
   * The process's chat pacer (src/telegram/pacing.ts): every message the bot sends, deliveries
   * and its own replies, takes its slots here.
   */
  readonly pacer: Pacer;
}

/** Backoff of the getMe retries, ms: 1 s doubling up to 60 s (full jitter). */
export const GETME_BACKOFF = { baseMs: 1_000, capMs: 60_000 } as const;

/** A bot already opened (tests, the benchmark): ready at once, pacing with `pacer`. */
export function readyBot(bot: TelegramBot, pacer: Pacer): TelegramAccess {
  return { config: bot.config, current: () => bot, pacer };
}

export class BotConnection implements TelegramAccess {
  private bot: TelegramBot | undefined;
  private readonly waiters = new Set<() => void>();
  /** getMe calls that failed (in all). */
  failures = 0;

  constructor(
    readonly config: Config['telegram'],
    private readonly logger: Logger,
    readonly pacer: Pacer,
    private readonly backoff: { baseMs: number; capMs: number } = GETME_BACKOFF,
  ) {}

  current(): TelegramBot | undefined {
    return this.bot;
  }

  /**
   * The bot once getMe succeeded; undefined when `signal` aborts first.
   */
  ready(signal: AbortSignal): Promise<TelegramBot | undefined> {
    if (this.bot || signal.aborted) return Promise.resolve(this.bot);
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve(this.bot);
      };
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Call getMe until it succeeds or `signal` aborts (see the file's comment). Never rejects.
   */
  async run(signal: AbortSignal): Promise<void> {
    let episode = 0;
    while (!signal.aborted && !this.bot) {
      try {
        const bot = await openBot(this.config);
        if (signal.aborted) return;
        this.bot = bot;
        this.logger.info(
          {
            bot_username: bot.identity.username,
            api_root: this.config.apiRoot,
            failed_before: episode,
          },
          'telegram bot ready',
        );
        for (const w of [...this.waiters]) w();
        return;
      } catch (err) {
        if (signal.aborted) return;
        episode++;
        this.failures++;
        const delay = backoffDelay(episode, this.backoff);
        const cause = err instanceof Error && err.cause !== undefined ? err.cause : err;
        const refused = cause instanceof GrammyError && cause.error_code === 401;
        const fields = {
          api_root: this.config.apiRoot,
          err: describeTelegramError(err),
          retry_in_ms: delay,
          consecutive: episode,
        };
        if (episode === 1) {
          this.logger.error(
            fields,
            refused
              ? 'telegram: the Bot API refused the token (401): chat deliveries wait until getMe succeeds; retrying'
              : 'telegram: the Bot API is unreachable: chat deliveries wait until getMe succeeds; retrying',
          );
        } else {
          this.logger.debug(fields, 'telegram getMe failed again; retrying');
        }
        await sleep(delay, signal);
      }
    }
  }
}
