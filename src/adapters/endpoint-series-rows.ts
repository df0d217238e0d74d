/**
 * The rows both stores' endpointSeries statement returns (one UNION ALL, one snapshot), folded into the port's
 * answer: `kind` says what a row counts, `b` is its bucket. Several rows may share a kind and bucket (deliveries
 * leave `pending` through several indexes); they are added up here.
 */
import {
  type AttemptBucketSums,
  type BucketCount,
  DELIVERED_LOOKBACK_MS,
  type EndpointSeriesSums,
} from '../domain/endpoint-series.ts';
import { idFloor } from '../domain/ids.ts';

/** The last millisecond a ULID holds: the upper bound of a read with no `until` (above every stamp and id). */
const NO_END = 2 ** 48 - 1;

/**
 * The bounds both statements bind: the time range [from, until) and the id ranges minted in it (ids sort by the
 * time they were minted at: attempts by their start, deliveries by their creation), and the look-back's floor.
 */
export function seriesBounds(from: number, until: number | null) {
  const end = until ?? NO_END;
  return {
    from,
    until: end,
    attemptFloor: idFloor('attempt', from),
    attemptCeiling: idFloor('attempt', end),
    deliveryFloor: idFloor('delivery', from),
    deliveryCeiling: idFloor('delivery', end),
    lookbackFloor: idFloor('attempt', from - DELIVERED_LOOKBACK_MS),
  };
}

export interface SeriesRow {
  kind: 'attempts' | 'created' | 'settled' | 'dead' | 'pending';
  b: number;
  n: number;
  /** Attempts only: delivered, and the sums of queue, platform and consumer times, and consumer times counted. */
  ok: number;
  q: number;
  p: number;
  c: number;
  cn: number;
}

export function foldSeriesRows(rows: SeriesRow[]): EndpointSeriesSums {
  const attempts = new Map<number, AttemptBucketSums>();
  const counts = {
    created: new Map<number, number>(),
    settled: new Map<number, number>(),
    dead: new Map<number, number>(),
  };
  const add = (m: Map<number, number>, b: number, n: number) => m.set(b, (m.get(b) ?? 0) + n);
  let pendingNow = 0;
  for (const r of rows) {
    const b = Number(r.b);
    const n = Number(r.n);
    if (r.kind === 'pending') pendingNow += n;
    else if (r.kind === 'attempts') {
      const a = attempts.get(b) ?? {
        bucket: b,
        attempts: 0,
        delivered: 0,
        queueMsSum: 0,
        platformMsSum: 0,
        consumerMsSum: 0,
        consumerCount: 0,
      };
      a.attempts += n;
      a.delivered += Number(r.ok);
      a.queueMsSum += Number(r.q);
      a.platformMsSum += Number(r.p);
      a.consumerMsSum += Number(r.c);
      a.consumerCount += Number(r.cn);
      attempts.set(b, a);
    } else {
      add(counts[r.kind], b, n);
      // A dead letter also left `pending`.
      if (r.kind === 'dead') add(counts.settled, b, n);
    }
  }
  const sorted = (m: Map<number, number>): BucketCount[] =>
    [...m].sort(([a], [b]) => a - b).map(([bucket, count]) => ({ bucket, count }));
  return {
    attempts: [...attempts.values()].sort((x, y) => x.bucket - y.bucket),
    deadLetters: sorted(counts.dead),
    created: sorted(counts.created),
    settled: sorted(counts.settled),
    pendingNow,
  };
}
