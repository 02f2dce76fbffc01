/**
 * SPEC §GET /healthz, DESIGN "Postgres unreachable", and the OpenAPI 3.1 document: valid, complete,
 * and describing the answers the app really gives (each real answer is validated against the
 * schema the document declares for its status).
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import type { LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/accounts/keys.js';
import { buildApp } from '../../src/api/app.js';
import { NODE_DOWN_GRACE_MS } from '../../src/api/routes/health.js';
import { ERROR_CODES } from '../../src/common/errors.js';
import { silentLogger } from '../../src/common/logger.js';
import { openDb } from '../../src/db/pool.js';
import { recordSecretProblem } from '../../src/delivery/secret-problems.js';
import { saveProviderStates } from '../../src/ingest/providers.js';
import { MemoryRateLimiter } from '../../src/rate-limit/limiter.js';
import {
  ADDR2_B58,
  type ApiHarness,
  apiHarness,
  insertEvents,
  json,
  openapiDocument,
  otherNetworkKey,
  responseChecker,
  webhookWatch,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

type Json = Record<string, unknown>;

/** A database whose server is down: nothing listens on port 1. */
const deadDb = () => openDb({ url: 'postgres://postgres@127.0.0.1:1/x', embeddedDir: '' });

describe.each(dbEngines)('GET /healthz on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('answers 200 when every dependency is up (no Redis configured counts as up)', async () => {
    h = await apiHarness(engine);
    const res = await h.app.inject({ url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(json(res)).toEqual({
      ok: true,
      network: 'mainnet',
      checks: { postgres: true, redis: true },
    });
  });

  it('answers 503 naming the key ids of webhook secrets a worker could not decrypt lately', async () => {
    h = await apiHarness(engine);
    await recordSecretProblem(
      h.db,
      'abcdef0123456789',
      'secret: unknown secret key id abcdef0123456789',
    );
    const res = await h.app.inject({ url: '/healthz' });
    expect(res.statusCode).toBe(503);
    expect(json(res)).toEqual({
      ok: false,
      network: 'mainnet',
      checks: { postgres: true, redis: true, secrets: false },
      secrets: {
        undecryptable_key_ids: ['abcdef0123456789'],
        reason: 'secret: unknown secret key id abcdef0123456789',
        since: expect.stringMatching(/Z$/),
      },
    });
    // A problem not seen for longer than the window no longer counts.
    await h.db.query("UPDATE secret_problems SET last_seen = now() - interval '10 minutes'");
    expect((await h.app.inject({ url: '/healthz' })).statusCode).toBe(200);
  });

  it('lists node providers that do not serve: 200 while one still serves, 503 when none does', async () => {
    h = await apiHarness(engine);
    const ok = { solidified: 1000, head: 1018 };
    await saveProviderStates(h.db, 'mainnet', [
      { index: 0, name: 'http://10.0.0.5:8090', state: 'ok', ...ok },
      { index: 1, name: 'https://api.trongrid.io', state: 'ok', ...ok },
    ]);
    expect(json(await h.app.inject({ url: '/healthz' }))).toEqual({
      ok: true,
      network: 'mainnet',
      checks: { postgres: true, redis: true },
    });
    const since = Date.parse('2026-01-08T13:40:00Z');
    await saveProviderStates(h.db, 'mainnet', [
      { index: 0, name: 'http://10.0.0.5:8090', state: 'ok', ...ok },
      {
        index: 1,
        name: 'https://api.trongrid.io',
        state: 'unhealthy',
        reason: 'forbidden',
        since,
        ...ok,
      },
    ]);
    const degraded = await h.app.inject({ url: '/healthz' });
    expect(degraded.statusCode).toBe(200);
    expect(json(degraded)).toEqual({
      ok: true,
      network: 'mainnet',
      checks: { postgres: true, redis: true, node: true },
      node: {
        providers: [
          { index: 0, state: 'ok' },
          { index: 1, state: 'unhealthy', reason: 'forbidden', since: '2026-01-08T13:40:00.000Z' },
        ],
      },
    });
    await saveProviderStates(h.db, 'mainnet', [
      {
        index: 0,
        name: 'http://10.0.0.5:8090',
        state: 'set_aside',
        reason: 'network',
        since,
        until: since + 4000,
        ...ok,
      },
      {
        index: 1,
        name: 'https://api.trongrid.io',
        state: 'unhealthy',
        reason: 'forbidden',
        since,
        ...ok,
      },
    ]);
    const down = await h.app.inject({ url: '/healthz' });
    expect(down.statusCode).toBe(503);
    expect(json(down)).toMatchObject({ ok: false, checks: { node: false } });
    expect(down.body).not.toMatch(/10\.0\.0\.5|trongrid/); // no URL without authentication
    expect(responseChecker(await openapiDocument(h.app))('/healthz', 'get', down)).toEqual([]);

    // A lone provider set aside moments ago (a timeout, a 503: retried within seconds) is
    // reported, but does not make a load balancer drop the replica until NODE_DOWN_GRACE_MS.
    const recent = Date.now() - 5_000;
    const setAside = (since: number) => [
      {
        index: 0,
        name: 'http://10.0.0.5:8090',
        state: 'set_aside' as const,
        reason: 'network',
        since,
        until: since + 8_000,
        ...ok,
      },
    ];
    await saveProviderStates(h.db, 'mainnet', setAside(recent));
    const brief = await h.app.inject({ url: '/healthz' });
    expect(brief.statusCode).toBe(200);
    expect(json(brief)).toMatchObject({ ok: true, checks: { postgres: true, node: false } });
    await saveProviderStates(h.db, 'mainnet', setAside(Date.now() - NODE_DOWN_GRACE_MS - 1_000));
    expect((await h.app.inject({ url: '/healthz' })).statusCode).toBe(503);
  });

  it('answers 503 with the same shape when PostgreSQL is down, and /v1 answers the bare 500', async () => {
    const db = await deadDb();
    h = await apiHarness(engine, { db });
    try {
      const res = await h.app.inject({ url: '/healthz' });
      expect(res.statusCode).toBe(503);
      expect(json(res)).toEqual({
        ok: false,
        network: 'mainnet',
        checks: { postgres: false, redis: true },
      });

      const v1 = await h.app.inject({
        url: '/v1/watches',
        headers: { authorization: `Bearer tw_live_${'C'.repeat(32)}` },
      });
      expect(v1.statusCode).toBe(500);
      expect(v1.body).toBe('{"error":"internal server error"}');
      expect(v1.headers['x-ratelimit-limit']).toBe('60');
    } finally {
      await db.close();
    }
  });

  it('answers 503 when the Redis check fails, throws or never settles', async () => {
    h = await apiHarness(engine);
    const checks: Array<() => Promise<boolean>> = [
      async () => false,
      async () => {
        throw new Error('ECONNREFUSED');
      },
      () => new Promise<boolean>(() => {}),
    ];
    const appWith = (redisCheck: () => Promise<boolean>) =>
      buildApp({
        config: h!.config,
        db: h!.db,
        logger: silentLogger,
        secrets: h!.secrets,
        rateLimiter: new MemoryRateLimiter(),
        redisCheck,
      });
    for (const redisCheck of checks) {
      const app = await appWith(redisCheck);
      try {
        // The third check never settles: an unbounded wait would hang here until the test's own
        // timeout fails it, so answering at all proves the health route bounds the check.
        const res = await app.inject({ url: '/healthz' });
        expect(res.statusCode).toBe(503);
        expect(json(res)).toEqual({
          ok: false,
          network: 'mainnet',
          checks: { postgres: true, redis: false },
        });
      } finally {
        await app.close();
      }
    }
    const up = await appWith(async () => true);
    try {
      expect((await up.inject({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await up.close();
    }
  });
});

describe.each(dbEngines)('OpenAPI document on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('is a valid OpenAPI 3.1 document at version 2026-08', async () => {
    h = await apiHarness(engine);
    const doc = await openapiDocument(h.app);
    const result = await new Validator().validate(doc);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
    expect((doc.info as Json).version).toBe('2026-08');
  });

  it('describes every endpoint, status, header, error code, the security scheme and the webhook', async () => {
    h = await apiHarness(engine);
    const doc = await openapiDocument(h.app);
    const paths = doc.paths as Record<string, Record<string, Json>>;
    expect(Object.keys(paths).sort()).toEqual([
      '/healthz',
      '/v1/audit',
      '/v1/endpoints',
      '/v1/endpoints/{id}',
      '/v1/endpoints/{id}/previous-secret/expire',
      '/v1/endpoints/{id}/redeliver',
      '/v1/endpoints/{id}/replay',
      '/v1/endpoints/{id}/rotate-secret',
      '/v1/events',
      '/v1/events/stream',
      '/v1/events/{event_id}',
      '/v1/events/{event_id}/redeliver',
      '/v1/status',
      '/v1/test/transfers',
      '/v1/watches',
      '/v1/watches/batch',
      '/v1/watches/batch/delete',
      '/v1/watches/batch/pause',
      '/v1/watches/batch/resume',
      '/v1/watches/{id}',
      '/v1/watches/{id}/health',
      '/v1/watches/{id}/pause',
      '/v1/watches/{id}/previous-secret/expire',
      '/v1/watches/{id}/resume',
      '/v1/watches/{id}/rotate-secret',
      '/v1/watches/{id}/transactions/{tx_id}',
    ]);
    const ops: Array<[string, string, string[]]> = [
      [
        '/v1/watches',
        'post',
        ['201', '400', '401', '402', '403', '404', '409', '413', '415', '429', '500', '503'],
      ],
      ['/v1/endpoints', 'post', ['201', '400', '401', '403', '413', '415', '429', '500']],
      ['/v1/endpoints', 'get', ['200', '400', '401', '403', '429', '500']],
      [
        '/v1/endpoints/{id}',
        'delete',
        ['204', '400', '401', '403', '404', '409', '413', '415', '429', '500'],
      ],
      ['/v1/watches', 'get', ['200', '400', '401', '403', '429', '500']],
      [
        '/v1/watches/{id}',
        'delete',
        ['204', '400', '401', '403', '404', '413', '415', '429', '500'],
      ],
      ['/v1/events', 'get', ['200', '400', '401', '403', '429', '500']],
      ['/v1/events/stream', 'get', ['200', '400', '401', '403', '429', '500']],
      [
        '/v1/events/{event_id}/redeliver',
        'post',
        ['201', '400', '401', '403', '404', '409', '413', '415', '429', '500'],
      ],
      ['/v1/status', 'get', ['200', '400', '401', '403', '429', '500']],
      ['/v1/events/{event_id}', 'get', ['200', '400', '401', '403', '404', '429', '500']],
      [
        '/v1/watches/{id}/transactions/{tx_id}',
        'get',
        ['200', '400', '401', '403', '404', '429', '500', '503'],
      ],
      ['/v1/audit', 'get', ['200', '400', '401', '403', '429', '500']],
      [
        '/v1/watches/{id}/pause',
        'post',
        ['200', '400', '401', '403', '404', '413', '415', '429', '500'],
      ],
      [
        '/v1/watches/{id}/resume',
        'post',
        ['200', '400', '401', '402', '403', '404', '413', '415', '429', '500', '503'],
      ],
    ];
    const components = doc.components as Json;
    const headers = components.headers as Record<string, Json>;
    for (const [path, method, statuses] of ops) {
      const op = paths[path]![method] as Json;
      expect(op.security).toEqual([{ bearerAuth: [] }]);
      const responses = op.responses as Record<string, Json>;
      expect(Object.keys(responses).sort()).toEqual(statuses);
      for (const [status, r] of Object.entries(responses)) {
        const hs = r.headers as Record<string, Json>;
        expect(hs['X-RateLimit-Limit'], `${path} ${method} ${status}`).toEqual({
          $ref: '#/components/headers/X-RateLimit-Limit',
        });
        expect(hs['X-RateLimit-Remaining']).toEqual({
          $ref: '#/components/headers/X-RateLimit-Remaining',
        });
      }
      expect((responses['429']!.headers as Json)['Retry-After']).toEqual({
        $ref: '#/components/headers/Retry-After',
      });
    }
    expect(headers['Retry-After']).toMatchObject({ required: true, schema: { type: 'integer' } });
    expect(headers['X-RateLimit-Limit']).toMatchObject({
      required: true,
      schema: { type: 'integer' },
    });
    expect((paths['/healthz']!.get as Json).security).toEqual([]);
    expect(Object.keys((paths['/healthz']!.get as Json).responses as Json).sort()).toEqual([
      '200',
      '503',
    ]);

    const schemas = components.schemas as Record<string, Json>;
    const errorProps = schemas.ErrorBody?.properties as Record<string, Json>;
    expect(errorProps.code?.enum).toEqual([...ERROR_CODES]);
    expect(schemas.ErrorBody?.required).toEqual(['error']);
    expect(schemas.QuotaExceededError?.required).toEqual(['error', 'usage']);
    expect(Object.keys((schemas.CreateWatch?.properties as Json) ?? {})).toEqual([
      'address',
      'asset_filter',
      'direction',
      'webhook_url',
      'telegram',
      // Additive (issue 30): a shared endpoint as the target.
      'endpoint_id',
      'label',
      // Additive (issue 30): the account's reference, copied into every event.
      'metadata',
      'network',
    ]);
    expect((schemas.CreateWatch!.properties as Record<string, Json>).webhook_url).toMatchObject({
      maxLength: 2048,
    });
    expect(Object.keys((schemas.Watch?.properties as Json) ?? {})).toEqual([
      'id',
      'address',
      'asset_filter',
      'direction',
      'channel',
      'webhook_url',
      // Additive (issue 30).
      'endpoint_id',
      'label',
      'metadata',
      'status',
      'created_at',
      // Additive (issue 36 item 4): the block after which it matches transfers.
      'active_from_block',
      // Additive (issue 19): rotation, automatic pause.
      'secret_rotated_at',
      'paused_reason',
      'auto_paused_at',
      'previous_secret_expires_at',
    ]);
    expect(schemas.Event?.required).toEqual([
      'api_version',
      'event_id',
      'type',
      'direction',
      'network',
      // Additive (issue 32): a live event or a test-mode one.
      'livemode',
      'asset',
      'tx_id',
      'event_index',
      'block_number',
      'block_timestamp',
      'from',
      'to',
      'amount_raw',
      'amount',
      'watch_id',
      // Additive (issue 26): how the transfer was established.
      'proof',
    ]);
    // Additive (issue 40 item 11): `test` for a test deposit triggered through the API.
    expect((schemas.Event?.properties as Json | undefined)?.proof).toMatchObject({
      enum: ['signed', 'quorum', 'provider', 'test'],
    });
    const events = paths['/v1/events']?.get as Json;
    const params = (events.parameters as Json[]).map((p) => [p.name, p.in]);
    expect(params).toEqual([
      ['limit', 'query'],
      ['before', 'query'],
      ['since', 'query'],
      ['watch_id', 'query'],
      ['network', 'query'],
      ['proof', 'query'],
      // Additive (issue 36): only events with (or without) a held delivery.
      ['held', 'query'],
      ['endpoint_id', 'query'],
    ]);
    const limit = (events.parameters as Json[])[0]?.schema;
    expect(limit).toMatchObject({ type: 'integer', minimum: 1, maximum: 200, default: 50 });

    expect((components.securitySchemes as Json).bearerAuth).toMatchObject({
      type: 'http',
      scheme: 'bearer',
    });

    const hook = ((doc.webhooks as Json)['transfer.confirmed'] as Json).post as Json;
    expect(
      ((hook.requestBody as Json).content as Record<string, Json>)['application/json']?.schema,
    ).toEqual({ $ref: '#/components/schemas/Event' });
    const hookHeaders = Object.fromEntries((hook.parameters as Json[]).map((p) => [p.name, p]));
    expect(hookHeaders['X-Signature']).toMatchObject({
      in: 'header',
      required: true,
      schema: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    });
    expect(hookHeaders['X-Event-Id']).toMatchObject({ in: 'header', required: true });
    expect(Object.keys(hook.responses as Json)).toContain('2XX');
  });

  it('matches the real answers: every status of every endpoint validates against its documented schema', async () => {
    h = await apiHarness(engine);
    const doc = await openapiDocument(h.app);
    const check = responseChecker(doc);
    const c = await h.caller({ watchQuota: 1 });
    const seen = new Set<string>();
    const problems: string[] = [];
    const expectAnswer = (
      path: string,
      method: string,
      status: number,
      res: LightMyRequestResponse,
    ) => {
      expect(res.statusCode, `${method} ${path}: ${res.body}`).toBe(status);
      problems.push(...check(path, method, res));
      seen.add(String(status));
    };
    const app = h.app;
    const post = (payload: unknown, headers = c.headers) =>
      app.inject({ method: 'POST', url: '/v1/watches', headers, payload: payload as Json });

    const created = await post(webhookWatch());
    expectAnswer('/v1/watches', 'post', 201, created);
    const id = String(json(created).id);
    expectAnswer('/v1/watches', 'post', 402, await post(webhookWatch({ asset_filter: 'TRX' })));
    expectAnswer('/v1/watches', 'post', 409, await post(webhookWatch()));
    expectAnswer('/v1/watches', 'post', 400, await post(webhookWatch({ address: 'nope' })));
    expectAnswer(
      '/v1/watches',
      'post',
      400,
      await post({ address: ADDR2_B58, asset_filter: 'USDT' }),
    );
    expectAnswer('/v1/watches', 'post', 400, await post(webhookWatch({ network: 'nile' })));
    expectAnswer(
      '/v1/watches',
      'post',
      415,
      await app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: { ...c.headers, 'content-type': 'text/plain' },
        payload: 'x',
      }),
    );
    expectAnswer('/v1/watches', 'post', 413, await post(webhookWatch({ pad: 'x'.repeat(70_000) })));
    expectAnswer(
      '/v1/watches',
      'get',
      200,
      await app.inject({ url: '/v1/watches', headers: c.headers }),
    );
    expectAnswer('/v1/watches', 'get', 401, await app.inject({ url: '/v1/watches' }));
    // A tw_test_ key is served in the test environment (issue 32): its own (empty) list.
    const testKey = await otherNetworkKey(h.db, c.accountId);
    expectAnswer(
      '/v1/watches',
      'get',
      200,
      await app.inject({ url: '/v1/watches', headers: { authorization: `Bearer ${testKey.key}` } }),
    );
    // 403: a live key asking for a test deposit (test_mode_only).
    expectAnswer(
      '/v1/test/transfers',
      'post',
      403,
      await app.inject({
        method: 'POST',
        url: '/v1/test/transfers',
        headers: c.headers,
        payload: { watch_id: 'wh_x', amount: '1' },
      }),
    );

    // Events: a USDT and a TRX event (contract null), paged so next_before is a string, then null.
    await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: id,
      tag: 'oa',
      count: 2,
      start: '2026-01-08T13:36:54.123456Z',
    });
    await h.db.query(
      "UPDATE events SET asset = 'TRX', contract = NULL, event_index = 0 WHERE id = 'evt_oa_000001'",
    );
    const first = await app.inject({ url: '/v1/events?limit=1', headers: c.headers });
    expectAnswer('/v1/events', 'get', 200, first);
    expect(json(first).next_before).toBe('2026-01-08T13:36:54.123457Z');
    expect((json(first).data as Json[])[0]?.contract).toBeNull();
    expectAnswer(
      '/v1/events',
      'get',
      200,
      await app.inject({ url: '/v1/events', headers: c.headers }),
    );
    expectAnswer(
      '/v1/events',
      'get',
      400,
      await app.inject({ url: '/v1/events?limit=0', headers: c.headers }),
    );

    expectAnswer(
      '/v1/watches/{id}',
      'delete',
      404,
      await app.inject({
        method: 'DELETE',
        url: '/v1/watches/wh_00000000000000000000000000',
        headers: c.headers,
      }),
    );
    expectAnswer(
      '/v1/watches/{id}',
      'delete',
      204,
      await app.inject({ method: 'DELETE', url: `/v1/watches/${id}`, headers: c.headers }),
    );

    // 401 revoked (details object) and 429.
    const r = await h.caller({ rateLimitPerMin: 1 });
    expectAnswer(
      '/v1/events',
      'get',
      200,
      await app.inject({ url: '/v1/events', headers: r.headers }),
    );
    expectAnswer(
      '/v1/events',
      'get',
      429,
      await app.inject({ url: '/v1/events', headers: r.headers }),
    );
    await revokeApiKey(h.db, r.keyId);
    expectAnswer(
      '/v1/events',
      'get',
      401,
      await app.inject({ url: '/v1/events', headers: r.headers }),
    );

    expectAnswer('/healthz', 'get', 200, await app.inject({ url: '/healthz' }));

    expect(problems).toEqual([]);
    // The checker is not vacuous: a wrong body or a missing header is caught.
    const forged = (body: Json, headers: Json) =>
      ({
        statusCode: 201,
        headers,
        body: JSON.stringify(body),
      }) as unknown as LightMyRequestResponse;
    expect(
      check('/v1/watches', 'post', forged({ ...json(created), status: 'GONE' }, created.headers)),
    ).toHaveLength(1);
    expect(check('/v1/watches', 'post', forged(json(created), {}))).toHaveLength(2);
    expect([...seen].sort()).toEqual([
      '200',
      '201',
      '204',
      '400',
      '401',
      '402',
      '403',
      '404',
      '409',
      '413',
      '415',
      '429',
    ]);
  });

  it('matches the real 503s (no chain head; dependency down)', async () => {
    h = await apiHarness(engine, { chainHead: false, redisCheck: async () => false });
    const check = responseChecker(await openapiDocument(h.app));
    const c = await h.caller();
    const noHead = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch(),
    });
    expect(noHead.statusCode).toBe(503);
    const down = await h.app.inject({ url: '/healthz' });
    expect(down.statusCode).toBe(503);
    expect([...check('/v1/watches', 'post', noHead), ...check('/healthz', 'get', down)]).toEqual(
      [],
    );
  });
});
