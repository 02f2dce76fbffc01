/**
 * Structured JSON logs (pino): a `msg` plus snake_case fields (`block_number`, `watch_id`).
 * Logs go to stderr, so commands that print data (scan) keep stdout clean.
 * Secrets never enter a log line: redaction below is a second line of defence, not the first.
 */
import { destination, type Logger, pino, stdTimeFunctions } from 'pino';

export type { Logger };

/** Create the process logger. `level` is a pino level name ('info' by default). */
export function createLogger(level = 'info', name = 'tronwatch'): Logger {
  return pino(
    {
      name,
      level,
      base: { pid: process.pid },
      timestamp: stdTimeFunctions.isoTime,
      redact: {
        paths: ['secret', '*.secret', 'api_key', '*.api_key', 'authorization', '*.authorization'],
        censor: '[redacted]',
      },
    },
    destination({ fd: 2, sync: false }),
  );
}

/** A logger that drops everything (tests that do not inspect logs). */
export const silentLogger: Logger = pino({ level: 'silent' });
