/** The circuit-open pass's transaction (deliverySkipBlocked) in SQLite. */
import { blockedUntil, decideAttempt } from '../../domain/circuit-breaker.ts';
import { parseRuntime } from '../../domain/endpoint-runtime.ts';
import type { LaneBinding } from '../../domain/lanes.ts';
import type { DeliveryStore, RecordedCompletion, SkipCompletion } from '../../ports/delivery-store.ts';
import { dueDelivery, dueRows, laneCondition } from './lease.ts';
import type { Row, St } from './rows.ts';

type SkipParams = Parameters<DeliveryStore['deliverySkipBlocked']>[0];

/** Runs inside a transaction (the caller's: turn-commit.ts). */
export function createSkipBlocked(
  st: St,
  complete: (completions: RecordedCompletion[], now: number, ids: SkipParams['ids']) => void,
) {
  return (
    now: number,
    limit: number,
    lanes: LaneBinding | undefined,
    skip: SkipParams['skip'],
    ids: SkipParams['ids'],
  ) => {
    // The blocked rows are few (endpoints in an outage): read through their own index, not by walking the
    // rotation of every endpoint with work.
    const blocked = st(
      `SELECT q.endpoint_id, q.inflight, q.runtime, e.ordering, e.url, e.tenant_id
           FROM endpoint_queue q INDEXED BY endpoint_queue_blocked JOIN endpoints e ON e.id = q.endpoint_id
          WHERE q.blocked_until > ? AND q.next_due_at <= ? ${laneCondition(lanes)}
          ORDER BY q.blocked_until, q.endpoint_id LIMIT ? + 0`,
    ).all(now, now, limit) as Row[];
    const out: SkipCompletion[] = [];
    for (const c of blocked) {
      if (out.length >= limit) break;
      const runtime = parseRuntime((c.runtime as string | null) ?? null);
      if (decideAttempt(runtime.circuit, now).kind !== 'skip') {
        // The stored block is behind the circuit (its probe is due): unblock, so the next lease probes.
        st('UPDATE endpoint_queue SET blocked_until = ? WHERE endpoint_id = ?').run(
          blockedUntil(runtime.circuit),
          c.endpoint_id,
        );
        continue;
      }
      const endpoint = {
        id: c.endpoint_id as string,
        tenantId: c.tenant_id as string,
        url: c.url as string,
      };
      for (const r of dueRows(st, c, now, limit - out.length, false))
        out.push(skip({ delivery: dueDelivery(r), endpoint }));
    }
    if (out.length > 0)
      complete(
        out.map((x) => ({ ...x, leaseOwner: null })),
        now,
        ids,
      );
    return out;
  };
}
