/**
 * A small TCP proxy for fault tests: put it between tronwatch processes and a dependency
 * (PostgreSQL, Redis, a TRON node), then `cut()` it — every open connection is destroyed on both
 * sides and new ones are dropped as soon as they are accepted — and `restore()` it later. The
 * listening port never changes, so the processes reconnect to the same address by themselves.
 */
import net from 'node:net';

export interface TcpProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** `url` with its host and port replaced by the proxy's (e.g. a DATABASE_URL). */
  via(url: string): string;
  /** Destroy every connection (both sides) and drop new ones until restore(). */
  cut(): void;
  /** Accept and forward connections again. */
  restore(): void;
  /** True while cut. */
  readonly isCut: boolean;
  /** Connections forwarded since start. */
  readonly accepted: number;
  /** Connections dropped while cut (attempts to reach the dependency during the cut). */
  readonly refused: number;
  /** Connections open now. */
  readonly open: number;
  close(): Promise<void>;
}

/** Start a proxy on 127.0.0.1 (any free port) forwarding to `target`. */
export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<{ a: net.Socket; b: net.Socket }>();
  let cut = false;
  let accepted = 0;
  let refused = 0;
  const server = net.createServer((client) => {
    if (cut) {
      refused++;
      client.on('error', () => {});
      client.resetAndDestroy();
      return;
    }
    accepted++;
    const upstream = net.connect(target.port, target.host);
    const pair = { a: client, b: upstream };
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    via(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    cut() {
      cut = true;
      for (const p of pairs) {
        // RST on both sides: the dependency sees its peer vanish at once (the PostgreSQL
        // server ends the session and drops its advisory locks), as does the client.
        p.a.resetAndDestroy();
        p.b.resetAndDestroy();
      }
      pairs.clear();
    },
    restore() {
      cut = false;
    },
    get isCut() {
      return cut;
    },
    get accepted() {
      return accepted;
    },
    get refused() {
      return refused;
    },
    get open() {
      return pairs.size;
    },
    close() {
      cut = true;
      for (const p of pairs) {
        p.a.destroy();
        p.b.destroy();
      }
      pairs.clear();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
