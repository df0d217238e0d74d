/**
 * The rows both stores' endpointSeries statement returns (one UNION ALL, one snapshot), folded into the port's
 * answer: `kind` says what a row counts, `b` is its bucket. Several rows may share a kind and bucket (deliveries
 * leave `pending` through several indexes); they are added up here.
 */
import type { AttemptBucketSums, BucketCount, EndpointSeriesSums } from '../domain/endpoint-series.ts';

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
