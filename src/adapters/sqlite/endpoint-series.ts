/**
 * An endpoint's time series on SQLite (OperationsStore.endpointSeries; what the sums mean and what the backlog
 * derivation assumes: the port and domain/endpoint-series.ts). One statement, so one snapshot: the pipeline thread
 * writes through its own connection meanwhile.
 */
import type { OperationsStore } from '../../ports/operations-store.ts';
import { foldSeriesRows, type SeriesRow, seriesBounds } from '../endpoint-series-rows.ts';
import { JUDGES_ENDPOINT_SQL } from '../judged-attempts.ts';
import type { St } from './rows.ts';

/** better-sqlite3 binds numbers as REAL: the bucket is made an integer explicitly. */
const bucket = (column: string) => `CAST((${column} - @from) / @bucket AS INTEGER)`;
const NO_SUMS = '0 AS ok, 0 AS q, 0 AS p, 0 AS c, 0 AS cn';
/** A stamp in [from, until). */
const within = (column: string) => `${column} >= @from AND ${column} < @until`;

/**
 * Each part reads one index range, bounded on both sides: attempts_endpoint and deliveries_endpoint over the ids
 * minted in [from, until) (`fresh`: the range's deliveries, by creation and — for those delivered in the range — by
 * completion), the attempt log from DELIVERED_LOOKBACK_MS before `from` up to `until` for older deliveries
 * delivered in the range (one primary-key probe each), deliveries_dead and deliveries_withdrawn by time,
 * deliveries_head for the pending count (only with @pending: a constant condition, so the read is skipped
 * otherwise).
 */
const SERIES = `
  WITH fresh AS MATERIALIZED (
    SELECT CASE WHEN ${within('created_at')} THEN ${bucket('created_at')} END AS cb,
           CASE WHEN status = 'delivered' AND ${within('updated_at')} THEN ${bucket('updated_at')} END AS ub,
           count(*) AS n
      FROM deliveries WHERE endpoint_id = @id AND id >= @deliveryFloor AND id < @deliveryCeiling
     GROUP BY cb, ub)
  SELECT 'attempts' AS kind, ${bucket('started_at')} AS b, count(*) AS n, sum(outcome = 'delivered') AS ok,
         sum(queue_ms) AS q, sum(platform_ms) AS p, coalesce(sum(consumer_ms), 0) AS c, count(consumer_ms) AS cn
    FROM attempts
   WHERE endpoint_id = @id AND id >= @attemptFloor AND id < @attemptCeiling AND ${within('started_at')}
     AND ${JUDGES_ENDPOINT_SQL}
   GROUP BY b
  UNION ALL
  SELECT 'created', cb, sum(n), ${NO_SUMS} FROM fresh WHERE cb IS NOT NULL GROUP BY cb
  UNION ALL
  SELECT 'settled', ub, sum(n), ${NO_SUMS} FROM fresh WHERE ub IS NOT NULL GROUP BY ub
  UNION ALL
  SELECT 'settled', ${bucket('updated_at')} AS b, count(*), ${NO_SUMS} FROM deliveries
   WHERE id IN (SELECT delivery_id FROM attempts
                 WHERE endpoint_id = @id AND id >= @lookbackFloor AND id < @attemptCeiling
                   AND outcome = 'delivered' AND delivery_id < @deliveryFloor)
     AND status = 'delivered' AND ${within('updated_at')}
   GROUP BY b
  UNION ALL
  SELECT 'dead', ${bucket('updated_at')} AS b, count(*), ${NO_SUMS} FROM deliveries
   WHERE endpoint_id = @id AND status = 'dead' AND ${within('updated_at')}
   GROUP BY b
  UNION ALL
  SELECT 'settled', ${bucket('updated_at')} AS b, count(*), ${NO_SUMS} FROM deliveries
   WHERE endpoint_id = @id AND status IN ('cancelled', 'skipped') AND ${within('updated_at')}
   GROUP BY b
  UNION ALL
  SELECT 'pending', 0, count(*), ${NO_SUMS} FROM deliveries
   WHERE @pending AND endpoint_id = @id AND status = 'pending'`;

export function createSqliteEndpointSeries(st: St): Pick<OperationsStore, 'endpointSeries'> {
  return {
    async endpointSeries({ endpointId, from, until, bucketMs, withPending }) {
      const rows = st(SERIES).all({
        id: endpointId,
        bucket: bucketMs,
        pending: withPending ? 1 : 0,
        ...seriesBounds(from, until),
      }) as SeriesRow[];
      return foldSeriesRows(rows);
    },
  };
}
