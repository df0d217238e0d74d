/**
 * The reference model for the ordering properties (test/conformance/ordering-properties.ts, ADR-05): what a run
 * generates (seeds, endpoints, events, attempt records) and what the store promised about each delivery, with the
 * per-step ordering invariant. Nothing here touches a store beyond creating the fixture endpoints.
 */
import type { newId } from '../../src/domain/ids.ts';
import type { AttemptOutcome, LeasedDelivery, Ordering } from '../../src/ports/delivery-store.ts';
import type { NewEvent, Store } from '../../src/ports/store.ts';

export const SECOND = 1_000;
export const LEASE_MS = 30 * SECOND;
/** Attempts before a retryable delivery is dead-lettered: 12 in production, fewer keeps runs short. */
export const MAX_ATTEMPTS = 4;
export const RESOURCES = ['r1', 'r2', 'r3', null] as const;
export const MODES: Ordering[] = ['none', 'endpoint', 'resource'];
export const MAX_EVENTS = 32;
const RUNS = 2;

export type IdOf = (kind: Parameters<typeof newId>[0]) => string;

const TENANT = { name: 'ordering', totpSeedSealed: 'sealed:x', deletedAt: null };
const KEY = { kind: 'tenant' as const, name: null, prefix: 'hkt_x', revokedAt: null };
const SECRET = { sealed: 'sealed:x', activeUntil: null };
const ENDPOINT = { url: 'https://example.com/hooks', description: null, eventTypes: ['*'], headers: {} };
const EVENT = { type: 'order.updated', idempotencyKey: null, requestHash: null };
/** What an attempt record holds beyond which delivery, when and how it went (nothing the store interprets). */
const QUIET = { errorMessage: null, request: { hops: [] }, responseHeaders: null, responseBody: null };
const TIMINGS = { queueMs: 0, platformMs: 0, consumerMs: null };

/** A tenant with one endpoint per mode (subscribed to everything); returns their ids. */
export async function createEndpoints(
  store: Store,
  id: IdOf,
  at: number,
  modes: Ordering[],
  cap: () => number,
) {
  const tenantId = id('tenant');
  const tenantKey = { ...KEY, id: id('apiKey'), tenantId, hash: id('apiKey'), createdAt: at };
  await store.tenantCreate({ tenant: { ...TENANT, id: tenantId, createdAt: at }, tenantKey });
  const endpointIds: string[] = [];
  for (const ordering of modes) {
    const ep = { ...ENDPOINT, id: id('endpoint'), tenantId, ordering, maxConcurrency: cap() };
    await store.endpointCreate({
      endpoint: { ...ep, status: 'enabled', disabledReason: null, createdAt: at, updatedAt: at },
      secret: { ...SECRET, id: id('secret'), endpointId: ep.id, tenantId, activeFrom: at, createdAt: at },
    });
    endpointIds.push(ep.id);
  }
  return { tenantId, endpointIds };
}

export function eventOf(
  id: IdOf,
  tenantId: string,
  resourceId: string | null,
  seq: number,
  at: number,
): NewEvent {
  return { ...EVENT, id: id('event'), tenantId, resourceId, data: JSON.stringify({ seq }), createdAt: at };
}

/** The attempt a worker records for a lease; a `circuit_open` lease was never sent. */
export function attemptOf(l: LeasedDelivery, id: string, at: number, now: number, outcome: AttemptOutcome) {
  const sent = l.mode !== 'circuit_open';
  return {
    id,
    deliveryId: l.delivery.id,
    endpointId: l.endpoint.id,
    tenantId: l.endpoint.tenantId,
    eventId: l.delivery.eventId,
    attemptNo: l.delivery.attempts + 1,
    url: l.endpoint.url,
    dueAt: l.delivery.nextAttemptAt ?? at,
    startedAt: at,
    finishedAt: now,
    outcome,
    statusCode: sent ? { delivered: 200, retryable: 503, permanent: 410 }[outcome] : null,
    errorClass: outcome === 'delivered' ? null : sent ? 'http_status' : 'circuit_open',
    ...QUIET,
    ...TIMINGS,
  };
}

export interface ModelDelivery {
  id: string;
  endpointId: string;
  /** Acceptance order of its event. */
  seq: number;
  resourceId: string | null;
  status: 'pending' | 'delivered' | 'dead';
  attempts: number;
  due: number;
  /** `epoch`: the endpoint's mode epoch at the lease (a lease made before a mode change is not bound by the new
   *  rule). */
  lease: { owner: string; until: number; epoch: number } | null;
}

export type ModelEndpoint = { id: string; ordering: Ordering; epoch: number; deliveries: ModelDelivery[] };

export const STATS = [
  'leases',
  'attempts',
  'crashes',
  'expired',
  'modeChanges',
  'busyChanges',
  'parallel',
] as const;
/** `busyChanges`: mode changes with deliveries of the endpoint in flight; `parallel`: leases that left two in
 *  flight where the mode allows it (`none`, or different resources). */
export type OrderingStats = Record<(typeof STATS)[number], number>;
export const emptyStats = () => Object.fromEntries(STATS.map((k) => [k, 0])) as OrderingStats;

export interface Scenario {
  /** Initial modes of the endpoints of one run. */
  modes: (pick: <T>(xs: readonly T[]) => T) => Ordering[];
  changeModes?: boolean;
}

export const label = (d: ModelDelivery) => `#${d.seq}${d.resourceId ? `/${d.resourceId}` : ''} (${d.id})`;

/** The deliveries one ordered line of `d` is in under the endpoint's mode, or null when `d` is unordered. */
export function scopeOf(ep: ModelEndpoint, d: ModelDelivery): ModelDelivery[] | null {
  if (ep.ordering === 'endpoint') return ep.deliveries;
  if (ep.ordering === 'resource' && d.resourceId !== null)
    return ep.deliveries.filter((x) => x.resourceId === d.resourceId);
  return null;
}

/**
 * After every step: once a delivery was leased under the current mode, it is the only one in flight in its line (the
 * endpoint, or its resource) and nothing before it is pending. Returns the first violation, or null.
 */
export function orderingViolation(endpoints: Iterable<ModelEndpoint>): string | null {
  for (const ep of endpoints) {
    for (const d of ep.deliveries) {
      if (d.lease?.epoch !== ep.epoch) continue;
      const scope = scopeOf(ep, d);
      if (!scope) continue;
      const where = `${ep.ordering}-ordered ${ep.id}: ${label(d)} in flight`;
      const others = scope.filter((x) => x.lease && x !== d);
      if (others.length > 0) return `${where} beside ${others.map(label).join(', ')}`;
      const earlier = scope.find((x) => x.seq < d.seq && x.status === 'pending');
      if (earlier) return `${where} before ${label(earlier)} ended`;
    }
  }
  return null;
}

/** A fresh 32-bit seed. */
export const randomSeed = (): number => Math.floor(Math.random() * 2 ** 32);

/** Fresh seeds on every test run unless ORDERING_SEED pins one; ORDERING_RUNS searches longer than RUNS. */
export function seeds(): number[] {
  const pinned = process.env.ORDERING_SEED;
  if (pinned) return [Number(pinned) >>> 0];
  const runs = Number(process.env.ORDERING_RUNS) || RUNS;
  return Array.from({ length: runs }, randomSeed);
}
