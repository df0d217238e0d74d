/**
 * Delivery conformance: the lease holds the replay rate (ADR-10; domain/replay-pacing.ts). Replays held up past
 * their due times start at most a burst of 10 at once, then one per 100 ms, whatever their due times; first
 * deliveries are leased as before.
 */
import { describe, expect } from 'vitest';
import type { DeliveryRecord, LeasedDelivery } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import { type DeliverySection, HOUR, ids, MINUTE, SECOND } from './harness.ts';

const isReplay = (l: LeasedDelivery) => l.delivery.replayedFrom !== null;
const replaysOf = (ls: LeasedDelivery[]) => ls.filter(isReplay).length;

export function replayPacingConformance({ h, test }: DeliverySection): void {
  const { newTenant, newEndpoint, publish, lease, complete } = h;

  /**
   * An endpoint (in-flight cap 100) with `n` replays, due 100 ms apart from NOW + HOUR (the bulk replay of its `n`
   * delivered deliveries). Leased at `at` (NOW + HOUR + MINUTE), they are all overdue, held up past their due times.
   */
  async function heldUpReplays(n: number, tenantAt = NOW) {
    const t = await newTenant(tenantAt);
    const ep = await newEndpoint(t.id, { maxConcurrency: 100, createdAt: tenantAt });
    await publish(
      t.id,
      Array.from({ length: n }, () => 'a.b'),
      tenantAt,
    );
    const first = (await lease({ now: tenantAt + SECOND })).filter((l) => l.endpoint.id === ep.id);
    expect(first).toHaveLength(n);
    for (const l of first) await complete(l, { status: 'delivered' }, tenantAt + 2 * SECOND);
    const bulk = await h.store.deliveryReplayBulk({
      endpointId: ep.id,
      tenantId: t.id,
      statuses: ['delivered'],
      since: null,
      until: NOW + HOUR,
      now: NOW + HOUR,
      ratePerSecond: 10,
      confirmAbove: null,
      max: 10_000,
      ids,
    });
    expect(bulk).toMatchObject({ created: n, lastDueAt: NOW + HOUR + (n - 1) * 100 });
    return { t, ep, first };
  }

  const at = NOW + HOUR + MINUTE;

  describe('replay pacing', () => {
    test('replays held up past their due times start a burst of 10, then one per 100 ms; first deliveries in full', async () => {
      const { t, ep } = await heldUpReplays(30);
      await publish(
        t.id,
        Array.from({ length: 20 }, () => 'a.c'),
        at - SECOND,
      );

      // All 30 replays are due and the cap has room for them all: the burst starts, and every first delivery.
      const burst = await lease({ now: at });
      expect(burst.every((l) => l.endpoint.id === ep.id)).toBe(true);
      expect(replaysOf(burst)).toBe(10);
      expect(burst.length - replaysOf(burst)).toBe(20);
      // No more at the same time, nor before the next interval.
      expect(await lease({ now: at })).toEqual([]);
      expect(await lease({ now: at + 99 })).toEqual([]);
      // One per 100 ms from then on, however long since the last lease (up to the burst).
      expect(replaysOf(await lease({ now: at + 100 }))).toBe(1);
      expect(await lease({ now: at + 150 })).toEqual([]);
      expect(replaysOf(await lease({ now: at + 350 }))).toBe(2);
      // Idle long enough, the burst again, no more: 10 + 1 + 2 + 10 = 23 of 30.
      expect(replaysOf(await lease({ now: at + 10 * SECOND }))).toBe(10);
      expect(replaysOf(await lease({ now: at + 20 * SECOND }))).toBe(7);
      expect(await lease({ now: at + 30 * SECOND })).toEqual([]);

      // First deliveries arriving meanwhile are not held back by the replays' schedule.
      await publish(
        t.id,
        Array.from({ length: 5 }, () => 'a.c'),
        at + 30 * SECOND,
      );
      expect((await lease({ now: at + 30 * SECOND })).map(isReplay)).toEqual([
        false,
        false,
        false,
        false,
        false,
      ]);
    });

    test('the pacing holds in a lease that takes replays alone, and within the replay budget', async () => {
      await heldUpReplays(30);
      const got = await lease({ now: at, firstLimit: 0, replayLimit: 4, replaysOnly: true });
      expect(replaysOf(got)).toBe(4);
      // The budget's leftover is the burst's: 6 more may start now, then one per interval.
      expect(replaysOf(await lease({ now: at, firstLimit: 0, replaysOnly: true }))).toBe(6);
      expect(await lease({ now: at + 50, firstLimit: 0, replaysOnly: true })).toEqual([]);
      expect(replaysOf(await lease({ now: at + 100, firstLimit: 0, replaysOnly: true }))).toBe(1);
    });

    test('a replays-only lease passes over an endpoint whose replays are paced to those that may start', async () => {
      const { ep: paced } = await heldUpReplays(30);
      const b = await newTenant(NOW + 1);
      const other = await newEndpoint(b.id, { createdAt: NOW + 1 });
      await publish(b.id, ['a.b'], NOW + 1);
      const [original] = await lease({ now: NOW + 2 * SECOND });
      expect(original?.endpoint.id).toBe(other.id);
      await complete(original!, { status: 'delivered' }, NOW + 3 * SECOND);
      // The paced endpoint takes its burst and is the least recently served of the two after the other is served.
      expect(replaysOf(await lease({ now: at, firstLimit: 0 }))).toBe(10);
      await publish(b.id, ['a.b'], at);
      expect((await lease({ now: at + 10, limit: 1 })).map((l) => l.endpoint.id)).toEqual([other.id]);
      const copy = (await h.store.deliveryReplay({
        id: original!.delivery.id,
        tenantId: b.id,
        now: at + 20,
        ratePerSecond: 10,
        ids,
      })) as DeliveryRecord;
      expect(copy.nextAttemptAt).toBe(at + 20);

      // One place: the paced endpoint, first in rotation with replays due, may start none; the other's is leased.
      const got = await lease({ now: at + 30, limit: 1, firstLimit: 0, replaysOnly: true });
      expect(got.map((l) => [l.endpoint.id, isReplay(l)])).toEqual([[other.id, true]]);
      // Once its pacing allows, the paced endpoint is first again.
      const next = await lease({ now: at + 100, limit: 1, firstLimit: 0, replaysOnly: true });
      expect(next.map((l) => [l.endpoint.id, isReplay(l)])).toEqual([[paced.id, true]]);
    });

    test('concurrent leases start no more replays of an endpoint than the pacing allows', async () => {
      const { ep } = await heldUpReplays(40);
      const owners = ['w1', 'w2', 'w3', 'w4'];
      const round = async (now: number) =>
        (await Promise.all(owners.map((owner) => lease({ owner, now, firstLimit: 0 }))))
          .flat()
          .filter((l) => l.endpoint.id === ep.id).length;
      expect(await round(at)).toBe(10);
      expect(await round(at)).toBe(0);
      expect(await round(at + 100)).toBe(1);
      expect(await round(at + 300)).toBe(2);
      // Whichever process holds the endpoint's queue row takes the one replay of each interval.
      for (let now = at + 400; now <= at + 2_000; now += 100) expect(await round(now)).toBe(1);
    });
  });
}
