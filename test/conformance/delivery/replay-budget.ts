/** Delivery conformance: replays lease on a budget of their own (ADR-10; deliveryLease firstLimit / replayLimit). */
import { describe, expect } from 'vitest';
import type { DeliveryRecord, LeasedDelivery } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import { type DeliverySection, HOUR, ids, SECOND } from './harness.ts';

const isReplay = (l: LeasedDelivery) => l.delivery.replayedFrom !== null;

export function replayBudgetConformance({ h, test }: DeliverySection): void {
  const { newTenant, newEndpoint, publish, lease, complete } = h;

  /** Replays `l`'s delivery at `now` (10/s: the k-th replay of an endpoint is due k × 100 ms later). */
  const replay = async (l: LeasedDelivery, now: number) =>
    (await h.store.deliveryReplay({
      id: l.delivery.id,
      tenantId: l.endpoint.tenantId,
      now,
      ratePerSecond: 10,
      ids,
    })) as DeliveryRecord;

  describe('replay budget', () => {
    test('of a lease, at most replayLimit are replays and at most firstLimit are not', async () => {
      const t = await newTenant();
      await newEndpoint(t.id, { maxConcurrency: 100 });
      await publish(t.id, ['a.b', 'a.b', 'a.b', 'a.b', 'a.b', 'a.b']);
      const done = await lease({ limit: 3 });
      for (const l of done) await complete(l, { status: 'delivered' });
      for (const l of done) await replay(l, NOW + HOUR);
      const at = NOW + HOUR + SECOND;

      const mixed = await lease({ now: at, limit: 10, firstLimit: 2, replayLimit: 1 });
      expect(mixed.filter(isReplay)).toHaveLength(1);
      expect(mixed.filter((l) => !isReplay(l))).toHaveLength(2);
      // No replay budget: the replays stay queued, the first delivery left is leased.
      const first = await lease({ now: at, limit: 10, replayLimit: 0 });
      expect(first.map(isReplay)).toEqual([false]);
      // No first budget: only the replays.
      const replays = await lease({ now: at, limit: 10, firstLimit: 0 });
      expect(replays.map(isReplay)).toEqual([true, true]);
      expect(await lease({ now: at })).toEqual([]);
    });

    test('replaysOnly visits only endpoints with a due replay', async () => {
      const a = await newTenant();
      const b = await newTenant(NOW + 1);
      const replaying = await newEndpoint(a.id);
      await publish(a.id, ['a.b']);
      const [l] = await lease({});
      await complete(l!, { status: 'delivered' });
      // Five endpoints with first deliveries due, all ahead of `replaying` in the rotation (served later, at
      // NOW + SECOND; they have never been served).
      for (let i = 0; i < 5; i++) await newEndpoint(b.id, { createdAt: NOW + 2 + i });
      await publish(b.id, ['a.b'], NOW + 2 * SECOND);
      await replay(l!, NOW + HOUR);

      const got = await lease({
        now: NOW + HOUR,
        limit: 1,
        firstLimit: 0,
        replayLimit: 1,
        replaysOnly: true,
      });
      expect(got.map((x) => [x.endpoint.id, isReplay(x)])).toEqual([[replaying.id, true]]);
      // The first deliveries were left for the first budget.
      expect(await lease({ now: NOW + HOUR, firstLimit: 0, replaysOnly: true })).toEqual([]);
      expect(await lease({ now: NOW + HOUR, replayLimit: 0 })).toHaveLength(5);
    });

    test("under 'endpoint' ordering a replay at the head holds the queue when replays may not be leased", async () => {
      const t = await newTenant();
      await newEndpoint(t.id, { ordering: 'endpoint' });
      await publish(t.id, ['a.b', 'a.c']);
      const [head] = await lease({});
      await complete(head!, { status: 'delivered' });
      // The replay copies the first event's sequence number: it is the head again, before the second event.
      await replay(head!, NOW + HOUR);
      expect(await lease({ now: NOW + HOUR, replayLimit: 0 })).toEqual([]);
      const [again] = await lease({ now: NOW + HOUR, firstLimit: 0 });
      expect(again && isReplay(again)).toBe(true);
      await complete(again!, { status: 'delivered' }, NOW + HOUR + SECOND);
      const [next] = await lease({ now: NOW + HOUR + 2 * SECOND, replayLimit: 0 });
      expect(next?.event.type).toBe('a.c');
    });
  });
}
