/**
 * The PostgreSQL store's availability contract: fail fast with StoreUnavailableError while the database is
 * unreachable, and recover by itself when it returns (through a TCP proxy the test cuts and restores).
 */
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { postgresUrl } from '../../../test/support/postgres.ts';
import {
  event,
  expectUnavailable,
  NOW,
  postgresStores,
  WINDOW,
} from '../../../test/support/postgres-stores.ts';
import { newId } from '../../domain/ids.ts';
import { StoreUnavailableError } from '../../ports/store.ts';

const { open, schema } = postgresStores();

describe('availability', () => {
  it('throws StoreUnavailableError quickly when nothing listens', async () => {
    const s = open({ schema: 'hr_nowhere', url: 'postgres://postgres@127.0.0.1:1/test' });
    const started = Date.now();
    await expectUnavailable(s.ping());
    await expectUnavailable(s.migrate());
    await expectUnavailable(s.tenantGet({ id: 'ten_x' }));
    await expectUnavailable(
      s.eventInsertBatch({ events: [event('ten_x', null)], now: NOW, idempotencyWindowMs: 1 }),
    );
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('gives up after the connect timeout when the server does not answer', async () => {
    // Accepts TCP but never speaks the protocol: a hung server, not a refused connection.
    const held: Socket[] = [];
    const black = createServer((sock) => held.push(sock));
    const port = await listen(black, 0);
    try {
      const s = open({ schema: 'hr_nowhere', url: `postgres://postgres@127.0.0.1:${port}/test` });
      const started = Date.now();
      await expectUnavailable(s.ping());
      expect(Date.now() - started).toBeLessThan(4_000);
    } finally {
      for (const sock of held) sock.destroy();
      await new Promise((r) => black.close(r));
    }
  });

  it('recovers by itself when the database comes back, and idle errors do not crash', async () => {
    const name = schema();
    const target = new URL(postgresUrl());
    const proxy = await startProxy(target.hostname, Number(target.port || 5432));
    const viaProxy = new URL(target);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const logger = { warn: vi.fn() };
    const s = open({ schema: name, url: viaProxy.toString(), logger, poolSize: 4 });
    await s.migrate();
    const tenantId = newId('tenant', NOW, randomBytes(10));
    const batch = () => ({ events: [event(tenantId, null)], now: NOW, idempotencyWindowMs: WINDOW });
    await Promise.all([s.eventInsertBatch(batch()), s.eventInsertBatch(batch()), s.ping()]);

    // "Database down": every open connection is cut, new ones are refused.
    const inFlight = s.eventInsertBatch(batch()).catch((e: unknown) => e);
    await proxy.stop();
    const r = await inFlight;
    expect(Array.isArray(r) || r instanceof StoreUnavailableError).toBe(true);
    await expectUnavailable(s.ping());
    await expectUnavailable(s.eventInsertBatch(batch()));
    // The idle pooled connections died too; the pool reported it through the logger instead of crashing.
    await vi.waitFor(() => expect(logger.warn).toHaveBeenCalled());
    // What it logs is the error's message and code: pg-pool hangs the client, with the connection's parameters
    // (its password among them), on the error.
    for (const [obj] of logger.warn.mock.calls) {
      expect(Object.keys(obj.err)).toEqual(['message', 'code']);
      expect(JSON.stringify(obj)).not.toContain(String(proxy.port));
    }

    // "Database back" on the same address: the same store works again without being recreated.
    await proxy.start();
    try {
      await vi.waitFor(() => s.ping(), { timeout: 5_000, interval: 100 });
      const [out] = await s.eventInsertBatch(batch());
      expect(out?.kind).toBe('created');
      expect(await s.eventGet({ id: out!.event.id, tenantId })).toEqual(out!.event);
    } finally {
      await proxy.stop();
    }
  });
});

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const addr = server.address();
      resolve(typeof addr === 'object' && addr ? addr.port : port);
    });
  });
}

/** A TCP relay to the real server that can be cut and restored on the same port: a database outage on demand. */
async function startProxy(host: string, targetPort: number) {
  let server: Server | null = null;
  const sockets = new Set<Socket>();
  let port = 0;
  const start = async () => {
    server = createServer((client) => {
      const upstream = connect(targetPort, host);
      const pair = [client, upstream];
      const cut = () => {
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
      client.pipe(upstream);
      upstream.pipe(client);
    });
    port = await listen(server, port);
  };
  const stop = async () => {
    const s = server;
    server = null;
    if (!s) return;
    const closed = new Promise((r) => s.close(r));
    for (const sock of sockets) sock.destroy();
    await closed;
  };
  await start();
  return { port, start, stop };
}
