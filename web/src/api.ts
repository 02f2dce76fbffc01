/**
 * The console API client: same-origin fetch with the session cookie, the CSRF header on every
 * state-changing request, one error type.
 *
 * - CSRF: the header `X-CSRF-Token` carries the `tw_csrf` cookie, read from document.cookie
 *   right before each request (the server replaces it at login and logout). A 403
 *   `csrf_mismatch` is answered by one GET /console/api/session (which sets a fresh cookie) and
 *   one retry.
 * - 401 `no_session` from any call: the listeners registered with onSignedOut run (the app then
 *   shows the login page, keeping the route).
 * - Environment: every request says the environment the page was loaded in; 409
 *   `environment_changed` (the switch moved in another tab) reloads the page.
 */
import type { ErrorBody } from './types';

export const API = '/console/api';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  readonly body: ErrorBody;
  /** Seconds, from a Retry-After header (429, 503). */
  readonly retryAfter: number | null;

  constructor(status: number, body: ErrorBody, retryAfter: number | null) {
    super(body.error);
    this.status = status;
    this.code = body.code;
    this.body = body;
    this.retryAfter = retryAfter;
  }

  /** The message of `field` in `details`, if any. */
  fieldError(field: string): string | undefined {
    return this.body.details?.find((d) => d.field === field || d.field === `/${field}`)?.message;
  }
}

const signedOutListeners = new Set<() => void>();

/** Run `fn` whenever a request answers 401 no_session. Returns the unsubscribe function. */
export function onSignedOut(fn: () => void): () => void {
  signedOutListeners.add(fn);
  return () => signedOutListeners.delete(fn);
}

/** The value of cookie `name` for this page, or ''. */
function cookie(name: string): string {
  for (const part of document.cookie.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return '';
}

export function csrfToken(): string {
  return cookie('tw_csrf');
}

/**
 * The environment this page was loaded in (the `tw_env` cookie then; the switch reloads the
 * page), sent with every request as `X-Tronwatch-Environment`: after another tab switched, the
 * server answers 409 `environment_changed` and the page reloads in the new environment rather
 * than act in one it does not show.
 */
const PAGE_ENVIRONMENT = cookie('tw_env') === 'test' ? 'test' : 'live';

async function send(method: string, path: string, body: unknown): Promise<Response> {
  const headers: Record<string, string> = {
    Accept: 'application/json',
    'X-Tronwatch-Environment': PAGE_ENVIRONMENT,
  };
  if (method !== 'GET') headers['X-CSRF-Token'] = csrfToken();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  return fetch(API + path, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? null : JSON.stringify(body),
  });
}

async function errorOf(res: Response): Promise<ApiError> {
  let body: ErrorBody;
  try {
    const parsed: unknown = await res.json();
    body =
      typeof parsed === 'object' && parsed !== null && 'error' in parsed
        ? (parsed as ErrorBody)
        : { error: `${res.status} ${res.statusText}` };
  } catch {
    body = { error: `The server answered ${res.status} ${res.statusText}`.trim() };
  }
  const ra = res.headers.get('Retry-After');
  const seconds = ra !== null && /^\d+$/.test(ra.trim()) ? Number(ra.trim()) : null;
  return new ApiError(res.status, body, seconds);
}

/**
 * One console API call. Resolves to the parsed body (undefined for 204), rejects with ApiError
 * (or a TypeError when the network failed).
 */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  let res = await send(method, path, body);
  if (res.status === 403 && method !== 'GET') {
    const err = await errorOf(res.clone());
    if (err.code === 'csrf_mismatch') {
      await fetch(`${API}/session`, { credentials: 'same-origin' });
      res = await send(method, path, body);
    }
  }
  if (!res.ok) {
    const err = await errorOf(res);
    if (err.status === 401 && err.code === 'no_session') {
      for (const fn of signedOutListeners) fn();
    }
    // Switched to the other environment in another tab: show that one (nothing was done here).
    if (err.status === 409 && err.code === 'environment_changed') location.reload();
    throw err;
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  return (text === '' ? undefined : JSON.parse(text)) as T;
}

export const get = <T>(path: string) => api<T>('GET', path);
export const post = <T>(path: string, body?: unknown) => api<T>('POST', path, body ?? {});
export const put = <T>(path: string, body: unknown) => api<T>('PUT', path, body);
export const del = <T>(path: string) => api<T>('DELETE', path);
export const patch = <T>(path: string, body: unknown) => api<T>('PATCH', path, body);

/** A sentence for any failure of a call: the server's message, or what happened on the way. */
export function describeError(e: unknown): string {
  if (e instanceof ApiError) {
    if (e.status === 429 && e.retryAfter !== null) {
      return `${e.message}. Try again in ${formatWait(e.retryAfter)}.`;
    }
    if (e.status >= 500 && e.retryAfter !== null) {
      return `${e.message}. Try again in ${formatWait(e.retryAfter)}.`;
    }
    return e.message;
  }
  if (e instanceof TypeError) return 'Could not reach the server. Check your connection and retry.';
  return e instanceof Error ? e.message : String(e);
}

export function formatWait(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  const m = Math.ceil(seconds / 60);
  return `${m} min`;
}

/** Query string from the defined, non-empty values. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}
