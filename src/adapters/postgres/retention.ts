/**
 * The retention pass on PostgreSQL (OperationsStore.retentionPrune; the rules are domain/retention.ts). Several
 * maintenance processes may run it at once; a batch is one transaction:
 *
 * - Candidates are read unlocked, then the gates of their tenants are taken exclusively (sorted, the one lock
 *   order of delivery-store.ts). A replay — single, bulk, or re-enable's re-queue — holds its tenant's gate while it
 *   reads the delivery it replays and inserts the copy, so no replay can be in progress while the batch deletes.
 * - The delete re-checks every condition in a statement of its own, after the gates are held (READ COMMITTED: a
 *   fresh snapshot), so a replay committed in between keeps its event, and an event another pass deleted is
 *   simply not there. Fan-out holds the same gates shared, so a tenant's fan-out waits for at most one batch.
 */
import { idFloor } from '../../domain/ids.ts';
import { type PruneBatch, retentionWalk } from '../../domain/retention.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import { cmp, lockTenantGates, type PostgresDeliveryStoreDeps } from './query-helpers.ts';

/**
 * Fanned out, and no delivery pending, leased (one cancelled in flight: its completion releases the slot through
 * the row) or a dead letter still inside its retention ($2: the dead-letter cutoff).
 */
const EXPIRED = (e: string) =>
  `NOT EXISTS (SELECT 1 FROM fanout_pending f WHERE f.event_seq = ${e}.seq)
   AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = ${e}.seq
                    AND (d.status = 'pending' OR d.lease_owner IS NOT NULL
                         OR (d.status = 'dead' AND d.updated_at >= $2)))`;

const oldest = (table: string) =>
  `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE id < $1 ORDER BY id LIMIT $2)`;

export function createPostgresRetention({
  tx,
}: PostgresDeliveryStoreDeps): Pick<OperationsStore, 'retentionPrune'> {
  return {
    async retentionPrune({ cutoffs: c, limit, deliveryLimit, after }) {
      return tx(async (db) => {
        // The walk: up to `limit` old events after the last one looked at, each with whether it may go and, if
        // so, how many deliveries go with it; then as many as fit the delivery budget.
        type Walked = { seq: string; id: string; tenant_id: string; expired: boolean; deliveries: number };
        const walk = retentionWalk<Walked>({ after, limit, deliveryLimit });
        let step = walk.next();
        while (!step.done) {
          const page = await db.query<Walked>(
            `SELECT x.*, CASE WHEN x.expired THEN (SELECT count(*) FROM deliveries d WHERE d.event_seq = x.seq)
                              ELSE 0 END::int AS deliveries
               FROM (SELECT s.seq, s.id, s.tenant_id, ${EXPIRED('s')} AS expired
                       FROM (SELECT seq, id, tenant_id FROM events WHERE id > $3 AND id < $1 ORDER BY id LIMIT $4) s
                    ) x
              ORDER BY x.id`,
            [idFloor('event', c.events), c.deadLetters, step.value.after, step.value.n],
          );
          step = walk.next(page.rows);
        }
        const { taken: seen, next } = step.value;
        const found = seen.filter((r) => r.expired);
        let events = 0;
        let deliveries = 0;
        if (found.length > 0) {
          await lockTenantGates(db, [...new Set(found.map((r) => r.tenant_id))].sort(cmp));
          const res = await db.query<{ events: number; deliveries: number }>(
            `WITH gone AS (
               DELETE FROM events e WHERE e.seq = ANY($1::bigint[]) AND ${EXPIRED('e')} RETURNING e.seq),
             dropped AS (DELETE FROM deliveries d USING gone WHERE d.event_seq = gone.seq RETURNING 1)
             SELECT (SELECT count(*) FROM gone)::int AS events, (SELECT count(*) FROM dropped)::int AS deliveries`,
            [found.map((r) => r.seq), c.deadLetters],
          );
          events = res.rows[0]!.events;
          deliveries = res.rows[0]!.deliveries;
        }
        const attempts = (await db.query(oldest('attempts'), [idFloor('attempt', c.attempts), limit]))
          .rowCount;
        const audit = (await db.query(oldest('audit_events'), [idFloor('audit', c.audit), limit])).rowCount;
        return {
          events,
          deliveries,
          attempts: attempts ?? 0,
          audit: audit ?? 0,
          after: next,
        } satisfies PruneBatch;
      });
    },
  };
}
