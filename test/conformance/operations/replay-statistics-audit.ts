/** Operations conformance: replay, statistics, audit. */
import { describe, expect } from 'vitest';
import type { AuditRecord, DeliveryRecord } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import { DAY, HOUR, id, ids, type OperationsSection, SECOND } from './harness.ts';

export function replayStatisticsAuditConformance({ h, test }: OperationsSection): void {
  const { newTenant, newEndpoint, publish, lease, complete, deliveriesOf } = h;
  describe('replay', () => {
    test('deliveryReplay: a new delivery with the same webhook-id; not_found; endpoint_gone', async () => {
      const t = await newTenant();
      const other = await newTenant(NOW + 1);
      const ep = await newEndpoint(t.id);
      const [ev] = await publish(t.id, 1);
      const [l] = await lease(NOW + SECOND);
      await complete([l!], NOW + 2 * SECOND);
      const original = (await h.store.deliveryGet({ id: l!.delivery.id, tenantId: t.id }))!;
      expect(original.status).toBe('delivered');

      const now = NOW + HOUR;
      const copy = await h.store.deliveryReplay({
        id: original.id,
        tenantId: t.id,
        now,
        ratePerSecond: 10,
        ids,
      });
      expect(copy).toEqual({
        id: expect.stringMatching(/^dlv_/),
        tenantId: t.id,
        endpointId: ep.id,
        eventId: ev!.id,
        eventType: 'a.b',
        resourceId: null,
        webhookId: original.webhookId,
        status: 'pending',
        attempts: 0,
        nextAttemptAt: now,
        firstAttemptAt: null,
        lastAttemptAt: null,
        statusReason: null,
        replayedFrom: original.id,
        createdAt: now,
        updatedAt: now,
      } satisfies DeliveryRecord);
      const c = copy as DeliveryRecord;
      expect(c.id).not.toBe(original.id);
      expect(await h.store.deliveryGet({ id: c.id, tenantId: t.id })).toEqual(copy);
      expect(await h.store.deliveryGet({ id: original.id, tenantId: t.id })).toEqual(original);
      // Due at once.
      const leased = await lease(now);
      expect(leased.map((x) => [x.delivery.id, x.delivery.webhookId, x.event.id])).toEqual([
        [c.id, original.webhookId, ev!.id],
      ]);
      // A replay of a replay keeps the webhook-id too.
      const again = (await h.store.deliveryReplay({
        id: c.id,
        tenantId: t.id,
        now: now + 1,
        ratePerSecond: 10,
        ids,
      })) as DeliveryRecord;
      // Rate-capped like a bulk replay: due one interval (100 ms at 10/s) after the endpoint's latest pending
      // replay, `c`, still in flight.
      expect(again).toMatchObject({
        webhookId: original.webhookId,
        replayedFrom: c.id,
        nextAttemptAt: now + 100,
      });
      const third = (await h.store.deliveryReplay({
        id: original.id,
        tenantId: t.id,
        now: now + 2,
        ratePerSecond: 10,
        ids,
      })) as DeliveryRecord;
      expect(third.nextAttemptAt).toBe(now + 200);

      expect(
        await h.store.deliveryReplay({ id: id('delivery'), tenantId: t.id, now, ratePerSecond: 10, ids }),
      ).toBe('not_found');
      expect(
        await h.store.deliveryReplay({ id: original.id, tenantId: other.id, now, ratePerSecond: 10, ids }),
      ).toBe('not_found');
      await h.store.endpointDelete({ id: ep.id, tenantId: t.id, now: now + 2 });
      expect(
        await h.store.deliveryReplay({
          id: original.id,
          tenantId: t.id,
          now: now + 3,
          ratePerSecond: 10,
          ids,
        }),
      ).toBe('endpoint_gone');
    });

    test('deliveryReplay refuses what an unsubscribe stopped: a cancelled delivery, an unsubscribed type', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { eventTypes: ['a.*'] });
      await publish(t.id, 2);
      const [l] = await lease(NOW + SECOND, { limit: 1 });
      await complete([l!], NOW + 2 * SECOND);
      const delivered = l!.delivery.id;
      const unsubscribe = async (eventTypes: string[], at: number) =>
        h.store.endpointUpdate({ id: ep.id, tenantId: t.id, patch: { eventTypes }, now: at });
      await unsubscribe(['c.*'], NOW + HOUR);
      const before = await deliveriesOf(ep.id);
      const cancelled = before.find((d) => d.status === 'cancelled')!;
      expect(before.map((d) => d.status).sort()).toEqual(['cancelled', 'delivered']);
      const replay = (deliveryId: string, at: number) =>
        h.store.deliveryReplay({ id: deliveryId, tenantId: t.id, now: at, ratePerSecond: 10, ids });

      expect(await replay(delivered, NOW + 2 * HOUR)).toBe('unsubscribed');
      expect(await replay(cancelled.id, NOW + 2 * HOUR)).toBe('cancelled');
      expect(await deliveriesOf(ep.id)).toEqual(before);

      // Subscribed again: the delivered one may be replayed; the cancelled one stays cancelled for good.
      await unsubscribe(['a.b'], NOW + 3 * HOUR);
      expect(await replay(cancelled.id, NOW + 4 * HOUR)).toBe('cancelled');
      const copy = (await replay(delivered, NOW + 4 * HOUR)) as DeliveryRecord;
      expect(copy).toMatchObject({ replayedFrom: delivered, status: 'pending' });
      expect(await deliveriesOf(ep.id)).toHaveLength(3);
    });

    test("deliveryReplay of a test event's delivery: addressed to the endpoint, whatever it subscribes to", async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { eventTypes: ['a.*'] });
      const at = NOW + SECOND;
      const event = {
        id: id('event', at),
        tenantId: t.id,
        type: 'hookrail.test',
        resourceId: null,
        data: '{"test":true}',
        idempotencyKey: null,
        requestHash: null,
        createdAt: at,
      };
      const d = (await h.store.endpointTestEvent({
        endpointId: ep.id,
        tenantId: t.id,
        event,
        now: at,
        ids,
      })) as DeliveryRecord;
      const copy = await h.store.deliveryReplay({
        id: d.id,
        tenantId: t.id,
        now: at + 1,
        ratePerSecond: 10,
        ids,
      });
      expect(copy).toMatchObject({ replayedFrom: d.id, eventType: 'hookrail.test', status: 'pending' });
    });

    test('deliveryReplayBulk: filters, confirmation, rate-spaced due times, each delivery replayed once', async () => {
      const t = await newTenant();
      const other = await newTenant(NOW + 1);
      const ep = await newEndpoint(t.id);
      const ep2 = await newEndpoint(t.id);
      await publish(t.id, 5);
      const leased = await lease(NOW + SECOND);
      // Oldest first means by delivery id (creation order, to the millisecond).
      const mine = leased
        .filter((l) => l.endpoint.id === ep.id)
        .sort((a, b) => (a.delivery.id < b.delivery.id ? -1 : 1));
      const theirs = leased.filter((l) => l.endpoint.id === ep2.id);
      const dead = { failure: 'retryable', next: { status: 'dead', reason: 'max_attempts' } } as const;
      await complete(mine.slice(0, 3), NOW + 2 * SECOND, dead);
      await complete(mine.slice(3), NOW + 2 * SECOND);
      await complete(theirs, NOW + 2 * SECOND, dead);
      const bulk = (o: Partial<Parameters<typeof h.store.deliveryReplayBulk>[0]> = {}) =>
        h.store.deliveryReplayBulk({
          endpointId: ep.id,
          tenantId: t.id,
          statuses: ['dead'],
          since: null,
          until: NOW + DAY,
          now: NOW + HOUR,
          ratePerSecond: 10,
          confirmAbove: null,
          max: 10_000,
          ids,
          ...o,
        });

      const matched = async (o: Parameters<typeof bulk>[0]) => {
        const r = await bulk(o);
        if (r === 'not_found') throw new Error('endpoint not found');
        return r.found;
      };

      // Above the confirmation threshold: counted, nothing created.
      expect(await bulk({ confirmAbove: 2 })).toEqual({
        found: 3,
        more: false,
        created: 0,
        firstDueAt: null,
        lastDueAt: null,
      });
      expect(await deliveriesOf(ep.id)).toHaveLength(5);
      // The time range is [since, until) on the delivery's creation time.
      expect(await matched({ since: NOW + 1 })).toBe(0);
      expect(await matched({ until: NOW })).toBe(0);
      expect(await matched({ statuses: ['delivered'], since: NOW, until: NOW + 1, confirmAbove: 0 })).toBe(2);

      // The oldest first, at most `max`, due one interval (100 ms at 10/s) apart from now.
      const T = NOW + HOUR;
      expect(await bulk({ max: 2 })).toEqual({
        found: 2,
        more: true,
        created: 2,
        firstDueAt: T,
        lastDueAt: T + 100,
      });
      const replays = (await deliveriesOf(ep.id, 'pending')).sort(
        (a, b) => a.nextAttemptAt! - b.nextAttemptAt!,
      );
      expect(replays.map((d) => [d.replayedFrom, d.webhookId, d.nextAttemptAt, d.createdAt])).toEqual([
        [mine[0]!.delivery.id, mine[0]!.delivery.webhookId, T, T],
        [mine[1]!.delivery.id, mine[1]!.delivery.webhookId, T + 100, T],
      ]);
      // The next request replays the rest, after the endpoint's pending replays (one rate per endpoint).
      expect(await bulk({ now: T + 1 })).toEqual({
        found: 1,
        more: false,
        created: 1,
        firstDueAt: T + 200,
        lastDueAt: T + 200,
      });
      expect(await bulk({ now: T + 2 })).toEqual({
        found: 0,
        more: false,
        created: 0,
        firstDueAt: null,
        lastDueAt: null,
      });
      // Due times hold: at T only the first replay is due.
      expect((await lease(T)).map((l) => l.delivery.replayedFrom)).toEqual([mine[0]!.delivery.id]);

      // The other endpoint's dead letters were untouched; once unsubscribed from their type, none match.
      expect(await deliveriesOf(ep2.id, 'dead')).toHaveLength(5);
      expect(await matched({ endpointId: ep2.id, confirmAbove: 100 })).toBe(5);
      await h.store.endpointUpdate({ id: ep2.id, tenantId: t.id, patch: { eventTypes: ['x.*'] }, now: T });
      expect(await matched({ endpointId: ep2.id })).toBe(0);
      // Another tenant's endpoint, or a deleted one: not found.
      expect(await bulk({ tenantId: other.id })).toBe('not_found');
      await h.store.endpointDelete({ id: ep.id, tenantId: t.id, now: T + 3 });
      expect(await bulk({ now: T + 4 })).toBe('not_found');
    });

    test('deliveryReplayBulk reads a long history in pages and stops at max, oldest first', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 2_000 });
      await publish(t.id, 1_000); // a fan-out pass takes at most 1,000 events
      await publish(t.id, 5);
      const leased = await lease(NOW + SECOND, { limit: 2_000, perEndpoint: 2_000 });
      expect(leased).toHaveLength(1_005);
      await complete(leased, NOW + 2 * SECOND);
      const byAge = leased.map((l) => l.delivery.id).sort();
      const bulk = (now: number, max: number) =>
        h.store.deliveryReplayBulk({
          endpointId: ep.id,
          tenantId: t.id,
          statuses: ['delivered'],
          since: null,
          until: NOW + DAY,
          now,
          ratePerSecond: 10,
          confirmAbove: null,
          max,
          ids,
        });
      // More than one page (1,000 rows) to find 1,002.
      expect(await bulk(NOW + HOUR, 1_002)).toMatchObject({ found: 1_002, more: true, created: 1_002 });
      const first = (await deliveriesOf(ep.id, 'pending')).map((d) => d.replayedFrom).sort();
      expect(first).toEqual(byAge.slice(0, 1_002));
      expect(await bulk(NOW + HOUR + 1, 1_002)).toMatchObject({ found: 3, more: false, created: 3 });
      expect(await bulk(NOW + HOUR + 2, 1_002)).toMatchObject({ found: 0, more: false, created: 0 });
      expect(await deliveriesOf(ep.id, 'pending')).toHaveLength(1_005);
    });

    test('a replay waiting out a retry holds no place in the pacing of later replays', async () => {
      const t = await newTenant();
      await newEndpoint(t.id);
      await publish(t.id, 2);
      const first = await lease(NOW + SECOND);
      await complete(first, NOW + 2 * SECOND);
      const [a, b] = first.map((l) => l.delivery.id);
      const r1 = (await h.store.deliveryReplay({
        id: a!,
        tenantId: t.id,
        now: NOW + HOUR,
        ratePerSecond: 10,
        ids,
      }))!;
      // R1 is attempted, fails, and waits 5 h for its retry.
      const [l1] = await lease(NOW + HOUR);
      expect(l1!.delivery.id).toBe((r1 as DeliveryRecord).id);
      await complete([l1!], NOW + HOUR + SECOND, {
        failure: 'retryable',
        next: { status: 'pending', nextAttemptAt: NOW + 6 * HOUR },
      });
      // A replay asked for now is due now, not behind R1's retry.
      const r2 = (await h.store.deliveryReplay({
        id: b!,
        tenantId: t.id,
        now: NOW + HOUR + 2 * SECOND,
        ratePerSecond: 10,
        ids,
      })) as DeliveryRecord;
      expect(r2.nextAttemptAt).toBe(NOW + HOUR + 2 * SECOND);
      // A replay not yet attempted still paces the next one: 100 ms behind it.
      const r3 = (await h.store.deliveryReplay({
        id: a!,
        tenantId: t.id,
        now: NOW + HOUR + 2 * SECOND,
        ratePerSecond: 10,
        ids,
      })) as DeliveryRecord;
      expect(r3.nextAttemptAt).toBe(NOW + HOUR + 2 * SECOND + 100);
    });

    test('deliveryReplay to a disabled endpoint waits until it is enabled', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      await publish(t.id, 1);
      const [l] = await lease(NOW + SECOND);
      await complete([l!], NOW + 2 * SECOND, {
        failure: 'permanent',
        next: { status: 'dead', reason: 'permanent_failure' },
      });
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'x',
        now: NOW + 3,
      });
      const copy = await h.store.deliveryReplay({
        id: l!.delivery.id,
        tenantId: t.id,
        now: NOW + HOUR,
        ratePerSecond: 10,
        ids,
      });
      expect(copy).toMatchObject({ status: 'pending', replayedFrom: l!.delivery.id });
      expect(await lease(NOW + HOUR + 1)).toEqual([]);
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'enabled',
        reason: null,
        now: NOW + HOUR + 2,
      });
      expect((await lease(NOW + HOUR + 3)).map((x) => x.delivery.id)).toEqual([(copy as DeliveryRecord).id]);
    });
  });

  describe('statistics', () => {
    test('attempts Hookrail did not send (circuit_open, platform_error) count in no rate or series', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      await publish(t.id, 3);
      const [d1, d2, d3] = (await lease(NOW + SECOND)).filter((l) => l.endpoint.id === ep.id);
      const at = NOW + 2 * SECOND;
      await complete([d1!], at, { failure: 'platform_error', attempt: { queueMs: 1, platformMs: 1 } });
      await complete([d2!], at, { failure: 'circuit_open', attempt: { queueMs: 1, platformMs: 1 } });
      await complete([d3!], at, { attempt: { queueMs: 40, platformMs: 3, consumerMs: 117 } });
      expect(await h.store.attemptStats({ endpointId: ep.id, since: NOW })).toEqual({
        attempts: 1,
        successes: 1,
        deadLetters: 0,
        queueMs: [40],
        platformMs: [3],
        consumerMs: [117],
      });
      const series = await h.store.endpointSeries({
        endpointId: ep.id,
        from: NOW,
        until: null,
        bucketMs: HOUR,
        withPending: false,
      });
      expect(series.attempts.map((a) => [a.attempts, a.delivered])).toEqual([[1, 1]]);
    });

    test('attemptStats and backlogStats count per endpoint and window', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      const other = await newEndpoint(t.id);
      await publish(t.id, 5);
      const leased = await lease(NOW + SECOND);
      const [d1, d2, d3, d4, d5] = leased.filter((l) => l.endpoint.id === ep.id);
      const at = NOW + 2 * SECOND;
      await complete([d1!], at, { attempt: { queueMs: 40, platformMs: 3, consumerMs: 117 } });
      await complete([d2!], at, {
        failure: 'retryable',
        attempt: { queueMs: 20, platformMs: 5, consumerMs: null },
      });
      await complete([d3!], at, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_attempts' },
        attempt: { queueMs: 30, platformMs: 7, consumerMs: 50 },
      });
      await complete([d4!], at, { failure: 'circuit_open', attempt: { queueMs: 1, platformMs: 1 } });
      await complete(
        leased.filter((l) => l.endpoint.id === other.id),
        at,
      );

      expect(await h.store.attemptStats({ endpointId: ep.id, since: NOW })).toEqual({
        attempts: 3,
        successes: 1,
        deadLetters: 1,
        queueMs: [20, 30, 40],
        platformMs: [3, 5, 7],
        consumerMs: [50, 117],
      });
      // The streak began with d2's failure; d3's dead letter belongs to it; d5 is still in flight.
      expect(await h.store.backlogStats({ endpointId: ep.id })).toEqual({
        pending: 3,
        deadLetters: 1,
        oldestCreatedAt: NOW,
        oldestPendingAt: NOW,
      });
      // Once replayed, the dead letter is backlog as its replay (pending), not a second time as a dead letter.
      await h.store.deliveryReplay({ id: d3!.delivery.id, tenantId: t.id, now: at, ratePerSecond: 10, ids });
      expect(await h.store.backlogStats({ endpointId: ep.id })).toMatchObject({ pending: 4, deadLetters: 0 });

      const later = NOW + 2 * HOUR;
      await complete([d5!], later, { attempt: { queueMs: 10, platformMs: 9, consumerMs: 80 } });
      expect(await h.store.attemptStats({ endpointId: ep.id, since: NOW })).toEqual({
        attempts: 4,
        successes: 2,
        deadLetters: 1,
        queueMs: [10, 20, 30, 40],
        platformMs: [3, 5, 7, 9],
        consumerMs: [50, 80, 117],
      });
      expect(await h.store.attemptStats({ endpointId: ep.id, since: NOW + HOUR })).toEqual({
        attempts: 1,
        successes: 1,
        deadLetters: 0,
        queueMs: [10],
        platformMs: [9],
        consumerMs: [80],
      });
      // A success ended the streak: its dead letters are no longer counted as backlog (d3's replay is pending).
      expect(await h.store.backlogStats({ endpointId: ep.id })).toEqual({
        pending: 3,
        deadLetters: 0,
        oldestCreatedAt: NOW,
        oldestPendingAt: NOW,
      });
      expect(await h.store.attemptStats({ endpointId: id('endpoint'), since: NOW })).toEqual({
        attempts: 0,
        successes: 0,
        deadLetters: 0,
        queueMs: [],
        platformMs: [],
        consumerMs: [],
      });
      expect(await h.store.backlogStats({ endpointId: id('endpoint') })).toEqual({
        pending: 0,
        deadLetters: 0,
        oldestCreatedAt: null,
        oldestPendingAt: null,
      });
    });
  });

  describe('audit', () => {
    test("backlogStats: a streak's dead letters count in the backlog's age, not in the pending deliveries'", async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      await publish(t.id, 1);
      await complete(await lease(NOW + SECOND), NOW + 2 * SECOND, {
        failure: 'permanent',
        next: { status: 'dead', reason: 'permanent_failure' },
      });
      expect(await h.store.backlogStats({ endpointId: ep.id })).toEqual({
        pending: 0,
        deadLetters: 1,
        oldestCreatedAt: NOW,
        oldestPendingAt: null,
      });
    });

    test('auditAppend and auditList: per tenant or all, newest or oldest first, paged', async () => {
      const t1 = await newTenant();
      const t2 = await newTenant(NOW + 1);
      const records: AuditRecord[] = [];
      for (let i = 0; i < 7; i++) {
        const at = NOW + i * SECOND;
        const r: AuditRecord = {
          id: id('audit', at),
          tenantId: i % 3 === 2 ? t2.id : t1.id,
          actor: i === 0 ? 'operator' : `tenant_key:key_${i}`,
          action: 'endpoint.updated',
          targetType: 'endpoint',
          targetId: `ep_${i}`,
          details: { i, nested: { list: [1, 'two', null], 'é "q"': true } },
          createdAt: at,
        };
        records.push(r);
        await h.store.auditAppend({ record: r });
      }
      const mine = records.filter((r) => r.tenantId === t1.id);
      expect(mine).toHaveLength(5);
      const collect = async (tenantId: string | null, ascending: boolean | undefined, limit: number) => {
        const pages: string[][] = [];
        let cursor: string | null = null;
        const out: AuditRecord[] = [];
        do {
          const p = await h.store.auditList({
            tenantId,
            limit,
            cursor,
            ...(ascending === undefined ? {} : { ascending }),
          });
          pages.push(p.data.map((r) => r.id));
          out.push(...p.data);
          cursor = p.nextCursor;
        } while (cursor !== null);
        return { out, pages };
      };
      const desc = await collect(t1.id, undefined, 2);
      expect(desc.out).toEqual([...mine].reverse());
      expect(desc.pages.map((p) => p.length)).toEqual([2, 2, 1]);
      const asc = await collect(t1.id, true, 2);
      expect(asc.out).toEqual(mine);
      expect(asc.pages.map((p) => p.length)).toEqual([2, 2, 1]);
      expect((await collect(t1.id, false, 10)).out).toEqual([...mine].reverse());
      expect((await collect(null, true, 3)).out).toEqual(records);
      expect((await collect(null, false, 3)).out).toEqual([...records].reverse());
      expect((await collect(t2.id, true, 1)).out).toEqual(records.filter((r) => r.tenantId === t2.id));
    });
  });
}
