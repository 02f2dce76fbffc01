/**
 * A browser for the console's JSON API through `app.inject`: keeps the cookies the console sets
 * and sends X-CSRF-Token like the page does, from a client address of its own (`ip`, the socket
 * peer) and with headers of its own (`headers`: an X-Forwarded-For added by a proxy, say).
 */
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

/** The password the helpers sign up and log in with unless told otherwise. */
export const PASSWORD = 'correct horse battery staple';

export class Browser {
  readonly jar = new Map<string, string>();
  constructor(
    private readonly app: FastifyInstance,
    private readonly host = 'localhost',
    readonly ip = '203.0.113.7',
    private readonly extraHeaders: Record<string, string> = {},
  ) {}

  get csrf(): string | undefined {
    return this.jar.get('tw_csrf');
  }

  async request(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    url: string,
    body?: unknown,
    opts: { csrf?: string | null } = {},
  ): Promise<LightMyRequestResponse> {
    const headers: Record<string, string> = { host: this.host, ...this.extraHeaders };
    const cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (cookie) headers.cookie = cookie;
    const csrf = opts.csrf === undefined ? this.csrf : opts.csrf;
    if (method !== 'GET' && csrf !== null && csrf !== undefined) headers['x-csrf-token'] = csrf;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await this.app.inject({
      method,
      url,
      headers,
      remoteAddress: this.ip,
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
    for (const c of res.cookies as Array<{ name: string; value: string; maxAge?: number }>) {
      if (c.value === '' || c.maxAge === 0) this.jar.delete(c.name);
      else this.jar.set(c.name, c.value);
    }
    return res;
  }

  get = (url: string) => this.request('GET', url);
  post = (url: string, body?: unknown, opts?: { csrf?: string | null }) =>
    this.request('POST', url, body, opts);
  put = (url: string, body?: unknown) => this.request('PUT', url, body);
  del = (url: string) => this.request('DELETE', url);

  /** Open the page (the CSRF cookie), then sign up. */
  async signUp(email: string, password = PASSWORD): Promise<LightMyRequestResponse> {
    await this.get('/console/api/config');
    return this.post('/console/api/signup', { email, password });
  }

  async login(email: string, password = PASSWORD): Promise<LightMyRequestResponse> {
    if (!this.csrf) await this.get('/console/api/config');
    return this.post('/console/api/login', { email, password });
  }
}
