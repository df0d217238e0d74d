/** The due time of an endpoint's queue row, recomputed after its deliveries or status change (SQLite). */
import type { St } from './rows.ts';

export type RefreshDue = (endpointId: string) => unknown;

/**
 * Earliest due time among unleased pending deliveries of an enabled endpoint (NULL otherwise), of the queue row
 * whose endpoint is bound as `@id`. Only a change to that set moves it: a lease takes deliveries out, a retry or
 * an expired lease puts one back, a skip reschedules or dead-letters one, a status change includes or excludes
 * them all. For completions the rule is domain/due-time.ts completionMovesDueTime.
 */
export const EARLIEST_DUE = `(
  SELECT min(d.next_attempt_at) FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
   WHERE d.endpoint_id = @id AND d.status = 'pending' AND d.lease_owner IS NULL
     AND e.status = 'enabled' AND e.deleted_at IS NULL)`;

// Named parameters: the subquery and the WHERE share `@id` (better-sqlite3 binds `?1` by name, not position).
const REFRESH_DUE = `UPDATE endpoint_queue SET next_due_at = ${EARLIEST_DUE} WHERE endpoint_id = @id`;

export function createRefreshDue(st: St) {
  const refreshDue = (endpointId: string) => st(REFRESH_DUE).run({ id: endpointId });
  return refreshDue;
}
