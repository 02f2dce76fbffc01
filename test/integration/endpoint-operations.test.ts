/**
 * Per-endpoint operations (issue 30 item 1: "health, failure alerts, auto-pause, redelivery and
 * dead letters work per endpoint as well as per watch"), on both engines, through the public API,
 * a real delivery worker and a real HTTPS receiver:
 * - GET /v1/endpoints and /v1/endpoints/{id} carry the endpoint's streak over all its watches
 *   (consecutive failures, last success and failure) and its alert, opened when deliveries fail
 *   and closed by the first success;
 * - POST /v1/endpoints/{id}/redeliver queues its dead letters again (another account: 404);
 * - an endpoint whose attempts all fail for WATCH_AUTO_PAUSE_DAYS is switched off by tronwatch
 *   (enabled false, paused_reason, an audit entry), its deliveries wait in the outbox, and
 *   enabling it again clears the reason and delivers them.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { type AlertMail, emailAlertSender } from '../../src/watches/alert-mail.js';
import { AlertLoop } from '../../src/watches/alert-outbox.js';
import {
  type ApiHarness,
  apiHarness,
  type Caller,
  json,
  openapiDocument,
  responseChecker,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-endpoint-ops-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** `count` distinct valid TRON addresses (41-hex). */
function addresses(count: number, salt: string): string[] {
  return Array.from(
    { length: count },
    (_, i) => `41${salt}${i.toString(16).padStart(6, '0')}${'cd'.repeat(16)}`,
  );
}

interface Health {
  last_success_at: string | null;
  last_failure_at: string | null;
  consecutive_failures: number;
  failing_since: string | null;
  alert: { state: string; since: string; reason: string } | null;
}
interface EndpointView {
  id: string;
  secret: string;
  enabled: boolean;
  paused_reason: string | null;
  auto_paused_at: string | null;
  health: Health;
}

describe.each(dbEngines)('endpoint operations on %s', (engine) => {
  let h: ApiHarness | undefined;
  let r: Receiver | undefined;
  let stopWorker: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stopWorker?.();
    stopWorker = undefined;
    await r?.close();
    r = undefined;
    await h?.close();
    h = undefined;
  });

  /** A harness whose receiver answers `status()`, an endpoint on it and `n` watches on that. */
  async function setUp(env: Record<string, string>, status: () => number, n: number) {
    r = await startReceiver({ secretFor: () => '', respond: () => status() });
    const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, r.ca);
    h = await apiHarness(engine, {
      env: {
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        WEBHOOK_CA_FILE: caFile,
        DELIVERY_POLL_MS: '20',
        ...env,
      },
    });
    const hh = h;
    const c = await hh.caller({ plan: 'pro' });
    const created = await hh.app.inject({
      method: 'POST',
      url: '/v1/endpoints',
      headers: c.headers,
      payload: { url: r.url, label: 'deposits' },
    });
    expect(created.statusCode).toBe(201);
    const ep = json<EndpointView>(created);
    const batch = await hh.app.inject({
      method: 'POST',
      url: '/v1/watches/batch',
      headers: c.headers,
      payload: {
        items: addresses(n, randomBytes(1).toString('hex')).map((address) => ({
          address,
          asset_filter: 'USDT',
          endpoint_id: ep.id,
        })),
      },
    });
    const watchIds = json<{ results: Array<{ watch: { id: string } }> }>(batch).results.map(
      (x) => x.watch.id,
    );
    expect(watchIds).toHaveLength(n);
    return { hh, c, ep, watchIds };
  }

  /** One event (and its PENDING notification) per watch, as the ingester writes them. */
  async function eventsFor(hh: ApiHarness, watchIds: string[], tag: string): Promise<string[]> {
    await hh.db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                           event_index, block_number, block_timestamp, from_address, to_address,
                           amount_raw, contract, created_at)
       SELECT 'evt_' || $1 || '_' || w.id, w.account_id, w.id, 'mainnet', 'incoming', 'USDT',
              md5($1 || w.id) || md5(w.id || $1), 0, 79072107, '2026-01-08T13:36:51Z',
              'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', w.address, 1500000,
              'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
              clock_timestamp() + row_number() OVER (ORDER BY w.id) * interval '1 microsecond'
         FROM watches w WHERE w.id = ANY($2::text[])`,
      [tag, watchIds],
    );
    await hh.db.query(
      `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                  next_attempt_at, created_at)
       SELECT 'ntf_' || substr(id, 5), id, account_id, watch_id, 'webhook', 'PENDING', 0,
              created_at, created_at
         FROM events WHERE id LIKE 'evt_' || $1 || '\\_%'`,
      [tag],
    );
    return watchIds.map((w) => `evt_${tag}_${w}`);
  }

  function startWorker(hh: ApiHarness): void {
    const worker = new DeliveryWorker({
      db: hh.db,
      secrets: hh.secrets,
      config: hh.config,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const done = worker.start(ac.signal);
    stopWorker = async () => {
      ac.abort();
      await done;
    };
  }

  const getEndpoint = async (hh: ApiHarness, c: Caller, id: string) => {
    const res = await hh.app.inject({
      method: 'GET',
      url: `/v1/endpoints/${id}`,
      headers: c.headers,
    });
    expect(res.statusCode).toBe(200);
    return json<EndpointView>(res);
  };

  it('keeps the streak and alert of the endpoint over all its watches, and redelivers its dead letters', async () => {
    let status = 500;
    const { hh, c, ep, watchIds } = await setUp(
      // 6 attempts in about 3 s (the contract's schedule × 0.0001); alert at 3 failures in a row.
      { DELIVERY_SCHEDULE_SCALE: '0.0001', WATCH_ALERT_FAILURES: '3', WATCH_AUTO_PAUSE_DAYS: '0' },
      () => status,
      3,
    );
    const check = responseChecker(await openapiDocument(hh.app));
    const fresh = await getEndpoint(hh, c, ep.id);
    expect(fresh.health).toEqual({
      last_success_at: null,
      last_failure_at: null,
      consecutive_failures: 0,
      failing_since: null,
      alert: null,
    });
    const first = await eventsFor(hh, watchIds, 'a');
    startWorker(hh);
    // Every delivery fails six times and goes DEAD.
    await vi.waitFor(
      async () => {
        const { rows } = await hh.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM notifications WHERE status = 'DEAD' AND event_id = ANY($1)`,
          [first],
        );
        if (rows[0]?.n !== 3) throw new Error(`${rows[0]?.n} of 3 DEAD`);
      },
      { timeout: 120_000, interval: 100 },
    );
    // The streak is the endpoint's, all three watches together: 18 failed attempts in a row.
    const failing = await vi.waitFor(
      async () => {
        const e = await getEndpoint(hh, c, ep.id);
        if (e.health.consecutive_failures !== 18) {
          throw new Error(`${e.health.consecutive_failures} failures`);
        }
        return e;
      },
      { timeout: 30_000, interval: 100 },
    );
    expect(failing.health.last_success_at).toBeNull();
    expect(failing.health.last_failure_at).not.toBeNull();
    expect(failing.health.failing_since).not.toBeNull();
    expect(failing.health.alert?.state).toBe('failing');
    expect(failing.health.alert?.reason).toMatch(/in a row|DEAD/);
    const list = await hh.app.inject({ method: 'GET', url: '/v1/endpoints', headers: c.headers });
    expect(check('/v1/endpoints', 'get', list)).toEqual([]);
    expect(json<{ data: EndpointView[] }>(list).data[0]?.health).toEqual(failing.health);

    // Another account cannot redeliver them (404, as for a missing endpoint).
    const other = await hh.caller({ plan: 'pro' });
    const stolen = await hh.app.inject({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/redeliver`,
      headers: other.headers,
    });
    expect(stolen.statusCode).toBe(404);
    expect(check('/v1/endpoints/{id}/redeliver', 'post', stolen)).toEqual([]);
    const missing = await hh.app.inject({
      method: 'POST',
      url: '/v1/endpoints/ep_nope/redeliver',
      headers: c.headers,
    });
    expect(missing.statusCode).toBe(404);

    // The receiver is fixed: its dead letters go again, the alert closes, the streak resets.
    status = 200;
    const redelivered = await hh.app.inject({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/redeliver`,
      headers: c.headers,
    });
    expect(redelivered.statusCode).toBe(200);
    expect(check('/v1/endpoints/{id}/redeliver', 'post', redelivered)).toEqual([]);
    expect(json(redelivered)).toEqual({ redelivered: 3 });
    // A second call while they are being delivered takes none of them again.
    const again = await hh.app.inject({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/redeliver`,
      headers: c.headers,
    });
    expect(json(again)).toEqual({ redelivered: 0 });
    const recovered = await vi.waitFor(
      async () => {
        const e = await getEndpoint(hh, c, ep.id);
        if (e.health.consecutive_failures !== 0 || e.health.alert !== null) {
          throw new Error('still failing');
        }
        return e;
      },
      { timeout: 60_000, interval: 100 },
    );
    expect(recovered.health.last_success_at).not.toBeNull();
    const events = await hh.app.inject({ method: 'GET', url: '/v1/events', headers: c.headers });
    const states = json<{ data: Array<{ event_id: string; delivery: { status: string } }> }>(events)
      .data.filter((e) => first.includes(e.event_id))
      .map((e) => e.delivery.status);
    expect(states).toEqual(['DELIVERED', 'DELIVERED', 'DELIVERED']);
    const { rows: audit } = await hh.db.query<{ action: string }>(
      `SELECT action FROM audit_log WHERE action = 'endpoint.redelivered'`,
    );
    expect(audit).toHaveLength(2);
  }, 300_000);

  it('alerts once per endpoint, not once per watch, through the real worker and alert loop', async () => {
    let status = 500;
    const n = 25;
    const { hh, c, ep, watchIds } = await setUp(
      { DELIVERY_SCHEDULE_SCALE: '0.0001', WATCH_ALERT_FAILURES: '3', WATCH_AUTO_PAUSE_DAYS: '0' },
      () => status,
      n,
    );
    const first = await eventsFor(hh, watchIds, 'f');
    startWorker(hh);
    // Every watch's deliveries fail until DEAD: each watch's own alert state opens too.
    await vi.waitFor(
      async () => {
        const { rows } = await hh.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM watches WHERE id = ANY($1) AND alert_state = 'failing'`,
          [watchIds],
        );
        if (rows[0]?.n !== n) throw new Error(`${rows[0]?.n} of ${n} watches failing`);
        const e = await getEndpoint(hh, c, ep.id);
        if (e.health.alert === null) throw new Error('endpoint alert not open');
      },
      { timeout: 120_000, interval: 100 },
    );
    const alerts = async () =>
      (
        await hh.db.query<{ kind: string; watch_id: string | null; endpoint_id: string | null }>(
          `SELECT kind, watch_id, endpoint_id FROM watch_alerts
            WHERE endpoint_id = $1 OR watch_id = ANY($2) ORDER BY created_at, id`,
          [ep.id, watchIds],
        )
      ).rows;
    // One alert for the endpoint, none for its 25 watches.
    expect(await alerts()).toEqual([{ kind: 'failing', watch_id: null, endpoint_id: ep.id }]);

    // The outbox sends it as one e-mail about the endpoint, naming its host and its watches.
    const sent: AlertMail[] = [];
    const loop = new AlertLoop({
      db: hh.db,
      consoleUrl: 'https://tw.example',
      paceMinutes: 0,
      email: emailAlertSender(hh.db, async (m) => void sent.push(m)),
      logger: silentLogger,
    });
    expect(await loop.runOnce()).toEqual({ sent: 1, failed: 0 });
    expect(sent).toHaveLength(1);
    expect(sent[0]?.subject).toBe('Deliveries to your endpoint are failing');
    expect(sent[0]?.alert).toMatchObject({
      watch_id: null,
      endpoint_id: ep.id,
      kinds: ['failing'],
    });
    expect(sent[0]?.text).toContain(`Endpoint: ${new URL(r?.url ?? '').host}\n`);
    expect(sent[0]?.text).toContain(`Endpoint id: deposits (${ep.id})`);
    expect(sent[0]?.text).toContain(`Watches on it: ${n}`);
    expect(sent[0]?.text).toContain(`https://tw.example/console/endpoints/${ep.id}`);

    // Every delivery goes DEAD; still the one alert. Then the receiver is fixed and its dead
    // letters redelivered: one 'recovered' for the endpoint, still nothing per watch.
    await vi.waitFor(
      async () => {
        const { rows } = await hh.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM notifications WHERE status = 'DEAD' AND event_id = ANY($1)`,
          [first],
        );
        if (rows[0]?.n !== n) throw new Error(`${rows[0]?.n} of ${n} DEAD`);
      },
      { timeout: 120_000, interval: 100 },
    );
    expect(await alerts()).toHaveLength(1);
    status = 200;
    const redelivered = await hh.app.inject({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/redeliver`,
      headers: c.headers,
    });
    expect(json(redelivered)).toEqual({ redelivered: n });
    await vi.waitFor(
      async () => {
        const e = await getEndpoint(hh, c, ep.id);
        if (e.health.alert !== null) throw new Error('endpoint still failing');
      },
      { timeout: 120_000, interval: 100 },
    );
    expect(await alerts()).toEqual([
      { kind: 'failing', watch_id: null, endpoint_id: ep.id },
      { kind: 'recovered', watch_id: null, endpoint_id: ep.id },
    ]);
    expect(await loop.runOnce()).toEqual({ sent: 1, failed: 0 });
    expect(sent.map((m) => m.subject)).toEqual([
      'Deliveries to your endpoint are failing',
      'Deliveries to your endpoint recovered',
    ]);
    await loop.stop();
  }, 300_000);

  it('switches an endpoint off after WATCH_AUTO_PAUSE_DAYS of failures; enabled again, it delivers what waited', async () => {
    let status = 503;
    const { hh, c, ep, watchIds } = await setUp(
      // 0.00002 days = 1.7 s of failures; the second retry comes 0.06 s + 0.3 s after the first.
      { DELIVERY_SCHEDULE_SCALE: '0.001', WATCH_AUTO_PAUSE_DAYS: '0.00002' },
      () => status,
      2,
    );
    const ids = await eventsFor(hh, watchIds, 'p');
    startWorker(hh);
    const paused = await vi.waitFor(
      async () => {
        const e = await getEndpoint(hh, c, ep.id);
        if (e.enabled) throw new Error('still enabled');
        return e;
      },
      { timeout: 120_000, interval: 100 },
    );
    expect(paused.paused_reason).toMatch(/switched off automatically/);
    expect(paused.auto_paused_at).not.toBeNull();
    const { rows: audit } = await hh.db.query<{
      actor_type: string;
      target_id: string;
      network: string | null;
    }>(`SELECT actor_type, target_id, network FROM audit_log WHERE action = 'endpoint.paused'`);
    // The endpoint's own environment (issue 32): live here.
    expect(audit).toEqual([{ actor_type: 'system', target_id: ep.id, network: 'mainnet' }]);
    // The pause is the endpoint's: no watch on it was paused alone, and its alerts are the
    // endpoint's (migration 092), none per watch.
    const { rows: statuses } = await hh.db.query<{ status: string }>(
      'SELECT status FROM watches WHERE id = ANY($1)',
      [watchIds],
    );
    expect(statuses.map((w) => w.status)).toEqual(['ACTIVE', 'ACTIVE']);
    const { rows: alerts } = await hh.db.query<{ kind: string; endpoint_id: string | null }>(
      `SELECT kind, endpoint_id FROM watch_alerts
        WHERE endpoint_id = $1 OR watch_id = ANY($2) ORDER BY kind`,
      [ep.id, watchIds],
    );
    expect(alerts.filter((a) => a.kind === 'auto_paused')).toEqual([
      { kind: 'auto_paused', endpoint_id: ep.id },
    ]);
    expect(alerts.every((a) => a.endpoint_id === ep.id)).toBe(true);
    // Switched off: nothing is attempted any more, nothing is lost.
    const { rows: before } = await hh.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM attempts WHERE endpoint_id = $1',
      [ep.id],
    );
    const { rows: pending } = await hh.db.query<{ status: string }>(
      'SELECT status FROM notifications WHERE event_id = ANY($1)',
      [ids],
    );
    expect(pending.map((p) => p.status)).toEqual(['PENDING', 'PENDING']);

    status = 200;
    const enabled = await hh.app.inject({
      method: 'PATCH',
      url: `/v1/endpoints/${ep.id}`,
      headers: c.headers,
      payload: { enabled: true },
    });
    expect(enabled.statusCode).toBe(200);
    expect(json(enabled)).toMatchObject({
      enabled: true,
      paused_reason: null,
      auto_paused_at: null,
    });
    await vi.waitFor(
      async () => {
        const { rows } = await hh.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM notifications WHERE status = 'DELIVERED' AND event_id = ANY($1)`,
          [ids],
        );
        if (rows[0]?.n !== 2) throw new Error(`${rows[0]?.n} of 2 delivered`);
      },
      { timeout: 120_000, interval: 100 },
    );
    const { rows: after } = await hh.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM attempts WHERE endpoint_id = $1',
      [ep.id],
    );
    expect((after[0]?.n ?? 0) > (before[0]?.n ?? 0)).toBe(true);
    const healthy = await vi.waitFor(
      async () => {
        const e = await getEndpoint(hh, c, ep.id);
        if (e.health.consecutive_failures !== 0) throw new Error('still failing');
        return e;
      },
      { timeout: 30_000, interval: 100 },
    );
    expect(healthy.enabled).toBe(true);
  }, 300_000);
});
