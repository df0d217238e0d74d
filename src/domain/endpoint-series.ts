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
 * - Retention (HOOKRAIL_RETENTION_EVENTS_DAYS, _DEAD_LETTERS_DAYS, _ATTEMPTS_DAYS) set below the window (7 days for
 *   `7d`): the buckets older than the retention lack what it deleted. Their attempts, success rate, latencies and
 *   dead letters are missing, a delivery created before the window and delivered inside it is not found once its
 *   attempt is gone, and a bucket's backlog is undercounted by the deliveries pending at its end that have since
 *   been deleted with their event (clamped at 0). No code makes up for it: the history is gone. With the defaults
 *   (30/30/90 days) none of this reaches into a 7-day window, except for the event-retention case above.
 * - Rows stamped after `now` by another process's clock are counted in the last bucket.
 *
 * Reading in two parts (app/endpoint-stats-cache.ts): the sums of the buckets that ended at least seriesSettleMs
 * ago (seriesSettledUntil) no longer change — every write that can still land in them has landed — so each is read
 * once and kept (until it leaves the window, or the entry is a day old); each request reads the rest (from that boundary on, with no upper bound) and
 * `pendingNow` in one statement (one snapshot), and joinSeriesSums puts the two together. Both reads go through the
 * same statement, bounded on the settled side, so the answer is the one a single read of the whole range gives,
 * except where a write lands later than seriesSettleMs allows: an attempt recorded after a store outage longer
 * than that, a retention pass deleting rows of a settled bucket. Either is missing (or still counted) until the
 * bucket leaves the window or the window is read again, at most a day later.
 */

import { ATTEMPT_TIMEOUT_MS } from './retry-schedule.ts';

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

/**
 * Beyond the lease and the attempt deadline, what seriesSettleMs allows for: the maintenance pass that returns an
 * expired lease runs every HOOKRAIL_MAINTENANCE_MS (5 s by default), completions wait for the store's write turn
 * and group commit and are retried with a back-off of up to 5 s when a write fails, and processes' clocks differ.
 */
export const SERIES_SETTLE_MARGIN_MS = MINUTE;

/**
 * How long after time t a write stamped at or before t can still land, so that the sums of a bucket that ended
 * this long ago no longer change:
 * - attempts are stamped with their start (the lease), and recorded when they finish: within ATTEMPT_TIMEOUT_MS of
 *   being sent;
 * - creations and completions are stamped with the time of the transaction that writes them;
 * - a delivery cancelled while its attempt was in flight is stamped again (moving its `settled` count to a later
 *   bucket) when the attempt is recorded or, when its worker is gone, when the lease (`leaseMs`,
 *   HOOKRAIL_LEASE_MS) has expired and the maintenance pass returns it;
 * plus SERIES_SETTLE_MARGIN_MS. With the default lease (60 s): 135 s.
 */
export const seriesSettleMs = (leaseMs: number): number =>
  leaseMs + ATTEMPT_TIMEOUT_MS + SERIES_SETTLE_MARGIN_MS;

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

/**
 * The end of the range's settled part: the last bucket boundary at or before `now − settleMs` (seriesSettleMs),
 * never before `from`. The buckets before it no longer change; the ones from it on are read on every request.
 */
export function seriesSettledUntil(range: SeriesRange, settleMs: number): number {
  if (!Number.isSafeInteger(settleMs) || settleMs < 0)
    throw new RangeError('settleMs must be an integer >= 0');
  const at = Math.floor((range.now - settleMs) / range.bucketMs) * range.bucketMs;
  return Math.max(range.from, at);
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
 * (k+1)·bucketMs); rows stamped before `from` (or at or after the read's `until`) are not read, rows after the
 * reader's `now` may have k ≥ buckets.
 */
export interface EndpointSeriesSums {
  attempts: AttemptBucketSums[];
  /** Deliveries that became `dead`, by `updated_at`. */
  deadLetters: BucketCount[];
  /** Deliveries created, by `created_at`. */
  created: BucketCount[];
  /** Deliveries that left `pending` for a terminal status (dead letters included), by `updated_at`. */
  settled: BucketCount[];
  /** Deliveries in status `pending` now, leased or not (0 when the read was not asked for it). */
  pendingNow: number;
}

/**
 * The sums of one range from its two reads: `settled`, read over [range.from, openFrom) with buckets counted from
 * range.from (its `pendingNow` is not used), and `open`, read from `openFrom` on — a bucket boundary — with
 * buckets counted from there, and `pendingNow`. The parts hold disjoint buckets, so the result keeps one entry per
 * bucket in ascending order.
 */
export function joinSeriesSums(
  range: SeriesRange,
  settled: EndpointSeriesSums,
  openFrom: number,
  open: EndpointSeriesSums,
): EndpointSeriesSums {
  const shift = (openFrom - range.from) / range.bucketMs;
  if (!Number.isSafeInteger(shift) || shift < 0) {
    throw new RangeError('openFrom must be a bucket boundary at or after from');
  }
  const moved = <T extends { bucket: number }>(rows: T[]): T[] =>
    rows.map((r) => ({ ...r, bucket: r.bucket + shift }));
  return {
    attempts: [...settled.attempts, ...moved(open.attempts)],
    deadLetters: [...settled.deadLetters, ...moved(open.deadLetters)],
    created: [...settled.created, ...moved(open.created)],
    settled: [...settled.settled, ...moved(open.settled)],
    pendingNow: open.pendingNow,
  };
}

/**
 * The buckets [first, end) of `sums`, counted from `first` (an entry that moved with its window, or a part of it);
 * `pendingNow` is kept.
 */
export function sliceSeriesSums(sums: EndpointSeriesSums, first: number, end: number): EndpointSeriesSums {
  if (!Number.isSafeInteger(first) || first < 0 || !(end >= first)) {
    throw new RangeError('first must be an integer >= 0 and end >= first');
  }
  if (first === 0 && end === Number.POSITIVE_INFINITY) return sums;
  const cut = <T extends { bucket: number }>(rows: T[]): T[] => {
    const out: T[] = [];
    for (const r of rows)
      if (r.bucket >= first && r.bucket < end) out.push({ ...r, bucket: r.bucket - first });
    return out;
  };
  return {
    attempts: cut(sums.attempts),
    deadLetters: cut(sums.deadLetters),
    created: cut(sums.created),
    settled: cut(sums.settled),
    pendingNow: sums.pendingNow,
  };
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
/** Delivered of attempted, in percent to two decimals; null without attempts (the health API's rates too). */
export const successPercent = (delivered: number, attempts: number): number | null =>
  attempts === 0 ? null : Math.round((delivered / attempts) * 10_000) / 100;

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
    b.successRatePercent = successPercent(b.delivered, b.attempts);
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
