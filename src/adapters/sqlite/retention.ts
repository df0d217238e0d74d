/**
 * The retention pass on SQLite (OperationsStore.retentionPrune; the rules are domain/retention.ts). One IMMEDIATE
 * transaction per batch: transactions are serial, so nothing can replay a delivery between the check and the
 * delete. A batch is short (it deletes at most `limit` of each kind) so that the pipeline's turn-commits, which
 * wait for the write lock, are held up only briefly.
 */
import type Database from 'better-sqlite3';
import { idFloor } from '../../domain/ids.ts';
import { type PruneBatch, type RetentionCutoffs, retentionWalk } from '../../domain/retention.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import type { St } from './rows.ts';

/**
 * Up to `limit` events accepted before the cutoff, oldest first after the walk's last one, each with whether it may
 * go: fanned out (at or below the fan-out cursor), and none of its deliveries pending, leased (a delivery cancelled
 * while in flight stays leased until its attempt's completion releases the endpoint's slot, and that completion
 * needs the row) or a dead letter still inside its retention.
 */
const SCAN = `
  SELECT x.seq, x.id, x.expired,
         CASE WHEN x.expired THEN (SELECT count(*) FROM deliveries d INDEXED BY deliveries_event
                                    WHERE d.event_seq = x.seq) ELSE 0 END AS deliveries
    FROM (SELECT s.seq, s.id,
                 s.seq <= (SELECT seq FROM fanout_cursor WHERE id = 1)
                 AND NOT EXISTS (SELECT 1 FROM deliveries d INDEXED BY deliveries_event
                                  WHERE d.event_seq = s.seq
                                    AND (d.status = 'pending' OR d.lease_owner IS NOT NULL
                                         OR (d.status = 'dead' AND d.updated_at >= ?))) AS expired
            FROM (SELECT seq, id FROM events WHERE id > ? AND id < ? ORDER BY id LIMIT ? + 0) s) x
   ORDER BY x.id`;

export function createSqliteRetention(
  db: Database.Database,
  st: St,
): Pick<OperationsStore, 'retentionPrune'> {
  const run = db.transaction(
    ({
      cutoffs: c,
      limit,
      deliveryLimit,
      after,
    }: {
      cutoffs: RetentionCutoffs;
      limit: number;
      deliveryLimit: number;
      after: string | null;
    }) => {
      type Walked = { seq: number; id: string; expired: number; deliveries: number };
      const walk = retentionWalk<Walked>({ after, limit, deliveryLimit });
      const floor = idFloor('event', c.events);
      let step = walk.next();
      while (!step.done) {
        step = walk.next(st(SCAN).all(c.deadLetters, step.value.after, floor, step.value.n) as Walked[]);
      }
      const { taken: seen, next } = step.value;
      const dropDeliveries = st('DELETE FROM deliveries WHERE event_seq = ?');
      const dropEvent = st('DELETE FROM events WHERE seq = ?');
      let events = 0;
      let deliveries = 0;
      for (const e of seen) {
        if (!e.expired) continue;
        deliveries += dropDeliveries.run(e.seq).changes;
        dropEvent.run(e.seq);
        events++;
      }
      const oldest = (table: string) =>
        `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE id < ? ORDER BY id LIMIT ? + 0)`;
      const attempts = st(oldest('attempts')).run(idFloor('attempt', c.attempts), limit).changes;
      const audit = st(oldest('audit_events')).run(idFloor('audit', c.audit), limit).changes;
      return { events, deliveries, attempts, audit, after: next } satisfies PruneBatch;
    },
  );
  return {
    async retentionPrune(p) {
      return run.immediate(p);
    },
  };
}
