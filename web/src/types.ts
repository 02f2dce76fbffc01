/**
 * The console API's bodies (/console/api/*), as the server answers them. Times are ISO 8601
 * strings (UTC); amounts are exact decimal strings (never numbers).
 *
 * TODO(console schemas): once src/console/ exports its TypeBox schemas, replace these with
 * `import type { Static }` of them (CONVENTIONS: no second hand-written copy of a shape).
 */

export type Plan = 'free' | 'starter' | 'pro' | 'scale' | 'business';
export type DeliveryStatus = 'PENDING' | 'DELIVERED' | 'DEAD';
export type WatchStatus = 'ACTIVE' | 'PAUSED';
export type AssetFilter = 'USDT' | 'TRX' | 'ALL';
export type Direction = 'incoming' | 'outgoing' | 'both';

export interface Config {
  signup: 'open' | 'closed';
  network: string;
  telegram: boolean;
}

export interface Me {
  account: { id: string; email: string; plan: Plan; plan_name: string; created_at: string };
  limits: { requests_per_minute: number; active_watches: number };
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
}

export interface Watch {
  id: string;
  address: string;
  asset_filter: AssetFilter;
  direction: Direction;
  channel: 'webhook' | 'telegram';
  webhook_url: string | null;
  status: WatchStatus;
  created_at: string;
}

export type WatchListed = Watch & { last_event_at: string | null };
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
export interface TransferEvent {
  api_version: string;
  event_id: string;
  type: string;
  direction: 'incoming' | 'outgoing';
  network: string;
  asset: 'USDT' | 'TRX';
  tx_id: string;
  event_index: number;
  block_number: number;
  block_timestamp: string;
  from: string;
  to: string;
  amount_raw: string;
  amount: string;
  watch_id: string;
  contract?: string | null;
}

export interface DeliverySummary {
  notification_id: string;
  status: DeliveryStatus;
  attempts: number;
  created_at: string;
}

export type EventWithDelivery = TransferEvent & { delivery: DeliverySummary | null };

export interface EventPage {
  data: EventWithDelivery[];
  next_before: string | null;
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
}

export interface Notification {
  id: string;
  status: DeliveryStatus;
  attempts: number;
  created_at: string;
  next_attempt_at: string | null;
  delivered_at: string | null;
  attempt_log: Attempt[];
}

export interface EventDetail {
  event: TransferEvent;
  payload: string;
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
  };
}

export interface ErrorBody {
  error: string;
  code?: string;
  details?: { field: string; message: string }[];
  usage?: { active_watches: number; limit: number; plan: string };
}
