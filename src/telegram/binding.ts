/**
 * Binding a Telegram chat to an account (issue 13 item 2; SPEC §POST /v1/watches rule 2, §Errors
 * "telegram_watches_active"), one function per statement that matters:
 *
 * - createLinkToken: "Connect Telegram" in the console. A random token (24 bytes, base64url: 32
 *   characters, within the 64 a deep link's start parameter allows), single use, valid
 *   {@link LINK_TOKEN_TTL_MS} (10 minutes); only its SHA-256 is stored (migration 010). At most
 *   {@link MAX_LIVE_LINK_TOKENS} live per account: a new one replaces the oldest.
 * - bindChat: `/start <token>` in a chat (private chat or group): uses the token and binds that
 *   chat to the token's account (replacing any chat bound before), in one transaction.
 * - unbindChat: refused (409 telegram_watches_active) while the account has chat watches that are
 *   not deleted (ACTIVE or PAUSED: a paused one would resume into no chat). The account row is
 *   locked, as createWatch locks it, so a chat watch cannot be created between the check and the
 *   unbinding.
 * - migrateChat: a group that became a supergroup has a new chat id (`migrate_to_chat_id`); every
 *   account bound to the old id follows it.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { InTransaction } from '../audit/audit.js';
import { ApiError } from '../common/errors.js';
import type { Db, Queryable } from '../db/pool.js';

/** How long a "Connect Telegram" link is valid, ms (issue 13: 10 minutes). */
export const LINK_TOKEN_TTL_MS = 10 * 60_000;

/** Chat types the Bot API reports (migration 010's CHECK). */
export type ChatType = 'private' | 'group' | 'supergroup' | 'channel';

/** The chat bound to an account, as the console shows it. */
export interface BoundChat {
  /** Bot API chat id, decimal text (negative for groups). */
  id: string;
  /** The group's title, or the private chat's user name; null when unknown. */
  title: string | null;
  type: ChatType | null;
  bound_at: Date | null;
}

/** SHA-256 hex of a link token (what is stored). */
export function linkTokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * Live (unused, unexpired) link tokens an account may hold at once (issue 17 item 4): a new one
 * replaces the oldest beyond this, so calling "Connect Telegram" in a loop never grows the table.
 * 3 covers a link opened on a phone, then again on a desktop, with one to spare.
 */
export const MAX_LIVE_LINK_TOKENS = 3;

/**
 * Make a one-time link token for `accountId`. In the same transaction, the account's unused
 * tokens that expired and its live ones beyond the newest {@link MAX_LIVE_LINK_TOKENS} − 1 are
 * deleted (their links stop working: the bot answers them like an unknown token); the account row
 * is locked (FOR NO KEY UPDATE) so that concurrent calls cannot together exceed the limit.
 * Used tokens are left to the pruning job (src/retention/prune.ts).
 * @returns the token (to put in the deep link, shown once) and its expiry.
 */
export async function createLinkToken(
  db: Db,
  accountId: string,
  ttlMs = LINK_TOKEN_TTL_MS,
): Promise<{ token: string; expiresAt: Date }> {
  return db.transaction((tx) => createLinkTokenIn(tx, accountId, ttlMs));
}

/**
 * {@link createLinkToken} inside the caller's transaction `tx` (so that its audit entry commits
 * with it); the account row's lock is held until that transaction ends.
 */
export async function createLinkTokenIn(
  tx: Queryable,
  accountId: string,
  ttlMs = LINK_TOKEN_TTL_MS,
): Promise<{ token: string; expiresAt: Date }> {
  const token = randomBytes(24).toString('base64url');
  await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE', [accountId]);
  await tx.query(
    `DELETE FROM telegram_link_tokens
      WHERE account_id = $1 AND used_at IS NULL
        AND (expires_at <= now()
             OR token_hash IN (SELECT token_hash FROM telegram_link_tokens
                                WHERE account_id = $1 AND used_at IS NULL AND expires_at > now()
                                ORDER BY created_at DESC, token_hash OFFSET $2))`,
    [accountId, MAX_LIVE_LINK_TOKENS - 1],
  );
  const { rows } = await tx.query<{ expires_at: Date }>(
    `INSERT INTO telegram_link_tokens (token_hash, account_id, expires_at)
     VALUES ($1, $2, now() + make_interval(secs => $3::float8 / 1000))
     RETURNING expires_at`,
    [linkTokenHash(token), accountId, ttlMs],
  );
  const expiresAt = rows[0]?.expires_at;
  if (!expiresAt) throw new Error('INSERT … RETURNING returned no row');
  return { token, expiresAt };
}

/** The chat a /start came from. */
export interface ChatInfo {
  id: string;
  type: ChatType;
  title: string | null;
}

/**
 * Use a link token and bind `chat` to its account.
 * @param inTx run in the binding's transaction with the account id (the audit entry).
 * @returns the account id, or null when the token is unknown, used or expired (nothing changes).
 */
export async function bindChat(
  db: Db,
  token: string,
  chat: ChatInfo,
  inTx?: InTransaction<string>,
): Promise<string | null> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ account_id: string }>(
      `UPDATE telegram_link_tokens SET used_at = now(), used_chat_id = $2
        WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
        RETURNING account_id`,
      [linkTokenHash(token), chat.id],
    );
    const accountId = rows[0]?.account_id;
    if (!accountId) return null;
    await tx.query(
      `UPDATE accounts SET telegram_chat_id = $2, telegram_chat_title = $3,
                           telegram_chat_type = $4, telegram_bound_at = now()
        WHERE id = $1`,
      [accountId, chat.id, chat.title, chat.type],
    );
    await inTx?.(tx, accountId);
    return accountId;
  });
}

/** The chat bound to `accountId`, or null. */
export async function boundChat(db: Queryable, accountId: string): Promise<BoundChat | null> {
  const { rows } = await db.query<{
    telegram_chat_id: string | null;
    telegram_chat_title: string | null;
    telegram_chat_type: ChatType | null;
    telegram_bound_at: Date | null;
  }>(
    `SELECT telegram_chat_id, telegram_chat_title, telegram_chat_type, telegram_bound_at
       FROM accounts WHERE id = $1`,
    [accountId],
  );
  const r = rows[0];
  if (!r?.telegram_chat_id) return null;
  return {
    id: r.telegram_chat_id,
    title: r.telegram_chat_title,
    type: r.telegram_chat_type,
    bound_at: r.telegram_bound_at,
  };
}

/**
 * Unbind the account's chat. Unbinding an account without a chat changes nothing.
 * @param inTx run in the transaction with the chat id that was bound, or null (the audit entry).
 * @throws ApiError 409 telegram_watches_active while the account has non-deleted chat watches
 *   (`extra.watches`: how many).
 */
export async function unbindChat(
  db: Db,
  accountId: string,
  inTx?: InTransaction<string | null>,
): Promise<void> {
  await db.transaction(async (tx) => {
    const { rows: locked } = await tx.query<{ telegram_chat_id: string | null }>(
      'SELECT telegram_chat_id FROM accounts WHERE id = $1 FOR UPDATE',
      [accountId],
    );
    const { rows } = await tx.query<{ n: number }>(
      `SELECT count(*)::int8 AS n FROM watches
        WHERE account_id = $1 AND channel = 'telegram' AND deleted_at IS NULL`,
      [accountId],
    );
    const n = Number(rows[0]?.n ?? 0);
    if (n > 0) {
      throw ApiError.coded(
        'telegram_watches_active',
        `${n} chat watch(es) still deliver to this chat: delete them first`,
        undefined,
        { watches: n },
      );
    }
    await tx.query(
      `UPDATE accounts SET telegram_chat_id = NULL, telegram_chat_title = NULL,
                           telegram_chat_type = NULL, telegram_bound_at = NULL
        WHERE id = $1`,
      [accountId],
    );
    await inTx?.(tx, locked[0]?.telegram_chat_id ?? null);
  });
}

/**
 * Follow a group that became a supergroup: every account bound to `fromChatId` is bound to
 * `toChatId` (type supergroup).
 * @returns how many accounts followed.
 */
export async function migrateChat(
  db: Queryable,
  fromChatId: string,
  toChatId: string,
): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE accounts SET telegram_chat_id = $2, telegram_chat_type = 'supergroup'
      WHERE telegram_chat_id = $1`,
    [fromChatId, toChatId],
  );
  return rowCount;
}
