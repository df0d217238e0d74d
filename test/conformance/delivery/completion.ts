/** Delivery conformance: completion. */
import { describe, expect } from 'vitest';
import { NOW } from '../store-conformance.ts';
import {
  attemptFor,
  type DeliverySection,
  eventRecord,
  HOUR,
  id,
  ids,
  LEASE_MS,
  MINUTE,
  SECOND,
  WINDOW,
} from './harness.ts';

export function completionConformance({ h, test }: DeliverySection): void {
  const { newTenant, newEndpoint, publish, lease, complete, deliveriesOf } = h;
  describe('completion', () => {
    test('deliveryComplete appends attempts and updates the projection', async () => {
      const t1 = await newTenant();
      const t2 = await newTenant(NOW + 1);
      await newEndpoint(t1.id);
      await publish(t1.id, ['a.b', 'a.c']);
      const [l1, l2] = await lease({ now: NOW + SECOND });
      const d1 = l1!.delivery.id;

      const a1 = await complete(l1!, { status: 'pending', nextAttemptAt: NOW + MINUTE }, NOW + 2 * SECOND, {
        attempt: {
          outcome: 'retryable',
          statusCode: 503,
          errorClass: 'http_status',
          errorMessage: 'Service Unavailable',
          request: {
            hops: [
              {
                url: 'https://example.com/hooks',
                headers: { 'webhook-id': 'msg_x', 'webhook-signature': 'v1,abc= v1,def=' },
                status: 307,
              },
              {
                url: 'https://example.com/hooks2',
                headers: { 'webhook-id': 'msg_x', 'x-é': '"q"' },
                status: 503,
              },
            ],
          },
          responseHeaders: { 'retry-after': '30', 'content-type': 'application/json' },
          responseBody: Buffer.from('{"error":"busy"}').toString('base64'),
          consumerMs: null,
        },
      });
      expect(await h.store.deliveryGet({ id: d1, tenantId: t1.id })).toMatchObject({
        status: 'pending',
        attempts: 1,
        nextAttemptAt: NOW + MINUTE,
        firstAttemptAt: NOW + 2 * SECOND,
        lastAttemptAt: NOW + 2 * SECOND,
        statusReason: null,
      });
      expect(await h.store.attemptList({ deliveryId: d1, tenantId: t1.id })).toEqual([a1]);
      expect(await h.store.attemptGet({ id: a1.id, tenantId: t1.id })).toEqual(a1);
      expect(await h.store.attemptGet({ id: a1.id, tenantId: null })).toEqual(a1);
      expect(await h.store.attemptGet({ id: a1.id, tenantId: t2.id })).toBeNull();
      expect(await h.store.attemptList({ deliveryId: d1, tenantId: t2.id })).toEqual([]);
      expect(await h.store.attemptGet({ id: id('attempt'), tenantId: null })).toBeNull();

      // Retried and delivered: a second attempt, first_attempt_at kept.
      const [again] = await lease({ now: NOW + MINUTE });
      expect(again?.delivery.id).toBe(d1);
      const a2 = await complete(again!, { status: 'delivered' }, NOW + MINUTE + 5);
      expect(await h.store.deliveryGet({ id: d1, tenantId: null })).toMatchObject({
        status: 'delivered',
        attempts: 2,
        nextAttemptAt: null,
        firstAttemptAt: NOW + 2 * SECOND,
        lastAttemptAt: NOW + MINUTE + 5,
        statusReason: null,
        updatedAt: NOW + MINUTE + 205,
      });
      expect(await h.store.attemptList({ deliveryId: d1, tenantId: null })).toEqual([a1, a2]);

      // Dead-lettered with a reason.
      await complete(l2!, { status: 'dead', reason: 'permanent_failure' }, NOW + 3 * SECOND, {
        attempt: {
          outcome: 'permanent',
          statusCode: 410,
          errorClass: 'http_status',
          responseHeaders: null,
        },
      });
      expect(await h.store.deliveryGet({ id: l2!.delivery.id, tenantId: null })).toMatchObject({
        status: 'dead',
        statusReason: 'permanent_failure',
        attempts: 1,
        nextAttemptAt: null,
      });
      expect(await lease({ now: NOW + HOUR })).toEqual([]);
    });

    test('JSON texts come back byte for byte, escaped control characters and NULLs included, in one batch', async () => {
      const t = await newTenant();
      await newEndpoint(t.id, { maxConcurrency: 10 });
      const data = JSON.stringify({ sep: '\u001e', nul: '\u0000', q: '"\\', e: 'é', empty: '' });
      const ev = { ...eventRecord(t.id, 'a.b', NOW), data };
      await h.store.eventInsertBatch({
        events: [ev, eventRecord(t.id, 'a.b', NOW)],
        now: NOW,
        idempotencyWindowMs: WINDOW,
      });
      await h.store.fanoutRun({ now: NOW, limit: 1_000, ids });
      const leased = await lease({});
      expect(leased).toHaveLength(2);
      expect(leased.find((l) => l.event.id === ev.id)?.event.data).toBe(data);
      const at = NOW + 2 * SECOND;
      const attempts = [
        attemptFor(leased[0]!, at, {
          request: {
            hops: [
              { url: 'https://example.com/a', headers: { 'x-sep': 'a\u001eb', 'x-q': '"\\' }, status: 200 },
            ],
          },
          responseHeaders: null,
        }),
        attemptFor(leased[1]!, at, { responseHeaders: { 'x-sep': '\u001e', 'x-empty': '' } }),
      ];
      await h.store.deliveryComplete({
        completions: attempts.map((attempt) => ({
          attempt,
          leaseOwner: 'w1',
          next: { status: 'delivered' as const },
        })),
        now: at + 200,
      });
      for (const a of attempts) expect(await h.store.attemptGet({ id: a.id, tenantId: null })).toEqual(a);
    });

    test('a batch written again (its first COMMIT went through unseen) is recorded and applied once', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 3 });
      await publish(t.id, ['a.b', 'a.b', 'a.b']);
      const [l1, l2, l3] = await lease({ now: NOW + SECOND });
      const at = NOW + 2 * SECOND;
      const batch = {
        completions: [
          { attempt: attemptFor(l1!, at), leaseOwner: 'w1', next: { status: 'delivered' as const } },
          {
            attempt: attemptFor(l2!, at, {
              outcome: 'retryable',
              statusCode: 503,
              errorClass: 'http_status',
            }),
            leaseOwner: 'w1',
            next: { status: 'pending' as const, nextAttemptAt: at + MINUTE },
          },
        ],
        now: at + 200,
      };
      await h.store.deliveryComplete(batch);
      const after = await deliveriesOf(ep.id);
      const runtime = await h.store.endpointRuntime({ endpointId: ep.id });
      expect(runtime?.inflight).toBe(1); // l3's
      // The same batch again, as a writer retries it when the answer to its COMMIT was lost.
      await h.store.deliveryComplete({ ...batch, now: at + 5_000 });
      expect(await deliveriesOf(ep.id)).toEqual(after);
      expect(await h.store.endpointRuntime({ endpointId: ep.id })).toEqual(runtime);
      for (const l of [l1!, l2!]) {
        expect(await h.store.attemptList({ deliveryId: l.delivery.id, tenantId: t.id })).toHaveLength(1);
      }
      // l3 still holds its slot: two more can be leased, not three.
      await publish(t.id, ['a.b', 'a.b', 'a.b'], at + 6_000);
      expect(await lease({ now: at + MINUTE + 1 })).toHaveLength(2);
      expect(l3).toBeDefined();
    });

    test('a completion with the wrong leaseOwner does not change the delivery', async () => {
      const t = await newTenant();
      await newEndpoint(t.id, { maxConcurrency: 1 });
      await publish(t.id, ['a.b', 'a.b']);
      const [l] = await lease({ owner: 'w1' });
      const before = await h.store.deliveryGet({ id: l!.delivery.id, tenantId: null });
      await complete(l!, { status: 'pending', nextAttemptAt: NOW + HOUR }, NOW + 2 * SECOND, {
        owner: 'w2',
      });
      await complete(l!, { status: 'delivered' }, NOW + 3 * SECOND, { owner: 'w2' });
      expect(await h.store.deliveryGet({ id: l!.delivery.id, tenantId: null })).toEqual(before);
      // The in-flight slot is still taken by w1.
      expect(await lease({ owner: 'w3', now: NOW + 4 * SECOND })).toEqual([]);
      await complete(l!, { status: 'delivered' }, NOW + 5 * SECOND, { owner: 'w1' });
      expect(await lease({ owner: 'w3', now: NOW + 6 * SECOND })).toHaveLength(1);
    });

    test('deliveryExpireLeases returns expired leases to the queue', async () => {
      const t = await newTenant();
      await newEndpoint(t.id, { maxConcurrency: 1 });
      await publish(t.id, ['a.b']);
      const [l] = await lease({ owner: 'w1', now: NOW, leaseMs: LEASE_MS });
      expect(await h.store.deliveryExpireLeases({ now: NOW + LEASE_MS - 1 })).toBe(0);
      expect(await lease({ owner: 'w2', now: NOW + LEASE_MS - 1 })).toEqual([]);
      expect(await h.store.deliveryExpireLeases({ now: NOW + LEASE_MS })).toBe(1);
      expect(await h.store.deliveryExpireLeases({ now: NOW + LEASE_MS })).toBe(0);
      const [again] = await lease({ owner: 'w2', now: NOW + LEASE_MS + 1 });
      expect(again?.delivery.id).toBe(l!.delivery.id);
      // The late worker's failure changes nothing: w2 holds the lease now.
      await complete(l!, { status: 'pending', nextAttemptAt: NOW + HOUR }, NOW + LEASE_MS + 2, {
        owner: 'w1',
      });
      expect(await h.store.deliveryGet({ id: l!.delivery.id, tenantId: null })).toMatchObject({
        status: 'pending',
        attempts: 0,
      });
      await complete(again!, { status: 'delivered' }, NOW + LEASE_MS + 3, { owner: 'w2' });
      expect((await h.store.deliveryGet({ id: l!.delivery.id, tenantId: null }))?.status).toBe('delivered');
    });

    test('deliveryExpireLeases returns every expired lease, however many (a store may work in batches)', async () => {
      const t = await newTenant();
      const eps = [];
      for (let i = 0; i < 11; i++)
        eps.push(await newEndpoint(t.id, { maxConcurrency: 100, eventTypes: [`many.${i}`] }));
      const types = eps.flatMap((_, i) => Array.from({ length: 100 }, () => `many.${i}`));
      await publish(t.id, types.slice(0, 550));
      await publish(t.id, types.slice(550));
      let leased = 0;
      for (let round = 0; round < 20 && leased < 1_100; round++)
        leased += (await lease({ limit: 500 })).length;
      expect(leased).toBe(1_100);
      expect(await h.store.deliveryExpireLeases({ now: NOW + SECOND + LEASE_MS })).toBe(1_100);
      expect(await h.store.deliveryExpireLeases({ now: NOW + SECOND + LEASE_MS })).toBe(0);
      let again = 0;
      for (let round = 0; round < 20 && again < 1_100; round++)
        again += (await lease({ owner: 'w2', now: NOW + 2 * SECOND + LEASE_MS, limit: 500 })).length;
      expect(again).toBe(1_100);
    });

    test('a late success after the lease expired still marks the delivery delivered', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 1 });
      await publish(t.id, ['a.b']);
      const [l] = await lease({ owner: 'w1', now: NOW });
      expect(await h.store.deliveryExpireLeases({ now: NOW + LEASE_MS })).toBe(1);
      await complete(l!, { status: 'delivered' }, NOW + LEASE_MS + 1, { owner: 'w1' });
      expect((await deliveriesOf(ep.id))[0]?.status).toBe('delivered');
      expect(await lease({ now: NOW + HOUR })).toEqual([]);
    });
  });
}
