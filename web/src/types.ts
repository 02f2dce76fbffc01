/**
 * The console API's bodies (/console/api/*), as the server answers them. Times are ISO 8601
 * strings (UTC); amounts are exact decimal strings (never numbers).
 *
 * Shapes that have a TypeBox schema on the server are imported from it, type-only (nothing of
 * src/ enters the bundle): the Event (SPEC §Event), its delivery state, the Watch, Me. The others
 * are written here after the console routes' answers (src/console/routes/*), which have no
 * schema of their own yet.
 */

import type { TwoFactorState as ServerTwoFactorState } from '../../src/accounts/two-factor';
import type { AuditEntryT } from '../../src/audit/schema';
import type {
  EndpointName as ServerEndpointName,
  InviteResult as ServerInviteResult,
  Me as ServerMe,
  Member as ServerMember,
  SecondFactorChallenge as ServerSecondFactorChallenge,
  TwoFactorSetup as ServerTwoFactorSetup,
} from '../../src/console/schemas';
import type { EndpointHealth as ServerEndpointHealth } from '../../src/endpoints/health';
import type { EndpointReplay as ServerEndpointReplay } from '../../src/endpoints/replay';
import type { Endpoint as ServerEndpoint } from '../../src/endpoints/schema';
import type {
  DeliveryState,
  Event as ServerEvent,
  EventWithDelivery as ServerEventWithDelivery,
} from '../../src/events/event';
import type {
  AlertChannelView,
  AlertChannelKind as ServerAlertChannelKind,
  AlertSettings as ServerAlertSettings,
} from '../../src/watches/alert-channels';
import type {
  Watch as ServerWatch,
  WatchWithHealth as ServerWatchWithHealth,
} from '../../src/watches/schema';

export type Watch = ServerWatch;
export type Endpoint = ServerEndpoint;
/** GET /console/api/endpoints: an Endpoint and its last day of attempts (src/endpoints/health.ts). */
/** An endpoint as the console lists it: its streak (`health`) and its last day (`day`). */
export type EndpointWithHealth = Endpoint & { day: ServerEndpointHealth | null };
/** GET /console/api/alert-settings (issue 29 item 1). */
export type AlertSettings = ServerAlertSettings;
export type AlertChannel = AlertChannelView;
export type AlertChannelKind = ServerAlertChannelKind;
export type WatchWithHealth = ServerWatchWithHealth;
export type WatchHealth = NonNullable<WatchWithHealth['health']>;

export interface HealthBucket {
  start: string;
  attempts: number;
  succeeded: number;
  success_rate: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
}

/** GET /console/api/watches/{id}/health */
export interface WatchHealthSeries {
  window: 'hour' | 'day' | 'week';
  bucket_seconds: number;
  buckets: HealthBucket[];
  watch: WatchWithHealth;
  /** The endpoint it delivers to (issue 40 item 2); null: its own URL or the chat. */
  endpoint: EndpointName | null;
}

/** GET /console/api/endpoints/{id}: the endpoint's page (issue 40 item 1). */
export interface EndpointPageData {
  endpoint: Endpoint;
  windows: Record<'hour' | 'day' | 'week', Omit<HealthBucket, 'start'>>;
  window: 'hour' | 'day' | 'week';
  bucket_seconds: number;
  buckets: HealthBucket[];
}

/** GET /console/api/endpoints/{id}/attempts: one attempt as stored. */
export interface EndpointAttempt {
  attempt: number;
  started_at: string;
  duration_ms: number;
  http_status: number | null;
  error: string | null;
  error_class: string | null;
  event_id: string;
  watch_id: string | null;
  watch_label: string | null;
  address: string | null;
}

/** POST /console/api/endpoints/{id}/replay (src/endpoints/replay.ts). */
export type EndpointReplay = ServerEndpointReplay;

/** GET /console/api/alerts: one open alert or automatic pause. */
export interface WatchAlert {
  watch_id: string;
  address: string;
  label: string | null;
  kind: 'failing' | 'auto_paused';
  since: string | null;
  reason: string;
  /** Failed attempts in a row now (older servers: absent). */
  consecutive_failures?: number;
}

/** GET /console/api/alerts `endpoints`: one endpoint failing or switched off (issue 40 item 3). */
export interface EndpointAlert {
  endpoint_id: string;
  label: string | null;
  /** Masked below the developer role. */
  url: string;
  kind: 'failing' | 'auto_paused';
  since: string | null;
  reason: string;
  consecutive_failures: number;
  /** Watches (active or paused) on it. */
  watch_count: number;
}
export type DeliveryStatus = DeliveryState['status'];
export type WatchStatus = Watch['status'];
export type AssetFilter = Watch['asset_filter'];
export type Direction = Watch['direction'];

export interface Config {
  signup: 'open' | 'closed';
  network: string;
  telegram: boolean;
  /** Whether the request carried a live session (older servers: absent). */
  signed_in?: boolean;
  /** E-mail is on (SMTP_URL): invitations and password resets go by e-mail. */
  email: boolean;
  /** Plain http:// webhooks are admitted inside WEBHOOK_ALLOW_CIDRS (older servers: absent). */
  local_http?: boolean;
  /** `tronwatch dev`: the local mailbox page capturing every e-mail sent (else null or absent). */
  dev_mailbox?: string | null;
  /** The environment switch's position (issue 32): live (real money) or test (older: absent). */
  environment?: 'live' | 'test';
  /** The test environment's network (`nile`). */
  test_network?: string;
}

export type Me = ServerMe;
/** The answer of a right password when the user has a second factor (issue 18 item 4). */
export type SecondFactorChallenge = ServerSecondFactorChallenge;
export type TwoFactorSetup = ServerTwoFactorSetup;
export type TwoFactorState = ServerTwoFactorState;
export type Role = Me['user']['role'];
export type Member = ServerMember;
export type InviteResult = ServerInviteResult;

/** GET /console/api/audit: one entry (src/audit/schema.ts) and a page. */
export type AuditEntry = AuditEntryT;
export interface AuditLogPage {
  data: AuditEntry[];
  next_cursor: string | null;
}
/** GET /console/api/audit/actions: the actions recorded, with the sentence shown. */
export interface AuditAction {
  name: string;
  description: string;
}

export interface Session {
  id: string;
  created_at: string;
  last_used_at: string;
  expires_at: string;
  user_agent: string | null;
  ip: string | null;
  current: boolean;
}

export interface KeyInfo {
  id: string;
  name: string | null;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  /** The most the key may do: never more than its maker's role (issue 27). */
  role: 'owner' | 'admin' | 'developer' | 'viewer';
  /** Who made it: a member (their e-mail then) or the operator's CLI. */
  created_by:
    | { type: 'user'; user_id: string; email: string | null }
    | { type: 'cli'; user_id: null; email: null };
  /** full, or read: GET requests only (and the read-only MCP tools). */
  scope: 'full' | 'read';
}

/** The endpoint a watch delivers to, by name (src/console/routes/watches.ts EndpointName). */
export type EndpointName = ServerEndpointName;
export type WatchListed = WatchWithHealth & {
  last_event_at: string | null;
  endpoint: EndpointName | null;
};
export type WatchCreated = Watch & { secret?: string; note?: string };

export interface TestResult {
  ok: boolean;
  http_status: number | null;
  error: string | null;
  error_class: string | null;
  duration_ms: number;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  request: { url: string; headers: Record<string, string>; body: string };
}

/** SPEC §Event. */
export type TransferEvent = ServerEvent;

export type DeliverySummary = DeliveryState;

export type EventWithDelivery = ServerEventWithDelivery;

export interface EventPage {
  data: EventWithDelivery[];
  /** The cursor of the older page, null on the oldest. */
  next_before: string | null;
  /** The cursor of the newer page, null on the newest. */
  next_after: string | null;
}

export type ErrorClass =
  | 'timeout'
  | 'tls'
  | 'refused'
  | 'dns'
  | 'blocked'
  | 'network'
  | 'http'
  | 'lost';

export interface Attempt {
  attempt: number;
  started_at: string;
  duration_ms: number;
  http_status: number | null;
  error: string | null;
  error_class: ErrorClass | null;
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  /**
   * A Bot API 429 on a chat delivery: rescheduled at its retry_after, not one of the six attempts;
   * it carries the number of the attempt made after it (listed first).
   */
  throttled: boolean;
}

export interface Notification {
  id: string;
  status: DeliveryStatus;
  attempts: number;
  created_at: string;
  next_attempt_at: string | null;
  delivered_at: string | null;
  /** Held (issue 36): a provider-proof event waiting for a second provider; null otherwise. */
  held: { reason: HeldReason; since: string; detail: string | null } | null;
  attempt_log: Attempt[];
}

/** Why a notification is held (src/events/event.ts HELD_REASONS). */
export type HeldReason = 'awaiting_confirmation' | 'single_provider' | 'contradicted';

export interface EventDetail {
  event: TransferEvent;
  payload: string;
  channel: 'webhook' | 'telegram';
  /** The label of the event's watch (null: none; absent from older servers). */
  watch_label?: string | null;
  /** A chat watch's delivery: the bound chat and the message sent (Bot API HTML). */
  telegram: {
    chat: { id: string; title: string | null; type: string | null } | null;
    message_html: string;
  } | null;
  notifications: Notification[];
}

export interface Overview {
  account: { email: string; plan_name: string };
  watches: { active: number; paused: number; quota: number };
  rate_limit: { limit: number; used: number; window_seconds: number };
  events_24h: Record<DeliveryStatus, number>;
  chain: {
    network: string;
    solidified_head: number | null;
    scanned_block: number | null;
    scanned_block_time: string | null;
    lag_blocks: number | null;
    lag_seconds: number | null;
    /** tronwatch's own finality (issue 28); null while the light client is off. */
    light_client: {
      final_block: number;
      final_block_timestamp: string;
      proven_by_srs: number;
      active_srs: number;
      known_srs: number;
      epoch: number;
      solidified_head_ahead_blocks: number | null;
    } | null;
  };
}

export interface ErrorBody {
  error: string;
  code?: string;
  details?: { field: string; message: string }[];
  usage?: { active_watches: number; limit: number; plan: string };
  /** 401 invalid_credentials at sign-in: failures left before the 15-minute lock. */
  attempts_left?: number;
  /** A 409 duplicate watch: the existing watch's id. */
  watch_id?: string;
}
