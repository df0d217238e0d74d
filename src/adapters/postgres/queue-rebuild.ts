/**
 * The queue rebuild on PostgreSQL (OperationsStore.queueRebuild, endpointIdList; what the derived columns mean is on
 * the port). Safe while any number of Hookrail processes run, by the delivery plane's own rules (delivery-store.ts
 * header):
 *
 * - One short transaction per endpoint, holding only that endpoint's queue row `FOR UPDATE`. Every writer of an
 *   existing delivery row (lease, completion, expiry, cancellation, re-enable) holds that row first, so under it the
 *   endpoint's leases and unleased pending deliveries cannot change: the values rebuilt in the next statement (a
 *   later snapshot than the lock, READ COMMITTED) stay true until COMMIT. Leasing skips the held row for those few
 *   milliseconds; completion waits for it. Fan-out's new deliveries are not visible to the rebuild, but its LEAST
 *   on the due time runs on the row after this commit, as it always does.
 * - Recreating a missing row takes the tenant's fan-out gate exclusively first, as the writers fan-out must not race
 *   do: a fan-out pass that ran without the row has committed by then (its deliveries are counted) and one after it
 *   finds the row. Lock order as everywhere: tenant gate, then the queue row.
 * - A dry run takes no lock: one statement reads the stored and the rebuilt values from one snapshot, and every
 *   writer changes the row and the deliveries it derives from in one transaction, so the two agree unless drifted.
 */
import { laneSchemeTag, sharedLane } from '../../domain/lanes.ts';
import type { OperationsStore, QueueRebuildResult } from '../../ports/operations-store.ts';
import { lockTenantGate, type PostgresDeliveryStoreDeps, recomputeDue } from './query-helpers.ts';

/**
 * Stored and rebuilt values of endpoint $1. Leases are counted by one read of deliveries_leased, which holds the
 * leased rows only (at most the delivery processes' concurrency). Fenced (OFFSET 0) so that the endpoint's id is not
 * pushed into it: the planner would then take the endpoint's own index, deliveries_endpoint, and visit every delivery
 * the endpoint ever had, with its queue row held (plan-shapes.test.ts checks the plan).
 */
export const REBUILT = `SELECT s.endpoint_id AS present, s.inflight, s.next_due_at,
    (SELECT count(*)::int FROM (SELECT d.endpoint_id FROM deliveries d WHERE d.lease_owner IS NOT NULL OFFSET 0) l
      WHERE l.endpoint_id = q.endpoint_id) AS leased,
    ${recomputeDue()} AS due
  FROM (SELECT $1::text COLLATE "C" AS endpoint_id) q
  LEFT JOIN endpoint_queue s ON s.endpoint_id = q.endpoint_id`;

interface RebuiltRow {
  present: string | null;
  inflight: number | null;
  next_due_at: number | null;
  leased: number;
  due: number | null;
}

const LOCK_ROW = 'SELECT 1 FROM endpoint_queue WHERE endpoint_id = $1 FOR UPDATE';

export function createPostgresQueueRebuild({
  query,
  tx,
}: PostgresDeliveryStoreDeps): Pick<OperationsStore, 'endpointIdList' | 'queueRebuild'> {
  return {
    async endpointIdList({ after, limit }) {
      const ids = await query<{ id: string }>('SELECT id FROM endpoints WHERE id > $1 ORDER BY id LIMIT $2', [
        after ?? '',
        limit,
      ]);
      const total = await query<{ n: number }>('SELECT count(*)::int AS n FROM endpoints');
      return { ids: ids.rows.map((r) => r.id), total: total.rows[0]?.n ?? 0 };
    },

    async queueRebuild({ endpointId, dryRun, sharedLanes, now }) {
      return tx(
        async (c) => {
          const ep = await c.query<{ tenant_id: string }>('SELECT tenant_id FROM endpoints WHERE id = $1', [
            endpointId,
          ]);
          const tenantId = ep.rows[0]?.tenant_id;
          if (tenantId === undefined) return null;
          let created = false;
          if (!dryRun && (await c.query(LOCK_ROW, [endpointId])).rowCount === 0) {
            await lockTenantGate(c, tenantId);
            const inserted = await c.query(
              `INSERT INTO endpoint_queue (endpoint_id, lane, lane_since, lane_scheme) VALUES ($1, $2, $3, $4)
               ON CONFLICT (endpoint_id) DO NOTHING`,
              [endpointId, sharedLane(endpointId, sharedLanes), now, laneSchemeTag(sharedLanes)],
            );
            created = inserted.rowCount === 1;
            // Recreated meanwhile by another rebuild, which has committed: hold it like any existing row.
            if (!created) await c.query(LOCK_ROW, [endpointId]);
          }
          const r = (await c.query<RebuiltRow>(REBUILT, [endpointId])).rows[0]!;
          if (dryRun) created = r.present === null;
          const result: QueueRebuildResult = {
            endpointId,
            created,
            inflight: [created ? null : r.inflight, r.leased],
            nextDueAt: [created ? null : r.next_due_at, r.due],
          };
          if (
            !dryRun &&
            (created ||
              result.inflight[0] !== result.inflight[1] ||
              result.nextDueAt[0] !== result.nextDueAt[1])
          ) {
            await c.query(
              'UPDATE endpoint_queue SET inflight = $2, next_due_at = $3 WHERE endpoint_id = $1',
              [endpointId, r.leased, r.due],
            );
          }
          return result;
        },
        { probesOnly: true },
      );
    },
  };
}
