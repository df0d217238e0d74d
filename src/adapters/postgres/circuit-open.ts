/** The circuit-open pass's transaction (deliverySkipBlocked) in PostgreSQL; locking: see delivery-store.ts. */
import { blockedUntil, decideAttempt } from '../../domain/circuit-breaker.ts';
import { parseRuntime } from '../../domain/endpoint-runtime.ts';
import type { DeliveryStore, EndpointRecord, SkipCompletion } from '../../ports/delivery-store.ts';
import { complete } from './completion.ts';
import { laneCondition, pickDue } from './lease.ts';
import type { TxRunner } from './migrate.ts';
import { toDelivery } from './rows.ts';

interface BlockedRow {
  endpoint_id: string;
  inflight: number;
  runtime: string | null;
  ordering: EndpointRecord['ordering'];
  url: string;
  tenant_id: string;
}

export async function skipBlocked(
  tx: TxRunner,
  { now, limit, lanes, skip, ids }: Parameters<DeliveryStore['deliverySkipBlocked']>[0],
): Promise<SkipCompletion[]> {
  return tx(async (c) => {
    // The blocked queue rows (endpoints in an outage: few, read through their partial index), locked; rows a
    // lease or completion holds are skipped and left to the next pass. Skipping, this never waits, so the order
    // of these locks cannot deadlock with writers that take queue rows sorted by endpoint id.
    const blocked = (
      await c.query<BlockedRow>(
        `SELECT q.endpoint_id, q.inflight, q.runtime, e.ordering, e.url, e.tenant_id
           FROM endpoint_queue q
          -- Fenced (OFFSET 0) as in the lease: the endpoint is looked up per blocked row. Left to choose without
          -- statistics, the planner hash-joins every registered endpoint (9.8 ms against 0.3 ms at 40,000).
          CROSS JOIN LATERAL (SELECT e.ordering, e.url, e.tenant_id FROM endpoints e
                               WHERE e.id = q.endpoint_id OFFSET 0) e
          WHERE q.blocked_until > $1 AND q.next_due_at <= $1 ${laneCondition(lanes)}
          ORDER BY q.blocked_until, q.endpoint_id
          LIMIT $2
          FOR UPDATE OF q SKIP LOCKED`,
        [now, limit],
      )
    ).rows;
    const cands: BlockedRow[] = [];
    const stale: Array<{ id: string; until: number | null }> = [];
    for (const b of blocked) {
      const circuit = parseRuntime(b.runtime).circuit;
      // The stored block is behind the circuit (its probe is due): unblocked below, so the next lease probes.
      if (decideAttempt(circuit, now).kind !== 'skip')
        stale.push({ id: b.endpoint_id, until: blockedUntil(circuit) });
      else cands.push(b);
    }
    if (stale.length > 0) {
      await c.query(
        `UPDATE endpoint_queue q SET blocked_until = u.until
           FROM unnest($1::text[], $2::bigint[]) AS u(endpoint_id, until) WHERE q.endpoint_id = u.endpoint_id`,
        [stale.map((x) => x.id), stale.map((x) => x.until)],
      );
    }
    // A later statement than the lock, so it sees what the previous holder of the queue rows committed.
    const room = cands.map((b) => (b.ordering !== 'endpoint' ? limit : b.inflight > 0 ? 0 : 1));
    const picked = room.some((r) => r > 0) ? await pickDue(c, cands, room, now, limit, false) : [];
    if (picked.length === 0) return [];
    const byId = new Map(cands.map((b) => [b.endpoint_id, b]));
    const out = picked.map((r) => {
      const b = byId.get(r.endpoint_id)!;
      return skip({
        delivery: toDelivery(r),
        endpoint: { id: b.endpoint_id, tenantId: b.tenant_id, url: b.url },
      });
    });
    // Written in this transaction, under the queue row locks taken above.
    await complete(
      (fn) => fn(c),
      out.map((x) => ({ ...x, leaseOwner: null })),
      now,
      ids,
    );
    return out;
  });
}
