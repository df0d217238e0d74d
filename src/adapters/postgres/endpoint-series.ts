/**
 * An endpoint's time series on PostgreSQL (OperationsStore.endpointSeries; what the sums mean and what the backlog
 * derivation assumes: the port and domain/endpoint-series.ts). One statement, so one snapshot (READ COMMITTED), on
 * the pool: it takes no lock.
 */
import { DELIVERED_LOOKBACK_MS } from '../../domain/endpoint-series.ts';
import { idFloor } from '../../domain/ids.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import { foldSeriesRows, type SeriesRow } from '../endpoint-series-rows.ts';
import type { PostgresDeliveryStoreDeps } from './query-helpers.ts';

/** $1 endpoint, $2 from, $3 bucket size, $4/$5/$6 the attempt, delivery and look-back id floors. */
const bucket = (column: string) => `(${column} - $2::bigint) / $3::bigint`;
const NO_SUMS = '0::bigint AS ok, 0::bigint AS q, 0::bigint AS p, 0::bigint AS c, 0::bigint AS cn';

/**
 * Each part reads one index range: attempts_endpoint and deliveries_endpoint from the ids minted at `from`
 * (`fresh`: the window's deliveries, by creation and — for those delivered — by completion), the attempt log from
 * DELIVERED_LOOKBACK_MS earlier for older deliveries delivered since (one primary-key probe each, fenced with
 * OFFSET 0 so that no table statistics can turn it into a scan of `deliveries`), deliveries_dead and
 * deliveries_withdrawn by time, deliveries_head for the pending count. Sums of BIGINT columns are numeric: cast
 * back, so that the pool parses them as numbers.
 */
const SERIES = `
  WITH fresh AS MATERIALIZED (
    SELECT CASE WHEN created_at >= $2::bigint THEN ${bucket('created_at')} END AS cb,
           CASE WHEN status = 'delivered' AND updated_at >= $2::bigint THEN ${bucket('updated_at')} END AS ub,
           count(*) AS n
      FROM deliveries WHERE endpoint_id = $1 AND id >= $5
     GROUP BY 1, 2)
  SELECT 'attempts' AS kind, ${bucket('started_at')} AS b, count(*) AS n,
         count(*) FILTER (WHERE outcome = 'delivered') AS ok, sum(queue_ms)::bigint AS q,
         sum(platform_ms)::bigint AS p, coalesce(sum(consumer_ms), 0)::bigint AS c, count(consumer_ms) AS cn
    FROM attempts
   WHERE endpoint_id = $1 AND id >= $4 AND started_at >= $2::bigint
     AND (error_class IS NULL OR error_class <> 'circuit_open')
   GROUP BY 2
  UNION ALL
  SELECT 'settled', ub, sum(n)::bigint, ${NO_SUMS} FROM fresh WHERE ub IS NOT NULL GROUP BY ub
  UNION ALL
  SELECT 'created', cb, sum(n)::bigint, ${NO_SUMS} FROM fresh WHERE cb IS NOT NULL GROUP BY cb
  UNION ALL
  SELECT 'settled', ${bucket('d.updated_at')}, count(*), ${NO_SUMS}
    FROM (SELECT DISTINCT delivery_id FROM attempts
           WHERE endpoint_id = $1 AND id >= $6 AND outcome = 'delivered' AND delivery_id < $5) a
   CROSS JOIN LATERAL (SELECT updated_at FROM deliveries
                        WHERE id = a.delivery_id AND status = 'delivered' AND updated_at >= $2::bigint
                       OFFSET 0) d
   GROUP BY 2
  UNION ALL
  SELECT 'dead', ${bucket('updated_at')}, count(*), ${NO_SUMS} FROM deliveries
   WHERE endpoint_id = $1 AND status = 'dead' AND updated_at >= $2::bigint
   GROUP BY 2
  UNION ALL
  SELECT 'settled', ${bucket('updated_at')}, count(*), ${NO_SUMS} FROM deliveries
   WHERE endpoint_id = $1 AND status IN ('cancelled', 'skipped') AND updated_at >= $2::bigint
   GROUP BY 2
  UNION ALL
  SELECT 'pending', 0, count(*), ${NO_SUMS} FROM deliveries WHERE endpoint_id = $1 AND status = 'pending'`;

export function createPostgresEndpointSeries({
  query,
}: PostgresDeliveryStoreDeps): Pick<OperationsStore, 'endpointSeries'> {
  return {
    async endpointSeries({ endpointId, from, bucketMs }) {
      const res = await query<SeriesRow>(SERIES, [
        endpointId,
        from,
        bucketMs,
        idFloor('attempt', from),
        idFloor('delivery', from),
        idFloor('attempt', from - DELIVERED_LOOKBACK_MS),
      ]);
      return foldSeriesRows(res.rows);
    },
  };
}
