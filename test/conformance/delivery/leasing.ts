/** Delivery conformance: leasing. */
import { describe, expect } from 'vitest';
import type { LeasedDelivery } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import {
  attemptFor,
  type DeliverySection,
  eventRecord,
  ids,
  LEASE_MS,
  MINUTE,
  SECOND,
  WINDOW,
} from './harness.ts';

export function leasingConformance({ h, test }: DeliverySection): void {
  const { newTenant, newEndpoint, publish, lease, complete, deliveriesOf } = h;
  describe('leasing', () => {
    test('deliveryLease returns what a worker needs, and the delivery as stored', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { url: 'https://example.com/in', headers: { 'x-k': 'v' } });
      const [ev] = await publish(t.id, ['order.created']);
      const leased = await lease({ owner: 'w1', now: NOW + SECOND });
      expect(leased).toHaveLength(1);
      const l = leased[0]!;
      expect(l.endpoint).toEqual({ id: ep.id, tenantId: t.id, url: ep.url, headers: { 'x-k': 'v' } });
      expect(l.event).toEqual({
        id: ev!.id,
        type: 'order.created',
        createdAt: NOW,
        data: ev!.data,
        traceParent: null,
      });
      expect(l.leaseUntil).toBe(NOW + SECOND + LEASE_MS);
      expect(l.delivery).toMatchObject({
        eventId: ev!.id,
        status: 'pending',
        attempts: 0,
        nextAttemptAt: NOW,
      });
      expect(await h.store.deliveryGet({ id: l.delivery.id, tenantId: t.id })).toEqual(l.delivery);
      // Leased: not leased again.
      expect(await lease({ owner: 'w2', now: NOW + 2 * SECOND })).toEqual([]);
    });

    test('an event’s traceparent comes back with its leased deliveries, replays included', async () => {
      const t = await newTenant();
      await newEndpoint(t.id, { url: 'https://example.com/in' });
      const traceParent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const ev = { ...eventRecord(t.id, 'order.created', NOW), traceParent };
      await h.store.eventInsertBatch({ events: [ev], now: NOW, idempotencyWindowMs: WINDOW });
      await h.store.fanoutRun({ now: NOW, limit: 1_000, ids });
      const [l] = await lease({ now: NOW + SECOND });
      expect(l!.event.traceParent).toBe(traceParent);
      await complete(l!, { status: 'delivered' }, NOW + 2 * SECOND);
      const replay = await h.store.deliveryReplay({
        id: l!.delivery.id,
        tenantId: t.id,
        now: NOW + 3 * SECOND,
        ratePerSecond: 10,
        ids,
      });
      expect(replay).toMatchObject({ replayedFrom: l!.delivery.id });
      const [r] = await lease({ now: NOW + 4 * SECOND });
      expect(r!.delivery.replayedFrom).toBe(l!.delivery.id);
      expect(r!.event.traceParent).toBe(traceParent);
    });

    test('deliveryLease respects max_concurrency', async () => {
      const t = await newTenant();
      await newEndpoint(t.id, { maxConcurrency: 2 });
      await publish(t.id, ['a.b', 'a.b', 'a.b', 'a.b', 'a.b']);
      const first = await lease({});
      expect(first).toHaveLength(2);
      expect(await lease({})).toEqual([]);
      await complete(first[0]!, { status: 'delivered' });
      const more = await lease({ now: NOW + 3 * SECOND });
      expect(more).toHaveLength(1);
      expect(more[0]!.delivery.id).not.toBe(first[1]!.delivery.id);
      expect(await lease({ now: NOW + 3 * SECOND })).toEqual([]);
    });

    test('deliveryLease takes at most perEndpoint per endpoint per call, oldest due first', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 10 });
      await publish(t.id, ['a.b', 'a.b', 'a.b', 'a.b', 'a.b']);
      const got: string[] = [];
      for (const n of [2, 2, 1, 0]) {
        const l = await lease({ perEndpoint: 2 });
        expect(l).toHaveLength(n);
        got.push(...l.map((x) => x.delivery.id));
      }
      expect(got.sort()).toEqual((await deliveriesOf(ep.id)).map((d) => d.id).sort());
    });

    test('deliveryLease is fair across endpoints (least recently served first)', async () => {
      const t = await newTenant();
      const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
      await publish(
        t.id,
        Array.from({ length: 10 }, () => 'a.b'),
      );
      const round = await lease({ limit: 3, perEndpoint: 1 });
      expect(round.map((l) => l.endpoint.id).sort()).toEqual(eps.map((e) => e.id).sort());
      // One at a time: the rotation visits every endpoint before any twice.
      const served: string[] = [];
      for (let i = 0; i < 6; i++) {
        const [l] = await lease({ limit: 1, perEndpoint: 1, now: NOW + (10 + i) * SECOND });
        served.push(l!.endpoint.id);
      }
      expect(new Set(served.slice(0, 3)).size).toBe(3);
      expect(served.slice(3)).toEqual(served.slice(0, 3));
      // `limit` caps the total across endpoints.
      expect(await lease({ limit: 4, perEndpoint: 10, now: NOW + 20 * SECOND })).toHaveLength(4);
    });

    test('deliveryLease leases only due deliveries', async () => {
      const t = await newTenant();
      await newEndpoint(t.id);
      await publish(t.id, ['a.b'], NOW + MINUTE);
      expect(await lease({ now: NOW + MINUTE - 1 })).toEqual([]);
      const [l] = await lease({ now: NOW + MINUTE });
      expect(l).toBeDefined();
      // A retry scheduled in the future waits for its time.
      await complete(l!, { status: 'pending', nextAttemptAt: NOW + 10 * MINUTE }, NOW + MINUTE + 1, {
        attempt: { outcome: 'retryable', statusCode: 503, errorClass: 'http_status' },
      });
      expect(await lease({ now: NOW + 10 * MINUTE - 1 })).toEqual([]);
      const [again] = await lease({ now: NOW + 10 * MINUTE });
      expect(again?.delivery.id).toBe(l!.delivery.id);
      expect(again?.delivery.attempts).toBe(1);
    });

    test('a disabled endpoint is leased nothing until enabled again', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      await publish(t.id, ['a.b', 'a.b']);
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'x',
        now: NOW,
      });
      expect(await lease({})).toEqual([]);
      // New work for a disabled endpoint is kept pending, not leased.
      await publish(t.id, ['a.b'], NOW + SECOND);
      expect(await deliveriesOf(ep.id, 'pending')).toHaveLength(3);
      expect(await lease({ now: NOW + 2 * SECOND })).toEqual([]);
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'enabled',
        reason: null,
        now: NOW,
      });
      expect(await lease({ now: NOW + 2 * SECOND })).toHaveLength(3);
    });

    test("ordering 'endpoint' leases only the head, and nothing while one is in flight", async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { ordering: 'endpoint', maxConcurrency: 5 });
      const evs = await publish(t.id, ['a.b', 'a.c', 'a.d']);
      const byEvent = async (n: number) =>
        (await deliveriesOf(ep.id)).find((d) => d.eventId === evs[n]!.id)!.id;
      const [head] = await lease({});
      expect(head?.delivery.id).toBe(await byEvent(0));
      expect(await lease({})).toEqual([]);
      // A failed head blocks the rest until it is due again, even though they are due.
      await complete(head!, { status: 'pending', nextAttemptAt: NOW + MINUTE }, NOW + 2 * SECOND, {
        attempt: { outcome: 'retryable', statusCode: 500, errorClass: 'http_status' },
      });
      expect(await lease({ now: NOW + 30 * SECOND })).toEqual([]);
      const [retry] = await lease({ now: NOW + MINUTE });
      expect(retry?.delivery.id).toBe(await byEvent(0));
      await complete(retry!, { status: 'delivered' }, NOW + MINUTE + 1);
      const [second] = await lease({ now: NOW + MINUTE + 2 });
      expect(second?.delivery.id).toBe(await byEvent(1));
      expect(await lease({ now: NOW + MINUTE + 2 })).toEqual([]);
    });

    test("ordering 'resource' keeps each resource in order, one in flight each, resources in parallel", async () => {
      const t = await newTenant();
      await newEndpoint(t.id, { ordering: 'resource', maxConcurrency: 10 });
      // a1 b1 a2 b2 (none) a3, accepted in that order.
      const evs = [
        eventRecord(t.id, 'r.x', NOW, 'a'),
        eventRecord(t.id, 'r.x', NOW, 'b'),
        eventRecord(t.id, 'r.x', NOW, 'a'),
        eventRecord(t.id, 'r.x', NOW, 'b'),
        eventRecord(t.id, 'r.x', NOW, null),
        eventRecord(t.id, 'r.x', NOW, 'a'),
      ];
      await h.store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
      await h.store.fanoutRun({ now: NOW, limit: 1_000, ids });
      const eventOf = (l: LeasedDelivery) => evs.findIndex((e) => e.id === l.event.id);
      const first = await lease({ limit: 10, perEndpoint: 10 });
      // The heads of a and b, and the unordered one; nothing else while they are in flight.
      expect(first.map(eventOf).sort()).toEqual([0, 1, 4]);
      expect(await lease({ limit: 10, perEndpoint: 10 })).toEqual([]);
      // a's head fails and is rescheduled: a stays blocked behind it, b moves on when its head is delivered.
      const a1 = first.find((l) => eventOf(l) === 0)!;
      const b1 = first.find((l) => eventOf(l) === 1)!;
      await complete(a1, { status: 'pending', nextAttemptAt: NOW + MINUTE }, NOW + SECOND, {
        attempt: { outcome: 'retryable', statusCode: 500, errorClass: 'http_status' },
      });
      await complete(b1, { status: 'delivered' }, NOW + SECOND);
      const next = await lease({ now: NOW + 2 * SECOND, limit: 10, perEndpoint: 10 });
      expect(next.map(eventOf)).toEqual([3]);
      const again = await lease({ now: NOW + MINUTE, limit: 10, perEndpoint: 10 });
      expect(again.map(eventOf)).toEqual([0]);
      await complete(again[0]!, { status: 'dead', reason: 'max_attempts' }, NOW + MINUTE + 1, {
        attempt: { outcome: 'retryable', statusCode: 500, errorClass: 'http_status' },
      });
      // A dead-lettered head unblocks its resource.
      const after = await lease({ now: NOW + MINUTE + 2, limit: 10, perEndpoint: 10 });
      expect(after.map(eventOf)).toEqual([2]);
    });

    test('concurrent workers never lease one delivery twice nor exceed the cap', async () => {
      const t = await newTenant();
      const cap = 3;
      const eps = await Promise.all(
        Array.from({ length: 5 }, () => newEndpoint(t.id, { maxConcurrency: cap })),
      );
      await publish(
        t.id,
        Array.from({ length: 20 }, () => 'a.b'),
      );
      const leasedOnce = new Set<string>();
      const ownerOf = new Map<string, string>();
      const inflight = new Map<string, LeasedDelivery[]>(eps.map((e) => [e.id, []]));
      let now = NOW + SECOND;
      for (let round = 0; round < 200 && leasedOnce.size < 100; round++) {
        now += 10;
        const owners = ['w1', 'w2', 'w3', 'w4'];
        const outs = await Promise.all(
          owners.map((owner) => lease({ owner, now, limit: 4, perEndpoint: 2 })),
        );
        outs.forEach((out, i) => {
          for (const l of out) {
            expect(leasedOnce.has(l.delivery.id)).toBe(false);
            leasedOnce.add(l.delivery.id);
            ownerOf.set(l.delivery.id, owners[i]!);
            inflight.get(l.endpoint.id)!.push(l);
          }
        });
        for (const list of inflight.values()) expect(list.length).toBeLessThanOrEqual(cap);
        // Complete about half of what is in flight (the oldest), each batch by the worker that leased it.
        const done = [...inflight.values()].flatMap((list) => list.splice(0, Math.ceil(list.length / 2)));
        await Promise.all(
          owners.map((owner) =>
            h.store.deliveryComplete({
              completions: done
                .filter((l) => ownerOf.get(l.delivery.id) === owner)
                .map((l) => ({
                  attempt: attemptFor(l, now + 1),
                  leaseOwner: owner,
                  next: { status: 'delivered' },
                })),
              now: now + 2,
            }),
          ),
        );
      }
      expect(leasedOnce.size).toBe(100);
      for (const ep of eps) {
        const ds = await deliveriesOf(ep.id);
        expect(ds.filter((d) => d.status === 'delivered').length + inflight.get(ep.id)!.length).toBe(20);
        expect(ds.every((d) => d.attempts <= 1)).toBe(true);
      }
    });
  });
}
