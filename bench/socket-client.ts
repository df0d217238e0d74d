/**
 * A minimal HTTP/1.1 client for the benchmarks' event producer: keep-alive TCP connections to one origin, one
 * request in flight on each, requests serialised to bytes once by the caller, responses parsed only as far as the
 * status code, `content-length` and the body.
 *
 * Why not undici, which Hookrail itself sends with: the producer stands in for the product's backend, which runs on
 * another machine. Here it shares the benchmark's two cores with Hookrail and the receiver, so whatever it spends
 * per request is taken from the system under test. Measured (bench:delivery, SQLite, bulk): an undici Pool cost the
 * producer ~97 µs of CPU per event, as much as the ceiling's whole client; this client costs a fraction of that
 * (the result line reports the producer's share, and `--producer-client undici` runs the old one).
 *
 * Limits, all fine for talking to Hookrail's own API: no chunked responses (Fastify sends a length), no pipelining,
 * no TLS, no redirects; a response that says `connection: close` closes its connection.
 */
import { connect, type Socket } from 'node:net';

export interface SocketResponse {
  status: number;
  body: string;
}

interface Pending {
  resolve: (r: SocketResponse) => void;
  reject: (e: Error) => void;
}

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;
const CONNECTION_CLOSE = /\r\nconnection:[ \t]*close/i;

class Connection {
  readonly socket: Socket;
  private buf: Buffer | null = null;
  private pending: Pending | null = null;
  closed = false;

  constructor(
    host: string,
    port: number,
    private readonly onFree: (c: Connection) => void,
  ) {
    this.socket = connect({ host, port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', (err) => this.fail(err));
    this.socket.on('close', () => this.fail(new Error('connection closed')));
  }

  send(bytes: Buffer): Promise<SocketResponse> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(bytes);
    });
  }

  private onData(chunk: Buffer): void {
    const buf = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
    const headerEnd = buf.indexOf(HEADER_END);
    if (headerEnd < 0) {
      this.buf = buf;
      return;
    }
    const head = buf.toString('latin1', 0, headerEnd);
    const length = CONTENT_LENGTH.exec(head);
    if (!length) {
      this.fail(new Error(`response without content-length: ${head.slice(0, 200)}`));
      return;
    }
    const end = headerEnd + 4 + Number(length[1]);
    if (buf.length < end) {
      this.buf = buf;
      return;
    }
    if (buf.length > end) {
      this.fail(new Error('bytes after the response: no request was pipelined'));
      return;
    }
    this.buf = null;
    const pending = this.pending;
    this.pending = null;
    const close = CONNECTION_CLOSE.test(head);
    if (close) {
      this.closed = true;
      this.socket.destroy();
    }
    pending?.resolve({ status: Number(head.slice(9, 12)), body: buf.toString('utf8', headerEnd + 4, end) });
    if (!close) this.onFree(this);
  }

  private fail(err: Error): void {
    this.closed = true;
    this.socket.destroy();
    const pending = this.pending;
    this.pending = null;
    pending?.reject(err);
  }
}

export class SocketPool {
  private readonly idle: Connection[] = [];
  private readonly host: string;
  private readonly port: number;

  /** `origin`: http://host:port. The caller keeps at most as many requests in flight as it wants connections. */
  constructor(origin: string) {
    const url = new URL(origin);
    if (url.protocol !== 'http:') throw new Error('SocketPool speaks plain HTTP only');
    this.host = url.hostname;
    this.port = Number(url.port || 80);
  }

  /** Sends one serialised request (see requestBytes) on an idle connection, or a new one. */
  request(bytes: Buffer): Promise<SocketResponse> {
    let conn = this.idle.pop();
    while (conn?.closed) conn = this.idle.pop();
    if (!conn) {
      conn = new Connection(this.host, this.port, (c) => {
        if (!c.closed) this.idle.push(c);
      });
    }
    return conn.send(bytes);
  }

  /** Closes the idle connections (call once nothing is in flight). */
  close(): void {
    for (const c of this.idle.splice(0)) c.socket.destroy();
  }
}

/** A POST with a JSON body, as bytes; header names and values must be plain ASCII without line breaks. */
export function requestBytes(
  origin: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Buffer {
  const host = new URL(origin).host;
  let head = `POST ${path} HTTP/1.1\r\nhost: ${host}\r\ncontent-length: ${body.length}\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    if (/[\r\n]/.test(name + value)) throw new Error('header with a line break');
    head += `${name}: ${value}\r\n`;
  }
  return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), body]);
}
