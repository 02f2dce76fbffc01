/**
 * `tronwatch doctor`: the checks of everything but the nodes (those are in node.ts): the
 * database, Redis, the secret key file, the public URLs' TLS and the Telegram token. Each returns
 * {@link CheckResult}s and never throws; none writes anything (the embedded database is opened
 * only when it exists and no running process holds it).
 */
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import pg from 'pg';
import { KEY_FILE, keyId, parseKey, parseKeyList } from '../common/secrets.js';
import type { Config } from '../config.js';
import { MIGRATIONS_DIR } from '../db/migrate.js';
import { EmbeddedDbLockedError, openDb } from '../db/pool.js';
import { closeRedis, createRedis } from '../redis/client.js';
import { describeTelegramError, openBot } from '../telegram/bot.js';
import type { CheckResult } from './types.js';

/** Lowest PostgreSQL and Redis major versions tronwatch runs on. */
export const MIN_POSTGRES_MAJOR = 15;
export const MIN_REDIS_MAJOR = 6;

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The newest migration version in migrations/ (NNN of NNN.do.name.sql). */
function latestMigration(): number {
  let max = 0;
  for (const f of fs.readdirSync(MIGRATIONS_DIR)) {
    const m = /^(\d+)\.do\./.exec(f);
    if (m) max = Math.max(max, Number(m[1]));
  }
  return max;
}

/** "N migrations pending" or "schema current", from postgrator's table (absent: none applied). */
async function schemaNote(
  query: (sql: string) => Promise<{ rows: Array<Record<string, unknown>> }>,
): Promise<string> {
  let version = 0;
  try {
    const r = await query('SELECT max(version) AS v FROM schema_migrations');
    version = Number(r.rows[0]?.v ?? 0);
  } catch {
    version = 0; // no table yet: nothing applied
  }
  const latest = latestMigration();
  return version >= latest
    ? `schema at version ${version}, current`
    : `schema at version ${version}, ${latest - version} migration(s) pending (applied at the next start, or run tronwatch migrate)`;
}

/** Host, port and database of a PostgreSQL URL (never its password). */
function pgTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'DATABASE_URL';
  }
}

/**
 * `database`: PostgreSQL (DATABASE_URL) reachable and at least {@link MIN_POSTGRES_MAJOR}, or the
 * embedded PGlite in DATA_DIR/pgdata opened and asked its version (not opened when it does not
 * exist yet, or while a running process holds it).
 */
export async function checkDatabase(cfg: Config, timeoutMs: number): Promise<CheckResult> {
  const url = cfg.database.url;
  if (url) {
    const target = pgTarget(url);
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      const v = await client.query<{ server_version_num: string }>('SHOW server_version_num');
      const num = Number(v.rows[0]?.server_version_num);
      const major = Math.floor(num / 10_000);
      const text = `${major}.${num % 10_000}`;
      if (major < MIN_POSTGRES_MAJOR) {
        return {
          check: 'database',
          target,
          status: 'fail',
          detail: `PostgreSQL ${text} is older than ${MIN_POSTGRES_MAJOR}`,
          fix: `upgrade PostgreSQL to ${MIN_POSTGRES_MAJOR} or later`,
        };
      }
      const note = await schemaNote((sql) => client.query(sql));
      return {
        check: 'database',
        target,
        status: 'pass',
        detail: `PostgreSQL ${text}; ${note}`,
      };
    } catch (err) {
      const code = (err as { code?: string }).code;
      const fix =
        code === '28P01' || code === '28000'
          ? 'check the user and password in DATABASE_URL'
          : code === '3D000'
            ? 'create the database (createdb) or correct its name in DATABASE_URL'
            : 'start PostgreSQL or correct the host and port of DATABASE_URL';
      return {
        check: 'database',
        target,
        status: 'fail',
        detail: `PostgreSQL unreachable: ${errText(err) || code || 'connection failed'}`,
        fix,
      };
    } finally {
      await client.end().catch(() => {});
    }
  }
  const dir = cfg.database.embeddedDir;
  if (!fs.existsSync(dir)) {
    return {
      check: 'database',
      target: dir,
      status: 'pass',
      detail: 'embedded PGlite, not created yet: created at the first start',
    };
  }
  try {
    const db = await openDb({ url: undefined, embeddedDir: dir });
    try {
      const v = await db.query<{ server_version: string }>('SHOW server_version');
      const note = await schemaNote((sql) => db.query(sql));
      return {
        check: 'database',
        target: dir,
        status: 'pass',
        detail: `embedded PGlite (PostgreSQL ${v.rows[0]?.server_version}); ${note}`,
      };
    } finally {
      await db.close();
    }
  } catch (err) {
    if (err instanceof EmbeddedDbLockedError) {
      return {
        check: 'database',
        target: dir,
        status: 'pass',
        detail: 'embedded PGlite, open in a running tronwatch process (not opened here)',
      };
    }
    return {
      check: 'database',
      target: dir,
      status: 'fail',
      detail: `the embedded database cannot be opened: ${errText(err)}`,
      fix: 'check DATA_DIR (permissions, disk space); restore pgdata from a backup if it is damaged',
    };
  }
}

/** `redis`: when REDIS_URL is set, Redis answers within the deadline and is at least version 6. */
export async function checkRedis(cfg: Config, timeoutMs: number): Promise<CheckResult> {
  const url = cfg.redis.url;
  if (!url) {
    return {
      check: 'redis',
      status: 'skip',
      detail: 'REDIS_URL unset: rate-limit windows are kept in each process',
    };
  }
  let target = 'REDIS_URL';
  try {
    const u = new URL(url);
    target = `${u.hostname}:${u.port || 6379}`;
  } catch {}
  const client = createRedis(url, { commandTimeoutMs: timeoutMs });
  let lastError = '';
  client.on('error', (err: Error) => {
    lastError = err.message;
  });
  try {
    const ready = await new Promise<boolean>((resolve) => {
      if (client.status === 'ready') return resolve(true);
      const timer = setTimeout(() => resolve(false), timeoutMs);
      client.once('ready', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (!ready) {
      return {
        check: 'redis',
        target,
        status: 'fail',
        detail: `Redis unreachable: ${lastError || `no connection within ${timeoutMs} ms`}`,
        fix: 'start Redis or correct REDIS_URL (or unset it: one process keeps its own windows)',
      };
    }
    const info = await client.info('server');
    const version = /redis_version:([\d.]+)/.exec(info)?.[1] ?? '0';
    const major = Number(version.split('.')[0]);
    if (major < MIN_REDIS_MAJOR) {
      return {
        check: 'redis',
        target,
        status: 'fail',
        detail: `Redis ${version} is older than ${MIN_REDIS_MAJOR}`,
        fix: `upgrade Redis to ${MIN_REDIS_MAJOR} or later`,
      };
    }
    return { check: 'redis', target, status: 'pass', detail: `Redis ${version}` };
  } catch (err) {
    return {
      check: 'redis',
      target,
      status: 'fail',
      detail: `Redis: ${errText(err)}`,
      fix: 'check REDIS_URL (password, database number)',
    };
  } finally {
    await closeRedis(client);
  }
}

/**
 * `secret_key`: the key that encrypts webhook secrets. From SECRET_ENCRYPTION_KEY: it must parse
 * (and SECRET_ENCRYPTION_KEYS_OLD). From DATA_DIR/secret.key (and retired secret.key.old-*
 * files): each must be a regular file that neither group nor others can read or write (mode
 * 0600), holding a valid key. Reports key ids only (SHA-256 prefixes), never a key.
 */
export function checkSecretKey(cfg: Config): CheckResult {
  try {
    parseKeyList(cfg.secrets.oldKeys);
  } catch (err) {
    return {
      check: 'secret_key',
      status: 'fail',
      detail: errText(err),
      fix: 'give each SECRET_ENCRYPTION_KEYS_OLD entry as 64 hex digits or base64 of 32 bytes',
    };
  }
  if (cfg.secrets.key) {
    try {
      const id = keyId(parseKey(cfg.secrets.key));
      return {
        check: 'secret_key',
        status: 'pass',
        detail: `SECRET_ENCRYPTION_KEY (key id ${id}); no key file used`,
      };
    } catch (err) {
      return {
        check: 'secret_key',
        status: 'fail',
        detail: errText(err),
        fix: 'generate one: openssl rand -hex 32',
      };
    }
  }
  const file = path.join(cfg.dataDir, KEY_FILE);
  if (!fs.existsSync(file)) {
    return {
      check: 'secret_key',
      target: file,
      status: cfg.database.url ? 'warn' : 'pass',
      detail: `not created yet: generated (mode 0600) at the first start${cfg.database.url ? '; with PostgreSQL every replica needs the same key' : ''}`,
      ...(cfg.database.url
        ? { fix: 'set SECRET_ENCRYPTION_KEY (openssl rand -hex 32) on every replica' }
        : {}),
    };
  }
  const files = [
    file,
    ...fs
      .readdirSync(cfg.dataDir)
      .filter((f) => f.startsWith(`${KEY_FILE}.old-`))
      .sort()
      .map((f) => path.join(cfg.dataDir, f)),
  ];
  for (const f of files) {
    const st = fs.statSync(f);
    const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
    if (!st.isFile()) {
      return {
        check: 'secret_key',
        target: f,
        status: 'fail',
        detail: 'not a regular file',
        fix: `replace ${f} with the key file`,
      };
    }
    if ((st.mode & 0o077) !== 0) {
      return {
        check: 'secret_key',
        target: f,
        status: 'fail',
        detail: `mode ${mode}: ${st.mode & 0o044 ? 'readable' : 'writable'} by ${st.mode & 0o070 ? 'its group' : 'other users'}, and it decrypts every webhook secret`,
        fix: `chmod 600 ${f}`,
      };
    }
    try {
      parseKey(fs.readFileSync(f, 'utf8'), path.basename(f));
    } catch (err) {
      return {
        check: 'secret_key',
        target: f,
        status: 'fail',
        detail: errText(err),
        fix: `restore ${f} from a backup (a lost key cannot decrypt the stored webhook secrets)`,
      };
    }
  }
  const id = keyId(parseKey(fs.readFileSync(file, 'utf8')));
  const shared = cfg.database.url !== undefined;
  return {
    check: 'secret_key',
    target: file,
    status: shared ? 'warn' : 'pass',
    detail: `mode 0600, key id ${id}${files.length > 1 ? `, ${files.length - 1} retired key file(s)` : ''}${shared ? '; with PostgreSQL every replica needs this same key' : ''}`,
    ...(shared
      ? {
          fix: 'set SECRET_ENCRYPTION_KEY to this key on every replica sharing the database',
        }
      : {}),
  };
}

/** What a TLS handshake with an origin showed (see inspectTls). */
interface TlsFindings {
  authorized: boolean;
  authorizationError: string | undefined;
  hostnameError: string | undefined;
  validTo: Date | undefined;
  subject: string;
  issuer: string;
}

/** Handshake with host:port without rejecting the certificate, and read what it holds. */
function inspectTls(host: string, port: number, timeoutMs: number): Promise<TlsFindings> {
  return new Promise((resolve, reject) => {
    const isIp = /^[\d.]+$|:/.test(host);
    const socket = tls.connect({
      host,
      port,
      ...(isIp ? {} : { servername: host }),
      rejectUnauthorized: false,
      timeout: timeoutMs,
    });
    const done = (err?: Error, r?: TlsFindings) => {
      socket.destroy();
      if (err) reject(err);
      else resolve(r as TlsFindings);
    };
    socket.once('timeout', () => done(new Error(`no TLS handshake within ${timeoutMs} ms`)));
    socket.once('error', (err) => done(err));
    socket.once('secureConnect', () => {
      const cert = socket.getPeerCertificate();
      const hostErr = cert?.raw ? tls.checkServerIdentity(host, cert) : undefined;
      done(undefined, {
        authorized: socket.authorized,
        authorizationError: socket.authorizationError
          ? String(socket.authorizationError)
          : undefined,
        hostnameError: hostErr?.message,
        validTo: cert?.valid_to ? new Date(cert.valid_to) : undefined,
        subject: String(cert?.subject?.CN ?? '?'),
        issuer: String(cert?.issuer?.O ?? cert?.issuer?.CN ?? '?'),
      });
    });
  });
}

/** Plain words for OpenSSL's verification codes a newcomer meets. */
const TLS_ERRORS: Readonly<Record<string, string>> = {
  DEPTH_ZERO_SELF_SIGNED_CERT: 'self-signed certificate',
  SELF_SIGNED_CERT_IN_CHAIN: 'self-signed certificate in the chain',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'issuer not trusted (or the chain is incomplete)',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'issuer not trusted (or the chain is incomplete)',
  CERT_HAS_EXPIRED: 'certificate expired',
  CERT_NOT_YET_VALID: 'certificate not yet valid',
};

/**
 * `public_url`: PUBLIC_URL (and TELEGRAM_WEBHOOK_URL when set) must be https with a certificate
 * this machine trusts (Node's CA store, plus NODE_EXTRA_CA_CERTS), for the URL's host name, not
 * expiring within `certDays` days. PUBLIC_URL unset warns: invitation links then name localhost.
 */
export async function checkPublicUrls(
  cfg: Config,
  env: Record<string, string | undefined>,
  timeoutMs: number,
  certDays: number,
): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  if (!env.PUBLIC_URL) {
    out.push({
      check: 'public_url',
      status: 'warn',
      detail: `PUBLIC_URL unset: invitation links point at ${cfg.console.publicUrl}`,
      fix: 'set PUBLIC_URL to the https origin users reach (https://tronwatch.example.com)',
    });
  }
  const urls = [
    ...(env.PUBLIC_URL ? [{ name: 'PUBLIC_URL', url: cfg.console.publicUrl }] : []),
    ...(cfg.telegram.webhookUrl
      ? [{ name: 'TELEGRAM_WEBHOOK_URL', url: cfg.telegram.webhookUrl }]
      : []),
  ];
  for (const { name, url } of urls) {
    const u = new URL(url);
    const target = u.origin;
    if (u.protocol !== 'https:') {
      out.push({
        check: 'public_url',
        target,
        status: 'fail',
        detail: `${name} is not https: console sessions and invitation links would travel in clear`,
        fix: `serve tronwatch behind TLS (a reverse proxy with a Let's Encrypt certificate) and set ${name}=https://…`,
      });
      continue;
    }
    const host = u.hostname.replace(/^\[|\]$/g, '');
    const port = Number(u.port || 443);
    let f: TlsFindings;
    try {
      f = await inspectTls(host, port, timeoutMs);
    } catch (err) {
      out.push({
        check: 'public_url',
        target,
        status: 'fail',
        detail: `${name}: no TLS connection: ${errText(err)}`,
        fix: `start the service (or its reverse proxy) at ${target}, or correct ${name}`,
      });
      continue;
    }
    const problems: string[] = [];
    const days = f.validTo ? (f.validTo.getTime() - Date.now()) / 86_400_000 : Number.NaN;
    if (!f.authorized && f.authorizationError) {
      problems.push(
        `${TLS_ERRORS[f.authorizationError] ?? 'not trusted'} (${f.authorizationError})`,
      );
    }
    if (f.hostnameError) problems.push(f.hostnameError);
    if (days < 0 && f.authorizationError !== 'CERT_HAS_EXPIRED') {
      problems.push(`expired on ${f.validTo?.toISOString()}`);
    } else if (days >= 0 && days < certDays) {
      problems.push(
        `expires in ${Math.floor(days)} days (${f.validTo?.toISOString()}), within ${certDays}`,
      );
    }
    if (problems.length > 0) {
      out.push({
        check: 'public_url',
        target,
        status: 'fail',
        detail: `${name}: certificate for ${f.subject} issued by ${f.issuer}: ${problems.join('; ')}`,
        fix: "use a certificate from a public CA for this host name, renewed well before expiry (Let's Encrypt with automatic renewal)",
      });
      continue;
    }
    out.push({
      check: 'public_url',
      target,
      status: 'pass',
      detail: `${name}: certificate for ${f.subject} issued by ${f.issuer}, valid until ${f.validTo?.toISOString()} (${Math.floor(days)} days)`,
    });
  }
  return out;
}

/** `telegram`: when TELEGRAM_BOT_TOKEN is set, getMe on TELEGRAM_API_ROOT accepts it. */
export async function checkTelegram(cfg: Config, timeoutMs: number): Promise<CheckResult> {
  if (!cfg.telegram.token) {
    return {
      check: 'telegram',
      status: 'skip',
      detail: 'TELEGRAM_BOT_TOKEN unset: no chat deliveries',
    };
  }
  const target = new URL(cfg.telegram.apiRoot).origin;
  try {
    const bot = await openBot({ ...cfg.telegram, timeoutMs });
    return {
      check: 'telegram',
      target,
      status: 'pass',
      detail: `getMe: bot @${bot.identity.username} (id ${bot.identity.id})`,
    };
  } catch (err) {
    const msg = describeTelegramError((err as { cause?: unknown }).cause ?? err);
    const refused = /Bot API (401|404)/.test(msg);
    return {
      check: 'telegram',
      target,
      status: 'fail',
      detail: `getMe failed: ${msg}`,
      fix: refused
        ? 'the token was refused: copy it again from @BotFather (/mybots → API Token), or issue a new one'
        : 'check TELEGRAM_API_ROOT and that this machine reaches it',
    };
  }
}
