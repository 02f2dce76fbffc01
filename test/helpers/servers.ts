/**
 * Throwaway PostgreSQL 15 and Redis servers, for the tests that stop, kill and restart a
 * dependency (test/e2e/dependencies.test.ts) and for the chaos soak (bench/soak.ts): each runs in
 * a temporary folder of its own, on a free port of 127.0.0.1, so the machine's shared servers
 * (PostgreSQL on 5432, Redis on 6379, used by every engineer's tests at once) are never touched.
 *
 * PostgreSQL: `initdb` once (trust authentication, user `postgres`, `--no-sync`), then the
 * postmaster is spawned directly (`postgres -D <folder>`) as a child of this process, not through
 * `pg_ctl`: this process is then the one that reaps it, so a postmaster killed with SIGKILL
 * leaves no zombie whose live-looking PID in `postmaster.pid` would make the next start refuse
 * ("lock file already exists"); PID 1 of these machines does not reap orphans. When this process
 * runs as root, initdb and the server run as the `postgres` user (initdb refuses root).
 *
 * Binaries: `PG_BIN` (default /usr/lib/postgresql/15/bin) and `redis-server` on the PATH.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

/** Folder of initdb and postgres (PostgreSQL 15). */
export const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';

/** True when the PostgreSQL binaries and redis-server needed here are installed. */
export function throwawayServersAvailable(): boolean {
  const onPath = (bin: string) =>
    (process.env.PATH ?? '')
      .split(path.delimiter)
      .some((d) => d !== '' && fs.existsSync(path.join(d, bin)));
  return (
    fs.existsSync(path.join(PG_BIN, 'initdb')) &&
    fs.existsSync(path.join(PG_BIN, 'postgres')) &&
    onPath('redis-server')
  );
}

const run = promisify(execFile);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A free TCP port on 127.0.0.1 (bound, read, released). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Resolve once `port` on 127.0.0.1 accepts a TCP connection; reject on the first refusal. */
function connectOnce(port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.end();
      resolve();
    });
    s.on('error', reject);
  });
}

/** uid/gid to run PostgreSQL as: the `postgres` user when we are root, else ourselves. */
async function postgresUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout.trim());
  return { uid: await id('-u'), gid: await id('-g') };
}

/** A child process with a promise of its exit. */
interface Child {
  process: ChildProcess;
  exited: Promise<void>;
}

function spawnChild(
  bin: string,
  args: string[],
  opts: { logFile: string; user?: { uid: number; gid: number } },
): Child {
  const log = fs.openSync(opts.logFile, 'a');
  const child = spawn(bin, args, {
    stdio: ['ignore', log, log],
    ...(opts.user ? { uid: opts.user.uid, gid: opts.user.gid } : {}),
  });
  fs.closeSync(log); // the child holds its own copy
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  return { process: child, exited };
}

function alive(c: Child | undefined): c is Child {
  return c !== undefined && c.process.exitCode === null && c.process.signalCode === null;
}

/** Send `signal` to the child and wait for its exit (no-op when it is not running). */
async function signalAndWait(c: Child | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!alive(c)) return;
  c.process.kill(signal);
  await c.exited;
}

/** A temporary folder (removed by close) unless the caller gives one (then the caller's). */
function folder(dir: string | undefined, prefix: string): { dir: string; own: boolean } {
  if (dir) return { dir, own: false };
  return { dir: fs.mkdtempSync(path.join(os.tmpdir(), prefix)), own: true };
}

export interface ThrowawayPostgres {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/<database>` (default database `postgres`). */
  url(database?: string): string;
  /** True while the postmaster runs. */
  readonly running: boolean;
  /**
   * Start the postmaster and resolve once it accepts queries (crash recovery done). After a
   * SIGKILL, the killed postmaster's backends live on until they notice (milliseconds) and hold
   * its shared memory meanwhile, so the new postmaster may refuse to start: it is started again
   * every 200 ms, for up to 60 s. No-op when running.
   */
  start(): Promise<void>;
  /**
   * Stop the postmaster: 'immediate' (SIGQUIT, like `pg_ctl stop -m immediate`: no checkpoint,
   * crash recovery at the next start) or 'fast' (SIGINT: sessions ended, checkpoint). Default
   * 'immediate'. No-op when stopped.
   */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  /**
   * SIGKILL the postmaster, as a crash or the OOM killer would: no shutdown at all. Its backends
   * see it gone and exit by themselves (their clients' connections close); the next start runs
   * crash recovery. Resolves once the postmaster is gone.
   */
  kill(): Promise<void>;
  /** Stop the server and remove its folder (when created here). Never rejects. */
  close(): Promise<void>;
}

/**
 * Create a PostgreSQL cluster in `opts.dir` (default: a new temporary folder), on a free port of
 * 127.0.0.1, listening on TCP and on a Unix socket in the folder, started unless `start: false`.
 * @throws when initdb or the first start fails (its log is `<dir>/postgres.log`).
 */
export async function throwawayPostgres(
  opts: { dir?: string; start?: boolean; maxConnections?: number } = {},
): Promise<ThrowawayPostgres> {
  const { dir, own } = folder(opts.dir, 'tw-pg-');
  const user = await postgresUser();
  if (user) fs.chownSync(dir, user.uid, user.gid);
  const data = path.join(dir, 'pgdata');
  const logFile = path.join(dir, 'postgres.log');
  const port = await freePort();
  await run(
    path.join(PG_BIN, 'initdb'),
    ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'],
    user ? { uid: user.uid, gid: user.gid } : {},
  );
  fs.appendFileSync(
    path.join(data, 'postgresql.conf'),
    [
      "listen_addresses = '127.0.0.1'",
      `port = ${port}`,
      `unix_socket_directories = '${dir}'`,
      `max_connections = ${opts.maxConnections ?? 100}`,
      // Throwaway data: no fsync (a killed postmaster still recovers from its WAL in the page
      // cache; only a machine crash would lose data, and then the folder is gone anyway).
      'fsync = off',
      '',
    ].join('\n'),
  );
  let server: Child | undefined;
  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;

  /** Spawn once; resolve true when it accepts queries, false when it exited first. */
  const startOnce = async (deadline: number): Promise<boolean> => {
    const c = spawnChild(path.join(PG_BIN, 'postgres'), ['-D', data], {
      logFile,
      ...(user ? { user } : {}),
    });
    server = c;
    while (Date.now() < deadline) {
      if (!alive(c)) return false;
      const client = new pg.Client({ connectionString: url(), connectionTimeoutMillis: 2_000 });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.query('SELECT 1');
        return true;
      } catch {
        await sleep(50); // refused, or 57P03 "the database system is starting up"
      } finally {
        await client.end().catch(() => undefined);
      }
    }
    return false;
  };

  const pgServer: ThrowawayPostgres = {
    port,
    url,
    get running() {
      return alive(server);
    },
    async start() {
      if (alive(server)) return;
      const deadline = Date.now() + 60_000;
      while (!(await startOnce(deadline))) {
        if (Date.now() >= deadline) {
          await signalAndWait(server, 'SIGQUIT');
          throw new Error(`postgres did not start in 60 s; see ${logFile}`);
        }
        await sleep(200);
      }
    },
    async stop(mode = 'immediate') {
      await signalAndWait(server, mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
    },
    async kill() {
      await signalAndWait(server, 'SIGKILL');
    },
    async close() {
      await signalAndWait(server, 'SIGQUIT').catch(() => undefined);
      if (own) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  if (opts.start !== false) {
    try {
      await pgServer.start();
    } catch (err) {
      await pgServer.close();
      throw err;
    }
  }
  return pgServer;
}

export interface ThrowawayRedis {
  readonly port: number;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  readonly running: boolean;
  /** Start redis-server (no persistence) and resolve once it accepts connections. No-op when running. */
  start(): Promise<void>;
  /** SIGKILL it (its windows are lost, as DESIGN allows). No-op when stopped. */
  stop(): Promise<void>;
  /** Stop it and remove its folder (when created here). Never rejects. */
  close(): Promise<void>;
}

/** A redis-server in `opts.dir` (default: a new temporary folder), started unless `start: false`. */
export async function throwawayRedis(
  opts: { dir?: string; start?: boolean } = {},
): Promise<ThrowawayRedis> {
  const { dir, own } = folder(opts.dir, 'tw-redis-');
  const port = await freePort();
  let server: Child | undefined;
  const r: ThrowawayRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    get running() {
      return alive(server);
    },
    async start() {
      if (alive(server)) return;
      const c = spawnChild(
        'redis-server',
        [
          '--bind',
          '127.0.0.1',
          '--port',
          String(port),
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          dir,
        ],
        { logFile: path.join(dir, 'redis.log') },
      );
      server = c;
      const deadline = Date.now() + 30_000;
      for (;;) {
        if (!alive(c)) throw new Error(`redis-server exited; see ${path.join(dir, 'redis.log')}`);
        try {
          await connectOnce(port);
          return;
        } catch (err) {
          if (Date.now() > deadline) throw err;
          await sleep(50);
        }
      }
    },
    async stop() {
      await signalAndWait(server, 'SIGKILL');
    },
    async close() {
      await signalAndWait(server, 'SIGKILL').catch(() => undefined);
      if (own) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  if (opts.start !== false) await r.start();
  return r;
}
