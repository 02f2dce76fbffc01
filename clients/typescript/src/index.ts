/**
 * @tronwatch/client: the tronwatch API, typed. `paths` and `components` are generated from the
 * service's OpenAPI document (src/schema.ts, scripts/generate.ts); requests go through
 * openapi-fetch, so every path, parameter, body and answer is checked by the compiler:
 *
 *   const tw = createTronwatchClient({ baseUrl: 'https://tronwatch.example.com', apiKey });
 *   const { data, error } = await tw.GET('/v1/events', { params: { query: { limit: 10 } } });
 *
 * `data` is the 2xx body, `error` the error body (`ErrorBody`: `{ error, code?, details? }`, its
 * `details` a FieldError list or `{ revoked_at }`), `response` the raw Response (rate-limit
 * headers). Unlike openapi-fetch's own signatures, a member that the API does not know (a
 * misspelt query key, an extra body field) is a compile error. Webhooks: verifyWebhook
 * (src/webhooks.ts). The package's version follows the API's: API `2026-08` is `2026.8.x`.
 */
import createClient, {
  type Client,
  type ClientOptions,
  type FetchOptions,
  type FetchResponse,
  type HeadersOptions,
} from 'openapi-fetch';
import type { components, paths } from './schema.js';

export { API_VERSION, type components, type paths } from './schema.js';
export {
  type VerifyWebhookOptions,
  verifyWebhook,
  type WebhookEvent,
  WebhookVerificationError,
} from './webhooks.js';

type Schemas = components['schemas'];
export type Watch = Schemas['Watch'];
/** A webhook watch's (`channel: 'webhook'`, with its `secret`) or a Telegram watch's creation. */
export type WatchCreated = Schemas['WatchCreated'];
export type WebhookWatchCreated = Schemas['WebhookWatchCreated'];
export type CreateWatch = Schemas['CreateWatch'];
export type Event = Schemas['Event'];
export type EventWithDelivery = Schemas['EventWithDelivery'];
export type EventList = Schemas['EventList'];
export type EventDetail = Schemas['EventDetail'];
export type Status = Schemas['Status'];
export type TransactionExplanation = Schemas['TransactionExplanation'];
/** Every error answer: `{ error, code?, details? }`. */
export type ErrorBody = Schemas['ErrorBody'];
/** One field at fault in a 400's `details`. */
export type FieldError = Schemas['FieldError'];
/** The `code` of an error answer. */
export type ErrorCode = NonNullable<ErrorBody['code']>;

type Method = 'get' | 'put' | 'post' | 'delete' | 'patch';
/** The paths that have an operation for `M`. */
export type PathsWith<M extends Method> = {
  [P in keyof paths]: paths[P][M] extends Record<string, unknown> ? P : never;
}[keyof paths];
type Operation<P extends keyof paths, M extends Method> = paths[P][M] & Record<string, unknown>;
/** The options of one call: `params` (path, query), `body`, and openapi-fetch's own. */
export type CallOptions<P extends keyof paths, M extends Method> = FetchOptions<Operation<P, M>>;
/** Optional when nothing in the options is required (no path parameter, no body). */
type CallArgs<O> =
  Record<string, never> extends Required<Pick<O, RequiredKeys<O>>> ? [options?: O] : [options: O];
type RequiredKeys<O> = {
  [K in keyof O]-?: Record<string, never> extends Pick<O, K> ? never : K;
}[keyof O];

/**
 * One method (GET, POST…): the options are not a type parameter, so an object literal is
 * checked for excess members at every depth (`{ query: { limit: 5, limt: 1 } }` does not compile).
 */
export type StrictMethod<M extends Method> = <P extends PathsWith<M>>(
  path: P,
  ...options: CallArgs<CallOptions<P, M>>
) => Promise<FetchResponse<Operation<P, M>, CallOptions<P, M>, `${string}/${string}`>>;

/** The client: openapi-fetch's, over tronwatch's paths, with strictly checked options. */
export type TronwatchClient = Omit<Client<paths>, 'GET' | 'PUT' | 'POST' | 'DELETE' | 'PATCH'> & {
  GET: StrictMethod<'get'>;
  PUT: StrictMethod<'put'>;
  POST: StrictMethod<'post'>;
  DELETE: StrictMethod<'delete'>;
  PATCH: StrictMethod<'patch'>;
};

export interface TronwatchClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** The deployment, e.g. `https://tronwatch.example.com` (no trailing `/v1`). */
  baseUrl: string;
  /** A `tw_live_…` API key, sent as `Authorization: Bearer …` (over any Authorization given). */
  apiKey: string;
  /** Headers sent with every request: a `Headers`, `[name, value]` pairs or a record. */
  headers?: HeadersOptions;
}

/** `headers` in any form openapi-fetch accepts, as one Headers (later values of a name append). */
function toHeaders(headers: HeadersOptions | undefined): Headers {
  if (headers === undefined) return new Headers();
  if (headers instanceof Headers || Array.isArray(headers)) return new Headers(headers);
  const out = new Headers();
  for (const [name, value] of Object.entries(headers)) {
    if (value === null || value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.append(name, String(v));
  }
  return out;
}

/** A client for one deployment and key. */
export function createTronwatchClient(opts: TronwatchClientOptions): TronwatchClient {
  const { apiKey, baseUrl, headers, ...rest } = opts;
  const merged = toHeaders(headers);
  merged.set('Authorization', `Bearer ${apiKey}`);
  // The strict signatures only narrow what compiles; the calls are openapi-fetch's.
  return createClient<paths>({
    ...rest,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    headers: merged,
  }) as unknown as TronwatchClient;
}
