/**
 * PostgreSQL half of the delivery plane (see src/ports/delivery-store.ts), for any number of processes sharing
 * the database. Same behaviour as the SQLite reference (src/adapters/sqlite/delivery-store.ts); what differs is
 * the concurrency control, which is all PostgreSQL row locks:
 *
 * - Leasing locks candidate `endpoint_queue` rows `FOR UPDATE SKIP LOCKED`: one transaction at a time leases for
 *   an endpoint, so the in-flight cap holds across processes, and workers never wait for each other.
 * - Fan-out claims `fanout_pending` rows `FOR UPDATE SKIP LOCKED` (each event is fanned out by exactly one
 *   transaction) and holds its tenants' gates — a per-tenant advisory lock — shared. Every writer that fan-out
 *   must not race (endpoint PATCH/DELETE/status, re-enable, auto-disable, tenant deletion) takes the gate
 *   exclusively, so it waits for the fan-out to commit and then sees (and cancels) what it created, or the fan-out
 *   waits for it and reads tenants and endpoints after it (a later statement than the gate). No row locks on
 *   tenants or endpoints: they would be one WAL-logged lock per endpoint of the tenant on every pass.
 * - Fairness: PostgreSQL's heavyweight lock queue makes new shared requests wait behind a waiting exclusive one,
 *   so with fan-out transactions overlapping back to back those writers still wait a bounded time (row-level
 *   FOR SHARE would let each new sharer overtake them).
 * - Every writer takes its locks in one order — tenant gate, tenants, endpoints, endpoint_queue (several rows:
 *   sorted by endpoint_id), deliveries — so transactions never deadlock each other (the tx helper retries one that
 *   does).
 * - The per-endpoint runtime record (circuit, streak, health, notice windows: domain/endpoint-runtime.ts) is JSON
 *   on the endpoint's queue row, read with the row lock leasing and completion take anyway (a locked row comes
 *   back in its current version) and written back before COMMIT. Under that lock a probe claim is a
 *   compare-and-set: of two processes that see a probe due, one holds the row and writes the claim, the other
 *   skips the row (leasing) or waits and then sees the claim. Completion writes the notices the runtime calls for
 *   to the notifications outbox in the same transaction (health changes before any notice is sent).
 *
 * READ COMMITTED pitfall avoided throughout: a statement's snapshot is taken before the row locks it acquires, so
 * anything that must see work committed by the previous holder of a queue row lock (the due-time recompute above
 * all) runs in a later statement than the one that took the lock.
 *
 * Every query is index-driven: leasing and fan-out cost depends on `limit`, `perEndpoint` and the endpoints
 * involved, never on the size of the backlog.
 */
import type { DeliveryStore } from '../../ports/delivery-store.ts';
import { SubscriptionCache } from '../subscriptions.ts';
import { skipBlocked } from './circuit-open.ts';
import { complete, expire } from './completion.ts';
import { createDeliveryReads } from './delivery-reads.ts';
import { createEndpointsStore } from './endpoints-store.ts';
import { fanoutRun } from './fanout.ts';
import { lease } from './lease.ts';
import type { PostgresDeliveryStoreDeps } from './query-helpers.ts';

// Helpers the operations store and tests share with the delivery plane.
export { insertNotificationsSql, type NewNotification, notificationValues } from './notification-outbox.ts';
export {
  cmp,
  type Db,
  lockTenantGate,
  lockTenantGates,
  lockTenantGatesShared,
  type PostgresDeliveryStoreDeps,
  recomputeDue,
  where,
} from './query-helpers.ts';
export {
  DELIVERY_COLUMNS,
  type DeliveryRow,
  ENDPOINT_COLUMNS,
  type EndpointRow,
  prefixed,
  runtimeColumns,
  toDelivery,
  toEndpoint,
  toPage,
} from './rows.ts';

export function createPostgresDeliveryStore({ query, tx }: PostgresDeliveryStoreDeps): DeliveryStore {
  const subscriptions = new SubscriptionCache();
  return {
    ...createEndpointsStore({ query, tx }),
    fanoutRun: ({ now, limit, deliveryLimit, ids }) =>
      fanoutRun(tx, subscriptions, now, limit, deliveryLimit ?? Number.POSITIVE_INFINITY, ids),
    deliveryLease: ({ owner, now, limit, perEndpoint, leaseMs, lanes, ...kinds }) =>
      lease(tx, owner, now, limit, perEndpoint, leaseMs, lanes, kinds),
    deliverySkipBlocked: (p) => skipBlocked(tx, p),
    async deliveryComplete({ completions, now, ids }) {
      if (completions.length > 0) await complete(tx, completions, now, ids);
    },
    deliveryExpireLeases: ({ now }) => expire(tx, now),
    ...createDeliveryReads({ query }),
  };
}
