/**
 * Operations conformance: lost delivery rows rebuilt from the events and the attempt log (deliveryReconstruct,
 * ADR-15). A history is driven through the real store API — endpoints, events fanned out, leases, attempts delivered,
 * failed for good and failed to be retried, a lease that expired — then delivery rows are deleted the way they are
 * lost in the field, by SQL from outside (the suite's `rawSql`), and the reconstruction must bring back what the log
 * proves, create what fan-out had created and nobody attempted, and touch nothing else.
 */
import { describe, expect } from 'vitest';
import type { DeliveryRecord } from '../../../src/ports/delivery-store.ts';
import type { DeliveryReconstructBatch, ReconstructedDelivery } from '../../../src/ports/operations-store.ts';
import type { NewEvent, Store } from '../../../src/ports/store.ts';
import { NOW } from '../store-conformance.ts';
import { DAY, HOUR, id, ids, LEASE_MS, MINUTE, type OperationsSection, SECOND } from './harness.ts';

/** When the reconstruction runs. */
const R = NOW + 10 * MINUTE;

export function deliveryReconstructConformance({
  h,
  test,
  rawSql,
}: OperationsSection & { rawSql: ((store: Store, sql: string) => Promise<void>) | undefined }): void {
  const { newTenant, newEndpoint, publish, lease, complete, deliveriesOf } = h;
  /** SQL both dialects accept; ids are the suite's own (no quotes in them). */
  const sql = (text: string) => {
    if (!rawSql) throw new Error('the delivery reconstruction section needs the suite option rawSql');
    return rawSql(h.store, text);
  };
  const list = (values: string[]) => values.map((v) => `'${v}'`).join(', ');

  const reconstruct = (o: {
    now: number;
    since?: number;
    dryRun?: boolean;
    limit?: number;
    after?: string | null;
  }) =>
    h.store.deliveryReconstruct({
      after: o.after ?? null,
      since: o.since ?? NOW - DAY,
      limit: o.limit ?? 100,
      now: o.now,
      dryRun: o.dryRun ?? false,
      ids,
    });
  /** Every batch, from the first until the walk reports its end. */
  async function reconstructAll(o: { now: number; since?: number; dryRun?: boolean; limit?: number }) {
    const batches: DeliveryReconstructBatch[] = [];
    for (let after: string | null = null; ; ) {
      const b: DeliveryReconstructBatch = await reconstruct({ ...o, after });
      batches.push(b);
      if (b.after === null) break;
      after = b.after;
    }
    return { batches, deliveries: batches.flatMap((b) => b.deliveries) };
  }
  const summary = (ds: ReconstructedDelivery[]) =>
    ds
      .map((d) => [d.endpointId, d.source, d.status, d.statusReason, d.attempts])
      .sort((x, y) => ((x[0] as string) < (y[0] as string) ? -1 : 1));
  const withoutUpdatedAt = ({ updatedAt: _, ...rest }: DeliveryRecord) => rest;

  describe('delivery reconstruction', () => {
    test('its floor is when attempts began to name their event: the migration, applied by this store', async () => {
      const before = Date.now();
      const floor = await h.store.deliveryReconstructFloor();
      expect(Number.isSafeInteger(floor)).toBe(true);
      // Migrated when the suite's store was made: within the last hour, not in the future.
      expect(floor).toBeLessThanOrEqual(before);
      expect(floor).toBeGreaterThan(before - 3_600_000);
    });

    test('lost rows come back as the log proves them, never-attempted ones as fan-out made them, nothing else changes', async () => {
      const t = await newTenant();
      const early = { createdAt: NOW - HOUR };
      const a = await newEndpoint(t.id, early);
      const b = await newEndpoint(t.id, { ...early, eventTypes: ['a.*'] });
      const c = await newEndpoint(t.id, { ...early, eventTypes: ['a.b'] });
      const d = await newEndpoint(t.id, early);
      const kept = await newEndpoint(t.id, early);
      const unsubscribed = await newEndpoint(t.id, { ...early, eventTypes: ['x.y'] });
      const [e1] = (await publish(t.id, 1, NOW)) as [NewEvent];
      const late = await newEndpoint(t.id, { createdAt: NOW + MINUTE });

      const leased = await lease(NOW + SECOND);
      expect(leased).toHaveLength(5);
      const of = (ep: { id: string }) => leased.find((l) => l.endpoint.id === ep.id)!;
      await complete([of(a), of(kept)], NOW + 2 * SECOND);
      await complete([of(b)], NOW + 2 * SECOND, {
        failure: 'permanent',
        next: { status: 'dead', reason: 'permanent_failure' },
      });
      await complete([of(c)], NOW + 2 * SECOND, {
        failure: 'retryable',
        next: { status: 'pending', nextAttemptAt: NOW + HOUR },
      });
      // d's lease expires before any attempt was recorded: pending, never attempted.
      expect(await h.store.deliveryExpireLeases({ now: NOW + SECOND + LEASE_MS })).toBe(1);
      const [e2] = (await publish(t.id, 1, NOW + 2 * MINUTE)) as [NewEvent];

      const everyone = [a, b, c, d, kept, unsubscribed, late];
      const before = new Map<string, DeliveryRecord[]>();
      for (const ep of everyone) before.set(ep.id, await deliveriesOf(ep.id));
      const original = (ep: { id: string }) => before.get(ep.id)!.find((x) => x.eventId === e1.id)!;
      // The attempt log names each attempt's event.
      expect(
        (await h.store.attemptList({ deliveryId: original(c).id, tenantId: null })).map((x) => x.eventId),
      ).toEqual([e1.id]);
      expect(before.get(late.id)!.map((x) => x.eventId)).toEqual([e2.id]);
      expect(before.get(unsubscribed.id)).toEqual([]);

      const lostIds = [a, b, c, d].map((ep) => original(ep).id);
      await sql(`DELETE FROM deliveries WHERE id IN (${list(lostIds)})`);
      const e1Of = async (ep: { id: string }) =>
        (await deliveriesOf(ep.id)).filter((x) => x.eventId === e1.id);
      const expected = summary([
        { endpointId: a.id, source: 'log', status: 'delivered', statusReason: null, attempts: 1 },
        { endpointId: b.id, source: 'log', status: 'dead', statusReason: 'permanent_failure', attempts: 1 },
        { endpointId: c.id, source: 'log', status: 'pending', statusReason: null, attempts: 1 },
        { endpointId: d.id, source: 'new', status: 'pending', statusReason: null, attempts: 0 },
      ] as ReconstructedDelivery[]);

      // A dry run reports and writes nothing.
      const dry = await reconstructAll({ now: R, dryRun: true });
      expect(summary(dry.deliveries)).toEqual(expected);
      expect(dry.batches.map((x) => x.events)).toEqual([2]);
      for (const ep of [a, b, c, d]) expect(await e1Of(ep)).toEqual([]);

      const run = await reconstructAll({ now: R });
      expect(summary(run.deliveries)).toEqual(expected);
      expect(run.deliveries.every((x) => x.eventId === e1.id)).toBe(true);
      // From the log: the lost rows under their own ids and webhook-ids, in the state their attempts proved.
      const [ra] = await e1Of(a);
      expect(withoutUpdatedAt(ra!)).toEqual(withoutUpdatedAt(original(a)));
      expect(ra!.status).toBe('delivered');
      const [rb] = await e1Of(b);
      expect(withoutUpdatedAt(rb!)).toEqual(withoutUpdatedAt(original(b)));
      expect(rb).toMatchObject({ status: 'dead', statusReason: 'permanent_failure' });
      const [rc] = await e1Of(c);
      expect(withoutUpdatedAt(rc!)).toEqual({ ...withoutUpdatedAt(original(c)), nextAttemptAt: R });
      expect(rc).toMatchObject({ status: 'pending', attempts: 1, webhookId: original(c).webhookId });
      // Never attempted: a new pending delivery, due now, with a new id and webhook-id.
      const [rd] = await e1Of(d);
      expect(rd).toMatchObject({
        tenantId: t.id,
        endpointId: d.id,
        eventId: e1.id,
        eventType: 'a.b',
        resourceId: null,
        status: 'pending',
        attempts: 0,
        nextAttemptAt: R,
        firstAttemptAt: null,
        replayedFrom: null,
        createdAt: R,
      });
      expect(rd!.id).not.toBe(original(d).id);
      expect(rd!.webhookId).not.toBe(original(d).webhookId);
      expect(run.deliveries.find((x) => x.endpointId === d.id)).toMatchObject({
        deliveryId: rd!.id,
        webhookId: rd!.webhookId,
      });
      // Nothing for the endpoint created after the event or the one not subscribed; every other row untouched.
      expect(await deliveriesOf(late.id)).toEqual(before.get(late.id));
      expect(await deliveriesOf(unsubscribed.id)).toEqual([]);
      expect(await deliveriesOf(kept.id)).toEqual(before.get(kept.id));
      for (const ep of [a, b, c, d]) {
        expect((await deliveriesOf(ep.id)).filter((x) => x.eventId !== e1.id)).toEqual(
          before.get(ep.id)!.filter((x) => x.eventId !== e1.id),
        );
      }

      // A second run finds nothing to do.
      expect((await reconstructAll({ now: R + MINUTE })).deliveries).toEqual([]);

      // The queue rows already agree (the reconstruction set the due times it changed), and leasing hands out
      // exactly the pending deliveries: never the delivered or dead ones again.
      for (const ep of everyone) {
        const q = await h.store.queueRebuild({ endpointId: ep.id, dryRun: true, sharedLanes: 4, now: R });
        expect(q).toMatchObject({ created: false });
        expect(q!.inflight[0]).toBe(q!.inflight[1]);
        expect(q!.nextDueAt[0]).toBe(q!.nextDueAt[1]);
        await h.store.queueRebuild({ endpointId: ep.id, dryRun: false, sharedLanes: 4, now: R });
      }
      const pending: string[] = [];
      for (const ep of everyone) pending.push(...(await deliveriesOf(ep.id, 'pending')).map((x) => x.id));
      expect(pending).toHaveLength(8); // c and d of e1, and e2's six
      const leasedAfter = await lease(R);
      expect(leasedAfter.map((l) => l.delivery.id).sort()).toEqual(pending.sort());
      expect(leasedAfter.map((l) => l.delivery.id)).not.toContain(original(a).id);
      expect(leasedAfter.find((l) => l.delivery.id === original(c).id)?.delivery.webhookId).toBe(
        original(c).webhookId,
      );
    });

    test('walks the events accepted since `since` in resumable batches, passing over test events and events not yet fanned out', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { createdAt: NOW - HOUR });
      await publish(t.id, 1, NOW);
      const fresh = await publish(t.id, 3, NOW + HOUR);
      const testEvent = await h.store.endpointTestEvent({
        endpointId: ep.id,
        tenantId: t.id,
        event: {
          id: id('event', NOW + HOUR),
          tenantId: t.id,
          type: 'hookrail.test',
          resourceId: null,
          data: '{}',
          idempotencyKey: null,
          requestHash: null,
          createdAt: NOW + HOUR,
        },
        now: NOW + HOUR,
        ids,
      });
      expect(testEvent).toMatchObject({ status: 'pending' });
      const unfanned: NewEvent = { ...fresh[0]!, id: id('event', NOW + 2 * HOUR), createdAt: NOW + 2 * HOUR };
      await h.store.eventInsertBatch({ events: [unfanned], now: NOW + 2 * HOUR, idempotencyWindowMs: DAY });
      await sql('DELETE FROM deliveries');

      const later = NOW + 3 * HOUR;
      const first = await reconstruct({ now: later, since: NOW + HOUR, limit: 2 });
      expect(first.events).toBe(2);
      expect(first.after).not.toBeNull();
      const second = await reconstruct({ now: later, since: NOW + HOUR, limit: 2, after: first.after });
      expect(second.events).toBe(2);
      const third = await reconstruct({ now: later, since: NOW + HOUR, limit: 2, after: second.after });
      expect(third).toMatchObject({ events: 1, after: null });
      const made = [...first.deliveries, ...second.deliveries, ...third.deliveries];
      expect(made.map((x) => x.eventId).sort()).toEqual(fresh.map((e) => e.id).sort());
      expect(made.every((x) => x.source === 'new' && x.endpointId === ep.id)).toBe(true);
      // The event before `since`, the test event and the unfanned one have no delivery; fan-out takes the last.
      expect((await deliveriesOf(ep.id)).map((x) => x.eventId).sort()).toEqual(fresh.map((e) => e.id).sort());
      await h.store.fanoutRun({ now: later, limit: 10, ids });
      expect((await deliveriesOf(ep.id)).map((x) => x.eventId)).toContain(unfanned.id);
    });

    test('a lost pending delivery comes back cancelled where its endpoint no longer stands, a lost replay as a plain delivery', async () => {
      const t = await newTenant();
      const early = { createdAt: NOW - HOUR };
      const narrowed = await newEndpoint(t.id, early);
      const deleted = await newEndpoint(t.id, early);
      const failing = await newEndpoint(t.id, early);
      await publish(t.id, 1, NOW);
      const leased = await lease(NOW + SECOND);
      const of = (ep: { id: string }) => leased.find((l) => l.endpoint.id === ep.id)!;
      await complete([of(narrowed), of(deleted)], NOW + 2 * SECOND, {
        failure: 'retryable',
        next: { status: 'pending', nextAttemptAt: NOW + HOUR },
      });
      await complete([of(failing)], NOW + 2 * SECOND, {
        failure: 'permanent',
        next: { status: 'dead', reason: 'permanent_failure' },
      });
      await h.store.endpointUpdate({
        id: narrowed.id,
        tenantId: t.id,
        patch: { eventTypes: ['x.*'] },
        now: NOW + MINUTE,
      });
      expect(await h.store.endpointDelete({ id: deleted.id, tenantId: t.id, now: NOW + MINUTE })).toBe(true);
      const copy = (await h.store.deliveryReplay({
        id: of(failing).delivery.id,
        tenantId: t.id,
        now: NOW + MINUTE,
        ratePerSecond: 10,
        ids,
      })) as DeliveryRecord;
      expect(copy.replayedFrom).toBe(of(failing).delivery.id);
      const [l] = await lease(NOW + 2 * MINUTE);
      expect(l?.delivery.id).toBe(copy.id);
      await complete([l!], NOW + 2 * MINUTE, {
        failure: 'retryable',
        next: { status: 'pending', nextAttemptAt: NOW + HOUR },
      });
      await sql(
        `DELETE FROM deliveries WHERE id IN (${list([of(narrowed).delivery.id, of(deleted).delivery.id, copy.id])})`,
      );

      const run = await reconstructAll({ now: R });
      expect(summary(run.deliveries)).toEqual(
        summary([
          {
            endpointId: narrowed.id,
            source: 'log',
            status: 'cancelled',
            statusReason: 'unsubscribed',
            attempts: 1,
          },
          {
            endpointId: deleted.id,
            source: 'log',
            status: 'cancelled',
            statusReason: 'endpoint_deleted',
            attempts: 1,
          },
          { endpointId: failing.id, source: 'log', status: 'pending', statusReason: null, attempts: 1 },
        ] as ReconstructedDelivery[]),
      );
      const back = await h.store.deliveryGet({ id: copy.id, tenantId: t.id });
      expect(back).toMatchObject({
        status: 'pending',
        webhookId: of(failing).delivery.webhookId,
        replayedFrom: null,
        nextAttemptAt: R,
      });
      // The original it replayed is still there and untouched; nothing is leased for the withdrawn ones.
      expect(await h.store.deliveryGet({ id: of(failing).delivery.id, tenantId: t.id })).toMatchObject({
        status: 'dead',
      });
      expect((await lease(R)).map((x) => x.delivery.id)).toEqual([copy.id]);
    });
  });
}
