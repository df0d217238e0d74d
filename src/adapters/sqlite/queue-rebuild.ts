/**
 * The queue rebuild on SQLite (OperationsStore.queueRebuild, endpointIdList; what the derived columns mean is on the
 * port). One short IMMEDIATE transaction per endpoint, so that nothing is written between its read and its write:
 * writers are serial, across processes too (`hookrail queue rebuild` and a running Hookrail take turns at SQLite's
 * write lock). A dry run is its one read statement: stored and rebuilt values from one snapshot.
 */
import type Database from 'better-sqlite3';
import { laneSchemeTag, sharedLane } from '../../domain/lanes.ts';
import type { OperationsStore, QueueRebuildResult } from '../../ports/operations-store.ts';
import { EARLIEST_DUE } from './queue-due.ts';
import type { Row, St } from './rows.ts';

/**
 * Stored and rebuilt values of the endpoint bound as `@id`. Leases are counted through deliveries_leased, which
 * holds the leased rows only (at most the delivery concurrency): the endpoint's own index, deliveries_endpoint,
 * would visit every delivery it ever had.
 */
const REBUILT = `SELECT (SELECT id FROM endpoints WHERE id = @id) AS endpoint,
    q.endpoint_id AS present, q.inflight, q.next_due_at,
    (SELECT count(*) FROM deliveries d INDEXED BY deliveries_leased
      WHERE d.lease_owner IS NOT NULL AND d.endpoint_id = @id) AS leased,
    ${EARLIEST_DUE} AS due
  FROM (SELECT 1) LEFT JOIN endpoint_queue q ON q.endpoint_id = @id`;

export function createSqliteQueueRebuild(
  db: Database.Database,
  st: St,
): Pick<OperationsStore, 'endpointIdList' | 'queueRebuild'> {
  const rebuild = (p: {
    endpointId: string;
    dryRun: boolean;
    sharedLanes: number;
    now: number;
  }): QueueRebuildResult | null => {
    const r = st(REBUILT).get({ id: p.endpointId }) as Row;
    if (r.endpoint === null) return null;
    const created = r.present === null;
    const result: QueueRebuildResult = {
      endpointId: p.endpointId,
      created,
      inflight: [created ? null : (r.inflight as number), r.leased as number],
      nextDueAt: [
        created ? null : ((r.next_due_at as number | null) ?? null),
        (r.due as number | null) ?? null,
      ],
    };
    if (p.dryRun) return result;
    if (created) {
      st(
        `INSERT INTO endpoint_queue (endpoint_id, inflight, next_due_at, lane, lane_since, lane_scheme)
         VALUES (?, ?, ?, ?, ?, ?)`,
      ).run(
        p.endpointId,
        result.inflight[1],
        result.nextDueAt[1],
        sharedLane(p.endpointId, p.sharedLanes),
        p.now,
        laneSchemeTag(p.sharedLanes),
      );
    } else if (result.inflight[0] !== result.inflight[1] || result.nextDueAt[0] !== result.nextDueAt[1]) {
      st('UPDATE endpoint_queue SET inflight = ?, next_due_at = ? WHERE endpoint_id = ?').run(
        result.inflight[1],
        result.nextDueAt[1],
        p.endpointId,
      );
    }
    return result;
  };
  const writeInTransaction = db.transaction(rebuild);

  return {
    async endpointIdList({ after, limit }) {
      const rows = st('SELECT id FROM endpoints WHERE id > ? ORDER BY id LIMIT ? + 0').all(
        after ?? '',
        limit,
      ) as Row[];
      const total = st('SELECT count(*) AS endpoints FROM endpoints').get() as Row;
      return { ids: rows.map((r) => r.id as string), total: total.endpoints as number };
    },
    // A dry run reads in one statement, which sees one snapshot: no transaction, no write lock.
    async queueRebuild(p) {
      return p.dryRun ? rebuild(p) : writeInTransaction.immediate(p);
    },
  };
}
