/**
 * An endpoint's time series (GET /v1/endpoints/:id/stats, the console's charts): per bucket of a window, the
 * attempts sent, how many were delivered, their mean latency split, the dead letters and the backlog at the
 * bucket's end. Pure: the caller passes `now`, the store passes raw per-bucket sums (EndpointSeriesSums), and this
 * module aligns the buckets and folds the sums into the answer.
 *
 * Buckets are aligned on the Unix epoch (every start is a multiple of the bucket size), the last one holds `now`
 * (it is partial; when `now` falls exactly on a boundary it is the bucket starting at `now`), and bucket k covers
 * [from + k·bucketMs, from + (k+1)·bucketMs).
 *
 * Backlog history is derived, not sampled. The backlog at time e is the number of the endpoint's deliveries in
 * status `pending` (leased or not) once everything stamped before e has happened:
 *
 *     backlog(e) = pendingNow − (deliveries created at or after e) + (deliveries that left `pending` at or after e)
 *
 * where "left pending at t" is a row in a terminal status (delivered, dead, cancelled, skipped) whose `updated_at`
 * is t. For the last bucket it is `pendingNow` itself. Exact under these assumptions, checked against every write
 * of `deliveries` in both stores:
 * - Deliveries are only ever inserted as `pending` (fan-out, replay, re-enable's replays, test events), with
 *   `created_at` the time their id was minted (ids sort by time: the stores find them by id range).
 * - Every move out of `pending` sets `updated_at` to its time (completion, a late "delivered" after a lease expired,
 *   cancellation on unsubscribe or deletion, skip on re-enable). Nothing moves a row back to `pending`.
 * - A terminal row's `updated_at` does not change afterwards — except for a delivery cancelled while its attempt was
 *   in flight: the attempt's completion (which may turn it `delivered`) or the lease's expiry stamps it again. Such
 *   a delivery counts as pending until that second stamp, at most one lease (HOOKRAIL_LEASE_MS) too long.
 * Limits:
 * - Retention deletes finished deliveries with their event once the event is older than its retention (30 days by
 *   default). A delivery so deleted is missing from both sides of the sum: the backlog is undercounted over the
 *   part of its pending life that lies inside the window (only possible for a delivery of an event older than the
 *   event retention that finished inside the window: a replay of an old event, or a backlog kept pending for weeks
 *   behind a disabled endpoint and then skipped). The result is clamped at 0.
 * - A delivery created before the window and delivered inside it is found by the stores through its `delivered`
 *   attempt, which must have started at most DELIVERED_LOOKBACK_MS before the window (an attempt lasts at most
 *   ATTEMPT_TIMEOUT_MS and is written in the same turn; only a store outage longer than that between an attempt and
 *   its recording hides one).
 * - The sums are read in one statement (one snapshot); rows stamped after `now` by another process's clock are
 *   counted in the last bucket.
 */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

export const SERIES_WINDOWS = ['1h', '24h', '7d'] as const;
export type SeriesWindow = (typeof SERIES_WINDOWS)[number];
export const DEFAULT_SERIES_WINDOW: SeriesWindow = '24h';

/** Bucket size and count per window: 12 × 5 min, 24 × 1 h, 28 × 6 h. */
export const SERIES_SHAPES: Readonly<Record<SeriesWindow, { bucketMs: number; buckets: number }>> = {
  '1h': { bucketMs: 5 * MINUTE, buckets: 12 },
  '24h': { bucketMs: HOUR, buckets: 24 },
  '7d': { bucketMs: 6 * HOUR, buckets: 28 },
};

/**
 * How long before the window a `delivered` attempt may have started and still be found for a delivery created
 * before the window and delivered inside it (the stores look that far back in the attempt log).
 */
export const DELIVERED_LOOKBACK_MS = HOUR;

export const isSeriesWindow = (s: string): s is SeriesWindow =>
  (SERIES_WINDOWS as readonly string[]).includes(s);

export interface SeriesRange {
  window: SeriesWindow;
  bucketMs: number;
  buckets: number;
  /** Start of the first bucket. */
  from: number;
  now: number;
}

export function seriesRange(window: SeriesWindow, now: number): SeriesRange {
  if (!Number.isSafeInteger(now) || now < 0) throw new RangeError('now must be an integer >= 0');
  const { bucketMs, buckets } = SERIES_SHAPES[window];
  const last = Math.floor(now / bucketMs) * bucketMs;
  return { window, bucketMs, buckets, from: last - (buckets - 1) * bucketMs, now };
}

/** A count in bucket `bucket` (0-based from the range's `from`). */
export interface BucketCount {
  bucket: number;
  count: number;
}

export interface AttemptBucketSums {
  bucket: number;
  /** Attempts sent (started in the bucket; `circuit_open` excluded). */
  attempts: number;
  delivered: number;
  queueMsSum: number;
  platformMsSum: number;
  /** Over the attempts with a consumer time (`consumerCount` of them). */
  consumerMsSum: number;
  consumerCount: number;
}

/**
 * What a store reads for one endpoint and range (OperationsStore.endpointSeries): sparse (a bucket with nothing is
 * absent), one entry per bucket in ascending order. Bucket k holds rows stamped in [from + k·bucketMs, from +
 * (k+1)·bucketMs); rows stamped before `from` are not read, rows after the reader's `now` may have k ≥ buckets.
 */
export interface EndpointSeriesSums {
  attempts: AttemptBucketSums[];
  /** Deliveries that became `dead`, by `updated_at`. */
  deadLetters: BucketCount[];
  /** Deliveries created, by `created_at`. */
  created: BucketCount[];
  /** Deliveries that left `pending` for a terminal status (dead letters included), by `updated_at`. */
  settled: BucketCount[];
  /** Deliveries in status `pending` now, leased or not. */
  pendingNow: number;
}

export interface SeriesBucket {
  start: number;
  attempts: number;
  delivered: number;
  /** delivered / attempts in percent, 2 decimals; null without attempts. */
  successRatePercent: number | null;
  /** Means, to 0.1 ms; null when no attempt (with a consumer time, for `consumer`) is in the bucket. */
  latencyMs: { queue: number | null; platform: number | null; consumer: number | null };
  deadLettered: number;
  /** Pending deliveries at the bucket's end (the last bucket: now); see the header. */
  backlog: number;
}

const mean = (sum: number, n: number) => (n === 0 ? null : Math.round((sum / n) * 10) / 10);
const percent = (part: number, whole: number) =>
  whole === 0 ? null : Math.round((part / whole) * 10_000) / 100;

export function foldSeries(range: SeriesRange, sums: EndpointSeriesSums): SeriesBucket[] {
  const n = range.buckets;
  assertCount(sums.pendingNow, 'pendingNow');
  // Later than now (another clock): the last bucket.
  const at = (bucket: number, what: string) => {
    assertCount(bucket, `${what}.bucket`);
    return Math.min(bucket, n - 1);
  };
  const out: SeriesBucket[] = Array.from({ length: n }, (_, k) => ({
    start: range.from + k * range.bucketMs,
    attempts: 0,
    delivered: 0,
    successRatePercent: null,
    latencyMs: { queue: null, platform: null, consumer: null },
    deadLettered: 0,
    backlog: 0,
  }));
  const sent = Array.from({ length: n }, () => ({ q: 0, p: 0, c: 0, cn: 0 }));
  for (const a of sums.attempts) {
    const k = at(a.bucket, 'attempts');
    assertCount(a.attempts, 'attempts');
    if (a.delivered > a.attempts || a.consumerCount > a.attempts) {
      throw new RangeError('delivered and consumerCount must not exceed attempts');
    }
    out[k]!.attempts += a.attempts;
    out[k]!.delivered += a.delivered;
    const s = sent[k]!;
    s.q += a.queueMsSum;
    s.p += a.platformMsSum;
    s.c += a.consumerMsSum;
    s.cn += a.consumerCount;
  }
  for (const [k, b] of out.entries()) {
    const s = sent[k]!;
    b.successRatePercent = percent(b.delivered, b.attempts);
    b.latencyMs = {
      queue: mean(s.q, b.attempts),
      platform: mean(s.p, b.attempts),
      consumer: mean(s.c, s.cn),
    };
  }
  for (const d of sums.deadLetters) out[at(d.bucket, 'deadLetters')]!.deadLettered += count(d.count);

  // Net growth of the backlog per bucket: created − settled.
  const net = new Array<number>(n).fill(0);
  for (const c of sums.created) net[at(c.bucket, 'created')]! += count(c.count);
  for (const s of sums.settled) net[at(s.bucket, 'settled')]! -= count(s.count);
  // Backwards from now: the backlog at the end of bucket k is pendingNow less the net growth after it.
  let after = 0;
  for (let k = n - 1; k >= 0; k--) {
    out[k]!.backlog = Math.max(0, sums.pendingNow - after);
    after += net[k]!;
  }
  return out;
}

function count(n: number): number {
  assertCount(n, 'count');
  return n;
}

function assertCount(n: number, name: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name} must be an integer >= 0`);
}
