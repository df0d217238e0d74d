/**
 * Operations conformance: the retention pass (retentionPrune; domain/retention.ts). Events go with their
 * deliveries once old enough, unless a delivery is pending or a dead letter inside its retention; attempts and
 * audit records go by their own age; batches are bounded; a replay racing the pass never leaves a delivery without
 * its event.
 */
import { describe, expect } from 'vitest';
import type { PruneBatch, RetentionCutoffs } from '../../../src/domain/retention.ts';
import type { AuditRecord, LeasedDelivery } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import { DAY, id, ids, type OperationsSection, SECOND } from './harness.ts';

/** Nothing is old enough: each test moves only the cutoffs it is about. */
const NONE: RetentionCutoffs = { events: 0, deadLetters: 0, attempts: 0, audit: 0 };

export function retentionConformance({ h, test }: OperationsSection): void {
  const { newTenant, newEndpoint, publish, lease, complete, deliveriesOf } = h;
  const prune = (
    cutoffs: Partial<RetentionCutoffs>,
    limit = 100,
    after: string | null = null,
    deliveryLimit = 10_000,
  ): Promise<PruneBatch> =>
    h.store.retentionPrune({ cutoffs: { ...NONE, ...cutoffs }, limit, deliveryLimit, after });
  const eventExists = async (eventId: string) =>
    (await h.store.eventGet({ id: eventId, tenantId: null })) !== null;
  const byEvent = (ls: LeasedDelivery[], eventId: string) => ls.find((l) => l.event.id === eventId)!;

  describe('retention', () => {
    test('an old event goes with its deliveries unless one is pending or a dead letter inside its retention', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      const [delivered, dead, pending, replayed] = await publish(t.id, 4);
      const [young] = await publish(t.id, 1, NOW + 10 * DAY);
      const leased = await lease(NOW + SECOND);
      await complete([byEvent(leased, delivered!.id), byEvent(leased, replayed!.id)], NOW + SECOND);
      await complete([byEvent(leased, dead!.id)], NOW + SECOND, {
        failure: 'permanent',
        next: { status: 'dead', reason: 'permanent_failure' },
      });
      await complete([byEvent(leased, pending!.id)], NOW + SECOND, { failure: 'retryable' });
      const original = byEvent(leased, replayed!.id).delivery.id;
      const replay = await h.store.deliveryReplay({
        id: original,
        tenantId: t.id,
        now: NOW + DAY,
        ratePerSecond: 10,
        ids,
      });
      expect(replay).toMatchObject({ status: 'pending' });

      // Events accepted before NOW + 1 day are old; dead letters that died after NOW are inside their retention.
      expect(await prune({ events: NOW + DAY, deadLetters: NOW })).toEqual({
        events: 1,
        deliveries: 1,
        attempts: 0,
        audit: 0,
        after: null,
      });
      expect(await eventExists(delivered!.id)).toBe(false);
      for (const e of [dead, pending, replayed, young]) expect(await eventExists(e!.id)).toBe(true);
      const left = await deliveriesOf(ep.id);
      expect(left.map((d) => d.eventId).sort()).toEqual(
        [dead!.id, pending!.id, replayed!.id, replayed!.id, young!.id].sort(),
      );
      expect(
        await h.store.deliveryGet({ id: byEvent(leased, delivered!.id).delivery.id, tenantId: null }),
      ).toBeNull();

      // Once the dead letter's own retention has passed too, it goes (its event with it); the rest stay.
      expect(await prune({ events: NOW + DAY, deadLetters: NOW + DAY })).toMatchObject({
        events: 1,
        deliveries: 1,
      });
      expect(await eventExists(dead!.id)).toBe(false);
      expect(await eventExists(pending!.id)).toBe(true);
      // Nothing more to do: a second pass finds nothing.
      expect(await prune({ events: NOW + DAY, deadLetters: NOW + DAY })).toMatchObject({
        events: 0,
        deliveries: 0,
      });

      // The kept ones are still leased and sent with their payloads.
      const later = await lease(NOW + 3 * DAY);
      expect(later.map((l) => l.event.id).sort()).toEqual([pending!.id, replayed!.id].sort());
      expect(later.every((l) => l.event.data === '{"n":1}')).toBe(true);
    });

    test('a delivery cancelled while its attempt is in flight keeps its event until the completion frees the slot', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 1 });
      const [ev] = await publish(t.id, 1);
      const leased = await lease(NOW + SECOND);
      expect(leased).toHaveLength(1);
      // Unsubscribed while the attempt runs: cancelled, still leased, its slot still taken.
      await h.store.endpointUpdate({
        id: ep.id,
        tenantId: t.id,
        patch: { eventTypes: ['x.*'] },
        now: NOW + 2 * SECOND,
      });
      expect((await deliveriesOf(ep.id)).map((d) => d.status)).toEqual(['cancelled']);
      expect(await prune({ events: NOW + DAY })).toMatchObject({ events: 0, deliveries: 0 });
      expect(await eventExists(ev!.id)).toBe(true);
      await complete(leased, NOW + 3 * SECOND);
      expect((await h.store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(0);
      expect(await prune({ events: NOW + DAY })).toMatchObject({ events: 1, deliveries: 1 });
      expect(await eventExists(ev!.id)).toBe(false);
    });

    test('an event not yet fanned out is kept; once fanned out to no endpoint it may go', async () => {
      const t = await newTenant();
      const ev = {
        id: id('event', NOW),
        tenantId: t.id,
        type: 'a.b',
        resourceId: null,
        data: '{}',
        idempotencyKey: null,
        requestHash: null,
        createdAt: NOW,
      };
      await h.store.eventInsertBatch({ events: [ev], now: NOW, idempotencyWindowMs: DAY });
      expect(await prune({ events: NOW + DAY })).toMatchObject({ events: 0 });
      expect(await eventExists(ev.id)).toBe(true);
      await h.store.fanoutRun({ now: NOW + SECOND, limit: 100, ids });
      expect(await prune({ events: NOW + DAY })).toMatchObject({ events: 1, deliveries: 0 });
      expect(await eventExists(ev.id)).toBe(false);
    });

    test('attempts and audit records go by their own age, oldest first, at most `limit` a batch', async () => {
      const t = await newTenant();
      await newEndpoint(t.id);
      await publish(t.id, 3);
      const leased = await lease(NOW + SECOND);
      // Attempts at NOW + 1 s, + 2 s and + 3 s (retried, so the deliveries stay pending: only attempts can go).
      for (const [i, l] of leased.entries()) {
        await complete([l], NOW + (i + 1) * SECOND, { failure: 'retryable' });
      }
      const records: AuditRecord[] = [];
      for (let i = 0; i < 5; i++) {
        const r: AuditRecord = {
          id: id('audit', NOW + i * SECOND),
          tenantId: t.id,
          actor: 'operator',
          action: 'endpoint.updated',
          targetType: 'endpoint',
          targetId: 'ep_x',
          details: {},
          createdAt: NOW + i * SECOND,
        };
        records.push(r);
        await h.store.auditAppend({ record: r });
      }
      // Attempts started before NOW + 2.5 s (two) and audit records made before NOW + 3.5 s (four), two a batch.
      const cutoffs = { attempts: NOW + 2_500, audit: NOW + 3_500 };
      expect(await prune(cutoffs, 2)).toEqual({
        events: 0,
        deliveries: 0,
        attempts: 2,
        audit: 2,
        after: null,
      });
      expect(await prune(cutoffs, 2)).toEqual({
        events: 0,
        deliveries: 0,
        attempts: 0,
        audit: 2,
        after: null,
      });
      expect(await prune(cutoffs, 2)).toEqual({
        events: 0,
        deliveries: 0,
        attempts: 0,
        audit: 0,
        after: null,
      });
      const audit = (await h.store.auditList({ tenantId: t.id, limit: 100, cursor: null, ascending: true }))
        .data;
      expect(audit).toEqual(records.slice(4));
      const attemptsLeft = [];
      for (const l of leased) {
        attemptsLeft.push(...(await h.store.attemptList({ deliveryId: l.delivery.id, tenantId: null })));
      }
      expect(attemptsLeft.map((a) => a.startedAt)).toEqual([NOW + 3 * SECOND]);
    });

    test('a batch deletes at most `deliveryLimit` deliveries, the first event whatever its count, and walks on', async () => {
      const t = await newTenant();
      const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
      const events = (await publish(t.id, 4)).map((e) => e.id).sort(); // one millisecond: sorted by id
      // Every delivery cancelled (the endpoints deleted): each event may go, with its three deliveries.
      for (const ep of eps) await h.store.endpointDelete({ id: ep.id, tenantId: t.id, now: NOW + SECOND });
      const cutoffs = { events: NOW + DAY };
      const first = await prune(cutoffs, 100, null, 7);
      expect(first).toMatchObject({ events: 2, deliveries: 6, after: events[1] });
      const second = await prune(cutoffs, 100, first.after, 1);
      expect(second).toMatchObject({ events: 1, deliveries: 3, after: events[2] });
      const third = await prune(cutoffs, 100, second.after, 7);
      expect(third).toMatchObject({ events: 1, deliveries: 3, after: null });
      for (const e of events) expect(await eventExists(e)).toBe(false);
    });

    test('old events that must be kept do not stall the pass: it walks past them, `limit` at a time', async () => {
      const kept = await newTenant();
      await newEndpoint(kept.id);
      // Four old events with pending deliveries (never leased), then three of a tenant with no endpoint.
      const held = await publish(kept.id, 4);
      const free = await newTenant();
      const gone = await publish(free.id, 3, NOW + SECOND);
      const cutoffs = { events: NOW + DAY };
      const walk: PruneBatch[] = [];
      let after: string | null = null;
      do {
        const b = await prune(cutoffs, 2, after);
        walk.push(b);
        after = b.after;
      } while (after !== null && walk.length < 10);
      expect(walk.map((b) => b.events)).toEqual([0, 0, 2, 1]);
      // Ids made in one millisecond sort by their random part, not by the order they were made in.
      const [h, g] = [held.map((e) => e.id).sort(), gone.map((e) => e.id).sort()];
      expect(walk.map((b) => b.after)).toEqual([h[1], h[3], g[1], null]);
      for (const e of gone) expect(await eventExists(e.id)).toBe(false);
      for (const e of held) expect(await eventExists(e.id)).toBe(true);
    });

    test('a replay racing the pass: either the replay is made and keeps its event, or neither is left', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 100 });
      const events = await publish(t.id, 20);
      const leased = await lease(NOW + SECOND);
      expect(leased).toHaveLength(20);
      await complete(leased, NOW + SECOND);
      const replays = leased.slice(0, 10).map((l) =>
        h.store.deliveryReplay({
          id: l.delivery.id,
          tenantId: t.id,
          now: NOW + DAY,
          ratePerSecond: 1_000,
          ids,
        }),
      );
      const [pruned, ...made] = await Promise.all([prune({ events: NOW + DAY }, 1_000), ...replays]);
      const replayed = made.filter((r) => typeof r === 'object').length;
      expect(made.every((r) => typeof r === 'object' || r === 'not_found')).toBe(true);
      expect({ pruned: pruned.events, replayed }).toEqual({ pruned: events.length - replayed, replayed });
      // Every pending delivery still has its event: all of them lease, with their payloads.
      const pending = await deliveriesOf(ep.id, 'pending');
      expect(pending).toHaveLength(replayed);
      const again = await lease(NOW + 2 * DAY);
      expect(again).toHaveLength(replayed);
      expect(again.every((l) => l.event.data === '{"n":1}')).toBe(true);
    });
  });
}
