/**
 * The worker on the real SQLite store: an attempt that throws (a bug, not an endpoint failure) gives its slot back,
 * records nothing and stays leased so that lease expiry retries it; replays hold only their own slots.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { captureLog } from '../../test/support/log-capture.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { asTenant, createTestStore, type TestStore } from '../../test/support/test-hookrail.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
import { createEndpoint } from '../app/manage-endpoints.ts';
import { createTenant } from '../app/manage-tenants.ts';
import { Signal } from '../app/signal.ts';
import { newId } from '../domain/ids.ts';
import type { Random } from '../ports/clock.ts';
import type { HttpSender, SendResult } from '../ports/http-sender.ts';
import type { Store } from '../ports/store.ts';
import { DeliveryWorker } from './delivery-worker.ts';

describe('DeliveryWorker', () => {
  let ts: TestStore | undefined;
  afterEach(() => ts?.destroy());

  /** A fresh SQLite store with one tenant, on a fake clock and a seeded random source. */
  const setup = async (seed: number) => {
    ts = await createTestStore('sqlite');
    const store = ts.store;
    const clock = new FakeClock();
    const random = seededRandom(seed);
    const base = { store, clock, random, keys: createLocalKeyService({ masterKey: Buffer.alloc(32, 3) }) };
    const { tenant } = await createTenant(base, { name: 'a' });
    return { store, clock, random, base, tenant };
  };

  it('an attempt that throws frees its slot, records nothing and leaves the lease to expire', async () => {
    const { store, clock, random, base, tenant } = await setup(5);
    const { endpoint } = await createEndpoint(base, asTenant(tenant.id), {
      url: 'https://ok.example.com/',
      eventTypes: ['*'],
    });
    await publish(store, tenant.id, 'order.created', 1, clock.now(), random);

    const { logger, lines: logged } = captureLog();
    let sends = 0;
    const sender: HttpSender = {
      send: async () => {
        sends++;
        throw new TypeError('a bug in the sender');
      },
      close: async () => {},
    };
    const worker = new DeliveryWorker({
      store,
      attempt: { sender, clock, random, userAgent: 'test', secretsFor: async () => ['whsec_x'] },
      owner: 'worker-1',
      concurrency: 4,
      perEndpoint: 4,
      leaseMs: 60_000,
      pollMs: 5,
      wake: new Signal(),
      logger,
      metrics: null,
    });
    worker.start();
    for (let i = 0; i < 200 && logged.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    await worker.stop();

    expect(sends).toBe(1);
    expect(worker.inFlight).toBe(0);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      level: 50,
      msg: 'attempt crashed',
      err: { message: 'a bug in the sender' },
    });
    const [delivery] = (
      await store.deliveryList({
        endpointId: endpoint.id,
        tenantId: tenant.id,
        status: null,
        limit: 10,
        cursor: null,
      })
    ).data;
    expect(delivery).toMatchObject({ status: 'pending', attempts: 0 });
    expect(logged[0]?.delivery).toBe(delivery?.id);
    expect(await store.attemptList({ deliveryId: delivery?.id as string, tenantId: null })).toEqual([]);
    // Still leased: nothing else takes it before the lease expires; afterwards it is due again, same delivery.
    expect(await store.deliveryExpireLeases({ now: clock.now() })).toBe(0);
    clock.advance(60_000);
    expect(await store.deliveryExpireLeases({ now: clock.now() })).toBe(1);
  });

  it('replays run on their own slots: however many are due, first deliveries keep theirs', async () => {
    const { store, clock, random, base, tenant } = await setup(9);
    const endpointFor = (url: string, type: string) =>
      createEndpoint(base, asTenant(tenant.id), { url, eventTypes: [type], maxConcurrency: 100 });
    const { endpoint: first } = await endpointFor('https://first.example.com/', 'a.*');
    const { endpoint: replayed } = await endpointFor('https://replayed.example.com/', 'b.*');

    // The sender answers 204 at once until `hold`; then it keeps every request open until released.
    let hold = false;
    const open = new Map<string, number>();
    const release: Array<() => void> = [];
    const sender: HttpSender = {
      send: async (req) => {
        const host = new URL(req.url).hostname;
        const timings = {
          startedAt: clock.now(),
          wireAt: clock.now(),
          responseAt: clock.now(),
          finishedAt: clock.now(),
        };
        const answer: SendResult = {
          kind: 'response',
          status: 204,
          headers: {},
          bodyPrefix: Buffer.alloc(0),
          hops: [],
          timings,
        };
        if (!hold) return answer;
        open.set(host, (open.get(host) ?? 0) + 1);
        await new Promise<void>((resolve) => release.push(resolve));
        open.set(host, open.get(host)! - 1);
        return answer;
      },
      close: async () => {},
    };
    const wake = new Signal();
    const worker = new DeliveryWorker({
      store,
      attempt: { sender, clock, random, userAgent: 'test', secretsFor: async () => ['whsec_x'] },
      owner: 'worker-1',
      concurrency: 4,
      replayConcurrency: 2,
      perEndpoint: 10,
      leaseMs: 60_000,
      pollMs: 5,
      wake,
      logger: null,
      metrics: null,
    });
    worker.start();
    try {
      // Ten deliveries to `replayed`, delivered; then all ten replayed, and ten new events for the other endpoint.
      await publish(store, tenant.id, 'b.x', 10, clock.now(), random);
      const delivered = await waitFor(async () => {
        const page = await store.deliveryList({
          endpointId: replayed.id,
          tenantId: tenant.id,
          status: 'delivered',
          limit: 100,
          cursor: null,
        });
        return page.data.length === 10 ? page.data : null;
      });
      // One delivery to the other endpoint, so that it was served last: the replays' endpoint is first in the
      // rotation, and without a budget of their own its due replays would take every free slot.
      clock.advance(10);
      await publish(store, tenant.id, 'a.x', 1, clock.now(), random);
      await waitFor(async () => {
        const page = await store.deliveryList({
          endpointId: first.id,
          tenantId: tenant.id,
          status: 'delivered',
          limit: 100,
          cursor: null,
        });
        return page.data.length === 1 ? true : null;
      });
      hold = true;
      // Made in the clock's future, so that all come due at once when it gets there.
      const later = clock.now() + 1_000;
      for (const d of delivered)
        await store.deliveryReplay({
          id: d.id,
          tenantId: tenant.id,
          now: later,
          ratePerSecond: 1000,
          ids: idsAt(later, random),
        });
      await publish(store, tenant.id, 'a.x', 10, later, random);
      clock.set(later + 1_000);
      wake.poke();
      await waitFor(async () => (release.length === 6 ? true : null));
      await new Promise((r) => setTimeout(r, 50)); // nothing more starts
      expect(Object.fromEntries(open)).toEqual({ 'first.example.com': 4, 'replayed.example.com': 2 });
    } finally {
      hold = false;
      for (const r of release.splice(0)) r();
      const stopping = worker.stop();
      for (let i = 0; i < 100 && release.length + open.size > 0; i++) {
        for (const r of release.splice(0)) r();
        await new Promise((r) => setTimeout(r, 5));
      }
      await stopping;
    }
  });
});

/** Inserts `n` events of `type` and fans them out. */
async function publish(store: Store, tenantId: string, type: string, n: number, now: number, random: Random) {
  await store.eventInsertBatch({
    events: Array.from({ length: n }, () => ({
      id: newId('event', now, random.bytes(10)),
      tenantId,
      type,
      resourceId: null,
      data: '{}',
      idempotencyKey: null,
      requestHash: null,
      createdAt: now,
    })),
    now,
    idempotencyWindowMs: 0,
  });
  await store.fanoutRun({
    now,
    limit: 100,
    ids: idsAt(now, random),
  });
}

const idsAt = (now: number, random: Random) => ({
  delivery: () => newId('delivery', now, random.bytes(10)),
  webhookId: () => newId('message', now, random.bytes(10)),
});

async function waitFor<T>(probe: () => Promise<T | null>): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = await probe();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('timed out');
}
