/**
 * `tronwatch doctor`: the checks of what breaks deliveries once the service runs (issue 31 item
 * 4): the stored webhook secrets against the keyring, the running service's `/healthz`, the
 * ingester's progress and the delivery workers. Each returns {@link CheckResult}s and never
 * throws; nothing is written, no secret is printed (key ids are SHA-256 prefixes).
 *
 * - `stored_secrets`: every sealed column (src/secrets/rotate.ts SEALED_COLUMNS: webhook secrets,
 *   replaced secrets in their grace period, two-factor keys) grouped by key id: a key id the
 *   configured keyring does not hold fails (its deliveries are held: src/delivery/
 *   secret-problems.ts); so does a row that its key does not authenticate. Up to
 *   {@link DECRYPT_SAMPLE} rows per key id are decrypted; the rest of a key id's rows are counted.
 * - `service`: GET `<url>/healthz` (url: `--url`, else http://HOST:PORT with 127.0.0.1 for a
 *   wildcard HOST). Nothing listening: skip (not running; the port is free for it). Something that
 *   is not tronwatch's /healthz answering there: fail (the port is taken). 503: fail, naming the
 *   failing parts (PostgreSQL, Redis, a stalled ingest, undecryptable secrets, no node serving);
 *   still starting: warn.
 * - `service.light_client` (issue 28), from the same /healthz: its `light_client` (the last block
 *   tronwatch proved final itself, src/api/routes/light-client.ts). A checkpoint the operator
 *   pinned (`checkpoint_pinned` true) passes with the final block; one the service took from the
 *   providers at its first start (false: trust on first use) warns, with how to pin one
 *   ({@link PIN_CHECKPOINT_FIX}). No /healthz of tronwatch's, or no `light_client` in it (nothing
 *   proven yet): skip, saying so.
 * - `service.ingest`: from the database: a recorded stall fails; the cursor behind the providers'
 *   solidified head by more than {@link LAG_WARN_BLOCKS} warns, by more than
 *   {@link LAG_FAIL_BLOCKS} fails; the chain head not observed for {@link INGEST_SILENT_MS}
 *   fails (no ingester runs).
 * - `service.workers`: notifications due for more than {@link OVERDUE_MS} and not claimed fail
 *   (no worker delivers).
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import {
  KEY_FILE,
  parseKey,
  parseKeyList,
  SecretBox,
  SecretDecryptError,
} from '../common/secrets.js';
import type { Config } from '../config.js';
import { EmbeddedDbLockedError, openDb, type Queryable } from '../db/pool.js';
import { readStall } from '../ingest/stall.js';
import { SEALED_COLUMNS } from '../secrets/rotate.js';
import type { NodeFindings } from './node.js';
import type { CheckResult } from './types.js';

/** Rows decrypted per key id and column, at most (a wrong key fails on the first). */
export const DECRYPT_SAMPLE = 200;
/** Ingest lag that warns: 20 blocks, one minute of mainnet. */
export const LAG_WARN_BLOCKS = 20;
/** Ingest lag that fails: 200 blocks, ten minutes of mainnet: notifications are late. */
export const LAG_FAIL_BLOCKS = 200;
/** No chain-head observation for this long: no ingester is running (it observes every few s). */
export const INGEST_SILENT_MS = 120_000;
/** A due notification not claimed for this long: no worker is delivering (they poll every s). */
export const OVERDUE_MS = 120_000;

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** A read-only connection to the configured database, or why there is none. */
export type StoredState =
  | { db: Queryable; close: () => Promise<void> }
  | { unavailable: string; status: 'skip' | 'fail' };

/**
 * Open the database for reading: PostgreSQL, or the embedded PGlite when it exists and no running
 * process holds it (then the running service's own /healthz speaks for it).
 */
export async function openStoredState(cfg: Config, timeoutMs: number): Promise<StoredState> {
  if (cfg.database.url) {
    const client = new pg.Client({
      connectionString: cfg.database.url,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs * 4,
    });
    client.on('error', () => {});
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => {});
      return { unavailable: `PostgreSQL unreachable: ${errText(err)}`, status: 'fail' };
    }
    return {
      db: {
        query: async <R>(sql: string, params?: readonly unknown[]) => {
          const r = await client.query(sql, params as unknown[] | undefined);
          return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
        },
      },
      close: () => client.end().catch(() => {}),
    };
  }
  if (!fs.existsSync(cfg.database.embeddedDir)) {
    return { unavailable: 'the embedded database is not created yet', status: 'skip' };
  }
  try {
    const db = await openDb({ url: undefined, embeddedDir: cfg.database.embeddedDir });
    return { db, close: () => db.close() };
  } catch (err) {
    if (err instanceof EmbeddedDbLockedError) {
      return {
        unavailable: 'the embedded database is open in the running process (its /healthz speaks)',
        status: 'skip',
      };
    }
    return {
      unavailable: `the embedded database cannot be opened: ${errText(err)}`,
      status: 'fail',
    };
  }
}

/**
 * The keyring the service would use, without creating anything: SECRET_ENCRYPTION_KEY, or
 * DATA_DIR/secret.key and its retired files, plus SECRET_ENCRYPTION_KEYS_OLD. Undefined when no
 * key exists yet; throws (a RangeError naming the variable or file) when one is malformed.
 */
function readKeyring(cfg: Config): SecretBox | undefined {
  const old = parseKeyList(cfg.secrets.oldKeys);
  if (cfg.secrets.key) return new SecretBox([parseKey(cfg.secrets.key), ...old]);
  const file = path.join(cfg.dataDir, KEY_FILE);
  // No key file yet: the service would make a new key, which decrypts nothing stored.
  if (!fs.existsSync(file)) return undefined;
  const retired = fs
    .readdirSync(cfg.dataDir)
    .filter((f) => /^secret\.key\.old-[0-9a-f]{16}$/.test(f))
    .map((f) => parseKey(fs.readFileSync(path.join(cfg.dataDir, f), 'utf8'), f));
  return new SecretBox([parseKey(fs.readFileSync(file, 'utf8'), file), ...retired, ...old]);
}

/** Where the keyring comes from, for the fix of a missing key id. */
function keySource(cfg: Config): string {
  return cfg.secrets.key
    ? 'SECRET_ENCRYPTION_KEY (or SECRET_ENCRYPTION_KEYS_OLD)'
    : `${path.join(cfg.dataDir, KEY_FILE)} (or SECRET_ENCRYPTION_KEYS_OLD)`;
}

/** `stored_secrets` (module doc). */
export async function checkStoredSecrets(cfg: Config, state: StoredState): Promise<CheckResult> {
  const check = 'stored_secrets';
  if ('unavailable' in state) {
    return { check, status: 'skip', detail: `not checked: ${state.unavailable}` };
  }
  let box: SecretBox | undefined;
  try {
    box = readKeyring(cfg);
  } catch (err) {
    return { check, status: 'skip', detail: `not checked: the key is invalid (${errText(err)})` };
  }
  interface Group {
    total: number;
    sampled: number;
    decrypted: number;
  }
  const groups = new Map<string, Group>();
  try {
    for (const [table, kid, ct] of SEALED_COLUMNS) {
      const { rows: counts } = await state.db.query<{ k: string; n: number }>(
        `SELECT ${kid} AS k, count(*)::int AS n FROM ${table}
          WHERE ${ct} IS NOT NULL GROUP BY ${kid}`,
      );
      for (const c of counts) {
        const g = groups.get(c.k) ?? { total: 0, sampled: 0, decrypted: 0 };
        g.total += Number(c.n);
        groups.set(c.k, g);
        if (!box?.hasKey(c.k)) continue;
        const { rows } = await state.db.query<{ c: Uint8Array }>(
          `SELECT ${ct} AS c FROM ${table} WHERE ${kid} = $1 AND ${ct} IS NOT NULL LIMIT ${DECRYPT_SAMPLE}`,
          [c.k],
        );
        for (const r of rows) {
          g.sampled++;
          try {
            box.decrypt({ keyId: c.k, ciphertext: Buffer.from(r.c) });
            g.decrypted++;
          } catch (err) {
            if (!(err instanceof SecretDecryptError)) throw err;
          }
        }
      }
    }
  } catch (err) {
    return { check, status: 'fail', detail: `could not read them: ${errText(err)}` };
  }
  const total = [...groups.values()].reduce((a, g) => a + g.total, 0);
  if (total === 0) {
    return {
      check,
      status: 'pass',
      detail: `none stored yet${box ? ` (the current key's id is ${box.currentKeyId})` : ''}`,
    };
  }
  const parts: string[] = [];
  const missing: string[] = [];
  let tampered = 0;
  for (const [id, g] of [...groups].sort((a, b) => b[1].total - a[1].total)) {
    if (!box?.hasKey(id)) {
      missing.push(id);
      parts.push(`${g.total} under key ${id}: no such key configured`);
      continue;
    }
    const role = id === box.currentKeyId ? 'current' : 'old';
    tampered += g.sampled - g.decrypted;
    parts.push(
      `${g.total} under key ${id} (${role}): ${g.decrypted} of ${g.sampled} tried decrypt${g.sampled < g.total ? ` (${g.total - g.sampled} not tried)` : ''}`,
    );
  }
  const detail = `${total} stored secret(s): ${parts.join('; ')}`;
  if (missing.length > 0) {
    const configured = box ? box.keyIds.join(', ') : 'none';
    return {
      check,
      status: 'fail',
      detail: `${detail}. Configured key ids: ${configured}`,
      fix: `configure the key whose id is ${missing.join(', ')} in ${keySource(cfg)}; until then their deliveries are held (a key's id is the first 16 hex digits of its SHA-256)`,
    };
  }
  if (tampered > 0) {
    return {
      check,
      status: 'fail',
      detail,
      fix: 'a stored secret fails authentication under its own key: the row was altered or restored from another deployment; rotate that watch’s secret (POST /v1/watches/{id}/rotate-secret)',
    };
  }
  return { check, status: 'pass', detail };
}

/** The URL of the running service: `--url`, else http://HOST:PORT (a wildcard HOST: loopback). */
export function serviceUrl(cfg: Config, url?: string): string {
  if (url) return url.replace(/\/+$/, '');
  const h = cfg.http.host;
  const host =
    h === '0.0.0.0' || h === ''
      ? '127.0.0.1'
      : h === '::'
        ? '[::1]'
        : h.includes(':')
          ? `[${h}]`
          : h;
  return `http://${host}:${cfg.http.port}`;
}

interface HealthBody {
  ok?: unknown;
  network?: unknown;
  checks?: Record<string, unknown>;
  ingest?: { stalled_block?: number; reason?: string; since?: string };
  secrets?: { undecryptable_key_ids?: string[]; reason?: string };
  /** Present while a provider is not serving (src/api/routes/health.ts). */
  node?: { providers?: Array<{ index: number; state: string; reason?: string; since?: string }> };
  /**
   * Present once the light client has proven a block (issue 28; src/api/routes/light-client.ts
   * LightClientStatusSchema: the fields read here).
   */
  light_client?: {
    final_block?: number;
    final_block_id?: string;
    final_block_timestamp?: string;
    proven_by_srs?: number;
    active_srs?: number;
    known_srs?: number;
    epoch?: number;
    checkpoint_block?: number;
    checkpoint_pinned?: boolean;
    checkpoint_source?: string | null;
    solidified_head_ahead_blocks?: number | null;
  };
}

/** The providers /healthz lists, by position in TRON_NODE_URL: `#0 set_aside timeout, #1 ok`. */
function providersOf(body: HealthBody): string {
  return (body.node?.providers ?? [])
    .map((n) => `#${n.index} ${n.state}${n.reason ? ` ${n.reason}` : ''}`)
    .join(', ');
}

/** What the TOFU fix says: how to pin the checkpoint the service took itself. */
export const PIN_CHECKPOINT_FIX =
  'the checkpoint was taken from the providers at the first start (trust on first use): review it and pin one with `tronwatch checkpoint` > file, TRON_LIGHT_CLIENT_CHECKPOINT=file';

/**
 * `service.light_client` (module doc).
 * @param body what /healthz answered when it was tronwatch's; undefined when the service did not
 *   answer as tronwatch (a skip: nothing can be said of its light client).
 */
export function checkLightClient(url: string, body: HealthBody | undefined): CheckResult {
  const check = 'service.light_client';
  const target = url;
  if (!body) {
    return {
      check,
      target,
      status: 'skip',
      detail: 'not checked: the running service did not answer /healthz',
    };
  }
  const lc = body.light_client;
  if (!lc || typeof lc !== 'object') {
    return {
      check,
      target,
      status: 'skip',
      detail:
        'not proven yet: /healthz has no light_client (the light client has proven no block final yet, or the ingest role does not run it)',
    };
  }
  const ahead =
    typeof lc.solidified_head_ahead_blocks === 'number'
      ? `; the providers' solidified head is ${lc.solidified_head_ahead_blocks} block(s) ahead`
      : '';
  const final = `final block ${lc.final_block} (${lc.final_block_timestamp}), proven by ${lc.proven_by_srs} of ${lc.active_srs} SRs (${lc.known_srs} known, epoch ${lc.epoch})${ahead}`;
  if (lc.checkpoint_pinned === false) {
    return {
      check,
      target,
      status: 'warn',
      detail: `${final}; checkpoint block ${lc.checkpoint_block} NOT pinned: ${lc.checkpoint_source ?? 'taken from the providers'}`,
      fix: PIN_CHECKPOINT_FIX,
    };
  }
  return {
    check,
    target,
    status: 'pass',
    detail: `${final}; checkpoint block ${lc.checkpoint_block} ${lc.checkpoint_pinned ? 'pinned (TRON_LIGHT_CLIENT_CHECKPOINT)' : '(whether pinned is not reported)'}`,
  };
}

/**
 * `service` and `service.light_client` (module doc): one GET /healthz.
 * @returns both results; `service.light_client` is a skip whenever /healthz gave no body of
 *   tronwatch's.
 */
export async function checkService(
  url: string,
  timeoutMs: number,
): Promise<{ service: CheckResult; lightClient: CheckResult }> {
  let body: HealthBody | undefined;
  const service = await checkHealthz(url, timeoutMs, (b) => {
    body = b;
  });
  return { service, lightClient: checkLightClient(url, body) };
}

/** `service` (module doc); hands the body, when it is tronwatch's, to `seen`. */
async function checkHealthz(
  url: string,
  timeoutMs: number,
  seen: (body: HealthBody) => void,
): Promise<CheckResult> {
  const check = 'service';
  const target = url;
  let res: Response;
  try {
    res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const code = (err as { cause?: { code?: string } }).cause?.code;
    if (code === 'ECONNREFUSED') {
      return {
        check,
        target,
        status: 'skip',
        detail: `not running: nothing listens at ${url} (the port is free for it)`,
      };
    }
    return {
      check,
      target,
      status: 'fail',
      detail: `GET /healthz: ${code ?? errText(err)}`,
      fix: `check that the service runs and answers at ${url} (tronwatch doctor --url <its address>)`,
    };
  }
  const text = await res.text();
  let body: HealthBody | undefined;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object' && 'checks' in parsed && 'ok' in parsed) {
      body = parsed as HealthBody;
    }
  } catch {}
  if (!body) {
    return {
      check,
      target,
      status: 'fail',
      detail: `the port is in use by something that is not tronwatch: GET /healthz answered HTTP ${res.status} ${JSON.stringify(text.slice(0, 80))}`,
      fix: `stop the program listening at ${url}, or give tronwatch another PORT (or HOST)`,
    };
  }
  seen(body);
  if (body.ok === true) {
    const c = body.checks ?? {};
    // checks.node: true = some providers serve, others not (degraded); false = none serves, for
    // less than the grace after which /healthz answers 503.
    const degraded =
      c.node === true
        ? `; some node providers are not serving (${providersOf(body)})`
        : c.node === false
          ? `; no node provider serving (${providersOf(body)}): /healthz answers 503 if it lasts 2 min`
          : '';
    return {
      check,
      target,
      status: degraded ? 'warn' : 'pass',
      detail: `up (${String(body.network)}): /healthz 200, ${Object.entries(c)
        .map(([k, v]) => `${k} ${v ? 'ok' : 'down'}`)
        .join(', ')}${degraded}`,
      ...(degraded ? { fix: 'see node.* above and GET /v1/status for each provider' } : {}),
    };
  }
  const c = body.checks ?? {};
  if (c.started === false) {
    return {
      check,
      target,
      status: 'warn',
      detail: '/healthz 503: still starting (reaching PostgreSQL, applying migrations)',
      fix: 'run doctor again in a minute; if it stays so, see the database check above',
    };
  }
  const problems: string[] = [];
  if (c.postgres === false) problems.push('PostgreSQL unreachable from the service');
  if (c.redis === false) problems.push('Redis unreachable from the service');
  if (c.ingest === false) {
    problems.push(
      `ingest stalled at block ${body.ingest?.stalled_block} since ${body.ingest?.since}: ${body.ingest?.reason ?? ''}`,
    );
  }
  if (c.secrets === false) {
    problems.push(
      `deliveries held: secrets under key id(s) ${(body.secrets?.undecryptable_key_ids ?? []).join(', ')} cannot be decrypted`,
    );
  }
  if (c.node === false) {
    problems.push(`no node provider serving (${providersOf(body)})`);
  }
  return {
    check,
    target,
    status: 'fail',
    detail: `/healthz ${res.status}: ${problems.join('; ') || JSON.stringify(c)}`,
    fix: 'see the checks above for each part named; the service logs say more',
  };
}

/** `service.ingest` (module doc). */
export async function checkIngest(
  cfg: Config,
  state: StoredState,
  nodes: readonly NodeFindings[],
  now: number = Date.now(),
): Promise<CheckResult> {
  const check = 'service.ingest';
  if ('unavailable' in state) {
    return { check, status: 'skip', detail: `not checked: ${state.unavailable}` };
  }
  try {
    const stall = await readStall(state.db, cfg.network);
    if (stall) {
      return {
        check,
        status: 'fail',
        detail: `stalled at block ${stall.block} since ${stall.since.toISOString()}: ${stall.reason}`,
        fix: 'nothing after this block is notified until it passes: see the reason, the node checks above and docs/operating.md (ingest stalls)',
      };
    }
    const { rows: cursor } = await state.db.query<{ block_number: number; updated_at: Date }>(
      'SELECT block_number, updated_at FROM chain_cursor WHERE network = $1',
      [cfg.network],
    );
    const { rows: head } = await state.db.query<{
      solidified_block_number: number;
      observed_at: Date;
    }>('SELECT solidified_block_number, observed_at FROM chain_head WHERE network = $1', [
      cfg.network,
    ]);
    const c = cursor[0];
    if (!c) {
      return { check, status: 'skip', detail: 'no block ingested yet (the service never ran)' };
    }
    const observed = head[0] ? new Date(head[0].observed_at).getTime() : 0;
    if (now - observed > INGEST_SILENT_MS) {
      return {
        check,
        status: 'fail',
        detail: `no ingester has looked at the chain since ${head[0] ? new Date(observed).toISOString() : 'ever'} (scanned through block ${c.block_number})`,
        fix: 'start a process with the ingest role (tronwatch serve, or tronwatch ingest); its logs say why it stopped',
      };
    }
    const nodeHead = Math.max(
      Number(head[0]?.solidified_block_number ?? 0),
      ...nodes.map((n) => n.head?.number ?? 0),
    );
    const lag = nodeHead - Number(c.block_number);
    const detail = `scanned through block ${c.block_number}, ${Math.max(0, lag)} block(s) behind the solidified head ${nodeHead}`;
    if (lag > LAG_FAIL_BLOCKS) {
      return {
        check,
        status: 'fail',
        detail,
        fix: `notifications are late by about ${Math.round((lag * cfg.ingest.blockIntervalMs) / 60_000)} min: give the node more requests per second (max_rps), or check node.budget above`,
      };
    }
    if (lag > LAG_WARN_BLOCKS) {
      return {
        check,
        status: 'warn',
        detail,
        fix: 'catching up; if the lag grows, the node budget is too small (node.budget above)',
      };
    }
    return { check, status: 'pass', detail };
  } catch (err) {
    return { check, status: 'fail', detail: `could not read the cursor: ${errText(err)}` };
  }
}

/** `service.workers` (module doc). */
export async function checkWorkers(state: StoredState): Promise<CheckResult> {
  const check = 'service.workers';
  if ('unavailable' in state) {
    return { check, status: 'skip', detail: `not checked: ${state.unavailable}` };
  }
  try {
    const { rows } = await state.db.query<{ n: number; oldest: Date | null }>(
      `SELECT count(*)::int AS n, min(next_attempt_at) AS oldest FROM notifications
        WHERE status = 'PENDING' AND held_since IS NULL
          AND next_attempt_at < now() - make_interval(secs => $1)`,
      [OVERDUE_MS / 1000],
    );
    const n = Number(rows[0]?.n ?? 0);
    if (n > 0) {
      return {
        check,
        status: 'fail',
        detail: `${n} notification(s) due for more than ${OVERDUE_MS / 60_000} min and not claimed (the oldest since ${new Date(rows[0]?.oldest ?? 0).toISOString()}): no worker is delivering`,
        fix: 'start a process with the worker role (tronwatch serve, or tronwatch worker); its logs say why it stopped',
      };
    }
    const { rows: pending } = await state.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM notifications WHERE status = 'PENDING'`,
    );
    return {
      check,
      status: 'pass',
      detail: `no delivery overdue (${Number(pending[0]?.n ?? 0)} pending, on schedule)`,
    };
  } catch (err) {
    return { check, status: 'fail', detail: `could not read the outbox: ${errText(err)}` };
  }
}
