/**
 * The retention pass on SQLite (OperationsStore.retentionPrune; the rules are domain/retention.ts). One IMMEDIATE
 * transaction per batch: transactions are serial, so nothing can replay a delivery between the check and the
 * delete. A batch is short (it deletes at most `limit` of each kind) so that the pipeline's turn-commits, which
 * wait for the write lock, are held up only briefly.
 */
import type Database from 'better-sqlite3';
import { idFloor } from '../../domain/ids.ts';
import type { PruneCounts, RetentionCutoffs } from '../../domain/retention.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import type { St } from './rows.ts';

/**
 * Events old enough to go, oldest first: fanned out (at or below the fan-out cursor), and none of their deliveries
 * pending or a dead letter still inside its retention. Kept events are passed over, not returned again and again.
 */
const EXPIRED_EVENTS = `
  SELECT e.seq FROM events e
   WHERE e.id < ? AND e.seq <= (SELECT seq FROM fanout_cursor WHERE id = 1)
     AND NOT EXISTS (SELECT 1 FROM deliveries d INDEXED BY deliveries_event
                      WHERE d.event_seq = e.seq AND (d.status = 'pending' OR (d.status = 'dead' AND d.updated_at >= ?)))
   ORDER BY e.id LIMIT ? + 0`;

export function createSqliteRetention(
  db: Database.Database,
  st: St,
): Pick<OperationsStore, 'retentionPrune'> {
  const run = db.transaction(({ cutoffs: c, limit }: { cutoffs: RetentionCutoffs; limit: number }) => {
    const seqs = st(EXPIRED_EVENTS).all(idFloor('event', c.events), c.deadLetters, limit) as Array<{
      seq: number;
    }>;
    const dropDeliveries = st('DELETE FROM deliveries WHERE event_seq = ?');
    const dropEvent = st('DELETE FROM events WHERE seq = ?');
    let deliveries = 0;
    for (const { seq } of seqs) {
      deliveries += dropDeliveries.run(seq).changes;
      dropEvent.run(seq);
    }
    const oldest = (table: string) =>
      `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE id < ? ORDER BY id LIMIT ? + 0)`;
    const attempts = st(oldest('attempts')).run(idFloor('attempt', c.attempts), limit).changes;
    const audit = st(oldest('audit_events')).run(idFloor('audit', c.audit), limit).changes;
    return { events: seqs.length, deliveries, attempts, audit } satisfies PruneCounts;
  });
  return {
    async retentionPrune(p) {
      return run.immediate(p);
    },
  };
}
