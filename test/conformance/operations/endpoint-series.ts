/**
 * Operations conformance: endpointSeries, the raw sums behind GET /v1/endpoints/:id/stats. One endpoint's history
 * is driven through the store's own fan-out, lease, completion, unsubscribe and re-enable at chosen times, around
 * and inside a one-hour window of 5-minute buckets; the sums are checked exactly, and the backlog folded from them
 * (domain/endpoint-series.ts) against a count made here from the history as it was driven. Reads bounded by
 * `until`, and the window split in two reads at each bucket boundary (as app/endpoint-stats-cache.ts splits it),
 * add up to the single read.
 */
import { describe, expect } from 'vitest';
import {
  type EndpointSeriesSums,
  foldSeries,
  joinSeriesSums,
  seriesRange,
} from '../../../src/domain/endpoint-series.ts';
import type { AttemptCompletion, AttemptRecord, LeasedDelivery } from '../../../src/ports/delivery-store.ts';
import type { NewEvent } from '../../../src/ports/store.ts';
import { NOW } from '../store-conformance.ts';
import { DAY, HOUR, id, MINUTE, type OperationsSection, SECOND, WRITE_DELAY } from './harness.ts';

/** The window's first bucket starts at T0 (a multiple of 5 minutes). */
const T0 = NOW + 2 * HOUR;
const BUCKET = 5 * MINUTE;
const AT = (minutes: number, ms = 0) => T0 + minutes * MINUTE + ms;
const empty: EndpointSeriesSums = { attempts: [], deadLetters: [], created: [], settled: [], pendingNow: 0 };

export function endpointSeriesConformance({ h, test }: OperationsSection): void {
  const { newTenant, newEndpoint, lease, complete, deliveriesOf } = h;

  /** Deliveries' ids minted when they are created, as the fan-out worker does. */
  const idsAt = (at: number) => ({ delivery: () => id('delivery', at), webhookId: () => id('message', at) });

  describe('endpoint series', () => {
    test('endpointSeries: per-bucket attempts, latencies, dead letters, creations and completions; the backlog they derive', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { eventTypes: ['a.b', 'c.x'], maxConcurrency: 100 });
      const other = await newEndpoint(t.id, { eventTypes: ['x.other'], maxConcurrency: 100 });

      // The history as driven: when each of ep's deliveries was created and left `pending` (null: still pending).
      const history = new Map<string, { created: number; left: number | null }>();
      const byEvent = new Map<string, string>();

      async function publish(types: string[], at: number): Promise<string[]> {
        const events: NewEvent[] = types.map((type) => ({
          id: id('event', at),
          tenantId: t.id,
          type,
          resourceId: null,
          data: '{}',
          idempotencyKey: null,
          requestHash: null,
          createdAt: at,
        }));
        await h.store.eventInsertBatch({ events, now: at, idempotencyWindowMs: DAY });
        await h.store.fanoutRun({ now: at, limit: 1_000, ids: idsAt(at) });
        for (const d of await deliveriesOf(ep.id)) {
          if (!history.has(d.id)) history.set(d.id, { created: d.createdAt, left: null });
          byEvent.set(d.eventId, d.id);
        }
        return events.map((e) => byEvent.get(e.id) ?? `not for ep: ${e.type}`);
      }
      let leased: LeasedDelivery[] = [];
      const take = async (at: number, expected: string[]) => {
        leased = (await lease(at)).filter((l) => l.endpoint.id === ep.id);
        expect(leased.map((l) => l.delivery.id).sort()).toEqual([...expected].sort());
      };
      const attempt = async (
        deliveryId: string,
        at: number,
        next: AttemptCompletion['next'],
        timing: Partial<AttemptRecord>,
        failure: 'retryable' | 'permanent' | 'circuit_open' | null = next.status === 'delivered'
          ? null
          : 'retryable',
      ) => {
        await complete(
          leased.filter((l) => l.delivery.id === deliveryId),
          at,
          { failure, next, attempt: timing },
        );
        if (next.status !== 'pending') history.get(deliveryId)!.left = at + WRITE_DELAY;
      };
      const pendingAt = (at: number) => ({ status: 'pending' as const, nextAttemptAt: at });
      const delivered = { status: 'delivered' as const };

      // Before the window: six deliveries, one delivered there (p4); the others fail once and are due later.
      const [p1, p2, p3, p4, p5, p6] = await publish(['a.b', 'a.b', 'a.b', 'a.b', 'a.b', 'c.x'], AT(-30));
      await take(AT(-25), [p1!, p2!, p3!, p4!, p5!, p6!]);
      await attempt(p4!, AT(-25), delivered, {});
      await attempt(p1!, AT(-25), pendingAt(AT(2)), {});
      await attempt(p2!, AT(-25), pendingAt(AT(12)), {});
      await attempt(p3!, AT(-25), pendingAt(AT(0) + DAY), {});
      await attempt(p5!, AT(-25), pendingAt(AT(0, -SECOND)), {});
      await attempt(p6!, AT(-25), pendingAt(AT(0) + DAY), {});
      // p5: sent 100 ms before the window, recorded 100 ms into it (the attempt is outside, the completion inside).
      await take(AT(0, -SECOND), [p5!]);
      await attempt(p5!, AT(0, -100), delivered, {});

      // Bucket 0: a and b created; p1 delivered, a fails (delivered in bucket 3), b delivered.
      const [a, b, x] = await publish(['a.b', 'a.b', 'x.other'], AT(1));
      expect(x).toBe('not for ep: x.other');
      await take(AT(2), [p1!, a!, b!]);
      await attempt(p1!, AT(2), delivered, { queueMs: 5, platformMs: 2, consumerMs: 100 });
      await attempt(a!, AT(2, 10 * SECOND), pendingAt(AT(16)), {
        queueMs: 7,
        platformMs: 3,
        consumerMs: null,
      });
      await attempt(b!, AT(2, 20 * SECOND), delivered, { queueMs: 9, platformMs: 4, consumerMs: 50 });
      // Bucket 1: c created. Bucket 2: p2 dead letter; c fails (cancelled in bucket 6).
      const [c] = await publish(['c.x'], AT(6));
      await take(AT(12), [p2!, c!]);
      await attempt(
        p2!,
        AT(12),
        { status: 'dead', reason: 'max_attempts' },
        { queueMs: 1, platformMs: 1, consumerMs: 30 },
      );
      await attempt(c!, AT(12, 10 * SECOND), pendingAt(AT(0) + DAY), {
        queueMs: 2,
        platformMs: 2,
        consumerMs: null,
      });
      // Bucket 3: a delivered, a minute after it came due.
      await take(AT(17), [a!]);
      await attempt(a!, AT(17), delivered, { queueMs: 60_000, platformMs: 5, consumerMs: 200 });
      // Bucket 5: d created; a circuit_open record of it is no attempt sent.
      const [d] = await publish(['a.b'], AT(26));
      await take(AT(27), [d!]);
      await attempt(d!, AT(27), pendingAt(AT(0) + DAY), { queueMs: 3, platformMs: 3 }, 'circuit_open');
      // Bucket 6: unsubscribing from c.x cancels c and p6 (created before the window).
      await h.store.endpointUpdate({
        id: ep.id,
        tenantId: t.id,
        patch: { eventTypes: ['a.b'] },
        now: AT(31),
      });
      history.get(c!)!.left = AT(31);
      history.get(p6!)!.left = AT(31);
      // Bucket 7: disabled, then re-enabled resuming from T0: p3 (accepted before) is skipped, d due again.
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'disabled_by_tenant',
        now: AT(35),
      });
      const enabled = await h.store.endpointEnable({
        id: ep.id,
        tenantId: t.id,
        choice: { kind: 'resume_from', at: T0 },
        now: AT(36),
        ids: idsAt(AT(36)),
      });
      expect(enabled).toMatchObject({ requeued: 1, skipped: 1 });
      history.get(p3!)!.left = AT(36);
      // Bucket 8: e created and dead-lettered (permanent failure); d fails again.
      const [e] = await publish(['a.b'], AT(41));
      await take(AT(43), [d!, e!]);
      await attempt(d!, AT(43), pendingAt(AT(0) + DAY), { queueMs: 4, platformMs: 4, consumerMs: 1000 });
      await attempt(
        e!,
        AT(43, 10 * SECOND),
        { status: 'dead', reason: 'permanent_failure' },
        { queueMs: 6, platformMs: 2, consumerMs: 12 },
        'permanent',
      );
      // Bucket 10: f created at its very start (the end of bucket 9, whose backlog it is not in yet); leased in
      // bucket 11 and still in flight.
      const [f] = await publish(['a.b'], AT(50));
      await take(AT(56), [f!]);
      const now = AT(57, 30 * SECOND);

      // The history driven is the store's: still pending are d and f.
      const pending = (await deliveriesOf(ep.id, 'pending')).map((r) => r.id).sort();
      expect(pending).toEqual([d!, f!].sort());
      expect(
        [...history]
          .filter(([, v]) => v.left === null)
          .map(([k]) => k)
          .sort(),
      ).toEqual(pending);

      const range = seriesRange('1h', now);
      expect(range.from).toBe(T0);
      const read = (from: number, until: number | null, withPending = until === null, endpointId = ep.id) =>
        h.store.endpointSeries({ endpointId, from, until, bucketMs: BUCKET, withPending });
      const sums = await read(range.from, null);
      expect(sums).toEqual({
        attempts: [
          // p5's attempt started before the window.
          {
            bucket: 0,
            attempts: 3,
            delivered: 2,
            queueMsSum: 21,
            platformMsSum: 9,
            consumerMsSum: 150,
            consumerCount: 2,
          },
          {
            bucket: 2,
            attempts: 2,
            delivered: 0,
            queueMsSum: 3,
            platformMsSum: 3,
            consumerMsSum: 30,
            consumerCount: 1,
          },
          {
            bucket: 3,
            attempts: 1,
            delivered: 1,
            queueMsSum: 60_000,
            platformMsSum: 5,
            consumerMsSum: 200,
            consumerCount: 1,
          },
          {
            bucket: 8,
            attempts: 2,
            delivered: 0,
            queueMsSum: 10,
            platformMsSum: 6,
            consumerMsSum: 1012,
            consumerCount: 2,
          },
        ],
        deadLetters: [
          { bucket: 2, count: 1 },
          { bucket: 8, count: 1 },
        ],
        created: [
          { bucket: 0, count: 2 },
          { bucket: 1, count: 1 },
          { bucket: 5, count: 1 },
          { bucket: 8, count: 1 },
          { bucket: 10, count: 1 },
        ],
        // p5, p1, b; p2; a; c, p6; p3; e.
        settled: [
          { bucket: 0, count: 3 },
          { bucket: 2, count: 1 },
          { bucket: 3, count: 1 },
          { bucket: 6, count: 2 },
          { bucket: 7, count: 1 },
          { bucket: 8, count: 1 },
        ],
        pendingNow: 2,
      } satisfies EndpointSeriesSums);

      // The backlog at each bucket's end, counted from the history: created before it and not yet left.
      const series = foldSeries(range, sums);
      const backlogAt = (end: number) =>
        [...history.values()].filter((v) => v.created < end && (v.left === null || v.left >= end)).length;
      expect(series.map((s) => s.backlog)).toEqual(
        series.map((s, k) => (k === series.length - 1 ? pending.length : backlogAt(s.start + BUCKET))),
      );
      expect(series.map((s) => s.backlog)).toEqual([4, 5, 4, 3, 3, 4, 2, 1, 1, 1, 2, 2]);
      expect(series[0]).toEqual({
        start: T0,
        attempts: 3,
        delivered: 2,
        successRatePercent: 66.67,
        latencyMs: { queue: 7, platform: 3, consumer: 75 },
        deadLettered: 0,
        backlog: 4,
      });
      expect(series[5]).toMatchObject({ attempts: 0, successRatePercent: null, latencyMs: { queue: null } });

      // A later start: what was stamped before it is not read, a delivery settled before it is not counted again.
      expect(await read(AT(30), null)).toEqual({
        attempts: [
          {
            bucket: 2,
            attempts: 2,
            delivered: 0,
            queueMsSum: 10,
            platformMsSum: 6,
            consumerMsSum: 1012,
            consumerCount: 2,
          },
        ],
        deadLetters: [{ bucket: 2, count: 1 }],
        created: [
          { bucket: 2, count: 1 },
          { bucket: 4, count: 1 },
        ],
        settled: [
          { bucket: 0, count: 2 },
          { bucket: 1, count: 1 },
          { bucket: 2, count: 1 },
        ],
        pendingNow: 2,
      });
      // Bounded: nothing stamped at or after `until` (a's delivery in bucket 3, c's and p6's cancellation in bucket
      // 6, ...), no pending count without withPending; p5, created before the window and delivered in bucket 0, is
      // found through the look-back as before.
      expect(await read(T0, AT(15))).toEqual({
        attempts: sums.attempts.filter((a) => a.bucket < 3),
        deadLetters: [{ bucket: 2, count: 1 }],
        created: [
          { bucket: 0, count: 2 },
          { bucket: 1, count: 1 },
        ],
        settled: [
          { bucket: 0, count: 3 },
          { bucket: 2, count: 1 },
        ],
        pendingNow: 0,
      });
      expect(await read(T0, AT(50), true)).toMatchObject({
        created: sums.created.slice(0, 4),
        pendingNow: 2,
      });
      expect(await read(T0, T0)).toEqual(empty);
      // Split at every bucket boundary (as the stats cache splits a window into its settled and open parts), the
      // two reads add up to the single one: a delivery created before the split and delivered after it (a: created
      // in bucket 0, delivered in bucket 3) is found by the open part's look-back.
      for (let k = 0; k <= 12; k++) {
        const at = T0 + k * BUCKET;
        const joined = joinSeriesSums(range, await read(T0, at), at, await read(at, null));
        expect(joined, `split at bucket ${k}`).toEqual(sums);
      }

      // Per endpoint: the other one has only x, created in bucket 0 and in flight.
      expect(await read(T0, null, true, other.id)).toEqual({
        attempts: [],
        deadLetters: [],
        created: [{ bucket: 0, count: 1 }],
        settled: [],
        pendingNow: 1,
      });
      expect(await read(T0, null, true, id('endpoint'))).toEqual({
        attempts: [],
        deadLetters: [],
        created: [],
        settled: [],
        pendingNow: 0,
      });
    });
  });
}
