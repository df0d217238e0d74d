/**
 * GET /v1/endpoints/:id/stats with the settled part of each window kept per process (app/endpoint-stats-cache.ts):
 * on both stores, an endpoint's history is driven through the store's own fan-out, lease, completion, lease expiry
 * and unsubscribe while a fake clock moves first by hours (three days of history), then by 97 s steps across
 * 5-minute, hourly and 6-hourly bucket boundaries; after every step each window is asked for twice, and the answers
 * must equal the series folded from one uncached read of the whole window. A second cache, over a store that
 * counts its reads, shows what a request reads: a new entry's settled part in pieces of at most six hours, then only the
 * buckets settled since and the open part, and the whole window again once the entry is a day old.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { createTestApp, STORE_KINDS, type TestApp } from '../../test/support/test-hookrail.ts';
import { EndpointStatsCache, READ_PIECE_MS, REREAD_AFTER_MS } from '../app/endpoint-stats-cache.ts';
import {
  foldSeries,
  SERIES_WINDOWS,
  type SeriesRange,
  seriesRange,
  seriesSettledUntil,
} from '../domain/endpoint-series.ts';
import { newId } from '../domain/ids.ts';
import type { AttemptCompletion, LeasedDelivery } from '../ports/delivery-store.ts';
import type { OperationsStore } from '../ports/operations-store.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** The dense steps run from 11:00 to about 12:20 on 2026-01-01 (UTC): across the 6-hour boundary at 12:00. */
const DENSE_FROM = Date.UTC(2026, 0, 1, 11);
const START = DENSE_FROM - 3 * DAY;
const LEASE_MS = 60_000;
/** When a slow attempt is recorded after its start: within the 15 s attempt deadline. */
const SLOW_MS = 14_000;

describe.each(STORE_KINDS)('endpoint stats cache on %s', (kind) => {
  let t: TestApp;
  const clock = new FakeClock(START);
  let tenantId: string;
  let tenantKey: string;
  let endpointId: string;
  let url: string;
  const rnd = () => randomBytes(10);

  beforeAll(async () => {
    t = await createTestApp(kind, { clock });
    const a = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } });
    tenantId = a.body.id;
    tenantKey = a.body.tenant_key;
    const ep = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: tenantKey,
      body: { url: 'https://hooks.example.com/in', event_types: ['*'] },
    });
    expect(ep.status).toBe(201);
    endpointId = ep.body.id;
    url = ep.body.url;
  });

  afterAll(async () => {
    await t?.close();
  });

  /**
   * One step of history at the clock's time: new events fanned out, due deliveries attempted. Returns the attempts
   * still running, which the caller records SLOW_MS after they started.
   */
  async function step(i: number): Promise<AttemptCompletion[]> {
    const now = clock.now();
    const events = Array.from({ length: 1 + (i % 3) }, (_, j) => ({
      id: newId('event', now, rnd()),
      tenantId,
      type: (i + j) % 2 === 0 ? 'order.created' : 'order.paid',
      resourceId: null,
      data: '{}',
      idempotencyKey: null,
      requestHash: null,
      createdAt: now,
    }));
    await t.store.eventInsertBatch({ events, now, idempotencyWindowMs: DAY });
    await t.store.fanoutRun({
      now,
      limit: 1_000,
      ids: { delivery: () => newId('delivery', now, rnd()), webhookId: () => newId('message', now, rnd()) },
    });
    // The maintenance role's pass: leases left in flight by an earlier step return to the queue.
    await t.store.deliveryExpireLeases({ now });
    const leased = await t.store.deliveryLease({
      owner: 'w1',
      now,
      limit: 100,
      perEndpoint: 100,
      leaseMs: LEASE_MS,
    });
    // Delivered, failed and due again 7 minutes on, dead-lettered (all recorded 2 s after they started), still
    // running (delivered, recorded by the caller), or left in flight by a worker that died (its lease expires).
    const fast: AttemptCompletion[] = [];
    const slow: AttemptCompletion[] = [];
    for (const [j, l] of leased.entries()) {
      const pick = (i + j) % 5;
      if (pick === 0) fast.push(completion(l, now, { status: 'delivered' }, j));
      if (pick === 1)
        fast.push(completion(l, now, { status: 'pending', nextAttemptAt: now + 7 * MINUTE }, j));
      if (pick === 2) fast.push(completion(l, now, { status: 'dead', reason: 'max_attempts' }, j));
      if (pick === 3) slow.push(completion(l, now, { status: 'delivered' }, j));
    }
    await t.store.deliveryComplete({ now: now + 2_000, completions: fast });
    // Now and then an unsubscribe cancels the pending `order.paid` deliveries (some of them in flight); the next
    // step subscribes again.
    if (i % 9 === 4) await setTypes(['order.created'], now + 3_000);
    if (i % 9 === 5) await setTypes(['*'], now + 3_000);
    return slow;
  }

  const setTypes = (eventTypes: string[], now: number) =>
    t.store.endpointUpdate({ id: endpointId, tenantId, patch: { eventTypes }, now });

  function completion(
    l: LeasedDelivery,
    startedAt: number,
    next: AttemptCompletion['next'],
    j: number,
  ): AttemptCompletion {
    const ok = next.status === 'delivered';
    return {
      leaseOwner: 'w1',
      next,
      attempt: {
        id: newId('attempt', startedAt, rnd()),
        deliveryId: l.delivery.id,
        endpointId,
        tenantId,
        eventId: l.delivery.eventId,
        attemptNo: l.delivery.attempts + 1,
        url,
        dueAt: startedAt - 10 * j,
        startedAt,
        finishedAt: startedAt + 1_500,
        outcome: ok ? 'delivered' : 'retryable',
        statusCode: ok ? 204 : 503,
        errorClass: ok ? null : 'http_status',
        errorMessage: null,
        request: { hops: [{ url, headers: {}, status: ok ? 204 : 503 }] },
        responseHeaders: null,
        responseBody: null,
        queueMs: 10 * j,
        platformMs: 3 + j,
        consumerMs: j % 2 === 0 ? 1_000 + j : null,
      },
    };
  }

  /** The series as one read of the whole window, with no cache, answers it. */
  async function uncached(range: SeriesRange) {
    const sums = await t.store.endpointSeries({
      endpointId,
      from: range.from,
      until: null,
      bucketMs: range.bucketMs,
      withPending: true,
    });
    return foldSeries(range, sums).map((b) => ({
      start: new Date(b.start).toISOString(),
      attempts: b.attempts,
      delivered: b.delivered,
      success_rate_percent: b.successRatePercent,
      latency_ms: b.latencyMs,
      dead_lettered: b.deadLettered,
      backlog: b.backlog,
    }));
  }

  it('answers as the uncached read does, across bucket boundaries, through the API', async () => {
    let compared = 0;
    let busy = 0;
    const askAll = async (label: string) => {
      for (const window of SERIES_WINDOWS) {
        for (let ask = 0; ask < 2; ask++) {
          const r = await t.request({
            method: 'GET',
            url: `/v1/endpoints/${endpointId}/stats?window=${window}`,
            token: tenantKey,
          });
          expect(r.status).toBe(200);
          const expected = await uncached(seriesRange(window, clock.now()));
          expect(r.body.buckets, `${label}, ${window}, ask ${ask}`).toEqual(expected);
          compared++;
          if (expected.some((b) => b.attempts > 0 || b.backlog > 0)) busy++;
        }
      }
    };
    // Nearly three days in steps of 7 h 13 min, then 100 s steps from 10:59:57 through 12:00: every third one
    // starts 3 s before a 5-minute boundary, so its slow attempts start in one bucket and are recorded in the next,
    // after the answers asked for at +13 s (which a cache with a settle time of 10 s or less would have kept
    // without them).
    const steps = [...Array<number>(9).fill(7 * HOUR + 13 * MINUTE), ...Array<number>(50).fill(100_000)];
    let at = START;
    for (const [i, by] of steps.entries()) {
      at = i === 9 ? DENSE_FROM - 3_000 : at + by;
      clock.set(at);
      const slow = await step(i);
      // Stamps of the step run to +3 s: ask once they are all in the past (and 10 s after the boundary, for every
      // third step), twice (the second from the cache).
      clock.set(at + 13_000);
      await askAll(`step ${i}`);
      clock.set(at + SLOW_MS);
      await t.store.deliveryComplete({ now: at + SLOW_MS, completions: slow });
      clock.set(at + SLOW_MS + 2_000);
      await askAll(`step ${i} after its slow attempts`);
    }
    expect(clock.now()).toBeGreaterThan(DENSE_FROM + HOUR + 20 * MINUTE);
    expect(compared).toBe(59 * 2 * 3 * 2);
    // The history is not empty: most answers have attempts or a backlog somewhere.
    expect(busy).toBeGreaterThan(compared * 0.9);
  });

  it('reads each settled bucket once (a new entry in pieces), the open part on every request', async () => {
    const reads: Array<{ from: number; until: number | null; withPending: boolean }> = [];
    const counting: Pick<OperationsStore, 'endpointSeries'> = {
      endpointSeries: (p) => {
        reads.push({ from: p.from, until: p.until, withPending: p.withPending });
        return t.store.endpointSeries(p);
      },
    };
    /** The reads made, settled ones first (the open one starts while a settled one waits for its entry's turn). */
    const made = () =>
      [...reads].sort((a, b) => Number(a.withPending) - Number(b.withPending) || a.from - b.from);
    const cache = new EndpointStatsCache({ leaseMs: LEASE_MS });
    const ask = async (window: (typeof SERIES_WINDOWS)[number]) => {
      const range = seriesRange(window, clock.now());
      const sums = await cache.sums(counting, endpointId, range);
      expect(foldSeries(range, sums)).toEqual(
        foldSeries(
          range,
          await t.store.endpointSeries({
            endpointId,
            from: range.from,
            until: null,
            bucketMs: range.bucketMs,
            withPending: true,
          }),
        ),
      );
      return range;
    };
    /** The settled reads cover [from, until) in contiguous pieces of at most READ_PIECE_MS. */
    const expectPieces = (from: number, until: number) => {
      const settled = reads.filter((r) => !r.withPending);
      expect(settled[0]?.from).toBe(from);
      expect(settled.at(-1)?.until).toBe(until);
      for (const [i, r] of settled.entries()) {
        expect(r.until! - r.from).toBeLessThanOrEqual(READ_PIECE_MS);
        if (i > 0) expect(r.from).toBe(settled[i - 1]!.until);
      }
      return settled.length;
    };

    // 12:31:00: now − 135 s is 12:28:45, so the 1h window's buckets up to 12:25 are settled.
    clock.set(Date.UTC(2026, 0, 1, 12, 31));
    await step(100);
    const r1 = await ask('1h');
    const settledUntil = Date.UTC(2026, 0, 1, 12, 25);
    expect(seriesSettledUntil(r1, cache.settleMs)).toBe(settledUntil);
    expect(made()).toEqual([
      { from: r1.from, until: settledUntil, withPending: false },
      { from: settledUntil, until: null, withPending: true },
    ]);
    // 12:32, in the same settled period, with writes meanwhile: only the open part is read.
    reads.length = 0;
    clock.advance(MINUTE);
    await step(101);
    await ask('1h');
    expect(reads).toEqual([{ from: settledUntil, until: null, withPending: true }]);
    // 12:35:15 is 12:30 + 135 s: the bucket from 12:25 is settled and read, the one that left the window dropped.
    reads.length = 0;
    clock.set(Date.UTC(2026, 0, 1, 12, 35, 15));
    await ask('1h');
    expect(made()).toEqual([
      { from: settledUntil, until: settledUntil + 5 * MINUTE, withPending: false },
      { from: settledUntil + 5 * MINUTE, until: null, withPending: true },
    ]);
    // A new 7d entry: its settled part (6 days and 12 hours here) read in pieces of at most READ_PIECE_MS.
    reads.length = 0;
    const r7 = await ask('7d');
    const settled7 = seriesSettledUntil(r7, cache.settleMs);
    expect(expectPieces(r7.from, settled7)).toBe(Math.ceil((settled7 - r7.from) / READ_PIECE_MS));
    expect(cache.size).toBe(2);
    // Six hours later one 6-hour bucket has settled: only it is read.
    reads.length = 0;
    clock.advance(6 * HOUR);
    const r7b = await ask('7d');
    expect(seriesSettledUntil(r7b, cache.settleMs)).toBe(settled7 + 6 * HOUR);
    expect(reads.filter((r) => !r.withPending)).toEqual([
      { from: settled7, until: settled7 + 6 * HOUR, withPending: false },
    ]);
    // A day after the entry was first read, the whole window is read again (what landed late or was deleted since).
    reads.length = 0;
    clock.set(r7.now + REREAD_AFTER_MS);
    const r7c = await ask('7d');
    expectPieces(r7c.from, seriesSettledUntil(r7c, cache.settleMs));
    // Concurrent requests for one entry take turns: the second finds the buckets the first read.
    reads.length = 0;
    const fresh = new EndpointStatsCache({ leaseMs: LEASE_MS });
    const r = seriesRange('24h', clock.now());
    const [x, y] = await Promise.all([
      fresh.sums(counting, endpointId, r),
      fresh.sums(counting, endpointId, r),
    ]);
    expect(y).toEqual(x);
    expectPieces(r.from, seriesSettledUntil(r, fresh.settleMs));
  });

  it('keeps at most maxEntries, dropping the least recently used', async () => {
    const reads: string[] = [];
    const range = seriesRange('24h', clock.now());
    const counting: Pick<OperationsStore, 'endpointSeries'> = {
      endpointSeries: (p) => {
        // An entry's first piece: the others start where the one before ended.
        if (p.until !== null && p.from === range.from) reads.push(p.endpointId);
        return t.store.endpointSeries(p);
      },
    };
    const cache = new EndpointStatsCache({ leaseMs: LEASE_MS, maxEntries: 2 });
    const [a, b, c] = [endpointId, newId('endpoint', 0, rnd()), newId('endpoint', 0, rnd())];
    for (const id of [a, b, a, c, a, b]) await cache.sums(counting, id!, range);
    // a, b read; a a hit; c read, dropping b (a was used more recently); a a hit; b read again.
    expect(reads).toEqual([a, b, c, b]);
    expect(cache.size).toBe(2);
  });
});
