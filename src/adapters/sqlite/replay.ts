/**
 * Bulk replay on SQLite (OperationsStore.deliveryReplayBulk; the rules are domain/replay.ts). One IMMEDIATE
 * transaction finds the matches and creates the replays, so two requests cannot both replay one delivery: the
 * second sees the first's replays (`deliveries_replayed`, migration 0011) and skips their originals.
 */
import type Database from 'better-sqlite3';
import { collectReplayable, replayDueAt, replayStart } from '../../domain/replay.ts';
import type { BulkReplayResult, OperationsStore } from '../../ports/operations-store.ts';
import { writeAudit } from './audit.ts';
import type { RefreshDue } from './queue-due.ts';
import type { Row, St } from './rows.ts';

// One page of candidates after `d.id > ?`, oldest first: `deliveries_endpoint` (endpoint_id, id) walks the endpoint's
// deliveries in id order, so a page stops after PAGE rows; the replay index answers the NOT EXISTS with one probe.
const PAGE = 1_000;
const CANDIDATES = (statuses: number) => `
  SELECT d.id, d.event_type FROM deliveries d
   WHERE d.endpoint_id = ? AND d.id > ? AND d.status IN (${Array(statuses).fill('?').join(', ')})
     AND d.created_at >= ? AND d.created_at < ?
     AND NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.replayed_from = d.id)
   ORDER BY d.id LIMIT ${PAGE}`;

/** A new pending delivery copying delivery ? (same event, endpoint and webhook-id): (new id, due, now, now, original id). */
export const INSERT_REPLAY = `
  INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id,
     status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
  SELECT ?, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id,
         'pending', 0, ?, id, ?, ?
    FROM deliveries WHERE id = ?`;

/**
 * The due time of the endpoint's last replay not yet attempted: new replays queue behind those still draining. A
 * replay that was attempted and waits out a retry's backoff (up to 6 h) is not queued behind: it holds no place in
 * the pacing any more (the lease's rate budget still spaces what is sent).
 */
export const LATEST_PENDING_REPLAY = `
  SELECT max(next_attempt_at) AS at FROM deliveries
   WHERE endpoint_id = ? AND status = 'pending' AND replayed_from IS NOT NULL AND attempts = 0`;

type BulkInput = Parameters<OperationsStore['deliveryReplayBulk']>[0];

export function createSqliteBulkReplay(
  db: Database.Database,
  st: St,
  refreshDue: RefreshDue,
): Pick<OperationsStore, 'deliveryReplayBulk'> {
  const run = db.transaction((p: BulkInput): BulkReplayResult | 'not_found' => {
    const ep = st(
      'SELECT event_types FROM endpoints WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL',
    ).get(p.endpointId, p.tenantId) as Row | undefined;
    if (!ep) return 'not_found';
    const subscribed = JSON.parse(ep.event_types as string) as string[];
    const page = st(CANDIDATES(p.statuses.length));
    const matches: string[] = [];
    let more = false;
    for (let after = ''; !more; ) {
      const rows = page.all(
        p.endpointId,
        after,
        ...p.statuses,
        p.since ?? Number.MIN_SAFE_INTEGER,
        p.until,
      ) as Array<{
        id: string;
        event_type: string;
      }>;
      more = collectReplayable(rows, subscribed, matches, p.max);
      if (rows.length < PAGE) break;
      after = rows[rows.length - 1]!.id;
    }
    const none = { found: matches.length, more, created: 0, firstDueAt: null, lastDueAt: null };
    if (matches.length === 0 || (p.confirmAbove !== null && matches.length > p.confirmAbove)) return none;
    const latest = st(LATEST_PENDING_REPLAY).get(p.endpointId) as { at: number | null };
    const start = replayStart(p.now, latest.at, p.ratePerSecond);
    const insert = st(INSERT_REPLAY);
    let dueAt = start;
    for (let k = 0; k < matches.length; k++) {
      dueAt = replayDueAt(start, k, p.ratePerSecond);
      insert.run(p.ids.delivery(), dueAt, p.now, p.now, matches[k]);
    }
    refreshDue(p.endpointId);
    const created = {
      found: matches.length,
      more,
      created: matches.length,
      firstDueAt: start,
      lastDueAt: dueAt,
    };
    return writeAudit(st, p.audit, created);
  });
  return {
    async deliveryReplayBulk(p) {
      return run.immediate(p);
    },
  };
}
