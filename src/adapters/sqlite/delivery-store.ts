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

// Row mappers the operations store shares with the delivery plane.
export { deliveryFromRow, endpointFromRow } from './rows.ts';

export function createSqliteDeliveryStore(
  db: Database.Database,
  st: St,
): DeliveryStore & { refreshDue(endpointId: string): void } {
  const refreshDue = createRefreshDue(st);
  const fanout = createFanout(db, st);
  const lease = createLease(db, st, refreshDue);
  const { complete, expire } = createCompletion(db, st, refreshDue);
  const skipBlocked = createSkipBlocked(db, st, complete);

  return {
    refreshDue: (endpointId: string) => void refreshDue(endpointId),
    ...createEndpointsStore(db, st, refreshDue),

    async fanoutRun({ now, limit, ids }) {
      return fanout.immediate(now, limit, ids);
    },
    async deliveryLease({ owner, now, limit, perEndpoint, leaseMs, lanes }) {
      return lease.immediate(owner, now, limit, perEndpoint, leaseMs, lanes);
    },
    async deliverySkipBlocked({ now, limit, lanes, skip, ids }) {
      return skipBlocked.immediate(now, limit, lanes, skip, ids);
    },
    async deliveryComplete({ completions, now, ids }) {
      if (completions.length > 0) complete.immediate(completions, now, ids);
    },
    async deliveryExpireLeases({ now }) {
      return expire.immediate(now);
    },
    ...createDeliveryReads(st),
  };
}
