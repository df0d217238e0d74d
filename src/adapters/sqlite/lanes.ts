/**
 * Queue lanes on SQLite (ADR-03; the scheme and the rule are domain/lanes.ts): the rebalance pass, an endpoint's
 * lane state for its health, and lane statistics for metrics. One process and serial transactions: a pass reads
 * and moves in one transaction, so nothing changes between the decision and the move.
 */
import type Database from 'better-sqlite3';
import { decideLane, type LaneThresholds, laneSchemeTag } from '../../domain/lanes.ts';
import type { LaneMove, OperationsStore } from '../../ports/operations-store.ts';
import type { Row, St } from './rows.ts';

/**
 * Per endpoint, its leases taken under another lane than its current one (the drain window of the last move), read
 * through `deliveries_leased`, which holds the leased rows only (at most the delivery concurrency): one walk of that
 * index, whether one endpoint or all of them are asked for. There is no index of leases by endpoint: it was changed
 * by every lease and every completion, in a leaf per endpoint (bench:delivery: 14–18 % of the WAL pages written per
 * event), for the sake of these reads. CROSS JOIN: SQLite keeps the leased rows as the outer loop.
 */
const DRAINING = `(SELECT d.endpoint_id, count(*) AS n
                     FROM deliveries d INDEXED BY deliveries_leased
                     CROSS JOIN endpoint_queue dq ON dq.endpoint_id = d.endpoint_id
                    WHERE d.lease_owner IS NOT NULL AND d.lease_lane IS NOT dq.lane
                    GROUP BY d.endpoint_id)`;
const DEDICATED = `(q.lane >= 'dedicated:' AND q.lane < 'dedicated;')`;

export function createSqliteLanes(
  db: Database.Database,
  st: St,
): Pick<OperationsStore, 'laneRebalance' | 'endpointLane' | 'laneStats'> {
  const rebalance = db.transaction(
    (now: number, sharedLanes: number, thresholds: LaneThresholds): LaneMove[] => {
      const tag = laneSchemeTag(sharedLanes);
      // Candidates: unassigned or mis-tagged rows, every dedicated lane, and shared endpoints that have due work or
      // enough recent volume to be hot (the estimate never exceeds count + previous). The backlog count stops at
      // promoteBacklog: the rule needs no more, and it keeps the pass O(threshold) per endpoint, not O(backlog).
      const rows = st(
        `SELECT q.endpoint_id, q.lane, q.lane_since, q.lane_scheme, q.volume_window_start, q.volume_count,
                q.volume_previous, e.status,
                (SELECT count(*) FROM (SELECT 1 FROM deliveries d WHERE d.endpoint_id = q.endpoint_id
                                         AND d.status = 'pending' LIMIT @cap + 0)) AS backlog,
                coalesce(dr.n, 0) AS draining
           FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
           LEFT JOIN ${DRAINING} dr ON dr.endpoint_id = q.endpoint_id
          WHERE e.deleted_at IS NULL
            AND (q.lane IS NULL OR q.lane_scheme IS NOT @tag OR ${DEDICATED} OR q.next_due_at IS NOT NULL
                 OR q.volume_count + q.volume_previous >= @rate)
          ORDER BY q.endpoint_id`,
      ).all({ cap: thresholds.promoteBacklog, tag, rate: thresholds.promoteRatePerMin }) as Row[];
      const move = st(
        `UPDATE endpoint_queue SET lane = @to, lane_previous = lane, lane_since = @now, lane_scheme = @tag
          WHERE endpoint_id = @id AND lane IS @from`,
      );
      const retag = st('UPDATE endpoint_queue SET lane_scheme = @tag WHERE endpoint_id = @id');
      const moves: LaneMove[] = [];
      for (const r of rows) {
        const endpointId = r.endpoint_id as string;
        const from = (r.lane as string | null) ?? null;
        const d = decideLane(
          {
            endpointId,
            lane: from,
            laneSince: (r.lane_since as number | null) ?? null,
            laneScheme: (r.lane_scheme as string | null) ?? null,
            enabled: r.status === 'enabled',
            backlog: r.backlog as number,
            volume: {
              windowStart: r.volume_window_start as number,
              count: r.volume_count as number,
              previous: r.volume_previous as number,
            },
            draining: r.draining as number,
          },
          { now, sharedLanes, thresholds },
        );
        if (d.action === 'retag') retag.run({ tag, id: endpointId });
        if (d.action !== 'move') continue;
        if (move.run({ to: d.to, now, tag, id: endpointId, from }).changes > 0) {
          moves.push({ endpointId, from, to: d.to, kind: d.kind });
        }
      }
      return moves;
    },
  );

  return {
    async laneRebalance({ now, sharedLanes, thresholds }) {
      return rebalance.immediate(now, sharedLanes, thresholds);
    },

    async endpointLane({ endpointId }) {
      const r = st(
        `SELECT q.lane, q.lane_since, q.lane_previous, coalesce(dr.n, 0) AS draining
           FROM endpoint_queue q LEFT JOIN ${DRAINING} dr ON dr.endpoint_id = q.endpoint_id
          WHERE q.endpoint_id = ?`,
      ).get(endpointId) as Row | undefined;
      if (!r) return null;
      return {
        lane: (r.lane as string | null) ?? null,
        since: (r.lane_since as number | null) ?? null,
        previous: (r.lane_previous as string | null) ?? null,
        draining: r.draining as number,
      };
    },

    async laneStats() {
      const dedicated = st(
        `SELECT count(*) AS n FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
          WHERE e.deleted_at IS NULL AND ${DEDICATED}`,
      ).get() as Row;
      const byLane = st(
        `SELECT CASE WHEN q.lane IS NULL THEN 'unassigned' WHEN ${DEDICATED} THEN 'dedicated' ELSE q.lane END AS lane,
                sum(p.n) AS n
           FROM (SELECT endpoint_id, count(*) AS n FROM deliveries WHERE status = 'pending' GROUP BY endpoint_id) p
           JOIN endpoint_queue q ON q.endpoint_id = p.endpoint_id
          GROUP BY 1`,
      ).all() as Row[];
      return {
        dedicatedEndpoints: dedicated.n as number,
        pendingByLane: Object.fromEntries(byLane.map((r) => [r.lane as string, r.n as number])),
      };
    },
  };
}
