/**
 * @tronwatch/client: the tronwatch API, typed. `paths` and `components` are generated from the
 * service's OpenAPI document (src/schema.ts, scripts/generate.ts); requests go through
 * openapi-fetch, so every path, parameter, body and answer is checked by the compiler:
 *
 *   const tw = createTronwatchClient({ baseUrl: 'https://tronwatch.example.com', apiKey });
 *   const { data, error } = await tw.GET('/v1/events', { params: { query: { limit: 10 } } });
 *
 * `data` is the 2xx body, `error` the error body (`{ error, code?, details? }`), `response` the raw
 * Response (rate-limit headers). Webhooks: verifyWebhook (src/webhooks.ts).
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './schema.js';

export type { components, paths } from './schema.js';
export { verifyWebhook, type WebhookEvent, WebhookVerificationError } from './webhooks.js';

type Schemas = components['schemas'];
export type Watch = Schemas['Watch'];
export type WatchCreated = Schemas['WatchCreated'];
export type CreateWatch = Schemas['CreateWatch'];
export type Event = Schemas['Event'];
export type EventWithDelivery = Schemas['EventWithDelivery'];
export type EventList = Schemas['EventList'];
export type EventDetail = Schemas['EventDetail'];
export type Status = Schemas['Status'];
export type TransactionExplanation = Schemas['TransactionExplanation'];
export type ErrorBody = Schemas['ErrorBody'];

/** The client: openapi-fetch's, over tronwatch's paths. */
export type TronwatchClient = Client<paths>;

export interface TronwatchClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** The deployment, e.g. `https://tronwatch.example.com` (no trailing `/v1`). */
  baseUrl: string;
  /** A `tw_live_…` API key, sent as `Authorization: Bearer …`. */
  apiKey: string;
}

/** A client for one deployment and key. */
export function createTronwatchClient(opts: TronwatchClientOptions): TronwatchClient {
  const { apiKey, baseUrl, headers, ...rest } = opts;
  return createClient<paths>({
    ...rest,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    headers: {
      ...(headers as Record<string, string> | undefined),
      Authorization: `Bearer ${apiKey}`,
    },
  });
}
