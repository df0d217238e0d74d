/**
 * Shared by the sections of the delivery conformance suite (delivery-conformance.ts): fixed times, record
 * factories and the helpers that drive the store under test.
 */
import { randomBytes } from 'node:crypto';
import type {
  AttemptCompletion,
  AttemptRecord,
  DeliveryRecord,
  EndpointRecord,
  LeasedDelivery,
} from '../../../src/ports/delivery-store.ts';
import type { NewEvent, Store, TenantRecord } from '../../../src/ports/store.ts';
import {
  createTenant,
  DAY,
  endpointRecord,
  HOUR,
  id,
  ids,
  LEASE_MS,
  MINUTE,
  SECOND,
  secretRecord,
} from '../fixtures.ts';
import { type ConformanceTest, NOW } from '../store-conformance.ts';

export { DAY, endpointRecord, HOUR, id, ids, LEASE_MS, MINUTE, SECOND, secretRecord };

export const WINDOW = DAY;

export function eventRecord(
  tenantId: string,
  type: string,
  at = NOW,
  resourceId: string | null = null,
): NewEvent {
  return {
    id: id('event', at),
    tenantId,
    type,
    resourceId,
    data: JSON.stringify({ type, n: randomBytes(4).toString('hex'), s: 'é "q" \\ {}' }),
    idempotencyKey: null,
    requestHash: null,
    createdAt: at,
  };
}

/** The attempt a worker would record for a leased delivery. */
export function attemptFor(l: LeasedDelivery, at: number, o: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    id: id('attempt', at),
    deliveryId: l.delivery.id,
    endpointId: l.endpoint.id,
    tenantId: l.endpoint.tenantId,
    eventId: l.delivery.eventId,
    attemptNo: l.delivery.attempts + 1,
    url: l.endpoint.url,
    dueAt: l.delivery.nextAttemptAt ?? at,
    startedAt: at,
    finishedAt: at + 120,
    outcome: 'delivered',
    statusCode: 200,
    errorClass: null,
    errorMessage: null,
    request: {
      hops: [{ url: l.endpoint.url, headers: { 'webhook-id': l.delivery.webhookId }, status: 200 }],
    },
    responseHeaders: { 'content-type': 'text/plain' },
    responseBody: Buffer.from('ok').toString('base64'),
    queueMs: at - (l.delivery.nextAttemptAt ?? at),
    platformMs: 3,
    consumerMs: 117,
    ...o,
  };
}

/** The suite's helpers, bound to the store of the running test (`h.store`, set by the suite's beforeEach). */
export function createDeliveryHarness() {
  const h = { store: undefined as unknown as Store };

  const newTenant = (at = NOW): Promise<TenantRecord> => createTenant(h.store, at);

  async function newEndpoint(tenantId: string, o: Partial<EndpointRecord> = {}): Promise<EndpointRecord> {
    const ep = endpointRecord(tenantId, o);
    await h.store.endpointCreate({ endpoint: ep, secret: secretRecord(ep) });
    return ep;
  }

  /** Inserts events (in order, so in event_seq order) and fans them all out at `at`. */
  async function publish(tenantId: string, types: string[], at = NOW): Promise<NewEvent[]> {
    const evs = types.map((t) => eventRecord(tenantId, t, at));
    await h.store.eventInsertBatch({ events: evs, now: at, idempotencyWindowMs: WINDOW });
    await h.store.fanoutRun({ now: at, limit: 1_000, ids });
    return evs;
  }

  const lease = (o: {
    owner?: string;
    now?: number;
    limit?: number;
    perEndpoint?: number;
    leaseMs?: number;
    firstLimit?: number;
    replayLimit?: number;
    replaysOnly?: boolean;
  }) =>
    h.store.deliveryLease({
      owner: o.owner ?? 'w1',
      now: o.now ?? NOW + SECOND,
      limit: o.limit ?? 100,
      perEndpoint: o.perEndpoint ?? 100,
      leaseMs: o.leaseMs ?? LEASE_MS,
      firstLimit: o.firstLimit,
      replayLimit: o.replayLimit,
      replaysOnly: o.replaysOnly,
    });

  const complete = (
    l: LeasedDelivery,
    next: AttemptCompletion['next'],
    at = NOW + 2 * SECOND,
    o: { owner?: string; attempt?: Partial<AttemptRecord> } = {},
  ) => {
    const attempt = attemptFor(l, at, o.attempt);
    // Under the lease `l` was given, as the worker completes it.
    const completion = { attempt, leaseOwner: o.owner ?? 'w1', leaseUntil: l.leaseUntil, next };
    return h.store.deliveryComplete({ completions: [completion], now: at + 200 }).then(() => attempt);
  };

  const deliveriesOf = async (endpointId: string, status: DeliveryRecord['status'] | null = null) =>
    (await h.store.deliveryList({ endpointId, tenantId: null, status, limit: 10_000, cursor: null })).data;

  return Object.assign(h, { newTenant, newEndpoint, publish, lease, complete, deliveriesOf });
}

export type DeliveryHarness = ReturnType<typeof createDeliveryHarness>;

/** What each section of the suite is given: the harness, and the suite's `test` (which honours `skip`). */
export interface DeliverySection {
  h: DeliveryHarness;
  test: ConformanceTest;
}
