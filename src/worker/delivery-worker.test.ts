/**
 * The worker's handling of an attempt that throws (a bug, not an endpoint failure), on the real SQLite store: the
 * slot is given back, nothing is recorded, and the delivery stays leased so that lease expiry retries it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { captureLog } from '../../test/support/log-capture.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { createTestStore, type TestStore } from '../../test/support/test-hookrail.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
import { createEndpoint } from '../app/manage-endpoints.ts';
import { createTenant } from '../app/manage-tenants.ts';
import { Signal } from '../app/signal.ts';
import { newId } from '../domain/ids.ts';
import type { HttpSender } from '../ports/http-sender.ts';
import { DeliveryWorker } from './delivery-worker.ts';
import { FanoutWorker } from './fanout-worker.ts';

describe('DeliveryWorker', () => {
  let ts: TestStore | undefined;
  afterEach(() => ts?.destroy());

  it('an attempt that throws frees its slot, records nothing and leaves the lease to expire', async () => {
    ts = await createTestStore('sqlite');
    const store = ts.store;
    const clock = new FakeClock();
    const random = seededRandom(5);
    const keys = createLocalKeyService({ masterKey: Buffer.alloc(32, 3) });
    const base = { store, clock, random, keys };
    const { tenant } = await createTenant(base, { name: 'a' });
    const { endpoint } = await createEndpoint(base, tenant.id, {
      url: 'https://ok.example.com/',
      eventTypes: ['*'],
    });
    const now = clock.now();
    await store.eventInsertBatch({
      events: [
        {
          id: newId('event', now, random.bytes(10)),
          tenantId: tenant.id,
          type: 'order.created',
          resourceId: null,
          data: '{}',
          idempotencyKey: null,
          requestHash: null,
          createdAt: now,
        },
      ],
      now,
      idempotencyWindowMs: 0,
    });
    const fanout = new FanoutWorker({
      store,
      clock,
      random,
      batch: 10,
      deliveryBatch: 10,
      pollMs: 5,
      wake: new Signal(),
      deliveriesCreated: new Signal(),
      logger: null,
    });
    expect(await fanout.runOnce()).toEqual({ events: 1, deliveries: 1 });

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
});
