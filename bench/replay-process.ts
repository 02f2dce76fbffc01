/**
 * Start `tronwatch replay-node` in a child process (so the node's serving does not share the
 * event loop of what is measured) and return its URL once it prints its startup line.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface ReplayProcess {
  url: string;
  first: number;
  last: number;
  child: ChildProcess;
  stop(): Promise<void>;
}

export async function startReplayProcess(args: string[]): Promise<ReplayProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'replay-node', ...args],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, LOG_LEVEL: 'warn' },
    },
  );
  const rl = readline.createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const line = await new Promise<string>((resolve, reject) => {
    rl.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`replay-node exited with ${code}`)));
  });
  const info = JSON.parse(line) as { url: string; first: number; last: number };
  return {
    ...info,
    child,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
