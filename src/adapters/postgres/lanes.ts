/**
 * Queue lanes on PostgreSQL (ADR-03; the scheme and the rule are domain/lanes.ts): the rebalance pass, an
 * endpoint's lane state for its health, and lane statistics for metrics. Same behaviour as the SQLite reference
 * (src/adapters/sqlite/lanes.ts); what differs is concurrency control:
 *
 * - Several maintenance processes may run the pass at once. Each pass runs in one transaction that first takes a
 *   transaction-scoped advisory lock (per schema) with pg_try_advisory_xact_lock: the pass that gets it decides and
 *   moves, any other returns at once with no moves (its next pass will find the work done). So a move is made once,
 *   and lane columns are written only while that lock is held (endpoint creation inserts, never updates them).
 * - A move rewrites the queue row's lane columns under the queue row lock, taken in endpoint_id order like every
 *   other multi-row writer (delivery-store.ts header). Leasing holds that lock from choosing an endpoint to
 *   recording the lane its deliveries were leased under, so a lease is either wholly before a move (its deliveries
 *   count as draining afterwards) or wholly after it (it sees the new lane, and its binding decides).
 * - The move re-checks, on the locked current row, that the lane is still the one the decision was made on.
 */
import { decideLane, laneSchemeTag } from '../../domain/lanes.ts';
import type { LaneMove, OperationsStore } from '../../ports/operations-store.ts';
import { BULK_DEADLINE_TX } from './endpoints-store.ts';
import { cmp, type Db, LOCK_QUEUE_ROWS, type PostgresDeliveryStoreDeps } from './query-helpers.ts';

/**
 * Per endpoint, its leases taken under another lane than its current one (the drain window of the last move), read
 * through `deliveries_leased`, which holds the leased rows only (at most the processes' delivery concurrency): one
 * walk of that index, whether one endpoint or all of them are asked for. There is no index of leases by endpoint
 * (migration 0009): every lease added an entry to it, for the sake of these reads.
 *
 * The walk is ordered and cut at `limit` (leasedBound: the leases there are, and then some) so that the plan is that
 * walk whatever the statistics say. Without statistics (autovacuum off, or a young table) the planner takes
 * `lease_owner IS NOT NULL` for nearly every row, and it read the whole table in parallel instead, on every
 * rebalance pass (bench:delivery: ~16,000 buffers per pass at 20,000 deliveries, growing with the table).
 */
const DRAINING = (limit: string) => `(SELECT d.endpoint_id, count(*) AS n
                     FROM (SELECT endpoint_id, lease_lane FROM deliveries WHERE lease_owner IS NOT NULL
                            ORDER BY lease_until LIMIT ${limit}) d
                     JOIN endpoint_queue dq ON dq.endpoint_id = d.endpoint_id
                    WHERE d.lease_lane IS DISTINCT FROM dq.lane
                    GROUP BY d.endpoint_id)`;

/**
 * More than the leases there are: the queue rows' in-flight counts (which every lease and release keeps, in the
 * same transaction) plus room for leases taken between this read and the walk.
 */
async function leasedBound(db: Db): Promise<number> {
  const r = await db.query<{ n: number }>('SELECT coalesce(sum(inflight), 0)::int AS n FROM endpoint_queue');
  return (r.rows[0]?.n ?? 0) + 1_000;
}

const DEDICATED = `(q.lane >= 'dedicated:' AND q.lane < 'dedicated;')`;

interface CandidateRow {
  endpoint_id: string;
  lane: string | null;
  lane_since: number | null;
  lane_scheme: string | null;
  volume_window_start: number;
  volume_count: number;
  volume_previous: number;
  status: string;
  backlog: number;
  draining: number;
}

export function createPostgresLanes({
  query,
  tx,
}: PostgresDeliveryStoreDeps): Pick<OperationsStore, 'laneRebalance' | 'endpointLane' | 'laneStats'> {
  return {
    async laneRebalance({ now, sharedLanes, thresholds }) {
      const tag = laneSchemeTag(sharedLanes);
      // The bulk deadline: the candidates' backlog counts read up to promoteBacklog rows per endpoint, which during
      // a wide outage (hundreds of endpoints failing at once) is millions of rows in one statement.
      return tx(async (c) => {
        const lock = await c.query<{ ok: boolean }>(
          `SELECT pg_try_advisory_xact_lock(hashtextextended('hookrail.lanes:' || current_schema(), 0)) AS ok`,
        );
        if (!lock.rows[0]?.ok) return [];
        // Candidates: unassigned or mis-tagged rows, every dedicated lane, and shared endpoints that have due work
        // or enough recent volume to be hot (the estimate never exceeds count + previous). The backlog count stops
        // at promoteBacklog: the rule needs no more, and it keeps the pass O(threshold) per endpoint.
        const bound = await leasedBound(c);
        const rows = (
          await c.query<CandidateRow>(
            `SELECT q.endpoint_id, q.lane, q.lane_since, q.lane_scheme, q.volume_window_start, q.volume_count,
                    q.volume_previous, e.status,
                    (SELECT count(*) FROM (SELECT 1 FROM deliveries d WHERE d.endpoint_id = q.endpoint_id
                                             AND d.status = 'pending' LIMIT $1) x) AS backlog,
                    coalesce(dr.n, 0) AS draining
               FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
               LEFT JOIN ${DRAINING('$4')} dr ON dr.endpoint_id = q.endpoint_id
              WHERE e.deleted_at IS NULL
                AND (q.lane IS NULL OR q.lane_scheme IS DISTINCT FROM $2 OR ${DEDICATED}
                     OR q.next_due_at IS NOT NULL OR q.volume_count + q.volume_previous >= $3)
              ORDER BY q.endpoint_id`,
            [thresholds.promoteBacklog, tag, thresholds.promoteRatePerMin, bound],
          )
        ).rows;
        const changes: Array<{ endpointId: string; from: string | null; to: string; move: LaneMove | null }> =
          [];
        for (const r of rows) {
          const d = decideLane(
            {
              endpointId: r.endpoint_id,
              lane: r.lane,
              laneSince: r.lane_since,
              laneScheme: r.lane_scheme,
              enabled: r.status === 'enabled',
              backlog: Number(r.backlog),
              volume: {
                windowStart: r.volume_window_start,
                count: r.volume_count,
                previous: r.volume_previous,
              },
              draining: Number(r.draining),
            },
            { now, sharedLanes, thresholds },
          );
          if (d.action === 'move') {
            const move = { endpointId: r.endpoint_id, from: r.lane, to: d.to, kind: d.kind };
            changes.push({ endpointId: r.endpoint_id, from: r.lane, to: d.to, move });
          } else if (d.action === 'retag' && r.lane !== null) {
            changes.push({ endpointId: r.endpoint_id, from: r.lane, to: r.lane, move: null });
          }
        }
        if (changes.length === 0) return [];
        changes.sort((a, b) => cmp(a.endpointId, b.endpointId));
        // Moves and re-tags in one statement; a re-tag (same lane, current scheme) keeps since/previous.
        const done = await c.query<{ endpoint_id: string }>(
          `WITH l AS (${LOCK_QUEUE_ROWS})
           UPDATE endpoint_queue q
              SET lane = m.to_lane,
                  lane_previous = CASE WHEN m.is_move THEN q.lane ELSE q.lane_previous END,
                  lane_since = CASE WHEN m.is_move THEN $4::bigint ELSE q.lane_since END,
                  lane_scheme = $5
             FROM l, unnest($1::text[], $2::text[], $3::text[], $6::boolean[])
                     AS m(endpoint_id, from_lane, to_lane, is_move)
            WHERE q.endpoint_id = l.endpoint_id AND m.endpoint_id = l.endpoint_id
              AND q.lane IS NOT DISTINCT FROM m.from_lane
           RETURNING q.endpoint_id`,
          [
            changes.map((x) => x.endpointId),
            changes.map((x) => x.from),
            changes.map((x) => x.to),
            now,
            tag,
            changes.map((x) => x.move !== null),
          ],
        );
        const applied = new Set(done.rows.map((r) => r.endpoint_id));
        return changes.flatMap((x) => (x.move && applied.has(x.endpointId) ? [x.move] : []));
      }, BULK_DEADLINE_TX);
    },

    async endpointLane({ endpointId }) {
      const bound = await leasedBound({ query });
      const res = await query<{
        lane: string | null;
        lane_since: number | null;
        lane_previous: string | null;
        draining: number;
      }>(
        `SELECT q.lane, q.lane_since, q.lane_previous, coalesce(dr.n, 0) AS draining
           FROM endpoint_queue q LEFT JOIN ${DRAINING('$2')} dr ON dr.endpoint_id = q.endpoint_id
          WHERE q.endpoint_id = $1`,
        [endpointId, bound],
      );
      const r = res.rows[0];
      if (!r) return null;
      return { lane: r.lane, since: r.lane_since, previous: r.lane_previous, draining: Number(r.draining) };
    },

    async laneStats() {
      const [dedicated, byLane] = await Promise.all([
        query<{ n: number }>(
          `SELECT count(*) AS n FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
            WHERE e.deleted_at IS NULL AND ${DEDICATED}`,
        ),
        query<{ lane: string; n: number }>(
          `SELECT CASE WHEN q.lane IS NULL THEN 'unassigned' WHEN ${DEDICATED} THEN 'dedicated' ELSE q.lane END
                    AS lane,
                  sum(p.n)::bigint AS n
             FROM (SELECT endpoint_id, count(*) AS n FROM deliveries WHERE status = 'pending'
                    GROUP BY endpoint_id) p
             JOIN endpoint_queue q ON q.endpoint_id = p.endpoint_id
            GROUP BY 1`,
        ),
      ]);
      return {
        dedicatedEndpoints: Number(dedicated.rows[0]?.n ?? 0),
        pendingByLane: Object.fromEntries(byLane.rows.map((r) => [r.lane, Number(r.n)])),
      };
    },
  };
}
