/** Run the real `tronwatch` CLI (src/main.ts through tsx) as a child process. */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Spawn `tronwatch ...args` with `env` added to the environment. */
export function spawnCli(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), ...args], {
    cwd: ROOT,
    // A free metrics port unless told: the default (9464) is one per machine, and tests run
    // several processes at once.
    env: { ...process.env, LOG_LEVEL: 'warn', METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Run to completion; resolve with exit code, stdout and stderr. */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawnCli(args, env);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
}

/** A running `tronwatch` process with its JSON log lines (stderr) parsed as they arrive. */
export interface LoggedProcess {
  name: string;
  child: ChildProcess;
  logs: Array<Record<string, unknown>>;
  exit: Promise<number | null>;
  /** A log line's `msg` is exactly `msg`. */
  has(msg: string): boolean;
  /** Log lines whose `msg` starts with `prefix`. */
  count(prefix: string): number;
}

/** Spawn `tronwatch ...args` at LOG_LEVEL info and collect its log lines. */
export function startLogged(
  name: string,
  args: string[],
  env: Record<string, string>,
): LoggedProcess {
  const child = spawnCli(args, { LOG_LEVEL: 'info', ...env });
  const logs: Array<Record<string, unknown>> = [];
  let buf = '';
  child.stderr?.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        logs.push({ msg: line });
      }
    }
  });
  const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    name,
    child,
    logs,
    exit,
    has: (msg) => logs.some((l) => l.msg === msg),
    count: (prefix) =>
      logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith(prefix)).length,
  };
}

/**
 * Poll `cond` every 20 ms until it holds. Fails at once when one of `procs` has exited, or after
 * `ms`, with the last log lines of every process in the message.
 */
export async function untilOrExit(
  what: string,
  cond: () => boolean | Promise<boolean>,
  procs: LoggedProcess[],
  ms = 40_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    const dead = procs.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
    if (Date.now() > end || dead) {
      const tail = procs.map((p) => `${p.name}: ${JSON.stringify(p.logs.slice(-8))}`).join('\n');
      throw new Error(`${dead ? `${dead.name} exited` : 'timed out'} waiting for ${what}\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** SIGTERM the process; resolves with its exit code. */
export function terminate(p: LoggedProcess): Promise<number | null> {
  p.child.kill('SIGTERM');
  return p.exit;
}
