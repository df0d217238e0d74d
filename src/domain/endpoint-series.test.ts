import { describe, expect, it } from 'vitest';
import {
  DEFAULT_SERIES_WINDOW,
  type EndpointSeriesSums,
  foldSeries,
  isSeriesWindow,
  joinSeriesSums,
  SERIES_SETTLE_MARGIN_MS,
  SERIES_SHAPES,
  seriesRange,
  seriesSettledUntil,
  seriesSettleMs,
  sliceSeriesSums,
} from './endpoint-series.ts';
import { ATTEMPT_TIMEOUT_MS } from './retry-schedule.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
/** 2026-01-01T00:00:00Z: a multiple of every bucket size. */
const MIDNIGHT = Date.UTC(2026, 0, 1);

const empty: EndpointSeriesSums = { attempts: [], deadLetters: [], created: [], settled: [], pendingNow: 0 };

describe('windows and bucket alignment', () => {
  it('has three windows, 24h by default', () => {
    expect(DEFAULT_SERIES_WINDOW).toBe('24h');
    expect(SERIES_SHAPES).toEqual({
      '1h': { bucketMs: 5 * MIN, buckets: 12 },
      '24h': { bucketMs: HOUR, buckets: 24 },
      '7d': { bucketMs: 6 * HOUR, buckets: 28 },
    });
    expect(['1h', '24h', '7d'].every(isSeriesWindow)).toBe(true);
    expect(['1d', '', '24H', '1h '].some(isSeriesWindow)).toBe(false);
  });

  it('ends with the bucket holding now, starts buckets − 1 buckets before it', () => {
    const now = MIDNIGHT + 10 * HOUR + 7 * MIN + 12_345;
    expect(seriesRange('1h', now)).toEqual({
      window: '1h',
      bucketMs: 5 * MIN,
      buckets: 12,
      from: MIDNIGHT + 10 * HOUR + 5 * MIN - 55 * MIN,
      now,
    });
    expect(seriesRange('24h', now).from).toBe(MIDNIGHT + 10 * HOUR - 23 * HOUR);
    // 6-hour buckets aligned on the epoch: the last one starts at 06:00 UTC.
    expect(seriesRange('7d', now).from).toBe(MIDNIGHT + 6 * HOUR - 27 * 6 * HOUR);
  });

  it('now exactly on a boundary: the last bucket starts at now', () => {
    const now = MIDNIGHT + 3 * HOUR;
    const r = seriesRange('24h', now);
    expect(r.from).toBe(now - 23 * HOUR);
    const buckets = foldSeries(r, empty);
    expect(buckets.at(-1)!.start).toBe(now);
    expect(buckets[0]!.start).toBe(r.from);
    // One millisecond earlier, the last bucket is the previous hour.
    expect(seriesRange('24h', now - 1).from).toBe(now - 24 * HOUR);
  });

  it('every bucket start is a multiple of the bucket size', () => {
    for (const w of ['1h', '24h', '7d'] as const) {
      const r = seriesRange(w, MIDNIGHT + 987_654_321);
      const buckets = foldSeries(r, empty);
      expect(buckets).toHaveLength(SERIES_SHAPES[w].buckets);
      for (const b of buckets) expect(b.start % SERIES_SHAPES[w].bucketMs).toBe(0);
      expect(buckets.at(-1)!.start).toBeLessThanOrEqual(r.now);
      expect(buckets.at(-1)!.start + r.bucketMs).toBeGreaterThan(r.now);
    }
  });

  it('the first bucket at the epoch itself', () => {
    expect(seriesRange('1h', 55 * MIN).from).toBe(0);
    expect(() => seriesRange('1h', -1)).toThrow(RangeError);
    expect(() => seriesRange('1h', 1.5)).toThrow(RangeError);
  });
});

describe('folding the sums', () => {
  const r = seriesRange('1h', MIDNIGHT + HOUR - 1); // 12 buckets of 5 min from MIDNIGHT

  it('empty: zeros, nulls, and no backlog', () => {
    const b = foldSeries(r, empty);
    expect(b[0]).toEqual({
      start: MIDNIGHT,
      attempts: 0,
      delivered: 0,
      successRatePercent: null,
      latencyMs: { queue: null, platform: null, consumer: null },
      deadLettered: 0,
      backlog: 0,
    });
    expect(b.every((x) => x.attempts === 0 && x.backlog === 0)).toBe(true);
  });

  it('rates to 2 decimals, means to 0.1 ms, consumer over the attempts that have a consumer time', () => {
    const b = foldSeries(r, {
      ...empty,
      attempts: [
        {
          bucket: 2,
          attempts: 3,
          delivered: 2,
          queueMsSum: 10,
          platformMsSum: 4,
          consumerMsSum: 301,
          consumerCount: 2,
        },
        {
          bucket: 3,
          attempts: 1,
          delivered: 0,
          queueMsSum: 0,
          platformMsSum: 1,
          consumerMsSum: 0,
          consumerCount: 0,
        },
      ],
      deadLetters: [{ bucket: 3, count: 1 }],
    });
    expect(b[2]).toMatchObject({
      attempts: 3,
      delivered: 2,
      successRatePercent: 66.67,
      latencyMs: { queue: 3.3, platform: 1.3, consumer: 150.5 },
      deadLettered: 0,
    });
    expect(b[3]).toMatchObject({
      successRatePercent: 0,
      latencyMs: { queue: 0, platform: 1, consumer: null },
      deadLettered: 1,
    });
  });

  it('backlog: pending now at the end, then backwards through creations and completions', () => {
    // History, 5-minute buckets: 4 pending before the window; bucket 0 creates 3 and settles 1; bucket 2 settles
    // 4; bucket 5 creates 2; bucket 9 creates 1 and settles 2; bucket 11 (now) creates 1. Pending now: 4.
    const b = foldSeries(r, {
      ...empty,
      created: [
        { bucket: 0, count: 3 },
        { bucket: 5, count: 2 },
        { bucket: 9, count: 1 },
        { bucket: 11, count: 1 },
      ],
      settled: [
        { bucket: 0, count: 1 },
        { bucket: 2, count: 4 },
        { bucket: 9, count: 2 },
      ],
      pendingNow: 4,
    });
    expect(b.map((x) => x.backlog)).toEqual([6, 6, 2, 2, 2, 4, 4, 4, 4, 3, 3, 4]);
  });

  it('backlog: the last bucket is pending now, whatever happened in it', () => {
    const b = foldSeries(r, {
      ...empty,
      created: [{ bucket: 11, count: 5 }],
      settled: [{ bucket: 11, count: 2 }],
      pendingNow: 7,
    });
    expect(b.at(-1)!.backlog).toBe(7);
    expect(b.at(-2)!.backlog).toBe(4);
  });

  it('entries of one bucket add up; stamps after now count in the last bucket', () => {
    const b = foldSeries(r, {
      ...empty,
      created: [{ bucket: 13, count: 1 }],
      settled: [
        { bucket: 4, count: 1 },
        { bucket: 4, count: 2 },
      ],
      deadLetters: [{ bucket: 12, count: 1 }],
      pendingNow: 1,
    });
    expect(b.at(-1)!.deadLettered).toBe(1);
    expect(b.at(-1)!.backlog).toBe(1);
    expect(b[10]!.backlog).toBe(0); // the delivery created "after now" did not exist yet
    expect(b[3]!.backlog).toBe(3);
    expect(b[4]!.backlog).toBe(0);
  });

  it('clamps a backlog the history cannot account for at 0', () => {
    // 10 created in bucket 8, none pending now and no completion seen (retention deleted them).
    const b = foldSeries(r, { ...empty, created: [{ bucket: 8, count: 10 }], pendingNow: 0 });
    expect(b.map((x) => x.backlog)).toEqual(Array(12).fill(0));
    const c = foldSeries(r, { ...empty, created: [{ bucket: 8, count: 10 }], pendingNow: 3 });
    expect(c.map((x) => x.backlog)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3]);
  });

  it('rejects sums that are not counts', () => {
    expect(() => foldSeries(r, { ...empty, pendingNow: -1 })).toThrow(RangeError);
    expect(() => foldSeries(r, { ...empty, created: [{ bucket: -1, count: 1 }] })).toThrow(RangeError);
    expect(() => foldSeries(r, { ...empty, settled: [{ bucket: 0, count: 0.5 }] })).toThrow(RangeError);
    expect(() =>
      foldSeries(r, {
        ...empty,
        attempts: [
          {
            bucket: 0,
            attempts: 1,
            delivered: 2,
            queueMsSum: 0,
            platformMsSum: 0,
            consumerMsSum: 0,
            consumerCount: 0,
          },
        ],
      }),
    ).toThrow(RangeError);
  });
});

describe('the settled part of a window', () => {
  it('settles after the lease, the attempt deadline and a margin', () => {
    expect(seriesSettleMs(60_000)).toBe(60_000 + ATTEMPT_TIMEOUT_MS + SERIES_SETTLE_MARGIN_MS);
    expect(seriesSettleMs(60_000)).toBe(135_000);
  });

  it('ends at the last bucket boundary at or before now − settle, never before from', () => {
    const settle = 135_000;
    // 10:07:30: now − settle is 10:05:15, so the 5-minute buckets up to 10:05 are settled.
    const r = seriesRange('1h', MIDNIGHT + 10 * HOUR + 7 * MIN + 30_000);
    expect(seriesSettledUntil(r, settle)).toBe(MIDNIGHT + 10 * HOUR + 5 * MIN);
    // 10:07:14.999: the bucket from 10:00 is not settled yet.
    expect(seriesSettledUntil({ ...r, now: MIDNIGHT + 10 * HOUR + 7 * MIN + 14_999 }, settle)).toBe(
      MIDNIGHT + 10 * HOUR,
    );
    // Exactly on it: settled.
    expect(seriesSettledUntil({ ...r, now: MIDNIGHT + 10 * HOUR + 7 * MIN + 15_000 }, settle)).toBe(
      MIDNIGHT + 10 * HOUR + 5 * MIN,
    );
    // 7d: hours into the last 6-hour bucket, every bucket before it is settled.
    const w = seriesRange('7d', MIDNIGHT + 9 * HOUR);
    expect(seriesSettledUntil(w, settle)).toBe(MIDNIGHT + 6 * HOUR);
    expect(seriesSettledUntil(w, 0)).toBe(MIDNIGHT + 6 * HOUR);
    // A settle time longer than the window: nothing is settled.
    expect(seriesSettledUntil(r, 2 * HOUR)).toBe(r.from);
    expect(() => seriesSettledUntil(r, -1)).toThrow(RangeError);
  });

  it('joins the settled and the open reads: buckets shifted, the pending count the open read’s', () => {
    const r = seriesRange('1h', MIDNIGHT + HOUR - 1); // 12 buckets of 5 min from MIDNIGHT
    const a = (bucket: number, attempts: number) => ({
      bucket,
      attempts,
      delivered: attempts,
      queueMsSum: attempts,
      platformMsSum: attempts,
      consumerMsSum: attempts,
      consumerCount: attempts,
    });
    const settled: EndpointSeriesSums = {
      attempts: [a(0, 1), a(8, 2)],
      deadLetters: [{ bucket: 3, count: 1 }],
      created: [{ bucket: 0, count: 4 }],
      settled: [{ bucket: 8, count: 2 }],
      pendingNow: 99, // not asked for, not used
    };
    const open: EndpointSeriesSums = {
      attempts: [a(0, 3), a(2, 1)],
      deadLetters: [],
      created: [{ bucket: 1, count: 2 }],
      settled: [{ bucket: 0, count: 1 }],
      pendingNow: 5,
    };
    const joined = joinSeriesSums(r, settled, MIDNIGHT + 45 * MIN, open);
    expect(joined).toEqual({
      attempts: [a(0, 1), a(8, 2), a(9, 3), a(11, 1)],
      deadLetters: [{ bucket: 3, count: 1 }],
      created: [
        { bucket: 0, count: 4 },
        { bucket: 10, count: 2 },
      ],
      settled: [
        { bucket: 8, count: 2 },
        { bucket: 9, count: 1 },
      ],
      pendingNow: 5,
    });
    expect(joinSeriesSums(r, empty, r.from, open).attempts).toEqual(open.attempts);
    expect(() => joinSeriesSums(r, empty, r.from + 1, open)).toThrow(RangeError);
    expect(() => joinSeriesSums(r, empty, r.from - 5 * MIN, open)).toThrow(RangeError);
  });

  it('slices buckets [first, end) out of a read, counted from first, the pending count kept', () => {
    const sums: EndpointSeriesSums = {
      attempts: [
        {
          bucket: 1,
          attempts: 2,
          delivered: 1,
          queueMsSum: 3,
          platformMsSum: 4,
          consumerMsSum: 5,
          consumerCount: 1,
        },
      ],
      deadLetters: [
        { bucket: 0, count: 1 },
        { bucket: 4, count: 2 },
      ],
      created: [
        { bucket: 2, count: 3 },
        { bucket: 3, count: 1 },
      ],
      settled: [{ bucket: 3, count: 7 }],
      pendingNow: 6,
    };
    expect(sliceSeriesSums(sums, 1, 4)).toEqual({
      attempts: [{ ...sums.attempts[0]!, bucket: 0 }],
      deadLetters: [],
      created: [
        { bucket: 1, count: 3 },
        { bucket: 2, count: 1 },
      ],
      settled: [{ bucket: 2, count: 7 }],
      pendingNow: 6,
    });
    expect(sliceSeriesSums(sums, 4, Number.POSITIVE_INFINITY).deadLetters).toEqual([{ bucket: 0, count: 2 }]);
    expect(sliceSeriesSums(sums, 0, Number.POSITIVE_INFINITY)).toBe(sums);
    expect(sliceSeriesSums(sums, 2, 2).created).toEqual([]);
    // The input is not changed.
    expect(sums.created[0]).toEqual({ bucket: 2, count: 3 });
    expect(() => sliceSeriesSums(sums, -1, 3)).toThrow(RangeError);
    expect(() => sliceSeriesSums(sums, 1.5, 3)).toThrow(RangeError);
    expect(() => sliceSeriesSums(sums, 3, 2)).toThrow(RangeError);
  });
});
