/**
 * An endpoint's time series on SQLite (OperationsStore.endpointSeries; what the sums mean and what the backlog
 * derivation assumes: the port and domain/endpoint-series.ts). One statement, so one snapshot: the pipeline thread
 * writes through its own connection meanwhile.
 */
import { DELIVERED_LOOKBACK_MS } from '../../domain/endpoint-series.ts';
import { idFloor } from '../../domain/ids.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import { foldSeriesRows, type SeriesRow } from '../endpoint-series-rows.ts';
import type { St } from './rows.ts';

/** better-sqlite3 binds numbers as REAL: the bucket is made an integer explicitly. */
const bucket = (column: string) => `CAST((${column} - @from) / @bucket AS INTEGER)`;
const NO_SUMS = '0 AS ok, 0 AS q, 0 AS p, 0 AS c, 0 AS cn';

/**
 * Each part reads one index range: attempts_endpoint and deliveries_endpoint from the ids minted at `from`
 * (`fresh`: the window's deliveries, by creation and — for those delivered — by completion), the attempt log from
 * DELIVERED_LOOKBACK_MS earlier for older deliveries delivered since (one primary-key probe each), deliveries_dead
 * and deliveries_withdrawn by time, deliveries_head for the pending count.
 */
const SERIES = `
  WITH fresh AS MATERIALIZED (
    SELECT CASE WHEN created_at >= @from THEN ${bucket('created_at')} END AS cb,
           CASE WHEN status = 'delivered' AND updated_at >= @from THEN ${bucket('updated_at')} END AS ub,
           count(*) AS n
      FROM deliveries WHERE endpoint_id = @id AND id >= @deliveryFloor
     GROUP BY cb, ub)
  SELECT 'attempts' AS kind, ${bucket('started_at')} AS b, count(*) AS n, sum(outcome = 'delivered') AS ok,
         sum(queue_ms) AS q, sum(platform_ms) AS p, coalesce(sum(consumer_ms), 0) AS c, count(consumer_ms) AS cn
    FROM attempts
   WHERE endpoint_id = @id AND id >= @attemptFloor AND started_at >= @from
     AND (error_class IS NULL OR error_class <> 'circuit_open')
   GROUP BY b
  UNION ALL
  SELECT 'created', cb, sum(n), ${NO_SUMS} FROM fresh WHERE cb IS NOT NULL GROUP BY cb
  UNION ALL
  SELECT 'settled', ub, sum(n), ${NO_SUMS} FROM fresh WHERE ub IS NOT NULL GROUP BY ub
  UNION ALL
  SELECT 'settled', ${bucket('updated_at')} AS b, count(*), ${NO_SUMS} FROM deliveries
   WHERE id IN (SELECT delivery_id FROM attempts
                 WHERE endpoint_id = @id AND id >= @lookbackFloor AND outcome = 'delivered'
                   AND delivery_id < @deliveryFloor)
     AND status = 'delivered' AND updated_at >= @from
   GROUP BY b
  UNION ALL
  SELECT 'dead', ${bucket('updated_at')} AS b, count(*), ${NO_SUMS} FROM deliveries
   WHERE endpoint_id = @id AND status = 'dead' AND updated_at >= @from
   GROUP BY b
  UNION ALL
  SELECT 'settled', ${bucket('updated_at')} AS b, count(*), ${NO_SUMS} FROM deliveries
   WHERE endpoint_id = @id AND status IN ('cancelled', 'skipped') AND updated_at >= @from
   GROUP BY b
  UNION ALL
  SELECT 'pending', 0, count(*), ${NO_SUMS} FROM deliveries WHERE endpoint_id = @id AND status = 'pending'`;

export function createSqliteEndpointSeries(st: St): Pick<OperationsStore, 'endpointSeries'> {
  return {
    async endpointSeries({ endpointId, from, bucketMs }) {
      const rows = st(SERIES).all({
        id: endpointId,
        from,
        bucket: bucketMs,
        attemptFloor: idFloor('attempt', from),
        deliveryFloor: idFloor('delivery', from),
        lookbackFloor: idFloor('attempt', from - DELIVERED_LOOKBACK_MS),
      }) as SeriesRow[];
      return foldSeriesRows(rows);
    },
  };
}
