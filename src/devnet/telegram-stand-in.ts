/**
 * A local stand-in for the Telegram Bot API (issue 13 item 4): a real HTTP server speaking the
 * Bot API's wire format at `<url>/bot<token>/<method>` (JSON or form bodies, `{ ok, result }` or
 * `{ ok: false, error_code, description, parameters? }` answers), for the tests, the benchmark
 * and `npm run demo -- --telegram`. Point TELEGRAM_API_ROOT at `url`.
 *
 * Methods: getMe; getUpdates (long poll: answers at once when updates at or above `offset` wait,
 * else when one arrives or `timeout` seconds pass; a newer getUpdates ends a waiting one with 409,
 * as Telegram does; 409 while a webhook is set); sendMessage (recorded in `sent` with its arrival
 * time); setWebhook / deleteWebhook (while set, each update is POSTed to the webhook with the
 * `X-Telegram-Bot-Api-Secret-Token` header instead of being kept for getUpdates).
 *
 * Scripting: `userSends` (a message a user sends in a chat: `/start <token>`), `failNext` (the
 * next sendMessage(s) to a chat answer 429 with `retry_after`, or 403), `block` (403 "bot was
 * blocked by the user" until unblocked), `migrate` (a group becomes a supergroup: a message with
 * `migrate_to_chat_id` in the old chat, and sendMessage to the old id answers 400 with
 * `parameters.migrate_to_chat_id` from then on).
 *
 * Limits (`opts.limits`, off by default): the Bot API's sending limits enforced on ARRIVAL, where
 * Telegram measures them, not on the sender's clock: per chat 1 message per second, per group
 * (a negative chat id) 20 per minute on top of that, per bot 30 per second. Each is a true sliding
 * window over the messages it accepted (arrival = the stand-in's Date.now() once the request's body
 * has been read): a message is refused when any window it needs already holds `limit` accepted
 * messages in the last `windowMs`, with 429 "Too Many Requests: retry after N" and
 * `parameters.retry_after` N, whole seconds (at least 1, as the Bot API answers) until every
 * refusing window has room. Refused messages do not count. `limits.scale` multiplies the windows
 * (as TELEGRAM_PACING_SCALE does ours), so tests can compress them; retry_after is never scaled.
 * The figures are the Bot API's (https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this),
 * kept here apart from src/telegram/pacing.ts on purpose: the stand-in models Telegram, not our
 * pacing, so a change to ours cannot move what it is checked against.
 *
 * Not the Bot API: no files, no entities parsing beyond what tests read (the HTML text is
 * recorded as sent).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A sendMessage the stand-in received. */
export interface SentMessage {
  chatId: string;
  text: string;
  parseMode: string | undefined;
  /** Arrival time, ms since the epoch (Date.now()). */
  at: number;
  /** The status it answered (200, 429, 403, 400). */
  status: number;
  /** A 429 of the stand-in's own limits (opts.limits): the first window that refused it. */
  limit?: LimitName;
}

/** The Bot API's sending limits (see the file's comment): count and window, ms. */
export const TELEGRAM_LIMITS = {
  chat: { limit: 1, windowMs: 1_000 },
  group: { limit: 20, windowMs: 60_000 },
  bot: { limit: 30, windowMs: 1_000 },
} as const;

/** Which of {@link TELEGRAM_LIMITS} refused a message. */
export type LimitName = keyof typeof TELEGRAM_LIMITS;

/** opts.limits: enforce {@link TELEGRAM_LIMITS} on arrival. */
export interface StandInLimits {
  /** Multiplies every window's length, in (0, 1] (default 1: the Bot API's). */
  scale?: number;
}

export type ChatKind = 'private' | 'group' | 'supergroup';

/** A scripted answer to sendMessage. */
export type SendFault = { code: 429; retryAfter: number } | { code: 403 };

export interface TelegramStandIn {
  /** The API root to configure (TELEGRAM_API_ROOT), e.g. http://127.0.0.1:41234. */
  url: string;
  token: string;
  botId: number;
  username: string;
  /** Every sendMessage received, in arrival order (failed ones included, with their status). */
  sent: SentMessage[];
  /** Bot API methods called, in order (token never included). */
  calls: string[];
  /** The webhook set by setWebhook, or null. */
  webhook: { url: string; secretToken: string | undefined } | null;
  /** A user writes `text` in chat `chatId`; returns the update_id. */
  userSends(
    chat: { id: number; type: ChatKind; title?: string },
    text: string,
    from?: { id: number; first_name: string },
  ): number;
  /** The next `times` sendMessage calls to `chatId` answer `fault`. */
  failNext(chatId: number | string, fault: SendFault, times?: number): void;
  /** sendMessage to `chatId` answers 403 (blocked) until unblock. */
  block(chatId: number | string): void;
  unblock(chatId: number | string): void;
  /** The group `fromId` becomes the supergroup `toId` (see the file's comment). */
  migrate(fromId: number, toId: number, title?: string): void;
  /** Successful messages to `chatId` (status 200). */
  delivered(chatId?: number | string): SentMessage[];
  /** Messages refused by the stand-in's own limits (opts.limits), in arrival order. */
  limited(): SentMessage[];
  close(): Promise<void>;
}

interface Waiter {
  offset: number;
  res: http.ServerResponse;
  timer: NodeJS.Timeout;
}

/**
 * Start a stand-in on 127.0.0.1.
 * @param opts.port the port (default 0: a free one); a given port lets a test start the stand-in
 *   after the service configured with its URL (a Bot API that comes up late).
 * @param opts.token the only token it accepts (others get 401 Unauthorized, as Telegram answers a
 *   revoked or mistyped token).
 * @param opts.limits enforce the Bot API's sending limits on arrival (see the file's comment);
 *   absent: no limits.
 */
export async function startTelegramStandIn(
  opts: {
    token?: string;
    botId?: number;
    username?: string;
    port?: number;
    limits?: StandInLimits;
  } = {},
): Promise<TelegramStandIn> {
  const botId = opts.botId ?? 7_000_000_001;
  const token = opts.token ?? `${botId}:STAND-IN-${Math.random().toString(36).slice(2, 12)}`;
  const username = opts.username ?? 'tronwatch_standin_bot';
  const updates: Array<{ update_id: number } & Record<string, unknown>> = [];
  let nextUpdateId = 1;
  let nextMessageId = 1;
  let waiter: Waiter | null = null;
  const faults = new Map<string, SendFault[]>();
  const blocked = new Set<string>();
  const migrated = new Map<string, number>();
  const sent: SentMessage[] = [];
  const calls: string[] = [];
  const sockets = new Set<import('node:net').Socket>();
  let webhook: TelegramStandIn['webhook'] = null;
  const checkLimits = opts.limits ? arrivalLimits(opts.limits.scale ?? 1) : null;

  const answer = (res: http.ServerResponse, status: number, body: unknown) => {
    if (res.writableEnded) return;
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const ok = (res: http.ServerResponse, result: unknown) => answer(res, 200, { ok: true, result });
  const fail = (
    res: http.ServerResponse,
    code: number,
    description: string,
    parameters?: Record<string, unknown>,
  ) =>
    answer(res, code, {
      ok: false,
      error_code: code,
      description,
      ...(parameters ? { parameters } : {}),
    });

  const pending = (offset: number) => updates.filter((u) => u.update_id >= offset);

  const flushWaiter = () => {
    if (!waiter) return;
    const list = pending(waiter.offset);
    if (list.length === 0) return;
    clearTimeout(waiter.timer);
    const w = waiter;
    waiter = null;
    ok(w.res, list);
  };

  const push = (update: Record<string, unknown>): number => {
    const id = nextUpdateId++;
    const u = { update_id: id, ...update };
    if (webhook) {
      const hook = webhook;
      void fetch(hook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(hook.secretToken ? { 'x-telegram-bot-api-secret-token': hook.secretToken } : {}),
        },
        body: JSON.stringify(u),
      }).catch(() => undefined);
    } else {
      updates.push(u);
      flushWaiter();
    }
    return id;
  };

  const handle = (method: string, p: Record<string, unknown>, res: http.ServerResponse) => {
    calls.push(method);
    switch (method) {
      case 'getMe':
        return ok(res, {
          id: botId,
          is_bot: true,
          first_name: 'tronwatch stand-in',
          username,
          can_join_groups: true,
          can_read_all_group_messages: false,
          supports_inline_queries: false,
        });
      case 'getUpdates': {
        if (webhook) {
          return fail(
            res,
            409,
            "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
          );
        }
        const offset = Number(p.offset ?? 0);
        // Confirm (forget) the updates below offset, as Telegram does.
        if (offset > 0) {
          for (let i = updates.length - 1; i >= 0; i--) {
            if ((updates[i]?.update_id ?? 0) < offset) updates.splice(i, 1);
          }
        }
        if (waiter) {
          clearTimeout(waiter.timer);
          fail(
            waiter.res,
            409,
            'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running',
          );
          waiter = null;
        }
        const list = pending(offset);
        const timeout = Number(p.timeout ?? 0);
        if (list.length > 0 || timeout <= 0) return ok(res, list);
        const w: Waiter = {
          offset,
          res,
          timer: setTimeout(() => {
            if (waiter === w) waiter = null;
            ok(res, []);
          }, timeout * 1000),
        };
        waiter = w;
        res.on('close', () => {
          if (waiter === w) {
            clearTimeout(w.timer);
            waiter = null;
          }
        });
        return;
      }
      case 'setWebhook':
        webhook = {
          url: String(p.url ?? ''),
          secretToken: p.secret_token === undefined ? undefined : String(p.secret_token),
        };
        return ok(res, true);
      case 'deleteWebhook':
        webhook = null;
        return ok(res, true);
      case 'sendMessage': {
        const chatId = String(p.chat_id ?? '');
        const text = String(p.text ?? '');
        // Arrival: the request's body has been read (where Telegram counts its limits).
        const at = Date.now();
        const record = (status: number, limit?: LimitName) =>
          sent.push({
            chatId,
            text,
            parseMode: p.parse_mode === undefined ? undefined : String(p.parse_mode),
            at,
            status,
            ...(limit ? { limit } : {}),
          });
        if (chatId === '' || text === '') {
          record(400);
          return fail(res, 400, 'Bad Request: message text is empty');
        }
        const to = migrated.get(chatId);
        if (to !== undefined) {
          record(400);
          return fail(res, 400, 'Bad Request: group chat was upgraded to a supergroup chat', {
            migrate_to_chat_id: to,
          });
        }
        const queue = faults.get(chatId);
        const fault = queue?.shift();
        if (queue && queue.length === 0) faults.delete(chatId);
        if (fault?.code === 429) {
          record(429);
          return fail(res, 429, `Too Many Requests: retry after ${fault.retryAfter}`, {
            retry_after: fault.retryAfter,
          });
        }
        const refused = checkLimits?.(chatId, at);
        if (refused) {
          record(429, refused.limit);
          return fail(res, 429, `Too Many Requests: retry after ${refused.retryAfter}`, {
            retry_after: refused.retryAfter,
          });
        }
        if (fault?.code === 403 || blocked.has(chatId)) {
          record(403);
          return fail(res, 403, 'Forbidden: bot was blocked by the user');
        }
        record(200);
        return ok(res, {
          message_id: nextMessageId++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: Number(chatId), type: chatId.startsWith('-') ? 'group' : 'private' },
          text,
        });
      }
      default:
        return fail(res, 404, 'Not Found: method not found');
    }
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://stand-in');
      const m = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
      if (!m) return fail(res, 404, 'Not Found');
      if (m[1] !== token) return fail(res, 401, 'Unauthorized');
      const raw = Buffer.concat(chunks).toString('utf8');
      const params: Record<string, unknown> = Object.fromEntries(url.searchParams);
      const type = String(req.headers['content-type'] ?? '');
      try {
        if (raw && type.includes('json')) Object.assign(params, JSON.parse(raw));
        else if (raw) Object.assign(params, Object.fromEntries(new URLSearchParams(raw)));
      } catch {
        return fail(res, 400, 'Bad Request: cannot parse the body');
      }
      handle(m[2] ?? '', params, res);
    });
  });
  // Idle keep-alive connections stay open as the Bot API's do: Node's default 5 s closes one the
  // bot may be reusing at that very moment, a reset that a test then sees as a failed attempt.
  server.keepAliveTimeout = 120_000;
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', resolve);
  });
  const port = (server.address() as AddressInfo).port;

  const chatKey = (id: number | string) => String(id);
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    botId,
    username,
    sent,
    calls,
    get webhook() {
      return webhook;
    },
    userSends(chat, text, from = { id: 424_242, first_name: 'Merchant' }) {
      return push({
        message: {
          message_id: nextMessageId++,
          date: Math.floor(Date.now() / 1000),
          chat: {
            id: chat.id,
            type: chat.type,
            ...(chat.type === 'private'
              ? { first_name: from.first_name }
              : { title: chat.title ?? 'Shop' }),
          },
          from: { id: from.id, is_bot: false, first_name: from.first_name },
          text,
          ...(text.startsWith('/')
            ? {
                entities: [
                  { type: 'bot_command', offset: 0, length: text.split(/\s/)[0]?.length ?? 0 },
                ],
              }
            : {}),
        },
      });
    },
    failNext(chatId, fault, times = 1) {
      const q = faults.get(chatKey(chatId)) ?? [];
      for (let i = 0; i < times; i++) q.push(fault);
      faults.set(chatKey(chatId), q);
    },
    block(chatId) {
      blocked.add(chatKey(chatId));
    },
    unblock(chatId) {
      blocked.delete(chatKey(chatId));
    },
    migrate(fromId, toId, title = 'Shop') {
      migrated.set(chatKey(fromId), toId);
      push({
        message: {
          message_id: nextMessageId++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: fromId, type: 'group', title },
          migrate_to_chat_id: toId,
        },
      });
    },
    limited() {
      return sent.filter((s) => s.limit !== undefined);
    },
    delivered(chatId) {
      return sent.filter(
        (s) => s.status === 200 && (chatId === undefined || s.chatId === chatKey(chatId)),
      );
    },
    async close() {
      if (waiter) {
        clearTimeout(waiter.timer);
        ok(waiter.res, []);
        waiter = null;
      }
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
    },
  };
}

/**
 * The limits' sliding windows (see the file's comment).
 * @returns check(chatId, at): null when the message fits every window (it is then counted in
 *   each), else the first refusing window and retry_after, whole seconds (nothing counted).
 */
function arrivalLimits(
  scale: number,
): (chatId: string, at: number) => { limit: LimitName; retryAfter: number } | null {
  const windowMs = (name: LimitName) =>
    Math.max(1, Math.round(TELEGRAM_LIMITS[name].windowMs * scale));
  /** Accepted arrival times, ascending, per window key. */
  const logs = new Map<string, number[]>();
  return (chatId, at) => {
    const windows: Array<[LimitName, string]> = [
      ['chat', `chat:${chatId}`],
      ...(chatId.startsWith('-') ? [['group', `group:${chatId}`] as [LimitName, string]] : []),
      ['bot', 'bot'],
    ];
    let refusedBy: LimitName | null = null;
    let waitMs = 0;
    for (const [name, key] of windows) {
      const w = windowMs(name);
      const log = logs.get(key) ?? [];
      // The window is (at - w, at]: an arrival exactly w earlier has left it.
      while (log.length > 0 && (log[0] ?? 0) <= at - w) log.shift();
      logs.set(key, log);
      const { limit } = TELEGRAM_LIMITS[name];
      if (log.length >= limit) {
        refusedBy ??= name;
        waitMs = Math.max(waitMs, (log[log.length - limit] ?? at) + w - at);
      }
    }
    if (refusedBy) return { limit: refusedBy, retryAfter: Math.max(1, Math.ceil(waitMs / 1000)) };
    for (const [, key] of windows) logs.get(key)?.push(at);
    return null;
  };
}
