/**
 * An endpoint's time series on PostgreSQL (OperationsStore.endpointSeries; what the sums mean and what the backlog
 * derivation assumes: the port and domain/endpoint-series.ts). One statement, so one snapshot (READ COMMITTED), on
 * the pool: it takes no lock.
 */
import type { OperationsStore } from '../../ports/operations-store.ts';
import { foldSeriesRows, type SeriesRow, seriesBounds } from '../endpoint-series-rows.ts';
import { JUDGES_ENDPOINT_SQL } from '../judged-attempts.ts';
import type { PostgresDeliveryStoreDeps } from './query-helpers.ts';

/**
 * $1 endpoint, $2 from, $3 bucket size, $4/$5/$6 the attempt, delivery and look-back id floors, $7 until,
 * $8/$9 the attempt and delivery id ceilings, $10 whether to count the pending deliveries.
 */
const bucket = (column: string) => `(${column} - $2::bigint) / $3::bigint`;
const NO_SUMS = '0::bigint AS ok, 0::bigint AS q, 0::bigint AS p, 0::bigint AS c, 0::bigint AS cn';
/** A stamp in [from, until). */
const within = (column: string) => `${column} >= $2::bigint AND ${column} < $7::bigint`;

/**
 * Each part reads one index range, bounded on both sides: attempts_endpoint and deliveries_endpoint over the ids
 * minted in [from, until) (`fresh`: the range's deliveries, by creation and — for those delivered in the range — by
 * completion), the attempt log from DELIVERED_LOOKBACK_MS before `from` up to `until` for older deliveries
 * delivered in the range (one primary-key probe each, fenced with OFFSET 0 so that no table statistics can turn it
 * into a scan of `deliveries`), deliveries_dead and deliveries_withdrawn by time, deliveries_head for the pending
 * count (only with $10: a one-time filter, so the read is skipped otherwise). Sums of BIGINT columns are numeric:
 * cast back, so that the pool parses them as numbers.
 */
const SERIES = `
  WITH fresh AS MATERIALIZED (
    SELECT CASE WHEN ${within('created_at')} THEN ${bucket('created_at')} END AS cb,
           CASE WHEN status = 'delivered' AND ${within('updated_at')} THEN ${bucket('updated_at')} END AS ub,
           count(*) AS n
      FROM deliveries WHERE endpoint_id = $1 AND id >= $5 AND id < $9
     GROUP BY 1, 2)
  SELECT 'attempts' AS kind, ${bucket('started_at')} AS b, count(*) AS n,
         count(*) FILTER (WHERE outcome = 'delivered') AS ok, sum(queue_ms)::bigint AS q,
         sum(platform_ms)::bigint AS p, coalesce(sum(consumer_ms), 0)::bigint AS c, count(consumer_ms) AS cn
    FROM attempts
   WHERE endpoint_id = $1 AND id >= $4 AND id < $8 AND ${within('started_at')}
     AND ${JUDGES_ENDPOINT_SQL}
   GROUP BY 2
  UNION ALL
  SELECT 'settled', ub, sum(n)::bigint, ${NO_SUMS} FROM fresh WHERE ub IS NOT NULL GROUP BY ub
  UNION ALL
  SELECT 'created', cb, sum(n)::bigint, ${NO_SUMS} FROM fresh WHERE cb IS NOT NULL GROUP BY cb
  UNION ALL
  SELECT 'settled', ${bucket('d.updated_at')}, count(*), ${NO_SUMS}
    FROM (SELECT DISTINCT delivery_id FROM attempts
           WHERE endpoint_id = $1 AND id >= $6 AND id < $8 AND outcome = 'delivered' AND delivery_id < $5) a
   CROSS JOIN LATERAL (SELECT updated_at FROM deliveries
                        WHERE id = a.delivery_id AND status = 'delivered' AND ${within('updated_at')}
                       OFFSET 0) d
   GROUP BY 2
  UNION ALL
  SELECT 'dead', ${bucket('updated_at')}, count(*), ${NO_SUMS} FROM deliveries
   WHERE endpoint_id = $1 AND status = 'dead' AND ${within('updated_at')}
   GROUP BY 2
  UNION ALL
  SELECT 'settled', ${bucket('updated_at')}, count(*), ${NO_SUMS} FROM deliveries
   WHERE endpoint_id = $1 AND status IN ('cancelled', 'skipped') AND ${within('updated_at')}
   GROUP BY 2
  UNION ALL
  SELECT 'pending', 0, count(*), ${NO_SUMS} FROM deliveries
   WHERE $10::boolean AND endpoint_id = $1 AND status = 'pending'`;

export function createPostgresEndpointSeries({
  query,
}: PostgresDeliveryStoreDeps): Pick<OperationsStore, 'endpointSeries'> {
  return {
    async endpointSeries({ endpointId, from, until, bucketMs, withPending }) {
      const b = seriesBounds(from, until);
      const res = await query<SeriesRow>(SERIES, [
        endpointId,
        from,
        bucketMs,
        b.attemptFloor,
        b.deliveryFloor,
        b.lookbackFloor,
        b.until,
        b.attemptCeiling,
        b.deliveryCeiling,
        withPending,
      ]);
      return foldSeriesRows(res.rows);
    },
  };
}
