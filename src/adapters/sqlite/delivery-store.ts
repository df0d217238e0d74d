/**
 * SQLite half of the delivery plane (see src/ports/delivery-store.ts). One process owns the database and
 * better-sqlite3 runs each transaction to completion on the event loop, so the row locking the PostgreSQL adapter
 * needs (SKIP LOCKED leasing, FOR SHARE at fan-out) is unnecessary here: transactions are serial by construction.
 */

import type Database from 'better-sqlite3';
import type { DeliveryStore } from '../../ports/delivery-store.ts';
import { createSkipBlocked } from './circuit-open.ts';
import { createCompletion } from './completion.ts';
import { createDeliveryReads } from './delivery-reads.ts';
import { createEndpointsStore } from './endpoints-store.ts';
import { createFanout } from './fanout.ts';
import { createLease } from './lease.ts';
import { createRefreshDue } from './queue-due.ts';
import type { St } from './rows.ts';
import type { TurnCommit } from './turn-commit.ts';

// Row mappers the operations store shares with the delivery plane.
export { deliveryFromRow, endpointFromRow } from './rows.ts';

export function createSqliteDeliveryStore(
  db: Database.Database,
  st: St,
  turn: TurnCommit,
): DeliveryStore & { refreshDue(endpointId: string): void } {
  const refreshDue = createRefreshDue(st);
  const fanout = createFanout(st);
  const lease = createLease(st);
  const { complete, expire } = createCompletion(st, refreshDue);
  const skipBlocked = createSkipBlocked(st, complete);

  return {
    refreshDue: (endpointId: string) => void refreshDue(endpointId),
    ...createEndpointsStore(db, st, refreshDue),

    // The pipeline's writes share one commit per event-loop turn (turn-commit.ts).
    fanoutRun: ({ now, limit, deliveryLimit, ids }) =>
      turn.submit(() => fanout(now, limit, deliveryLimit ?? Number.POSITIVE_INFINITY, ids)),
    deliveryLease: ({ owner, now, limit, perEndpoint, leaseMs, lanes, ...kinds }) =>
      turn.submit(() => lease(owner, now, limit, perEndpoint, leaseMs, lanes, kinds)),
    deliverySkipBlocked: ({ now, limit, lanes, skip, ids }) =>
      turn.submit(() => skipBlocked(now, limit, lanes, skip, ids)),
    async deliveryComplete({ completions, now, ids }) {
      if (completions.length > 0) await turn.submit(() => complete(completions, now, ids));
    },
    deliveryExpireLeases: ({ now }) => turn.submit(() => expire(now)),
    ...createDeliveryReads(st),
  };
}
