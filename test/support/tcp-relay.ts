/**
 * A TCP relay in front of a real server (PostgreSQL in the tests) that can be cut and restored on the same port: a
 * database outage on demand. Extracted from src/adapters/postgres/postgres-store.test.ts so that end-to-end tests
 * can put a child process behind it.
 *
 * - `stop()`   "the database went away": every relayed connection is destroyed and new connections are refused.
 * - `start()`  "the database is back" on the same address.
 * - `partition()` / `heal()`  a network partition: nothing is closed or refused, bytes simply stop flowing (held,
 *   as TCP would retransmit them, and delivered on heal); new connections are accepted but get no answer.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface TcpRelay {
  /** The relay's port on 127.0.0.1 (stable across stop/start). */
  readonly port: number;
  /** Connections accepted since the relay was created. */
  readonly accepted: number;
  /** Connections currently relayed. */
  readonly open: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  partition(): void;
  heal(): void;
}

export function listenOn(server: Server, port: number, host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const addr = server.address();
      resolve(typeof addr === 'object' && addr ? addr.port : port);
    });
  });
}

export async function startTcpRelay(targetHost: string, targetPort: number): Promise<TcpRelay> {
  let server: Server | null = null;
  const sockets = new Set<Socket>();
  let port = 0;
  let accepted = 0;
  let pairs = 0;
  let partitioned = false;
  /** Stops one relayed pair's flow (partition). */
  const pausers = new Set<() => void>();
  /** Restarts a paused pair, or relays a connection accepted during the partition (heal). */
  const resumers = new Set<() => void>();

  const relay = (client: Socket) => {
    if (client.destroyed) return;
    pairs++;
    const upstream = connect(targetPort, targetHost);
    const pair = [client, upstream];
    const resume = () => {
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
      upstream.resume();
    };
    const pause = () => {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
      resumers.add(resume);
    };
    let done = false;
    const cut = () => {
      if (!done) {
        done = true;
        pairs--;
        pausers.delete(pause);
        resumers.delete(resume);
      }
      for (const x of pair) x.destroy();
    };
    for (const sock of pair) {
      sockets.add(sock);
      sock.on('error', cut);
      sock.on('close', () => {
        sockets.delete(sock);
        cut();
      });
    }
    pausers.add(pause);
    resume();
  };

  const start = async () => {
    if (server) return;
    const srv = createServer((client) => {
      accepted++;
      if (!partitioned) return relay(client);
      // Accepted, but nothing answers until the partition heals (the client's bytes wait in the socket).
      sockets.add(client);
      client.pause();
      client.on('error', () => client.destroy());
      client.on('close', () => sockets.delete(client));
      resumers.add(() => relay(client));
    });
    server = srv;
    port = await listenOn(srv, port);
  };

  const stop = async () => {
    const s = server;
    server = null;
    if (!s) return;
    const closed = new Promise((r) => s.close(r));
    for (const sock of sockets) sock.destroy();
    await closed;
  };

  const partition = () => {
    if (partitioned) return;
    partitioned = true;
    for (const pause of pausers) pause();
  };
  const heal = () => {
    if (!partitioned) return;
    partitioned = false;
    const waiting = [...resumers];
    resumers.clear();
    for (const resume of waiting) resume();
  };

  await start();
  return {
    get port() {
      return port;
    },
    get accepted() {
      return accepted;
    },
    get open() {
      return pairs;
    },
    start,
    stop,
    partition,
    heal,
  };
}

/** A relay in front of the PostgreSQL server that `url` names, and `url` rewritten to reach it through the relay. */
export async function postgresRelay(url: string): Promise<{ relay: TcpRelay; url: string }> {
  const direct = new URL(url);
  const relay = await startTcpRelay(direct.hostname, Number(direct.port || 5432));
  const via = new URL(direct);
  via.hostname = '127.0.0.1';
  via.port = String(relay.port);
  return { relay, url: via.toString() };
}
