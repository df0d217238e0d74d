/**
 * A scriptable local webhook receiver: a real HTTP server on loopback whose answers the test decides per request
 * (status, headers, delay, slow or huge bodies, connection resets), and which records every request it received
 * with the exact body bytes.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface ReceivedRequest {
  path: string;
  headers: Record<string, string>;
  body: Buffer;
  at: number;
}

export type ReceiverAction =
  | { status: number; headers?: Record<string, string>; body?: string | Buffer; delayMs?: number }
  | { reset: true }
  | { hang: true }
  | { drip: { bytes: number; everyMs: number }; status?: number };

export type Script = (req: ReceivedRequest, nth: number) => ReceiverAction;

export class Receiver {
  readonly requests: ReceivedRequest[] = [];
  private server: Server;
  private sockets = new Set<Socket>();
  private script: Script = () => ({ status: 204 });
  private counts = new Map<string, number>();
  port = 0;

  constructor() {
    this.server = createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** Listens on `port` (0: any free port); a receiver restarted on its old port models an endpoint coming back. */
  static async start(port = 0): Promise<Receiver> {
    const r = new Receiver();
    await new Promise<void>((resolve) => r.server.listen(port, '127.0.0.1', resolve));
    r.port = (r.server.address() as AddressInfo).port;
    return r;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  answer(script: Script): void {
    this.script = script;
  }

  received(path?: string): ReceivedRequest[] {
    return path ? this.requests.filter((r) => r.path === path) : this.requests;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers))
        headers[k] = Array.isArray(v) ? v.join(', ') : (v ?? '');
      const path = req.url ?? '/';
      const record: ReceivedRequest = { path, headers, body: Buffer.concat(chunks), at: Date.now() };
      this.requests.push(record);
      const nth = (this.counts.get(path) ?? 0) + 1;
      this.counts.set(path, nth);
      const action = this.script(record, nth);
      if ('reset' in action) {
        req.socket.destroy();
        return;
      }
      if ('hang' in action) return;
      if ('drip' in action) {
        res.writeHead(action.status ?? 200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => {
          if (res.destroyed) return clearInterval(timer);
          res.write(Buffer.alloc(action.drip.bytes, 0x61));
        }, action.drip.everyMs);
        res.on('close', () => clearInterval(timer));
        return;
      }
      const send = () => {
        res.writeHead(action.status, action.headers ?? {});
        res.end(action.body ?? '');
      };
      if (action.delayMs) setTimeout(send, action.delayMs);
      else send();
    });
  }
}
