/** Delivery conformance: reads, cancellation. */
import { describe, expect } from 'vitest';
import { NOW } from '../store-conformance.ts';
import { type DeliverySection, HOUR, id, MINUTE, SECOND } from './harness.ts';

export function readsCancellationConformance({ h, test }: DeliverySection): void {
  const { newTenant, newEndpoint, publish, lease, complete, deliveriesOf } = h;
  describe('reads', () => {
    test('deliveryGet and deliveryList are scoped to the tenant, page newest first, filter by status', async () => {
      const t1 = await newTenant();
      const t2 = await newTenant(NOW + 1);
      const ep = await newEndpoint(t1.id, { maxConcurrency: 1 });
      await publish(t1.id, ['a.b', 'a.b', 'a.b', 'a.b', 'a.b']);
      const all = await deliveriesOf(ep.id);
      expect(all).toHaveLength(5);
      const newest = all.map((d) => d.id);
      expect([...newest].sort().reverse()).toEqual(newest);
      expect(await h.store.deliveryGet({ id: newest[0]!, tenantId: t1.id })).toEqual(all[0]);
      expect(await h.store.deliveryGet({ id: newest[0]!, tenantId: t2.id })).toBeNull();
      expect(await h.store.deliveryGet({ id: id('delivery'), tenantId: null })).toBeNull();
      const page = (cursor: string | null, tenantId: string | null = t1.id) =>
        h.store.deliveryList({ endpointId: ep.id, tenantId, status: null, limit: 2, cursor });
      const p1 = await page(null);
      expect(p1.data.map((d) => d.id)).toEqual(newest.slice(0, 2));
      const p2 = await page(p1.nextCursor);
      expect(p2.data.map((d) => d.id)).toEqual(newest.slice(2, 4));
      const p3 = await page(p2.nextCursor);
      expect(p3.data.map((d) => d.id)).toEqual(newest.slice(4));
      expect(p3.nextCursor).toBeNull();
      expect((await page(null, t2.id)).data).toEqual([]);
      const [l] = await lease({});
      await complete(l!, { status: 'delivered' });
      const delivered = await h.store.deliveryList({
        endpointId: ep.id,
        tenantId: t1.id,
        status: 'delivered',
        limit: 10,
        cursor: null,
      });
      expect(delivered.data.map((d) => d.id)).toEqual([l!.delivery.id]);
      expect(await deliveriesOf(ep.id, 'pending')).toHaveLength(4);
    });
  });

  describe('cancellation', () => {
    test('endpointUpdate narrowing event types cancels pending non-matching deliveries', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { eventTypes: ['*'], maxConcurrency: 10 });
      await publish(t.id, ['order.created', 'invoice.sent', 'order.paid', 'invoice.sent']);
      // Not narrowing event types cancels nothing.
      await h.store.endpointUpdate({
        id: ep.id,
        tenantId: t.id,
        patch: { url: 'https://x.test/' },
        now: NOW,
      });
      expect(await deliveriesOf(ep.id, 'pending')).toHaveLength(4);
      const at = NOW + 10 * SECOND;
      const updated = await h.store.endpointUpdate({
        id: ep.id,
        tenantId: t.id,
        patch: { eventTypes: ['order.*'] },
        now: at,
      });
      expect(updated?.eventTypes).toEqual(['order.*']);
      const cancelled = await deliveriesOf(ep.id, 'cancelled');
      expect(cancelled.map((d) => d.eventType)).toEqual(['invoice.sent', 'invoice.sent']);
      for (const d of cancelled) {
        expect(d).toMatchObject({ statusReason: 'unsubscribed', nextAttemptAt: null, updatedAt: at });
      }
      const leased = await lease({ now: at + 1 });
      expect(leased.map((l) => l.event.type).sort()).toEqual(['order.created', 'order.paid']);
      // Later events follow the new subscription.
      await publish(t.id, ['invoice.sent', 'order.shipped'], at + 2);
      expect((await deliveriesOf(ep.id)).filter((d) => d.eventType === 'order.shipped')).toHaveLength(1);
      expect(await deliveriesOf(ep.id)).toHaveLength(5);
    });

    test('an attempt in flight when its delivery is cancelled is counted, and frees its slot as it completes', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { eventTypes: ['*'], maxConcurrency: 1 });
      await publish(t.id, ['a.one', 'b.one', 'a.two', 'b.two']);
      const [first] = await lease({});
      expect(first?.event.type).toBe('a.one');
      const at = NOW + 10 * SECOND;
      await h.store.endpointUpdate({ id: ep.id, tenantId: t.id, patch: { eventTypes: ['b.*'] }, now: at });
      expect(await h.store.deliveryGet({ id: first!.delivery.id, tenantId: t.id })).toMatchObject({
        status: 'cancelled',
        statusReason: 'unsubscribed',
      });
      // The one slot is still the attempt's, until it completes (long before its lease would expire).
      expect(await lease({ now: at + 1 })).toEqual([]);
      await complete(first!, { status: 'delivered' }, at + 2);
      expect(await h.store.deliveryGet({ id: first!.delivery.id, tenantId: t.id })).toMatchObject({
        status: 'delivered',
        statusReason: null,
        attempts: 1,
        firstAttemptAt: at + 2,
        lastAttemptAt: at + 2,
        nextAttemptAt: null,
      });
      const [second] = await lease({ now: at + 3 });
      expect(second?.event.type).toBe('b.one');
      // A failed attempt leaves the cancellation standing: no retry, the attempt counted, the slot freed.
      await h.store.endpointUpdate({
        id: ep.id,
        tenantId: t.id,
        patch: { eventTypes: ['c.*'] },
        now: at + 4,
      });
      await complete(second!, { status: 'pending', nextAttemptAt: at + MINUTE }, at + 5, {
        attempt: { outcome: 'retryable', statusCode: 500 },
      });
      expect(await h.store.deliveryGet({ id: second!.delivery.id, tenantId: t.id })).toMatchObject({
        status: 'cancelled',
        statusReason: 'unsubscribed',
        attempts: 1,
        nextAttemptAt: null,
      });
      expect(await h.store.attemptList({ deliveryId: second!.delivery.id, tenantId: t.id })).toHaveLength(1);
      await publish(t.id, ['c.one'], at + 6);
      expect((await lease({ now: at + 7 })).map((l) => l.event.type)).toEqual(['c.one']);
    });

    test('endpointDelete cancels pending deliveries and leases nothing more', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 1 });
      const keep = await newEndpoint(t.id);
      await publish(t.id, ['a.b', 'a.b', 'a.b']);
      const at = NOW + 10 * SECOND;
      expect(await h.store.endpointDelete({ id: ep.id, tenantId: t.id, now: at })).toBe(true);
      const ds = await deliveriesOf(ep.id);
      expect(ds).toHaveLength(3);
      for (const d of ds) {
        expect(d).toMatchObject({
          status: 'cancelled',
          statusReason: 'endpoint_deleted',
          nextAttemptAt: null,
          updatedAt: at,
        });
      }
      // Kept as records, readable by id.
      expect(await h.store.deliveryGet({ id: ds[0]!.id, tenantId: t.id })).toEqual(ds[0]);
      const leased = await lease({ now: at + 1 });
      expect(leased.map((l) => l.endpoint.id)).toEqual([keep.id, keep.id, keep.id]);
      await publish(t.id, ['a.b'], at + 2);
      expect(await deliveriesOf(ep.id)).toHaveLength(3);
    });

    test('tenantDelete cancels pending deliveries and leases nothing afterwards', async () => {
      const t = await newTenant();
      const other = await newTenant(NOW + 1);
      const eps = [
        await newEndpoint(t.id),
        await newEndpoint(t.id, { status: 'disabled', disabledReason: 'x' }),
      ];
      const theirs = await newEndpoint(other.id);
      await publish(t.id, ['a.b', 'a.b']);
      await publish(other.id, ['a.b']);
      const [inFlight] = await lease({ limit: 1, perEndpoint: 1 });
      const at = NOW + 10 * SECOND;
      expect(await h.store.tenantDelete({ id: t.id, now: at })).toBe(true);
      for (const ep of eps) {
        expect(await h.store.endpointGet({ id: ep.id, tenantId: null })).toBeNull();
        for (const d of await deliveriesOf(ep.id)) {
          expect(d).toMatchObject({
            status: 'cancelled',
            statusReason: 'tenant_deleted',
            nextAttemptAt: null,
          });
        }
      }
      expect(await deliveriesOf(eps[0]!.id)).toHaveLength(2);
      expect(await deliveriesOf(eps[1]!.id)).toHaveLength(2);
      // Only the other tenant's work is leased, now and after the in-flight lease would have expired.
      const after = await lease({ now: at + 1 });
      const expected = inFlight?.endpoint.id === theirs.id ? [] : [theirs.id];
      expect(after.map((l) => l.endpoint.id)).toEqual(expected);
      await h.store.deliveryExpireLeases({ now: at + HOUR });
      expect((await lease({ now: at + HOUR + 1 })).filter((l) => l.endpoint.tenantId === t.id)).toEqual([]);
      // Events accepted for the deleted tenant fan out to nothing.
      await publish(t.id, ['a.b'], at + 2);
      expect(await deliveriesOf(eps[0]!.id)).toHaveLength(2);
    });
  });
}
