/** The benchmarks' producer client (bench/socket-client.ts) against a real HTTP server on loopback. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestBytes, SocketPool } from '../../bench/socket-client.ts';

let server: Server;
let origin: string;
const seen: Array<{ headers: Record<string, unknown>; body: string; socket: unknown }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      body += c;
    });
    req.on('end', () => {
      seen.push({ headers: req.headers, body, socket: req.socket });
      if (req.url === '/close') res.setHeader('connection', 'close');
      if (req.url === '/chunked') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('a');
        res.end('b');
        return;
      }
      const pad = req.url === '/big' ? 'y'.repeat(200_000) : ''; // arrives in many reads
      const out = JSON.stringify({ id: `evt_${seen.length}`, echo: body.length, text: 'é', pad });
      res.writeHead(req.url === '/bad' ? 400 : 202, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(out), // as Fastify sends it
      });
      res.end(out);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const post = (path: string, body = '{"a":1}') =>
  requestBytes(
    origin,
    path,
    { authorization: 'Bearer k', 'content-type': 'application/json' },
    Buffer.from(body),
  );

describe('SocketPool', () => {
  it('sends the request as written and returns the status and the whole body', async () => {
    const pool = new SocketPool(origin);
    const body = JSON.stringify({ data: 'x'.repeat(100_000) }); // larger than one TCP segment
    const res = await pool.request(post('/v1/events', body));
    expect(res.status).toBe(202);
    const parsed = JSON.parse(res.body) as { id: string; echo: number; text: string };
    expect(parsed.echo).toBe(body.length);
    expect(parsed.text).toBe('é');
    const last = seen[seen.length - 1];
    expect(last?.body).toBe(body);
    expect(last?.headers.authorization).toBe('Bearer k');
    expect(last?.headers['content-type']).toBe('application/json');
    expect((await pool.request(post('/bad'))).status).toBe(400);
    const big = await pool.request(post('/big'));
    expect((JSON.parse(big.body) as { pad: string }).pad).toHaveLength(200_000);
    pool.close();
  });

  it('keeps a connection alive between requests and opens more when several are in flight', async () => {
    const pool = new SocketPool(origin);
    const from = seen.length;
    await pool.request(post('/a'));
    await pool.request(post('/b'));
    const sequential = seen.slice(from);
    expect(sequential[0]?.socket).toBe(sequential[1]?.socket);
    const at = seen.length;
    await Promise.all([pool.request(post('/c')), pool.request(post('/d')), pool.request(post('/e'))]);
    expect(new Set(seen.slice(at).map((s) => s.socket)).size).toBe(3);
    pool.close();
  });

  it('does not reuse a connection the server closes', async () => {
    const pool = new SocketPool(origin);
    const from = seen.length;
    expect((await pool.request(post('/close'))).status).toBe(202);
    expect((await pool.request(post('/after'))).status).toBe(202);
    const [first, second] = seen.slice(from);
    expect(first?.socket).not.toBe(second?.socket);
    pool.close();
  });

  it('fails a response without content-length, and a refused connection', async () => {
    const pool = new SocketPool(origin);
    await expect(pool.request(post('/chunked'))).rejects.toThrow(/content-length/);
    pool.close();
    const nowhere = new SocketPool('http://127.0.0.1:1');
    await expect(nowhere.request(post('/'))).rejects.toThrow();
  });

  it('refuses header values with line breaks', () => {
    expect(() => requestBytes(origin, '/', { 'x-a': 'b\r\nx-injected: 1' }, Buffer.alloc(0))).toThrow();
  });
});
