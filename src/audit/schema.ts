/**
 * The audit log's JSON shapes (TypeBox): the query the console and GET /v1/audit accept, an
 * entry and a page as they answer (src/audit/audit.ts listAuditLog writes them).
 */
import { type Static, Type as T } from '@sinclair/typebox';
import { NullableString, StringEnum } from '../common/schema.js';

const instant = (description: string) =>
  T.Optional(
    T.String({
      format: 'date-time',
      maxLength: 40,
      description: `${description} RFC 3339 date-time with a time zone.`,
    }),
  );

/** GET /console/api/audit and GET /v1/audit query. Unknown members are refused (400). */
export const AuditQuerySchema = T.Object(
  {
    limit: T.Optional(
      T.Integer({ minimum: 1, maximum: 200, default: 50, description: 'Page size: 1 to 200.' }),
    ),
    cursor: T.Optional(
      T.String({
        maxLength: 200,
        description: 'The previous page’s `next_cursor`: the page of older entries.',
      }),
    ),
    actor: T.Optional(
      T.String({
        maxLength: 140,
        description:
          'Only this kind of actor (`user`, `api_key`, `system`) or this one actor (`api_key:key_…`, `user:<id>`).',
      }),
    ),
    action: T.Optional(
      T.String({
        maxLength: 82,
        description: 'Only this action (`watch.created`) or this group of actions (`watch.*`).',
      }),
    ),
    since: instant('Inclusive lower bound on the entry’s time.'),
    until: instant('Exclusive upper bound on the entry’s time.'),
  },
  { additionalProperties: false },
);
export type AuditQueryT = Static<typeof AuditQuerySchema>;

export const AuditEntrySchema = T.Object(
  {
    id: T.String({ description: 'Entry id (`aud_…`).' }),
    at: T.String({
      format: 'date-time',
      description: 'When the change was made: UTC, microseconds.',
    }),
    actor: T.Object({
      type: StringEnum(['user', 'api_key', 'system'] as const, {
        description:
          '`user`: a console user; `api_key`: a /v1 request with that key; `system`: tronwatch itself (`cli`: the operator’s command line, `telegram`: the bot).',
      }),
      id: NullableString({
        description:
          'The user’s id, the key’s id (`key_…`), or the system part (`cli`, `telegram`).',
      }),
      label: NullableString({
        description: 'A name for people: the user’s e-mail, or the key’s prefix and name.',
      }),
      session_id: NullableString({
        description: 'The console session the user acted through (`ses_…`), if any.',
      }),
    }),
    action: T.String({
      description: 'What was done: `<thing>.<what happened>` (`watch.created`).',
    }),
    target_id: NullableString({
      description: 'What it was done to: a watch, key, event, session or chat id.',
    }),
    detail: T.Record(T.String(), T.Union([T.String(), T.Number(), T.Boolean(), T.Null()]), {
      description: 'A few facts about the change (never a key, secret, token or password).',
    }),
    client_ip: NullableString({
      description:
        'The client address (behind a trusted proxy, the address it forwarded); null for the operator’s CLI and the Telegram bot.',
    }),
    environment: T.Optional(
      T.Union([T.Literal('live'), T.Literal('test'), T.Null()], {
        description:
          'Additive (test mode): the environment the change was made in, `live` or `test`; null for a change that belongs to no environment (sign-ins, members, passwords).',
      }),
    ),
  },
  { $id: 'AuditEntry', description: 'One change to the account.' },
);
export type AuditEntryT = Static<typeof AuditEntrySchema>;
