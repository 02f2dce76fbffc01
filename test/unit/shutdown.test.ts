/**
 * The shutdown registry (src/common/shutdown.ts): abort first, closers last-registered first,
 * each awaited, a failing one logged without stopping the rest, idempotent, late registrations
 * closed at once.
 */

import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Shutdown } from '../../src/common/shutdown.js';

describe('Shutdown', () => {
  it('aborts its signal, then closes in reverse order, each awaited', async () => {
    const s = new Shutdown();
    const order: string[] = [];
    s.add('first', () => order.push(`first aborted=${s.signal.aborted}`));
    s.add('second', async () => {
      await new Promise((r) => setTimeout(r, 20));
      order.push('second');
    });
    s.add('third', () => order.push('third'));
    expect(s.isKilled).toBe(false);
    await s.kill();
    expect(s.isKilled).toBe(true);
    expect(order).toEqual(['third', 'second', 'first aborted=true']);
  });

  it('logs a failing closer and still runs the others; kill is idempotent and never rejects', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'error' }, { write: (l: string) => lines.push(l) });
    const s = new Shutdown(logger);
    let dbClosed = 0;
    s.add('database', () => {
      dbClosed++;
    });
    s.add('redis', async () => {
      throw new Error('connection reset');
    });
    const a = s.kill();
    const b = s.kill();
    expect(a).toBe(b);
    await expect(a).resolves.toBeUndefined();
    expect(dbClosed).toBe(1);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({
      closer: 'redis',
      err: 'connection reset',
      msg: 'closing failed during shutdown',
    });
  });

  it('closes what is registered after kill started (a start racing a SIGTERM)', async () => {
    const s = new Shutdown();
    await s.kill(new Error('interrupted'));
    expect((s.signal.reason as Error).message).toBe('interrupted');
    let closed = false;
    s.add('late', () => {
      closed = true;
    });
    await new Promise((r) => setTimeout(r, 0));
    expect(closed).toBe(true);
  });
});
