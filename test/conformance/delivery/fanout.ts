/** Delivery conformance: fan-out. */
import { describe, expect } from 'vitest';
import type { DeliveryRecord, EndpointRecord } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import { type DeliverySection, eventRecord, ids, SECOND, WINDOW } from './harness.ts';

export function fanoutConformance({ h, test }: DeliverySection): void {
  const { newTenant, newEndpoint, publish, deliveriesOf, lease } = h;
  describe('fan-out', () => {
    test("a pending test event survives a change of the endpoint's event types (it was addressed to it)", async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { eventTypes: ['order.*'] });
      const at = NOW + SECOND;
      const event = eventRecord(t.id, 'hookrail.test', at);
      const d = (await h.store.endpointTestEvent({
        endpointId: ep.id,
        tenantId: t.id,
        event,
        now: at,
        ids,
      })) as DeliveryRecord;
      await publish(t.id, ['order.created', 'invoice.sent'], at + 1);
      for (const eventTypes of [['order.*'], ['invoice.*']]) {
        await h.store.endpointUpdate({ id: ep.id, tenantId: t.id, patch: { eventTypes }, now: at + 2 });
        expect(await h.store.deliveryGet({ id: d.id, tenantId: t.id })).toMatchObject({ status: 'pending' });
      }
      // The unsubscribe still binds for the fanned-out ones.
      expect((await deliveriesOf(ep.id, 'cancelled')).map((x) => x.eventType)).toEqual(['order.created']);
    });

    test("a test event's delivery waits behind an ordered endpoint's events still awaiting fan-out", async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { ordering: 'endpoint' });
      const at = NOW + SECOND;
      // An event accepted, not fanned out yet.
      const earlier = eventRecord(t.id, 'order.created', at);
      await h.store.eventInsertBatch({ events: [earlier], now: at, idempotencyWindowMs: WINDOW });
      const test = (await h.store.endpointTestEvent({
        endpointId: ep.id,
        tenantId: t.id,
        event: eventRecord(t.id, 'hookrail.test', at + 1),
        now: at + 1,
        ids,
      })) as DeliveryRecord;
      expect(await lease({ now: at + 2 })).toEqual([]);
      // Fanned out: the earlier event's delivery is the head, then the test event's.
      await h.store.fanoutRun({ now: at + 3, limit: 1_000, ids });
      const first = await lease({ now: at + 4 });
      expect(first.map((l) => l.delivery.eventId)).toEqual([earlier.id]);
      await h.complete(first[0]!, { status: 'delivered' }, at + 5);
      expect((await lease({ now: at + 6 })).map((l) => l.delivery.id)).toEqual([test.id]);
    });

    test('endpointTestEvent: one delivery, to that endpoint alone, which fan-out never adds to', async () => {
      const t = await newTenant();
      const other = await newTenant(NOW + 1);
      const ep = await newEndpoint(t.id, { eventTypes: ['order.*'] });
      const all = await newEndpoint(t.id, { eventTypes: ['*'] });
      const at = NOW + SECOND;
      const event = eventRecord(t.id, 'hookrail.test', at);
      const d = await h.store.endpointTestEvent({ endpointId: ep.id, tenantId: t.id, event, now: at, ids });
      expect(d).toMatchObject({
        tenantId: t.id,
        endpointId: ep.id,
        eventId: event.id,
        eventType: 'hookrail.test',
        status: 'pending',
        attempts: 0,
        nextAttemptAt: at,
        replayedFrom: null,
      } satisfies Partial<DeliveryRecord>);
      // Recorded like any event.
      expect(await h.store.eventGet({ id: event.id, tenantId: t.id })).toMatchObject({
        id: event.id,
        type: 'hookrail.test',
        data: event.data,
      });
      // Fan-out takes the events after it as usual, and never it: the endpoint subscribed to everything gets none.
      await publish(t.id, ['order.created'], at + 1);
      expect((await deliveriesOf(ep.id)).map((x) => x.eventType).sort()).toEqual([
        'hookrail.test',
        'order.created',
      ]);
      expect((await deliveriesOf(all.id)).map((x) => x.eventType)).toEqual(['order.created']);
      // Leased with its event's data, like any delivery.
      const leased = await lease({ now: at + 2 });
      expect(leased.find((l) => l.delivery.id === (d as DeliveryRecord).id)?.event).toMatchObject({
        id: event.id,
        type: 'hookrail.test',
        data: event.data,
      });
      // Another tenant's endpoint, a disabled one: nothing written.
      const stray = eventRecord(other.id, 'hookrail.test', at + 3);
      expect(
        await h.store.endpointTestEvent({
          endpointId: ep.id,
          tenantId: other.id,
          event: stray,
          now: at + 3,
          ids,
        }),
      ).toBe('not_found');
      await h.store.endpointSetStatus({
        id: all.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'x',
        now: at + 3,
      });
      const held = eventRecord(t.id, 'hookrail.test', at + 4);
      expect(
        await h.store.endpointTestEvent({
          endpointId: all.id,
          tenantId: t.id,
          event: held,
          now: at + 4,
          ids,
        }),
      ).toBe('disabled');
      expect(await h.store.eventGet({ id: stray.id, tenantId: null })).toBeNull();
      expect(await h.store.eventGet({ id: held.id, tenantId: null })).toBeNull();
      expect(await deliveriesOf(all.id)).toHaveLength(1);
    });

    test('each pass matches against the endpoints as they are when it runs (created, changed, deleted)', async () => {
      const t = await newTenant();
      const a = await newEndpoint(t.id, { eventTypes: ['order.*'] });
      const typesOf = async (ep: EndpointRecord) =>
        (await deliveriesOf(ep.id)).map((d) => d.eventType).sort();
      await publish(t.id, ['order.created', 'invoice.sent'], NOW);
      expect(await typesOf(a)).toEqual(['order.created']);

      await h.store.endpointUpdate({
        id: a.id,
        tenantId: t.id,
        patch: { eventTypes: ['invoice.*'] },
        now: NOW + 1,
      });
      const b = await newEndpoint(t.id, { eventTypes: ['order.paid'] });
      await publish(t.id, ['order.paid', 'invoice.sent'], NOW + 2);
      expect(await typesOf(a)).toEqual(['invoice.sent', 'order.created']);
      expect(await typesOf(b)).toEqual(['order.paid']);

      await h.store.endpointDelete({ id: a.id, tenantId: t.id, now: NOW + 3 });
      await publish(t.id, ['invoice.sent', 'order.paid'], NOW + 4);
      expect(await typesOf(a)).toEqual(['invoice.sent', 'order.created']);
      expect(await typesOf(b)).toEqual(['order.paid', 'order.paid']);

      await h.store.tenantDelete({ id: t.id, now: NOW + 5 });
      await publish(t.id, ['order.paid'], NOW + 6);
      expect(await typesOf(b)).toEqual(['order.paid', 'order.paid']);
    });

    test('fanoutRun creates one delivery per matching, non-deleted endpoint, exactly once', async () => {
      const t1 = await newTenant();
      const t2 = await newTenant(NOW + 1);
      const gone = await newTenant(NOW + 2);
      const all = await newEndpoint(t1.id, { eventTypes: ['*'] });
      const orders = await newEndpoint(t1.id, {
        eventTypes: ['order.*'],
        status: 'disabled',
        disabledReason: 'x',
      });
      const invoices = await newEndpoint(t1.id, { eventTypes: ['invoice.sent'] });
      const deleted = await newEndpoint(t1.id, { eventTypes: ['*'] });
      await h.store.endpointDelete({ id: deleted.id, tenantId: t1.id, now: NOW });
      const other = await newEndpoint(t2.id, { eventTypes: ['user.*'] });
      const ofGone = await newEndpoint(gone.id, { eventTypes: ['*'] });
      await h.store.tenantDelete({ id: gone.id, now: NOW });

      const evs = [
        { ...eventRecord(t1.id, 'order.created'), resourceId: 'ord_1' },
        eventRecord(t1.id, 'invoice.sent'),
        eventRecord(t1.id, 'user.created'),
        eventRecord(t2.id, 'order.created'),
        eventRecord(gone.id, 'order.created'),
      ];
      await h.store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
      const at = NOW + 5 * SECOND;
      expect(await h.store.fanoutRun({ now: at, limit: 100, ids })).toEqual({ events: 5, deliveries: 5 });
      expect(await h.store.fanoutPendingCount()).toBe(0);
      expect(await h.store.fanoutRun({ now: at + 1, limit: 100, ids })).toEqual({ events: 0, deliveries: 0 });

      const typesOf = async (ep: EndpointRecord) =>
        (await deliveriesOf(ep.id)).map((d) => d.eventType).sort();
      expect(await typesOf(all)).toEqual(['invoice.sent', 'order.created', 'user.created']);
      expect(await typesOf(orders)).toEqual(['order.created']);
      expect(await typesOf(invoices)).toEqual(['invoice.sent']);
      expect(await typesOf(deleted)).toEqual([]);
      expect(await typesOf(other)).toEqual([]);
      expect(await typesOf(ofGone)).toEqual([]);

      const [d] = await deliveriesOf(orders.id);
      expect(d).toEqual({
        id: expect.stringMatching(/^dlv_/),
        tenantId: t1.id,
        endpointId: orders.id,
        eventId: evs[0]!.id,
        eventType: 'order.created',
        resourceId: 'ord_1',
        webhookId: expect.stringMatching(/^msg_/),
        status: 'pending',
        attempts: 0,
        nextAttemptAt: at,
        firstAttemptAt: null,
        lastAttemptAt: null,
        statusReason: null,
        replayedFrom: null,
        createdAt: at,
        updatedAt: at,
      } satisfies DeliveryRecord);
      // Every delivery has its own webhook id.
      const allDeliveries = [...(await deliveriesOf(all.id)), ...(await deliveriesOf(invoices.id)), d!];
      expect(new Set(allDeliveries.map((x) => x.webhookId)).size).toBe(5);
    });

    test('fanoutRun takes at most `limit` events, oldest first', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      const evs = Array.from({ length: 5 }, () => eventRecord(t.id, 'a.b'));
      await h.store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
      expect(await h.store.fanoutRun({ now: NOW, limit: 2, ids })).toEqual({ events: 2, deliveries: 2 });
      expect((await deliveriesOf(ep.id)).map((d) => d.eventId).sort()).toEqual(
        evs
          .slice(0, 2)
          .map((e) => e.id)
          .sort(),
      );
      expect(await h.store.fanoutPendingCount()).toBe(3);
      expect(await h.store.fanoutRun({ now: NOW, limit: 10, ids })).toEqual({ events: 3, deliveries: 3 });
      expect(await h.store.fanoutPendingCount()).toBe(0);
    });

    test('fanoutRun ends a pass after the event that reaches `deliveryLimit`; the rest wait', async () => {
      const t = await newTenant();
      const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
      const evs = Array.from({ length: 5 }, () => eventRecord(t.id, 'a.b'));
      await h.store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
      const run = (deliveryLimit: number) => h.store.fanoutRun({ now: NOW, limit: 10, deliveryLimit, ids });
      // Three deliveries per event: the limit of 4 is reached by the second event, which is taken whole.
      expect(await run(4)).toEqual({ events: 2, deliveries: 6 });
      expect(await h.store.fanoutPendingCount()).toBe(3);
      // An event is taken whole even when it alone exceeds the limit, so a pass always makes progress.
      expect(await run(1)).toEqual({ events: 1, deliveries: 3 });
      expect(await run(0)).toEqual({ events: 1, deliveries: 3 });
      expect(await run(100)).toEqual({ events: 1, deliveries: 3 });
      expect(await h.store.fanoutPendingCount()).toBe(0);
      for (const ep of eps) {
        expect((await deliveriesOf(ep.id)).map((d) => d.eventId).sort()).toEqual(evs.map((e) => e.id).sort());
      }
    });

    test('concurrent fanoutRun calls create each delivery exactly once', async () => {
      const t = await newTenant();
      const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
      const evs = Array.from({ length: 60 }, (_, i) => eventRecord(t.id, `type.n${i % 4}`));
      await h.store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
      let events = 0;
      let deliveries = 0;
      for (let round = 0; round < 50 && (await h.store.fanoutPendingCount()) > 0; round++) {
        const outs = await Promise.all(
          Array.from({ length: 4 }, () => h.store.fanoutRun({ now: NOW, limit: 7, ids })),
        );
        for (const o of outs) {
          events += o.events;
          deliveries += o.deliveries;
        }
      }
      expect(events).toBe(60);
      expect(deliveries).toBe(180);
      for (const ep of eps) {
        const ds = await deliveriesOf(ep.id);
        expect(ds).toHaveLength(60);
        expect(new Set(ds.map((d) => d.eventId))).toEqual(new Set(evs.map((e) => e.id)));
      }
    });
  });
}
