/**
 * Shared by the sections of the operations conformance suite (operations-conformance.ts): fixed times, record
 * factories and the helpers that drive the store under test.
 */
import { randomBytes } from 'node:crypto';
import type {
  AttemptCompletion,
  AttemptRecord,
  DeliveryRecord,
  EndpointRecord,
  LeasedDelivery,
  SkipCompletion,
  SkippedDelivery,
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

export { DAY, HOUR, id, ids, LEASE_MS, MINUTE, SECOND };

/** What a completion batch is stamped with after its attempts finished (attemptFor: finishedAt = at + 120). */
export const WRITE_DELAY = 200;
export const FINISH = 120;

export type Failure = 'retryable' | 'permanent' | 'circuit_open' | 'platform_error';

/** The attempt a worker would record for a leased delivery: delivered unless `failure` says otherwise. */
export function attemptFor(
  l: SkippedDelivery,
  at: number,
  failure: Failure | null = null,
  o: Partial<AttemptRecord> = {},
): AttemptRecord {
  const status =
    failure === null ? 200 : failure === 'permanent' ? 410 : failure === 'retryable' ? 503 : null;
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
    finishedAt: at + FINISH,
    outcome: failure === null ? 'delivered' : failure === 'permanent' ? 'permanent' : 'retryable',
    statusCode: status,
    errorClass:
      failure === null
        ? null
        : failure === 'circuit_open' || failure === 'platform_error'
          ? failure
          : 'http_status',
    errorMessage: null,
    request: { hops: [{ url: l.endpoint.url, headers: { 'webhook-id': l.delivery.webhookId }, status }] },
    responseHeaders: null,
    responseBody: null,
    queueMs: 0,
    platformMs: 3,
    consumerMs: failure === 'circuit_open' || failure === 'platform_error' ? null : 117,
    ...o,
  };
}

/** The suite's helpers, bound to the store of the running test (`h.store`, set by the suite's beforeEach). */
export function createOperationsHarness() {
  const h = { store: undefined as unknown as Store };

  async function newTenant(at = NOW, email: string | null = null): Promise<TenantRecord> {
    const tenant = await createTenant(h.store, at);
    if (email !== null) await h.store.tenantSetNotificationEmail({ tenantId: tenant.id, email, now: at });
    return tenant;
  }

  async function newEndpoint(tenantId: string, o: Partial<EndpointRecord> = {}): Promise<EndpointRecord> {
    const url = `https://example.com/hooks/${randomBytes(3).toString('hex')}`;
    const ep = endpointRecord(tenantId, { url, ...o });
    await h.store.endpointCreate({ endpoint: ep, secret: secretRecord(ep, { sealed: 'sealed:x' }) });
    return ep;
  }

  /** Inserts `n` events of the tenant at `at` and fans them out at `at`. */
  async function publish(tenantId: string, n: number, at = NOW): Promise<NewEvent[]> {
    const evs: NewEvent[] = Array.from({ length: n }, () => ({
      id: id('event', at),
      tenantId,
      type: 'a.b',
      resourceId: null,
      data: '{"n":1}',
      idempotencyKey: null,
      requestHash: null,
      createdAt: at,
    }));
    await h.store.eventInsertBatch({ events: evs, now: at, idempotencyWindowMs: DAY });
    await h.store.fanoutRun({ now: at, limit: 1_000, ids });
    return evs;
  }

  const lease = (now: number, o: { owner?: string; limit?: number; perEndpoint?: number } = {}) =>
    h.store.deliveryLease({
      owner: o.owner ?? 'w1',
      now,
      limit: o.limit ?? 100,
      perEndpoint: o.perEndpoint ?? 100,
      leaseMs: LEASE_MS,
    });

  /** The circuit-open pass's write at `now`: due deliveries of blocked endpoints recorded as `circuit_open`. */
  const skipBlocked = (now: number, limit = 100) =>
    h.store.deliverySkipBlocked({
      now,
      limit,
      skip: (d) => ({
        attempt: attemptFor(d, now, 'circuit_open', { finishedAt: now }),
        next: { status: 'pending', nextAttemptAt: now + DAY },
      }),
    });
  const skipped = (cs: SkipCompletion[], endpointId: string) =>
    cs.filter((x) => x.attempt.endpointId === endpointId).map((x) => x.attempt.errorClass);

  /** Completes leased deliveries in one batch: attempts started at `at`, the batch written at `at + 200`. */
  async function complete(
    ls: LeasedDelivery[],
    at: number,
    o: {
      failure?: Failure | null;
      next?: AttemptCompletion['next'];
      owner?: string;
      notificationIds?: string[];
      attempt?: Partial<AttemptRecord>;
    } = {},
  ): Promise<AttemptRecord[]> {
    const failure = o.failure ?? null;
    const next: AttemptCompletion['next'] =
      o.next ?? (failure === null ? { status: 'delivered' } : { status: 'pending', nextAttemptAt: at + DAY });
    const attempts = ls.map((l) => attemptFor(l, at, failure, o.attempt));
    const notificationIds = [...(o.notificationIds ?? [])];
    await h.store.deliveryComplete({
      completions: ls.map((l, i) => ({
        attempt: attempts[i]!,
        leaseOwner: o.owner ?? 'w1',
        probe: l.mode === 'probe',
        next,
      })),
      now: at + WRITE_DELAY,
      ids: { notification: () => notificationIds.shift() ?? id('notification', at) },
    });
    return attempts;
  }

  const runtimeOf = async (endpointId: string) => (await h.store.endpointRuntime({ endpointId }))!.runtime;
  const deliveriesOf = async (endpointId: string, status: DeliveryRecord['status'] | null = null) =>
    (await h.store.deliveryList({ endpointId, tenantId: null, status, limit: 10_000, cursor: null })).data;
  const notificationsOf = async (tenantId: string | null) =>
    (await h.store.notificationList({ tenantId, limit: 1_000, cursor: null })).data;
  const modes = (ls: LeasedDelivery[]) => ls.map((l) => l.mode ?? 'send');

  return Object.assign(h, {
    newTenant,
    newEndpoint,
    publish,
    lease,
    skipBlocked,
    skipped,
    complete,
    runtimeOf,
    deliveriesOf,
    notificationsOf,
    modes,
  });
}

export type OperationsHarness = ReturnType<typeof createOperationsHarness>;

/** What each section of the suite is given: the harness, and the suite's `test` (which honours `skip`). */
export interface OperationsSection {
  h: OperationsHarness;
  test: ConformanceTest;
}
