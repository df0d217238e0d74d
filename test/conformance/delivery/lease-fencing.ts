/**
 * Delivery conformance: a completion is fenced to the lease it was made under (owner and leaseUntil). The owner is
 * per process, so when a lease expires and the same process leases the delivery again, only leaseUntil tells the
 * first attempt's completion from the second's. Written late (the store was unreachable past the lease), the first
 * one must not end the second lease: that would free its in-flight slot while its request is still out, and under
 * `endpoint` ordering let the next delivery be sent beside it.
 */
import { describe, expect } from 'vitest';
import type { LeasedDelivery } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import { type DeliverySection, LEASE_MS, MINUTE, SECOND } from './harness.ts';

export function leaseFencingConformance({ h, test }: DeliverySection): void {
  const { newTenant, newEndpoint, publish, lease, complete, deliveriesOf } = h;

  /** Leases the endpoint's only due delivery as `w1`, expires that lease, and leases it again as `w1`. */
  async function leasedTwice(): Promise<{ first: LeasedDelivery; second: LeasedDelivery }> {
    const [first] = await lease({ owner: 'w1', now: NOW + SECOND });
    expect(first).toBeDefined();
    expect(await h.store.deliveryExpireLeases({ now: NOW + SECOND + LEASE_MS })).toBe(1);
    const [second] = await lease({ owner: 'w1', now: NOW + 2 * SECOND + LEASE_MS });
    expect(second?.delivery.id).toBe(first!.delivery.id);
    expect(second!.leaseUntil).not.toBe(first!.leaseUntil);
    return { first: first!, second: second! };
  }

  const inflight = async (endpointId: string) => (await h.store.endpointRuntime({ endpointId }))?.inflight;

  describe('lease fencing', () => {
    test("a completion of an expired lease does not end the same owner's later lease", async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 1 });
      await publish(t.id, ['a.b']);
      const { first, second } = await leasedTwice();
      const id = first.delivery.id;
      expect(await inflight(ep.id)).toBe(1);

      // The first attempt arrived; its completion is written only now, while the second attempt is in flight.
      const late = await complete(first, { status: 'delivered' }, NOW + 3 * SECOND + LEASE_MS, {
        owner: 'w1',
      });
      expect(await h.store.deliveryGet({ id, tenantId: null })).toMatchObject({
        status: 'pending',
        attempts: 0,
        firstAttemptAt: null,
      });
      expect(await inflight(ep.id)).toBe(1);
      // Recorded in the attempt log all the same: it happened.
      expect(await h.store.attemptList({ deliveryId: id, tenantId: null })).toEqual([late]);
      // The second lease still holds the endpoint's one slot.
      await publish(t.id, ['a.b'], NOW + 4 * SECOND + LEASE_MS);
      expect(await lease({ owner: 'w2', now: NOW + 5 * SECOND + LEASE_MS })).toEqual([]);

      // The second lease's completion is applied normally.
      const at = NOW + 6 * SECOND + LEASE_MS;
      const current = await complete(second, { status: 'pending', nextAttemptAt: at + MINUTE }, at, {
        owner: 'w1',
        attempt: { outcome: 'retryable', statusCode: 503, errorClass: 'http_status' },
      });
      expect(await h.store.deliveryGet({ id, tenantId: null })).toMatchObject({
        status: 'pending',
        attempts: 1,
        nextAttemptAt: at + MINUTE,
        lastAttemptAt: at,
      });
      expect(await inflight(ep.id)).toBe(0);
      expect((await h.store.attemptList({ deliveryId: id, tenantId: null })).map((a) => a.id).sort()).toEqual(
        [late.id, current.id].sort(),
      );
      // The slot is free again: the other delivery is leased.
      const next = await lease({ owner: 'w2', now: at + SECOND });
      expect(next.map((l) => l.delivery.id)).not.toContain(id);
      expect(next).toHaveLength(1);
    });

    test('under endpoint ordering, the next delivery is not leased while the head is in flight again', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { ordering: 'endpoint', maxConcurrency: 5 });
      await publish(t.id, ['a.b', 'a.c']);
      const { first, second } = await leasedTwice();
      const [head, behind] = [...(await deliveriesOf(ep.id))].sort((a, b) =>
        a.eventId === first.event.id ? -1 : b.eventId === first.event.id ? 1 : 0,
      );
      expect(head?.id).toBe(first.delivery.id);

      await complete(first, { status: 'delivered' }, NOW + 3 * SECOND + LEASE_MS, { owner: 'w1' });
      expect((await h.store.deliveryGet({ id: head!.id, tenantId: null }))?.status).toBe('pending');
      expect(await inflight(ep.id)).toBe(1);
      // The head's second attempt is still in flight: nothing behind it may be sent, by any worker.
      expect(await lease({ owner: 'w1', now: NOW + 4 * SECOND + LEASE_MS })).toEqual([]);
      expect(await lease({ owner: 'w2', now: NOW + 4 * SECOND + LEASE_MS })).toEqual([]);

      await complete(second, { status: 'delivered' }, NOW + 5 * SECOND + LEASE_MS, { owner: 'w1' });
      expect((await h.store.deliveryGet({ id: head!.id, tenantId: null }))?.status).toBe('delivered');
      expect(await inflight(ep.id)).toBe(0);
      const [then] = await lease({ owner: 'w1', now: NOW + 6 * SECOND + LEASE_MS });
      expect(then?.delivery.id).toBe(behind!.id);
    });

    test('a completion of an expired lease does not end a later lease of a cancelled delivery', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { eventTypes: ['*'], maxConcurrency: 1 });
      await publish(t.id, ['a.b']);
      const { first, second } = await leasedTwice();
      const id = first.delivery.id;
      // Unsubscribed while the second attempt is in flight.
      await h.store.endpointUpdate({
        id: ep.id,
        tenantId: t.id,
        patch: { eventTypes: ['other.*'] },
        now: NOW + 3 * SECOND + LEASE_MS,
      });
      expect((await h.store.deliveryGet({ id, tenantId: null }))?.status).toBe('cancelled');

      await complete(first, { status: 'delivered' }, NOW + 4 * SECOND + LEASE_MS, { owner: 'w1' });
      expect(await h.store.deliveryGet({ id, tenantId: null })).toMatchObject({
        status: 'cancelled',
        attempts: 0,
      });
      expect(await inflight(ep.id)).toBe(1);

      await complete(second, { status: 'delivered' }, NOW + 5 * SECOND + LEASE_MS, { owner: 'w1' });
      expect(await h.store.deliveryGet({ id, tenantId: null })).toMatchObject({
        status: 'delivered',
        attempts: 1,
      });
      expect(await inflight(ep.id)).toBe(0);
      expect(await h.store.attemptList({ deliveryId: id, tenantId: null })).toHaveLength(2);
    });
  });
}
