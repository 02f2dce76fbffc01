/**
 * The console's JSON bodies (CONVENTIONS "Types from the same schemas"): TypeBox schemas that the
 * routes validate with, and whose static types the web app imports. Unknown members are refused
 * (400 with `details`), as on /v1.
 */

import { type Static, Type as T } from '@sinclair/typebox';
import { StringEnum } from '../common/schema.js';
import { CreateTestTransferSchema } from '../events/test-transfer.js';
import { EVENT_PROOFS } from '../tron/types.js';
import { PASSWORD_MAX, PASSWORD_MIN } from './passwords.js';

const Email = T.String({ minLength: 3, maxLength: 320, description: 'E-mail address.' });
const Password = T.String({
  minLength: PASSWORD_MIN,
  maxLength: PASSWORD_MAX,
  description: `Password, ${PASSWORD_MIN} to ${PASSWORD_MAX} characters.`,
});
const closed = { additionalProperties: false } as const;

export const CredentialsBody = T.Object({ email: Email, password: Password }, closed);
/** Login does not enforce the length rules (an old password must still be refused as wrong). */
export const LoginBody = T.Object(
  { email: Email, password: T.String({ minLength: 1, maxLength: PASSWORD_MAX }) },
  closed,
);
export const InviteAcceptBody = T.Object(
  { token: T.String({ minLength: 1, maxLength: 128 }), password: Password },
  closed,
);
/** GET /console/api/invite?token=…: what an invitation link says. */
export const InviteQuery = T.Object({ token: T.String({ minLength: 1, maxLength: 128 }) }, closed);
export const PasswordChangeBody = T.Object(
  { current_password: T.String({ minLength: 1, maxLength: PASSWORD_MAX }), new_password: Password },
  closed,
);
export const ResetRequestBody = T.Object({ email: Email }, closed);
export const ResetConfirmBody = T.Object(
  { token: T.String({ minLength: 1, maxLength: 128 }), password: Password },
  closed,
);
/** A TOTP code (6 digits) or a recovery code (`xxxxx-xxxxx`), as typed. */
const Code = T.String({
  minLength: 6,
  maxLength: 32,
  description: 'Authentication or recovery code.',
});
export const SecondFactorBody = T.Object(
  { challenge: T.String({ minLength: 1, maxLength: 128 }), code: Code },
  closed,
);
export const TwoFactorSetupBody = T.Object(
  { password: T.String({ minLength: 1, maxLength: PASSWORD_MAX }) },
  closed,
);
export const TwoFactorEnableBody = T.Object({ code: Code }, closed);
/** New recovery codes: the password and a current code (issue 27 item 7). */
export const RecoveryCodesBody = T.Object(
  { password: T.String({ minLength: 1, maxLength: PASSWORD_MAX }), code: Code },
  closed,
);
export const TwoFactorDisableBody = T.Object(
  { password: T.String({ minLength: 1, maxLength: PASSWORD_MAX }), code: Code },
  closed,
);
export const TwoFactorRequirementBody = T.Object({ required: T.Boolean() }, closed);
const RoleSchema = StringEnum(['owner', 'admin', 'developer', 'viewer'] as const);
export const MemberInviteBody = T.Object({ email: Email, role: RoleSchema }, closed);
export const MemberRoleBody = T.Object({ role: RoleSchema }, closed);
/** PUT /console/api/members/me/alerts: the signed-in member's own alert e-mail choice. */
export const MemberAlertsBody = T.Object(
  { alert_emails: T.Boolean({ description: 'Watch alerts are e-mailed to me.' }) },
  closed,
);
export const KeyCreateBody = T.Object(
  {
    name: T.Optional(T.String({ maxLength: 100, description: 'A label for the key.' })),
    role: T.Optional(RoleSchema),
    scope: T.Optional(
      StringEnum(['full', 'read'] as const, {
        description: 'full (default), or read: GET requests only (issue 31 item 3).',
      }),
    ),
  },
  closed,
);
/** GET /console/api/keys?made_by=usr_…|cli: only the keys that member (or the CLI) made. */
export const KeyListQuery = T.Object(
  { made_by: T.Optional(T.String({ minLength: 1, maxLength: 64 })) },
  closed,
);
export const IdParams = T.Object({ id: T.String({ minLength: 1, maxLength: 64 }) });
/** /console/api/alert-settings/channels/{kind}: which alert channel (issue 29 item 1). */
export const AlertChannelParams = T.Object({ kind: StringEnum(['slack', 'webhook'] as const) });
/** PUT /console/api/alert-settings/channels/{kind}: add the channel (url needed) or edit it. */
export const AlertChannelBody = T.Object(
  {
    url: T.Optional(
      T.String({
        minLength: 1,
        maxLength: 2048,
        description: 'https URL of the incoming webhook or the alert receiver.',
      }),
    ),
    enabled: T.Optional(T.Boolean({ description: 'Alerts go out on this channel.' })),
  },
  closed,
);
/** POST /console/api/alert-settings/test: send a test alert on one channel now. */
export const AlertTestBody = T.Object(
  { target: StringEnum(['email', 'slack', 'webhook'] as const) },
  closed,
);

const Instant = T.String({ format: 'date-time', maxLength: 40 });
/** The filters shared by the events list and its export (issue 19 item 5). */
const eventFilters = {
  since: T.Optional(Instant),
  until: T.Optional(Instant),
  watch_id: T.Optional(T.String({ maxLength: 64 })),
  status: T.Optional(StringEnum(['PENDING', 'DELIVERED', 'DEAD'] as const)),
  /** A transaction id, an event id or an address (src/events/list.ts parseEventSearch). */
  q: T.Optional(T.String({ maxLength: 100 })),
  asset: T.Optional(StringEnum(['USDT', 'TRX'] as const)),
  direction: T.Optional(StringEnum(['incoming', 'outgoing'] as const)),
  channel: T.Optional(StringEnum(['webhook', 'telegram'] as const)),
  proof: T.Optional(StringEnum(EVENT_PROOFS)),
  /** Only events with a held delivery (`true`) or without (`false`): issue 36 item 5. */
  held: T.Optional(StringEnum(['true', 'false'] as const)),
  /** Only the events of the watches that deliver to this endpoint (`ep_…`, issue 40 item 1). */
  endpoint_id: T.Optional(T.String({ maxLength: 64 })),
};
export const ConsoleEventsQuery = T.Object(
  {
    limit: T.Optional(T.Integer({ minimum: 1, maximum: 200, default: 50 })),
    before: T.Optional(Instant),
    after: T.Optional(Instant),
    ...eventFilters,
  },
  closed,
);
export const ConsoleExportQuery = T.Object(
  { format: StringEnum(['csv', 'json'] as const), ...eventFilters },
  closed,
);
/** POST /console/api/redeliver: the dead letters page's filters (all but status and paging). */
export const RedeliverBody = T.Object(
  {
    watch_id: eventFilters.watch_id,
    since: eventFilters.since,
    until: eventFilters.until,
    q: eventFilters.q,
    asset: eventFilters.asset,
    direction: eventFilters.direction,
    channel: eventFilters.channel,
    endpoint_id: eventFilters.endpoint_id,
  },
  closed,
);

export type Credentials = Static<typeof CredentialsBody>;
export type ConsoleEventsQueryT = Static<typeof ConsoleEventsQuery>;
export type ConsoleExportQueryT = Static<typeof ConsoleExportQuery>;

/** GET /console/api/session, and the answer of sign-up, login, invitation and reset. */
export interface Me {
  /** The signed-in user (issue 18): its own e-mail and its role in the account. */
  user: {
    id: string;
    email: string;
    role: 'owner' | 'admin' | 'developer' | 'viewer';
    /** The user has a second factor (issue 18 item 4). */
    two_factor: boolean;
    /** The account requires one and the user has none: only its set-up answers until then. */
    two_factor_setup_required: boolean;
  };
  account: {
    id: string;
    email: string;
    /** An owner requires a second factor of every member. */
    require_two_factor: boolean;
    plan: string;
    plan_name: string;
    created_at: string;
  };
  limits: { requests_per_minute: number; active_watches: number };
}

/** POST /console/api/login (and invitation, reset) when the user has a second factor. */
export interface SecondFactorChallenge {
  second_factor_required: true;
  /** Posted back with the code to POST /console/api/login/second-factor; used once. */
  challenge: string;
  expires_in_seconds: number;
}

/** POST /console/api/two-factor/setup: what the authenticator app needs, shown once. */
export interface TwoFactorSetup {
  /** The TOTP secret, base32 (for typing into the app). */
  secret: string;
  /** The `otpauth://totp/…` URI the QR code holds. */
  otpauth_uri: string;
  /** The QR code of the URI, an SVG document. */
  qr_svg: string;
}

/** A member of the account as GET /console/api/members lists it. */
export interface Member {
  id: string;
  email: string;
  role: 'owner' | 'admin' | 'developer' | 'viewer';
  /** invited: the invitation is not accepted yet (no password). */
  status: 'active' | 'invited';
  created_at: string;
  joined_at: string | null;
  /**
   * Watch alerts (failing, recovered, paused) are e-mailed to this member once joined: their own
   * choice (PUT /console/api/members/me/alerts); owners and admins start on, others off.
   */
  alert_emails: boolean;
  /** The member has two-factor sign-in on (an owner can turn it off for a lost device). */
  two_factor: boolean;
  /** The signed-in user. */
  you: boolean;
}

/** POST /console/api/members and …/members/{id}/invite: the invitation made. */
export interface InviteResult {
  member: Member;
  /** True: the link went by e-mail (and is not shown). False: e-mail is off, `link` is it. */
  emailed: boolean;
  /** The one-time link, only when e-mail is off (for the admin to pass on). */
  link: string | null;
  expires_at: string;
}

/** GET /console/api/telegram (issue 13): the bot and the chat bound to the account. */
export const TelegramStatus = T.Object({
  /** False when the deployment has no bot (then the other endpoints answer 503). */
  configured: T.Boolean(),
  /** The bot's @username without the @, or null when not configured. */
  bot_username: T.Union([T.String(), T.Null()]),
  chat: T.Union([
    T.Object({
      /** Bot API chat id, decimal text (negative for groups). */
      id: T.String(),
      /** Group title or the private chat's user name; null when unknown. */
      title: T.Union([T.String(), T.Null()]),
      type: T.Union([StringEnum(['private', 'group', 'supergroup', 'channel']), T.Null()]),
      bound_at: T.Union([T.String({ format: 'date-time' }), T.Null()]),
    }),
    T.Null(),
  ]),
});
export type TelegramStatusT = Static<typeof TelegramStatus>;

/** POST /console/api/telegram/connect: the one-time deep link (valid 10 minutes, single use). */
export const TelegramConnect = T.Object({
  /** https://t.me/<bot>?start=<token> */
  link: T.String(),
  expires_at: T.String({ format: 'date-time' }),
});
export type TelegramConnectT = Static<typeof TelegramConnect>;

/**
 * The console's "Trigger test deposit" body (issue 32): POST /v1/test/transfers's, the watch
 * taken from the path.
 */
export const ConsoleTestTransferBody = T.Omit(CreateTestTransferSchema, ['watch_id'], {
  additionalProperties: false,
});

/** What a watch's row and page say of the endpoint it delivers to (issue 40 item 2). */
export interface EndpointName {
  id: string;
  label: string | null;
  /** Masked below the developer role (src/console/mask.ts). */
  url: string;
  enabled: boolean;
  /** Deleted since (its watches were moved or deleted first; a deleted watch may still name it). */
  deleted: boolean;
}
