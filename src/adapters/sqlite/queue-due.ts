/** The due time of an endpoint's queue row, recomputed after its deliveries or status change (SQLite). */
import type { St } from './rows.ts';

export type RefreshDue = (endpointId: string) => unknown;

export function createRefreshDue(st: St) {
  /** Earliest due time among unleased pending deliveries of an enabled endpoint (NULL otherwise). */
  const refreshDue = (endpointId: string) =>
    st(
      `UPDATE endpoint_queue SET next_due_at = (
         SELECT min(d.next_attempt_at) FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
         WHERE d.endpoint_id = @id AND d.status = 'pending' AND d.lease_owner IS NULL
           AND e.status = 'enabled' AND e.deleted_at IS NULL)
       WHERE endpoint_id = @id`,
    ).run({ id: endpointId }); // named: better-sqlite3 binds `?1` by name, not by position
  return refreshDue;
}
