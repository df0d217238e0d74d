/**
 * Scriptable loopback servers for the delivery-client tests: HTTP, HTTPS (with a throwaway self-signed
 * certificate from the openssl CLI) and raw TCP for responses no HTTP server library would produce (header
 * floods, drips, resets). Every server counts the TCP connections it accepted, which is how the tests prove a
 * "sentinel" internal server was never reached.
 */
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Resolver } from '../../src/adapters/http/guarded-agent.ts';
import type { OutboundRequest } from '../../src/ports/http-sender.ts';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  remoteAddress: string | undefined;
}

export interface LoopbackServer {
  host: string;
  port: number;
  /** `http(s)://host:port` + path, with the literal address as host. */
  url(path?: string, host?: string): string;
  connections: number;
  requests: RecordedRequest[];
  /** Sockets currently open (to check that the client dropped a connection). */
  openSockets(): number;
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

function track(
  server: Server,
  host: string,
  scheme: string,
  requests: RecordedRequest[],
): Promise<LoopbackServer> {
  const sockets = new Set<Socket>();
  const state = { connections: 0 };
  // TLS servers see the raw TCP connection first; count that, so a failed handshake still counts.
  server.on('connection', (s: Socket) => {
    state.connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => {
      const port = (server.address() as { port: number }).port;
      resolve({
        host,
        port,
        url: (path = '/', h = host) => `${scheme}://${h.includes(':') ? `[${h}]` : h}:${port}${path}`,
        get connections() {
          return state.connections;
        },
        requests,
        openSockets: () => sockets.size,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

function recordingListener(requests: RecordedRequest[], handler: Handler) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
        remoteAddress: req.socket.remoteAddress,
      });
      handler(req, res, body);
    });
  };
}

export function startHttpServer(host: string, handler: Handler): Promise<LoopbackServer> {
  const requests: RecordedRequest[] = [];
  return track(createHttpServer(recordingListener(requests, handler)), host, 'http', requests);
}

export function startHttpsServer(host: string, cert: TestCert, handler: Handler): Promise<LoopbackServer> {
  const requests: RecordedRequest[] = [];
  const server = createHttpsServer({ cert: cert.cert, key: cert.key }, recordingListener(requests, handler));
  return track(server, host, 'https', requests);
}

/** A TCP server that reads the request head and then hands the socket to `script`. */
export function startRawServer(host: string, script: (socket: Socket) => void): Promise<LoopbackServer> {
  const server = createNetServer((socket) => {
    let head = '';
    const onData = (c: Buffer) => {
      head += c.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      socket.on('error', () => undefined);
      script(socket);
    };
    socket.on('data', onData);
    socket.on('error', () => undefined);
  });
  return track(server, host, 'http', []);
}

export interface TestCert {
  cert: string;
  key: string;
}

/** A self-signed P-256 certificate for `name`, made with the openssl CLI. */
export function makeSelfSignedCert(name: string): TestCert {
  const dir = mkdtempSync(join(tmpdir(), 'hookrail-cert-'));
  try {
    const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
      ].concat(['-out', cert, '-days', '2', '-subj', `/CN=${name}`, '-addext', `subjectAltName=DNS:${name}`]),
      { stdio: 'ignore' },
    );
    return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A resolver answering from a table; a function value is asked on every call (rebinding). Logs every call. */
export function stubResolver(table: Record<string, string[] | ((call: number) => string[])>) {
  const calls: string[] = [];
  const resolver: Resolver = {
    async resolve(host) {
      calls.push(host);
      const entry = table[host];
      if (entry === undefined)
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return typeof entry === 'function' ? entry(calls.filter((h) => h === host).length) : entry;
    },
  };
  return { resolver, calls };
}

/**
 * An OutboundRequest whose headers imitate the real builder: a timestamp from a ticking fake clock and an HMAC
 * over it, so each hop's signature differs; custom headers only while `sameOrigin`.
 */
export function signedRequest(url: string, opts: { custom?: Record<string, string>; body?: string } = {}) {
  let tick = 1_700_000_000;
  const body = Buffer.from(opts.body ?? '{"id":"evt_1","type":"order.created","data":{}}');
  const seen: { url: string; sameOrigin: boolean }[] = [];
  const req: OutboundRequest = {
    url,
    body,
    headersFor: (hop) => {
      seen.push(hop);
      const ts = String(tick++);
      const sig = createHmac('sha256', 'test-secret').update(`msg_1.${ts}.`).update(body).digest('base64');
      return {
        ...(hop.sameOrigin ? (opts.custom ?? {}) : {}),
        'content-type': 'application/json',
        'webhook-id': 'msg_1',
        'webhook-timestamp': ts,
        'webhook-signature': `v1,${sig}`,
      };
    },
  };
  return { req, seen };
}
