/**
 * The benchmark's webhook receiver in its own thread (worker_threads), so that the receiving
 * side's TLS and HTTP work does not share the event loop of the code under test — as in
 * production, where the receiver is another machine. It is src/devnet/receiver.ts unchanged:
 * it verifies every signature and answers 200 only when it matches (401 otherwise).
 *
 * Protocol (parentPort): starts with workerData `{ secret }`, posts `{ url, ca }` when listening;
 * answers `'stats'` with `{ connections, requests }` and `'close'` by closing and posting
 * `'closed'`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { startReceiver } from '../src/devnet/receiver.js';

const port = parentPort;
if (!port) throw new Error('receiver-thread.ts runs as a worker thread');
const { secret } = workerData as { secret: string };
const receiver = await startReceiver({ secretFor: secret, record: false });
port.on('message', async (msg: unknown) => {
  if (msg === 'stats') {
    port.postMessage({ connections: receiver.connections, requests: receiver.requests });
  } else if (msg === 'close') {
    await receiver.close();
    port.postMessage('closed');
    port.close();
  }
});
port.postMessage({ url: receiver.url, ca: receiver.ca });
