/**
 * A console session over real HTTP, as the web app holds one (src/console/guard.ts): cookies kept
 * from every answer, `X-CSRF-Token` sent equal to the `tw_csrf` cookie on every state-changing
 * request. Used by the demo's `--telegram` step and tests that drive a running service.
 */

/** One console call: method, path under the origin, optional JSON body. */
export type ConsoleCall = <T = unknown>(
  method: string,
  path: string,
  body?: unknown,
) => Promise<{ status: number; json: T }>;

/**
 * A console session against `base` (the service's origin, e.g. `http://127.0.0.1:8080`): its
 * first call reads GET /console/api/config, which sets the csrf cookie.
 * @returns the call function; `json` is the parsed answer body (undefined for an empty one).
 * @throws the fetch error (network) or SyntaxError (a body that is not JSON).
 */
export async function consoleSession(base: string): Promise<ConsoleCall> {
  const jar = new Map<string, string>();
  const call: ConsoleCall = async <T>(method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = {};
    if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const csrf = jar.get('tw_csrf');
    if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    for (const c of res.headers.getSetCookie()) {
      const pair = c.split(';', 1)[0] ?? '';
      const i = pair.indexOf('=');
      if (i > 0) jar.set(pair.slice(0, i), pair.slice(i + 1));
    }
    const text = await res.text();
    return { status: res.status, json: (text ? JSON.parse(text) : undefined) as T };
  };
  await call('GET', '/console/api/config');
  return call;
}
