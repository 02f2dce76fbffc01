/**
 * The console's Telegram endpoints (issue 13 item 2; SPEC §Errors, Console errors), and the bot's
 * webhook when updates come by webhook:
 *
 *   GET    /console/api/telegram          → { configured, bot_username, chat: { id, title, type, bound_at } | null }
 *   POST   /console/api/telegram/connect  → { link, expires_at }   (link: https://t.me/<bot>?start=<token>)
 *   DELETE /console/api/telegram          → 204 | 409 telegram_watches_active
 *   POST   <path of TELEGRAM_WEBHOOK_URL> → 200 (the Bot API's updates; 401 without the secret token)
 *
 * Without a bot (TELEGRAM_BOT_TOKEN unset): GET answers `configured: false` (and the bound chat, if
 * one was bound while a bot was configured); connect and DELETE answer 503 telegram_unavailable.
 * With a token whose getMe has not succeeded yet (the Bot API unreachable or refusing the token:
 * src/telegram/connection.ts retries it in the background), all three answer 503
 * telegram_unavailable, and so does the webhook (Telegram retries it).
 * The rules are the domain's (src/telegram/binding.ts); the webhook's handling is the same as long
 * polling's (src/telegram/updates.ts handleUpdate). The webhook lives here, beside the console's
 * binding endpoints, because binding is what it does.
 */
import { timingSafeEqual } from 'node:crypto';
import type { Update } from 'grammy/types';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { boundChat, createLinkTokenIn, unbindChat } from '../../telegram/binding.js';
import type { TelegramBot } from '../../telegram/bot.js';
import { handleUpdate, WEBHOOK_SECRET_HEADER, webhookSecretToken } from '../../telegram/updates.js';
import { requireSession } from '../guard.js';
import type { TelegramConnectT, TelegramStatusT } from '../schemas.js';

const hide = { hide: true } as const;

/** The bot, or 503 telegram_unavailable (not configured, or the Bot API has not answered yet). */
function requireBot(deps: AppDeps): TelegramBot {
  if (!deps.telegram) {
    throw ApiError.coded(
      'telegram_unavailable',
      'the Telegram bot is not configured on this deployment (TELEGRAM_BOT_TOKEN)',
    );
  }
  const bot = deps.telegram.current();
  if (!bot) {
    throw ApiError.coded(
      'telegram_unavailable',
      'the Telegram Bot API has not answered yet (unreachable, or the token was refused); retrying',
    );
  }
  return bot;
}

/** The deep link that starts the bot with `token` (https://core.telegram.org/bots/features#deep-linking). */
export function deepLink(username: string, token: string): string {
  return `https://t.me/${encodeURIComponent(username)}?start=${encodeURIComponent(token)}`;
}

export function telegramRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/console/api/telegram',
    { config: { consoleRole: 'viewer' }, schema: hide },
    async (request): Promise<TelegramStatusT> => {
      const ctx = requireSession(request);
      const bot = deps.telegram ? requireBot(deps) : undefined;
      const chat = await boundChat(deps.db, ctx.accountId);
      return {
        configured: bot !== undefined,
        bot_username: bot?.identity.username ?? null,
        chat: chat && {
          id: chat.id,
          title: chat.title,
          type: chat.type,
          bound_at: chat.bound_at?.toISOString() ?? null,
        },
      };
    },
  );

  app.post(
    '/console/api/telegram/connect',
    { config: { consoleRole: 'admin' }, schema: hide },
    async (request): Promise<TelegramConnectT> => {
      const ctx = requireSession(request);
      const bot = requireBot(deps);
      const audit = auditContextOf(request);
      const { token, expiresAt } = await deps.db.transaction(async (tx) => {
        const made = await createLinkTokenIn(tx, ctx.accountId);
        // The token is the link's credential: only its expiry is recorded.
        await recordAudit(tx, audit, {
          action: 'telegram.link_created',
          detail: { expires_at: made.expiresAt.toISOString() },
        });
        return made;
      });
      request.log.info({ account_id: ctx.accountId }, 'telegram link created');
      return {
        link: deepLink(bot.identity.username, token),
        expires_at: expiresAt.toISOString(),
      };
    },
  );

  app.delete(
    '/console/api/telegram',
    { config: { consoleRole: 'admin' }, schema: hide },
    async (request, reply) => {
      const ctx = requireSession(request);
      requireBot(deps);
      const audit = auditContextOf(request);
      await unbindChat(deps.db, ctx.accountId, (tx, chatId) =>
        recordAudit(tx, audit, { action: 'telegram.unbound', targetId: chatId }),
      );
      request.log.info({ account_id: ctx.accountId }, 'telegram chat unbound');
      return reply.code(204).send();
    },
  );

  const access = deps.telegram;
  const hookUrl = access?.config.webhookUrl;
  if (access && hookUrl && access.config.token) {
    const secret = Buffer.from(webhookSecretToken(access.config.token), 'utf8');
    const path = new URL(hookUrl).pathname;
    app.post(path, { schema: hide }, async (request, reply) => {
      const given = request.headers[WEBHOOK_SECRET_HEADER];
      const g = Buffer.from(typeof given === 'string' ? given : '', 'utf8');
      if (g.length !== secret.length || !timingSafeEqual(g, secret)) {
        return reply.code(401).send({ error: 'unknown secret token' });
      }
      const bot = access.current();
      // Not ready yet: Telegram keeps the update and retries it.
      if (!bot) return reply.code(503).send({ error: 'telegram bot not ready' });
      const update = request.body as Update | undefined;
      if (update && typeof update === 'object' && typeof update.update_id === 'number') {
        await handleUpdate(
          { db: deps.db, telegram: bot, pacer: access.pacer, logger: deps.logger },
          update,
        );
      }
      return reply.code(200).send({});
    });
  }
}
