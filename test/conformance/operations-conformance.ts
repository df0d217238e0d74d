/**
 * The operations conformance suite (src/ports/operations-store.ts, and the failure handling that leasing and
 * completion do in src/ports/delivery-store.ts): the shared per-endpoint runtime (circuit, probe, ramp, streak,
 * health), the notification outbox and its digests, auto-disable, re-enable with a backlog choice, replay,
 * statistics and the audit trail. Written once against the port and run on every Store adapter, like
 * delivery-conformance.ts: no SQL, a fresh migrated store per test, every timestamp a fixed fake time. The
 * concurrency tests (Promise.all on one store) must pass on single-process stores too.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PROBE_INTERVAL_MS } from '../../src/domain/circuit-breaker.ts';
import { AUTO_DISABLE_AFTER_MS } from '../../src/domain/endpoint-health.ts';
import { initialRuntime } from '../../src/domain/endpoint-runtime.ts';
import { newId } from '../../src/domain/ids.ts';
import { noticeText } from '../../src/domain/notice-text.ts';
import type {
  AttemptCompletion,
  AttemptRecord,
  AuditRecord,
  DeliveryIdFactory,
  DeliveryRecord,
  EndpointRecord,
  LeasedDelivery,
  NotificationRecord,
  SkipCompletion,
  SkippedDelivery,
} from '../../src/ports/delivery-store.ts';
import type { NewEvent, Store, TenantRecord } from '../../src/ports/store.ts';
import { NOW, type StoreConformanceOptions } from './store-conformance.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const LEASE_MS = 30 * SECOND;
/** What a completion batch is stamped with after its attempts finished (attemptFor: finishedAt = at + 120). */
const WRITE_DELAY = 200;
const FINISH = 120;

const id = (kind: Parameters<typeof newId>[0], at = NOW) => newId(kind, at, randomBytes(10));
const ids: DeliveryIdFactory = { delivery: () => id('delivery'), webhookId: () => id('message') };

type Failure = 'retryable' | 'permanent' | 'circuit_open';

/** The attempt a worker would record for a leased delivery: delivered unless `failure` says otherwise. */
function attemptFor(
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
    attemptNo: l.delivery.attempts + 1,
    url: l.endpoint.url,
    dueAt: l.delivery.nextAttemptAt ?? at,
    startedAt: at,
    finishedAt: at + FINISH,
    outcome: failure === null ? 'delivered' : failure === 'permanent' ? 'permanent' : 'retryable',
    statusCode: status,
    errorClass: failure === null ? null : failure === 'circuit_open' ? 'circuit_open' : 'http_status',
    errorMessage: null,
    request: { hops: [{ url: l.endpoint.url, headers: { 'webhook-id': l.delivery.webhookId }, status }] },
    responseHeaders: null,
    responseBody: null,
    queueMs: 0,
    platformMs: 3,
    consumerMs: failure === 'circuit_open' ? null : 117,
    ...o,
  };
}

export function runOperationsConformance(opts: StoreConformanceOptions): void {
  const skipped = new Map<string, string>();
  for (const s of opts.skip ?? []) for (const t of s.tests) skipped.set(t, s.reason);
  const seen = new Set<string>();
  const test = (name: string, fn: () => Promise<void>) => {
    seen.add(name);
    const reason = skipped.get(name);
    if (reason !== undefined) it.skip(`${name} [skipped: ${reason}]`, fn);
    else it(name, fn);
  };

  describe(`Operations store conformance: ${opts.name}`, () => {
    let store: Store;

    beforeEach(async () => {
      store = await opts.createStore();
      await store.migrate();
    });
    afterEach(async () => {
      if (opts.destroyStore) await opts.destroyStore(store);
      else await store.close();
    });

    async function newTenant(at = NOW, email: string | null = null): Promise<TenantRecord> {
      const tenant: TenantRecord = {
        id: id('tenant', at),
        name: `tenant ${at}`,
        totpSeedSealed: 'sealed:x',
        createdAt: at,
        deletedAt: null,
      };
      await store.tenantCreate({
        tenant,
        tenantKey: {
          id: id('apiKey', at),
          kind: 'tenant',
          tenantId: tenant.id,
          name: null,
          hash: randomBytes(32).toString('hex'),
          prefix: 'hkt_abcd',
          createdAt: at,
          revokedAt: null,
        },
      });
      if (email !== null) await store.tenantSetNotificationEmail({ tenantId: tenant.id, email, now: at });
      return tenant;
    }

    async function newEndpoint(tenantId: string, o: Partial<EndpointRecord> = {}): Promise<EndpointRecord> {
      const at = o.createdAt ?? NOW;
      const ep: EndpointRecord = {
        id: id('endpoint', at),
        tenantId,
        url: `https://example.com/hooks/${randomBytes(3).toString('hex')}`,
        description: null,
        eventTypes: ['*'],
        ordering: 'none',
        maxConcurrency: 10,
        headers: {},
        status: 'enabled',
        disabledReason: null,
        createdAt: at,
        updatedAt: at,
        ...o,
      };
      await store.endpointCreate({
        endpoint: ep,
        secret: {
          id: id('secret', at),
          endpointId: ep.id,
          tenantId,
          sealed: 'sealed:x',
          activeFrom: at,
          activeUntil: null,
          createdAt: at,
        },
      });
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
      await store.eventInsertBatch({ events: evs, now: at, idempotencyWindowMs: DAY });
      await store.fanoutRun({ now: at, limit: 1_000, ids });
      return evs;
    }

    const lease = (now: number, o: { owner?: string; limit?: number; perEndpoint?: number } = {}) =>
      store.deliveryLease({
        owner: o.owner ?? 'w1',
        now,
        limit: o.limit ?? 100,
        perEndpoint: o.perEndpoint ?? 100,
        leaseMs: LEASE_MS,
      });

    /** The circuit-open pass's write at `now`: due deliveries of blocked endpoints recorded as `circuit_open`. */
    const skipBlocked = (now: number, limit = 100) =>
      store.deliverySkipBlocked({
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
        o.next ??
        (failure === null ? { status: 'delivered' } : { status: 'pending', nextAttemptAt: at + DAY });
      const attempts = ls.map((l) => attemptFor(l, at, failure, o.attempt));
      const notificationIds = [...(o.notificationIds ?? [])];
      await store.deliveryComplete({
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

    const runtimeOf = async (endpointId: string) => (await store.endpointRuntime({ endpointId }))!.runtime;
    const deliveriesOf = async (endpointId: string, status: DeliveryRecord['status'] | null = null) =>
      (await store.deliveryList({ endpointId, tenantId: null, status, limit: 10_000, cursor: null })).data;
    const notificationsOf = async (tenantId: string | null) =>
      (await store.notificationList({ tenantId, limit: 1_000, cursor: null })).data;
    const modes = (ls: LeasedDelivery[]) => ls.map((l) => l.mode ?? 'send');

    describe('runtime', () => {
      test('endpointRuntime: absent for an unknown endpoint, initial for a new one, counts in-flight', async () => {
        expect(await store.endpointRuntime({ endpointId: id('endpoint') })).toBeNull();
        const t = await newTenant();
        const ep = await newEndpoint(t.id);
        expect(await store.endpointRuntime({ endpointId: ep.id })).toEqual({
          endpointId: ep.id,
          inflight: 0,
          runtime: initialRuntime(),
        });
        await publish(t.id, 3);
        const ls = await lease(NOW + SECOND);
        expect(modes(ls)).toEqual(['send', 'send', 'send']);
        expect((await store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(3);
        await complete(ls.slice(0, 1), NOW + 2 * SECOND);
        const view = await store.endpointRuntime({ endpointId: ep.id });
        expect(view?.inflight).toBe(2);
        expect(view?.runtime).toMatchObject({
          lastSuccessAt: NOW + 2 * SECOND + FINISH,
          lastFailureAt: null,
          failingSince: null,
          health: 'healthy',
        });
        await complete(ls.slice(1), NOW + 3 * SECOND, { failure: 'retryable' });
        expect(await store.endpointRuntime({ endpointId: ep.id })).toMatchObject({
          inflight: 0,
          runtime: {
            circuit: { state: 'closed', consecutiveFailures: 2 },
            lastFailureAt: NOW + 3 * SECOND + FINISH,
            failingSince: NOW + 3 * SECOND + FINISH,
            health: 'healthy',
          },
        });
      });

      test('the circuit opens after 20 failures, probes once per 5 minutes, closes on success and ramps', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id, { maxConcurrency: 10 });
        const other = await newEndpoint(t.id, { maxConcurrency: 10 });
        await publish(t.id, 60);
        expect(await store.queueStats()).toEqual({ pending: 120, circuitsOpen: 0 });
        const only = (ls: LeasedDelivery[]) => ls.filter((l) => l.endpoint.id === ep.id);

        // 20 failed attempts, in two batches of 10 (the cap), open the circuit.
        const r1 = only(await lease(NOW + SECOND));
        expect(modes(r1)).toEqual(Array(10).fill('send'));
        await complete(r1, NOW + 2 * SECOND, { failure: 'retryable' });
        expect((await runtimeOf(ep.id)).circuit).toMatchObject({ state: 'closed', consecutiveFailures: 10 });
        const r2 = only(await lease(NOW + 3 * SECOND));
        expect(modes(r2)).toEqual(Array(10).fill('send'));
        await complete(r2, NOW + 4 * SECOND, { failure: 'retryable' });
        const openedAt = NOW + 4 * SECOND + FINISH;
        expect(await store.endpointRuntime({ endpointId: ep.id })).toEqual({
          endpointId: ep.id,
          inflight: 0,
          runtime: {
            ...initialRuntime(),
            circuit: {
              state: 'open',
              consecutiveFailures: 20,
              openedAt,
              lastProbeAt: null,
              probeInFlightUntil: null,
              closedAt: null,
            },
            lastFailureAt: openedAt,
            failingSince: NOW + 2 * SECOND + FINISH,
            health: 'failing',
            healthReasons: ['circuit_open', 'consecutive_failures'],
          },
        });
        expect((await store.queueStats()).circuitsOpen).toBe(1);
        // The other endpoint of the tenant is unaffected.
        expect((await runtimeOf(other.id)).circuit.state).toBe('closed');

        // While open the endpoint is blocked until its probe is due: a lease passes over it, and the circuit-open
        // pass records its due deliveries as circuit_open, unleased; recording them moves nothing.
        const probeAt = openedAt + PROBE_INTERVAL_MS;
        expect(only(await lease(NOW + 5 * SECOND, { perEndpoint: 5 }))).toEqual([]);
        const skip = await skipBlocked(NOW + 5 * SECOND, 5);
        expect(skipped(skip, ep.id)).toEqual(Array(5).fill('circuit_open'));
        expect(skip.every((x) => x.attempt.endpointId === ep.id)).toBe(true);
        const view = await store.endpointRuntime({ endpointId: ep.id });
        expect(view?.inflight).toBe(0);
        expect(view?.runtime.circuit).toMatchObject({ state: 'open', consecutiveFailures: 20 });
        expect(view?.runtime.lastFailureAt).toBe(openedAt);
        // Recorded: an attempt each, rescheduled, not leased.
        const first = (await store.deliveryGet({ id: skip[0]!.attempt.deliveryId, tenantId: null }))!;
        expect(first).toMatchObject({
          status: 'pending',
          attempts: 1,
          nextAttemptAt: NOW + 5 * SECOND + DAY,
        });
        expect(
          (await store.attemptList({ deliveryId: first.id, tenantId: null })).map((a) => a.errorClass),
        ).toEqual(['circuit_open']);

        expect(only(await lease(probeAt - 1, { perEndpoint: 1 }))).toEqual([]);
        expect(skipped(await skipBlocked(probeAt - 1, 1), ep.id)).toEqual(['circuit_open']);

        // Due: several workers lease at once — exactly one probe among them, and nothing else of the endpoint
        // (one at a time while the circuit is not closed).
        const owners = ['w1', 'w2', 'w3', 'w4'];
        const racing = await Promise.all(
          owners.map((owner) => lease(probeAt, { owner, perEndpoint: 2 }).then(only)),
        );
        expect(modes(racing.flat())).toEqual(['probe']);
        expect((await runtimeOf(ep.id)).circuit).toMatchObject({ state: 'half_open', lastProbeAt: probeAt });
        // While the probe is in flight, nothing else is sent: blocked again, circuit_open only.
        expect(only(await lease(probeAt + SECOND, { owner: 'w5', perEndpoint: 1 }))).toEqual([]);
        expect(skipped(await skipBlocked(probeAt + SECOND, 1), ep.id)).toEqual(['circuit_open']);
        // The skip took no slot: the probe's is the only one in flight.
        expect((await store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(1);
        for (const [i, ls] of racing.entries()) {
          await complete(ls, probeAt + 2 * SECOND, { failure: 'retryable', owner: owners[i]! });
        }
        // The probe failed: open again, the next probe spaced from this one's start.
        expect((await runtimeOf(ep.id)).circuit).toEqual({
          state: 'open',
          consecutiveFailures: 21,
          openedAt,
          lastProbeAt: probeAt,
          probeInFlightUntil: null,
          closedAt: null,
        });
        expect(skipped(await skipBlocked(probeAt + PROBE_INTERVAL_MS - 1, 1), ep.id)).toEqual([
          'circuit_open',
        ]);
        // Once the probe is due the endpoint is no longer blocked: the circuit-open pass leaves it alone.
        expect(await skipBlocked(probeAt + PROBE_INTERVAL_MS)).toEqual([]);

        // The second probe succeeds: closed, closedAt set, the streak over.
        const probe2At = probeAt + PROBE_INTERVAL_MS;
        const p2 = only(await lease(probe2At, { perEndpoint: 1 }));
        expect(modes(p2)).toEqual(['probe']);
        await complete(p2, probe2At);
        const closedAt = probe2At + FINISH;
        const closed = await runtimeOf(ep.id);
        expect(closed.circuit).toEqual({
          state: 'closed',
          consecutiveFailures: 0,
          openedAt: null,
          lastProbeAt: null,
          probeInFlightUntil: null,
          closedAt,
        });
        expect(closed).toMatchObject({
          lastSuccessAt: closedAt,
          failingSince: null,
          health: 'healthy',
          healthReasons: [],
        });
        expect((await store.queueStats()).circuitsOpen).toBe(0);

        // The ramp: 1 of 10 right after the close, 5 at half-way, all 10 after five minutes.
        const a = only(await lease(closedAt + SECOND));
        expect(modes(a)).toEqual(['send']);
        expect(only(await lease(closedAt + 2 * SECOND))).toEqual([]);
        const b = only(await lease(closedAt + 150 * SECOND));
        expect(b).toHaveLength(4);
        const c = only(await lease(closedAt + 5 * MINUTE));
        expect(c).toHaveLength(5);
        expect(modes([...b, ...c]).every((m) => m === 'send')).toBe(true);
        expect((await store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(10);
        // Successes while closed keep closedAt (the ramp is not restarted).
        await complete([...a, ...b, ...c], closedAt + 6 * MINUTE);
        expect((await runtimeOf(ep.id)).circuit.closedAt).toBe(closedAt);
        expect(only(await lease(closedAt + 7 * MINUTE))).toHaveLength(10);
        expect((await store.queueStats()).pending).toBe(
          (await deliveriesOf(ep.id, 'pending')).length + (await deliveriesOf(other.id, 'pending')).length,
        );
      });

      test('skipping an open circuit: the head only under `endpoint` ordering, a dead letter notifies', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id, { ordering: 'endpoint' });
        const evs = await publish(t.id, 3);
        // 20 failed attempts of the head, one at a time (strict order), open the circuit.
        let at = NOW + SECOND;
        for (let i = 0; i < 20; i++, at += SECOND) {
          const ls = await lease(at);
          expect(ls.map((l) => l.delivery.eventId)).toEqual([evs[0]!.id]);
          await complete(ls, at, {
            failure: 'retryable',
            next: { status: 'pending', nextAttemptAt: at + 1 },
          });
        }
        expect((await runtimeOf(ep.id)).circuit.state).toBe('open');
        // Every delivery is due, but only the head may be recorded, once per pass.
        const skipAt = (now: number, next: AttemptCompletion['next']) =>
          store.deliverySkipBlocked({
            now,
            limit: 100,
            skip: (d) => ({ attempt: attemptFor(d, now, 'circuit_open', { finishedAt: now }), next }),
            ids: { notification: () => id('notification', now) },
          });
        const skip = await skipAt(at, { status: 'pending', nextAttemptAt: at + SECOND });
        expect(skip.map((x) => [x.attempt.deliveryId, x.attempt.attemptNo])).toEqual([
          [skip[0]!.attempt.deliveryId, 21],
        ]);
        const head = (await store.deliveryGet({ id: skip[0]!.attempt.deliveryId, tenantId: null }))!;
        expect(head.eventId).toBe(evs[0]!.id);
        // A skip that uses the last attempt dead-letters the delivery, with its notice, in the same transaction.
        const dead = await skipAt(at + SECOND, { status: 'dead', reason: 'max_attempts' });
        expect(dead.map((x) => x.attempt.deliveryId)).toEqual([head.id]);
        expect(await store.deliveryGet({ id: head.id, tenantId: null })).toMatchObject({
          status: 'dead',
          attempts: 22,
        });
        expect((await notificationsOf(t.id)).map((n) => n.kind)).toEqual(['dead_letter']);
        expect((await store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(0);
        // The next event is the head now.
        const next = await skipBlocked(at + 2 * SECOND);
        const nextHead = (await store.deliveryGet({ id: next[0]!.attempt.deliveryId, tenantId: null }))!;
        expect([next.length, nextHead.eventId]).toEqual([1, evs[1]!.id]);
      });

      test('an endpoint at its ramped cap does not hold up leasing for the others', async () => {
        const t = await newTenant();
        const ramping = await newEndpoint(t.id, { maxConcurrency: 10 });
        const other = await newEndpoint(t.id, { maxConcurrency: 10 });
        await publish(t.id, 5);
        await store.endpointSetStatus({
          id: ramping.id,
          tenantId: t.id,
          status: 'disabled',
          reason: 'x',
          now: NOW,
        });
        const enabled = await store.endpointEnable({
          id: ramping.id,
          tenantId: t.id,
          choice: { kind: 'deliver' },
          now: NOW + SECOND,
          ids,
        });
        expect(enabled?.requeued).toBe(5);
        const endpointsOf = (ls: LeasedDelivery[]) => ls.map((l) => l.endpoint.id).sort();
        // Cap 1 right after the (re-)close: one each.
        expect(endpointsOf(await lease(NOW + 2 * SECOND, { perEndpoint: 1 }))).toEqual(
          [ramping.id, other.id].sort(),
        );
        // The ramping endpoint is passed over (at its cap); the other one is served again.
        expect(endpointsOf(await lease(NOW + 3 * SECOND, { perEndpoint: 1 }))).toEqual([other.id]);
        // Now the ramping endpoint is least recently served, and still at its cap: a lease for one delivery
        // goes to the other endpoint rather than coming back empty.
        expect(endpointsOf(await lease(NOW + 4 * SECOND, { limit: 1 }))).toEqual([other.id]);
        expect(endpointsOf(await lease(NOW + 5 * SECOND, { limit: 1 }))).toEqual([other.id]);
      });
    });

    describe('notifications', () => {
      test('the first dead letter notifies once (pending with a channel, logged without); later ones are digested', async () => {
        const t1 = await newTenant(NOW, 'ops@one.test');
        const t2 = await newTenant(NOW + 1);
        const e1 = await newEndpoint(t1.id);
        const e2 = await newEndpoint(t2.id);
        await publish(t1.id, 5);
        await publish(t2.id, 1);
        const all = await lease(NOW + SECOND);
        const mine = all.filter((l) => l.endpoint.id === e1.id);
        const theirs = all.filter((l) => l.endpoint.id === e2.id);
        expect(mine).toHaveLength(5);

        const at = NOW + 2 * SECOND;
        const n1 = id('notification', at);
        await complete(mine.slice(0, 1), at, {
          failure: 'retryable',
          next: { status: 'dead', reason: 'max_attempts' },
          notificationIds: [n1],
        });
        expect(await notificationsOf(t1.id)).toEqual([
          {
            id: n1,
            tenantId: t1.id,
            endpointId: e1.id,
            kind: 'dead_letter',
            ...noticeText('dead_letter', { endpointId: e1.id, url: e1.url, at: at + FINISH, count: 0 }),
            emailTo: 'ops@one.test',
            status: 'pending',
            attempts: 0,
            nextAttemptAt: at + WRITE_DELAY,
            lastError: null,
            createdAt: at + WRITE_DELAY,
            sentAt: null,
          } satisfies NotificationRecord,
        ]);
        // Health changed in the same transaction (ADR-09: before any notice is sent).
        expect(await runtimeOf(e1.id)).toMatchObject({
          lastDeadLetterAt: at + FINISH,
          health: 'degraded',
          notices: { dead_letter: { lastNoticeAt: at + FINISH, pending: 0 } },
        });

        // No channel: listed only.
        await complete(theirs, at, {
          failure: 'retryable',
          next: { status: 'dead', reason: 'max_attempts' },
        });
        expect(await notificationsOf(t2.id)).toEqual([
          expect.objectContaining({
            tenantId: t2.id,
            endpointId: e2.id,
            kind: 'dead_letter',
            emailTo: null,
            status: 'logged',
            nextAttemptAt: null,
            attempts: 0,
          }),
        ]);

        // The second dead letter within 24 h is aggregated: no new row.
        await complete(mine.slice(1, 2), at + HOUR, {
          failure: 'retryable',
          next: { status: 'dead', reason: 'max_age' },
        });
        expect(await notificationsOf(t1.id)).toHaveLength(1);
        expect((await runtimeOf(e1.id)).notices.dead_letter).toEqual({
          lastNoticeAt: at + FINISH,
          pending: 1,
        });
        // A completion that does not hold the lease writes no dead letter, so no notice either.
        await complete(mine.slice(2, 3), at + HOUR, {
          failure: 'retryable',
          next: { status: 'dead', reason: 'max_age' },
          owner: 'w2',
        });
        expect((await runtimeOf(e1.id)).notices.dead_letter.pending).toBe(1);
        // A rejection is another cause with its own window: notified at once.
        await complete(mine.slice(3, 4), at + 2 * HOUR, {
          failure: 'permanent',
          next: { status: 'dead', reason: 'permanent_failure' },
        });
        const afterReject = await notificationsOf(t1.id);
        expect(afterReject.map((n) => n.kind)).toEqual(['permanent_failure', 'dead_letter']);
        expect(afterReject[0]).toMatchObject({
          ...noticeText('permanent_failure', {
            endpointId: e1.id,
            url: e1.url,
            at: at + 2 * HOUR + FINISH,
            count: 0,
          }),
          status: 'pending',
        });

        // The digest is due 24 h after the notice: one digest, once.
        const dueAt = at + FINISH + DAY;
        const digestIds = () => ({ notification: () => id('notification', dueAt) });
        expect(await store.notificationDigestRun({ now: dueAt - 1, ids: digestIds() })).toBe(0);
        expect(await notificationsOf(t1.id)).toHaveLength(2);
        expect(await store.notificationDigestRun({ now: dueAt, ids: digestIds() })).toBe(1);
        const digests = (await notificationsOf(t1.id)).filter((n) => n.kind === 'digest');
        expect(digests).toEqual([
          expect.objectContaining({
            endpointId: e1.id,
            ...noticeText('digest', { endpointId: e1.id, url: e1.url, at: dueAt, count: 1 }),
            emailTo: 'ops@one.test',
            status: 'pending',
            nextAttemptAt: dueAt,
            createdAt: dueAt,
          }),
        ]);
        expect((await runtimeOf(e1.id)).notices.dead_letter).toEqual({ lastNoticeAt: dueAt, pending: 0 });
        expect(await store.notificationDigestRun({ now: dueAt + HOUR, ids: digestIds() })).toBe(0);
        expect(await store.notificationDigestRun({ now: dueAt + 2 * DAY, ids: digestIds() })).toBe(0);
        expect(await notificationsOf(t1.id)).toHaveLength(3);
        // Across tenants (operator view), newest first.
        const everyone = await notificationsOf(null);
        expect(everyone).toHaveLength(4);
        expect(everyone.map((n) => n.id)).toEqual(
          everyone
            .map((n) => n.id)
            .sort()
            .reverse(),
        );
      });

      test('notificationClaim and notificationMark: sent, retried later, logged; pages newest first', async () => {
        const t = await newTenant(NOW, 'ops@t.test');
        const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
        await publish(t.id, 1);
        const ls = await lease(NOW + SECOND);
        // One dead letter per endpoint, a minute apart: three notifications due a minute apart.
        const nids: string[] = [];
        for (const [i, ep] of eps.entries()) {
          const at = NOW + (i + 1) * MINUTE;
          nids.push(id('notification', at));
          await complete(
            ls.filter((l) => l.endpoint.id === ep.id),
            at,
            {
              failure: 'retryable',
              next: { status: 'dead', reason: 'max_attempts' },
              notificationIds: [nids[i]!],
            },
          );
        }
        const dueAt = (i: number) => NOW + (i + 1) * MINUTE + WRITE_DELAY;
        expect(await store.notificationClaim({ now: dueAt(0) - 1, limit: 10, leaseMs: MINUTE })).toEqual([]);

        const now = NOW + HOUR;
        const c1 = await store.notificationClaim({ now, limit: 2, leaseMs: MINUTE });
        expect(c1.map((n) => [n.id, n.attempts, n.nextAttemptAt])).toEqual([
          [nids[0], 1, dueAt(0)],
          [nids[1], 1, dueAt(1)],
        ]);
        // Claimed rows are pushed out by the lease: the next claim gets the rest only.
        const c2 = await store.notificationClaim({ now, limit: 10, leaseMs: MINUTE });
        expect(c2.map((n) => n.id)).toEqual([nids[2]]);
        expect(await store.notificationClaim({ now: now + MINUTE - 1, limit: 10, leaseMs: MINUTE })).toEqual(
          [],
        );

        await store.notificationMark({ id: nids[0]!, now: now + SECOND, result: { kind: 'sent' } });
        await store.notificationMark({
          id: nids[1]!,
          now: now + SECOND,
          result: { kind: 'retry', at: now + 10 * MINUTE, error: 'smtp 451' },
        });
        await store.notificationMark({ id: nids[2]!, now: now + SECOND, result: { kind: 'logged' } });
        const byId = new Map((await notificationsOf(t.id)).map((n) => [n.id, n]));
        expect(byId.get(nids[0]!)).toMatchObject({
          status: 'sent',
          sentAt: now + SECOND,
          nextAttemptAt: null,
        });
        expect(byId.get(nids[1]!)).toMatchObject({
          status: 'pending',
          attempts: 1,
          nextAttemptAt: now + 10 * MINUTE,
          lastError: 'smtp 451',
          sentAt: null,
        });
        expect(byId.get(nids[2]!)).toMatchObject({ status: 'logged', nextAttemptAt: null, sentAt: null });

        // The lease has run out, but sent and logged ones are never claimed again; the retry waits for its time.
        expect(await store.notificationClaim({ now: now + 2 * MINUTE, limit: 10, leaseMs: MINUTE })).toEqual(
          [],
        );
        const again = await store.notificationClaim({ now: now + 10 * MINUTE, limit: 10, leaseMs: MINUTE });
        expect(again.map((n) => [n.id, n.attempts, n.lastError])).toEqual([[nids[1], 2, 'smtp 451']]);

        // Pages, newest first.
        const p1 = await store.notificationList({ tenantId: t.id, limit: 2, cursor: null });
        expect(p1.data.map((n) => n.id)).toEqual([nids[2], nids[1]]);
        const p2 = await store.notificationList({ tenantId: t.id, limit: 2, cursor: p1.nextCursor });
        expect(p2.data.map((n) => n.id)).toEqual([nids[0]]);
        expect(p2.nextCursor).toBeNull();
        expect(
          (await store.notificationList({ tenantId: id('tenant'), limit: 2, cursor: null })).data,
        ).toEqual([]);
      });

      test('concurrent notificationClaim calls never return the same notification', async () => {
        const t = await newTenant(NOW, 'ops@t.test');
        const eps: EndpointRecord[] = [];
        for (let i = 0; i < 12; i++) eps.push(await newEndpoint(t.id));
        await publish(t.id, 1);
        const ls = await lease(NOW + SECOND);
        expect(ls).toHaveLength(12);
        await complete(ls, NOW + 2 * SECOND, {
          failure: 'retryable',
          next: { status: 'dead', reason: 'max_attempts' },
        });
        expect(await notificationsOf(t.id)).toHaveLength(12);
        const now = NOW + HOUR;
        const claims = await Promise.all(
          [0, 1, 2, 3].map(() => store.notificationClaim({ now, limit: 5, leaseMs: MINUTE })),
        );
        const claimed = claims.flat().map((n) => n.id);
        expect(new Set(claimed).size).toBe(claimed.length);
        const rest = await store.notificationClaim({ now, limit: 100, leaseMs: MINUTE });
        const all = [...claimed, ...rest.map((n) => n.id)];
        expect(new Set(all).size).toBe(all.length);
        expect(all.sort()).toEqual((await notificationsOf(t.id)).map((n) => n.id).sort());
        expect(claims.flat().every((n) => n.attempts === 1)).toBe(true);
      });

      test('tenant notification e-mail round trip', async () => {
        expect(await store.tenantNotificationEmail({ tenantId: id('tenant') })).toBeNull();
        const t = await newTenant();
        const other = await newTenant(NOW + 1, 'other@x.test');
        expect(await store.tenantNotificationEmail({ tenantId: t.id })).toBeNull();
        await store.tenantSetNotificationEmail({ tenantId: t.id, email: 'ops@t.test', now: NOW + 2 });
        expect(await store.tenantNotificationEmail({ tenantId: t.id })).toBe('ops@t.test');
        expect(await store.tenantNotificationEmail({ tenantId: other.id })).toBe('other@x.test');
        await store.tenantSetNotificationEmail({ tenantId: t.id, email: null, now: NOW + 3 });
        expect(await store.tenantNotificationEmail({ tenantId: t.id })).toBeNull();
        expect(await store.tenantNotificationEmail({ tenantId: other.id })).toBe('other@x.test');
      });
    });

    describe('auto-disable and re-enable', () => {
      test('endpointAutoDisable disables after 72 h of failures with no success, not before, once', async () => {
        const t = await newTenant(NOW, 'ops@t.test');
        const bad = await newEndpoint(t.id);
        const recovered = await newEndpoint(t.id);
        const fine = await newEndpoint(t.id);
        await publish(t.id, 2);
        const ls = await lease(NOW + SECOND);
        const of = (ep: EndpointRecord) => ls.filter((l) => l.endpoint.id === ep.id);
        await complete(of(bad).slice(0, 1), NOW + 2 * SECOND, { failure: 'retryable' });
        await complete(of(recovered).slice(0, 1), NOW + 2 * SECOND, { failure: 'retryable' });
        await complete(of(recovered).slice(1), NOW + 3 * SECOND);
        await complete(of(fine), NOW + 2 * SECOND);
        const failingSince = NOW + 2 * SECOND + FINISH;
        expect((await runtimeOf(bad.id)).failingSince).toBe(failingSince);

        const due = failingSince + AUTO_DISABLE_AFTER_MS;
        const disableIds = (at: number) => ({
          audit: () => id('audit', at),
          notification: () => id('notification', at),
        });
        expect(
          await store.endpointAutoDisable({
            now: due - 1,
            afterMs: AUTO_DISABLE_AFTER_MS,
            ids: disableIds(due),
          }),
        ).toEqual([]);
        // Still failing later on (another failure does not restart the streak).
        await complete(of(bad).slice(1), NOW + HOUR, { failure: 'retryable' });
        expect((await runtimeOf(bad.id)).failingSince).toBe(failingSince);

        const disabled = await store.endpointAutoDisable({
          now: due,
          afterMs: AUTO_DISABLE_AFTER_MS,
          ids: disableIds(due),
        });
        const expected: EndpointRecord = {
          ...bad,
          status: 'disabled',
          disabledReason: 'auto_disabled',
          updatedAt: due,
        };
        expect(disabled).toEqual([expected]);
        expect(await store.endpointGet({ id: bad.id, tenantId: t.id })).toEqual(expected);
        expect((await store.endpointGet({ id: recovered.id, tenantId: t.id }))?.status).toBe('enabled');
        expect((await store.endpointGet({ id: fine.id, tenantId: t.id }))?.status).toBe('enabled');
        expect(await runtimeOf(bad.id)).toMatchObject({
          failingSince,
          health: 'disabled',
          healthReasons: expect.arrayContaining(['disabled']),
        });

        const audit = (await store.auditList({ tenantId: t.id, limit: 10, cursor: null })).data;
        expect(audit).toEqual([
          {
            id: expect.stringMatching(/^aud_/),
            tenantId: t.id,
            actor: 'system',
            action: 'endpoint.auto_disabled',
            targetType: 'endpoint',
            targetId: bad.id,
            details: { failing_since: failingSince, reason: 'auto_disabled' },
            createdAt: due,
          } satisfies AuditRecord,
        ]);
        const notices = (await notificationsOf(t.id)).filter((n) => n.kind === 'auto_disabled');
        expect(notices).toEqual([
          expect.objectContaining({
            endpointId: bad.id,
            ...noticeText('auto_disabled', { endpointId: bad.id, url: bad.url, at: due, count: 0 }),
            emailTo: 'ops@t.test',
            status: 'pending',
            nextAttemptAt: due,
            createdAt: due,
          }),
        ]);

        // Once: a second pass (or another process) finds nothing more to do.
        expect(
          await store.endpointAutoDisable({
            now: due + HOUR,
            afterMs: AUTO_DISABLE_AFTER_MS,
            ids: disableIds(due),
          }),
        ).toEqual([]);
        expect((await store.auditList({ tenantId: t.id, limit: 10, cursor: null })).data).toHaveLength(1);
        // Nothing is leased for it any more, even once its retries are due.
        expect((await lease(NOW + 2 * DAY + HOUR)).filter((l) => l.endpoint.id === bad.id)).toEqual([]);
      });

      test('concurrent endpointAutoDisable calls disable each endpoint exactly once', async () => {
        const t = await newTenant(NOW, 'ops@t.test');
        const eps: EndpointRecord[] = [];
        for (let i = 0; i < 4; i++) eps.push(await newEndpoint(t.id));
        await publish(t.id, 1);
        await complete(await lease(NOW + SECOND), NOW + 2 * SECOND, { failure: 'retryable' });
        const due = NOW + 2 * SECOND + FINISH + AUTO_DISABLE_AFTER_MS;
        const passIds = { audit: () => id('audit', due), notification: () => id('notification', due) };
        const pass = () =>
          store.endpointAutoDisable({ now: due, afterMs: AUTO_DISABLE_AFTER_MS, ids: passIds });
        const runs = await Promise.all([pass(), pass(), pass()]);
        // Each disabled exactly once, whichever pass got there first.
        expect(
          runs
            .flat()
            .map((e) => e.id)
            .sort(),
        ).toEqual(eps.map((e) => e.id).sort());
        expect(await pass()).toEqual([]);
        expect((await store.auditList({ tenantId: t.id, limit: 100, cursor: null })).data).toHaveLength(4);
        expect((await notificationsOf(t.id)).filter((n) => n.kind === 'auto_disabled')).toHaveLength(4);
      });

      /**
       * A disabled endpoint with a backlog: a dead letter of an earlier streak, a success, then the current
       * streak with two dead letters and two pending retries, and one delivery never attempted.
       *
       *   ev0 @0m dead (old streak) · ev1 @1m delivered · ev2 @2m dead · ev3 @3m retry pending · ev4 @4m dead ·
       *   ev5 @5m retry pending · ev6 @6m pending · disabled @7m
       */
      async function disabledWithBacklog() {
        const t = await newTenant();
        const ep = await newEndpoint(t.id);
        const evs: NewEvent[] = [];
        const deliveryOf = new Map<string, DeliveryRecord>();
        const step = async (i: number, outcome: 'dead' | 'delivered' | 'retry' | null) => {
          const at = NOW + i * MINUTE;
          const [ev] = await publish(t.id, 1, at);
          evs.push(ev!);
          if (outcome === null) return;
          const ls = await lease(at + SECOND);
          expect(ls).toHaveLength(1);
          deliveryOf.set(ev!.id, ls[0]!.delivery);
          await complete(ls, at + 2 * SECOND, {
            failure: outcome === 'delivered' ? null : 'retryable',
            ...(outcome === 'dead' ? { next: { status: 'dead' as const, reason: 'max_attempts' } } : {}),
          });
        };
        await step(0, 'dead');
        await step(1, 'delivered');
        await step(2, 'dead');
        await step(3, 'retry');
        await step(4, 'dead');
        await step(5, 'retry');
        await step(6, null);
        expect((await runtimeOf(ep.id)).failingSince).toBe(NOW + 2 * MINUTE + 2 * SECOND + FINISH);
        await store.endpointSetStatus({
          id: ep.id,
          tenantId: t.id,
          status: 'disabled',
          reason: 'manual',
          now: NOW + 7 * MINUTE,
        });
        const byEvent = async () => {
          const m = new Map<string, DeliveryRecord[]>();
          for (const d of await deliveriesOf(ep.id)) m.set(d.eventId, [...(m.get(d.eventId) ?? []), d]);
          // Per event: the original first, then its copies (delivery ids of one instant do not sort by time).
          const originalFirst = (a: DeliveryRecord, b: DeliveryRecord) =>
            Number(a.replayedFrom !== null) - Number(b.replayedFrom !== null);
          return evs.map((e) => (m.get(e.id) ?? []).sort(originalFirst));
        };
        return { t, ep, evs, byEvent };
      }

      test("endpointEnable 'deliver': pending due now, the streak's dead letters re-queued with their webhook-id", async () => {
        const { t, ep, byEvent } = await disabledWithBacklog();
        const before = await byEvent();
        const now = NOW + 8 * MINUTE;
        const res = await store.endpointEnable({
          id: ep.id,
          tenantId: t.id,
          choice: { kind: 'deliver' },
          now,
          ids,
        });
        expect(res).toEqual({
          endpoint: { ...ep, status: 'enabled', disabledReason: null, updatedAt: now },
          requeued: 5,
          skipped: 0,
        });
        const after = await byEvent();
        // ev0: dead letter of an earlier streak, not re-queued; ev1 delivered.
        expect(after[0]).toEqual(before[0]);
        expect(after[1]).toEqual(before[1]);
        for (const i of [2, 4]) {
          const [original, copy] = after[i]!;
          expect(original).toEqual(before[i]![0]);
          expect(copy).toEqual({
            id: expect.stringMatching(/^dlv_/),
            tenantId: t.id,
            endpointId: ep.id,
            eventId: original!.eventId,
            eventType: original!.eventType,
            resourceId: null,
            webhookId: original!.webhookId,
            status: 'pending',
            attempts: 0,
            nextAttemptAt: now,
            firstAttemptAt: null,
            lastAttemptAt: null,
            statusReason: null,
            replayedFrom: original!.id,
            createdAt: now,
            updatedAt: now,
          } satisfies DeliveryRecord);
        }
        for (const i of [3, 5, 6]) {
          expect(after[i]).toEqual([{ ...before[i]![0]!, nextAttemptAt: now, updatedAt: now }]);
        }
        // The ramp starts: 1 of 10 at once, mode send.
        const runtime = await runtimeOf(ep.id);
        expect(runtime.circuit).toMatchObject({ state: 'closed', consecutiveFailures: 0, closedAt: now });
        // Recovered, though the streak's dead letters are recent (they were just re-queued).
        expect(runtime).toMatchObject({
          failingSince: null,
          health: 'degraded',
          healthReasons: ['recent_dead_letter'],
        });
        const first = await lease(now + SECOND);
        expect(modes(first)).toEqual(['send']);
        expect((await lease(now + 5 * MINUTE)).length).toBe(4);
        // Not disabled any more: null.
        expect(
          await store.endpointEnable({ id: ep.id, tenantId: t.id, choice: { kind: 'deliver' }, now, ids }),
        ).toBeNull();
      });

      test("endpointEnable 'skip': pending deliveries become skipped, nothing re-queued", async () => {
        const { t, ep, byEvent } = await disabledWithBacklog();
        const before = await byEvent();
        const now = NOW + 8 * MINUTE;
        const res = await store.endpointEnable({
          id: ep.id,
          tenantId: t.id,
          choice: { kind: 'skip' },
          now,
          ids,
        });
        expect(res).toEqual({
          endpoint: { ...ep, status: 'enabled', disabledReason: null, updatedAt: now },
          requeued: 0,
          skipped: 3,
        });
        const after = await byEvent();
        for (const i of [0, 1, 2, 4]) expect(after[i]).toEqual(before[i]);
        for (const i of [3, 5, 6]) {
          expect(after[i]).toEqual([
            {
              ...before[i]![0]!,
              status: 'skipped',
              statusReason: 'skipped_on_enable',
              nextAttemptAt: null,
              updatedAt: now,
            },
          ]);
        }
        expect(await lease(NOW + 2 * DAY)).toEqual([]);
      });

      test("endpointEnable 'resume_from': events accepted before the point are skipped, the rest delivered", async () => {
        const { t, ep, byEvent } = await disabledWithBacklog();
        const before = await byEvent();
        const now = NOW + 8 * MINUTE;
        const at = NOW + 3 * MINUTE + 30 * SECOND;
        const res = await store.endpointEnable({
          id: ep.id,
          tenantId: t.id,
          choice: { kind: 'resume_from', at },
          now,
          ids,
        });
        expect(res).toMatchObject({ requeued: 3, skipped: 1, endpoint: { status: 'enabled' } });
        const after = await byEvent();
        for (const i of [0, 1, 2]) expect(after[i]).toEqual(before[i]);
        expect(after[3]).toEqual([
          {
            ...before[3]![0]!,
            status: 'skipped',
            statusReason: 'skipped_on_enable',
            nextAttemptAt: null,
            updatedAt: now,
          },
        ]);
        expect(after[4]).toHaveLength(2);
        expect(after[4]![1]).toMatchObject({
          webhookId: before[4]![0]!.webhookId,
          replayedFrom: before[4]![0]!.id,
          status: 'pending',
          nextAttemptAt: now,
        });
        for (const i of [5, 6])
          expect(after[i]).toEqual([{ ...before[i]![0]!, nextAttemptAt: now, updatedAt: now }]);
      });

      test('endpointEnable is null for an endpoint that is absent, of another tenant, deleted or not disabled', async () => {
        const t = await newTenant();
        const other = await newTenant(NOW + 1);
        const enabled = await newEndpoint(t.id);
        const disabled = await newEndpoint(t.id, { status: 'disabled', disabledReason: 'manual' });
        const deleted = await newEndpoint(t.id, { status: 'disabled', disabledReason: 'manual' });
        await store.endpointDelete({ id: deleted.id, tenantId: t.id, now: NOW });
        const enable = (endpointId: string, tenantId = t.id) =>
          store.endpointEnable({ id: endpointId, tenantId, choice: { kind: 'deliver' }, now: NOW + 1, ids });
        expect(await enable(enabled.id)).toBeNull();
        expect(await enable(id('endpoint'))).toBeNull();
        expect(await enable(disabled.id, other.id)).toBeNull();
        expect(await enable(deleted.id)).toBeNull();
        expect(await store.endpointGet({ id: disabled.id, tenantId: null })).toEqual(disabled);
        expect(await enable(disabled.id)).toMatchObject({ requeued: 0, skipped: 0 });
      });
    });

    describe('replay', () => {
      test('deliveryReplay: a new delivery with the same webhook-id; not_found; endpoint_gone', async () => {
        const t = await newTenant();
        const other = await newTenant(NOW + 1);
        const ep = await newEndpoint(t.id);
        const [ev] = await publish(t.id, 1);
        const [l] = await lease(NOW + SECOND);
        await complete([l!], NOW + 2 * SECOND);
        const original = (await store.deliveryGet({ id: l!.delivery.id, tenantId: t.id }))!;
        expect(original.status).toBe('delivered');

        const now = NOW + HOUR;
        const copy = await store.deliveryReplay({ id: original.id, tenantId: t.id, now, ids });
        expect(copy).toEqual({
          id: expect.stringMatching(/^dlv_/),
          tenantId: t.id,
          endpointId: ep.id,
          eventId: ev!.id,
          eventType: 'a.b',
          resourceId: null,
          webhookId: original.webhookId,
          status: 'pending',
          attempts: 0,
          nextAttemptAt: now,
          firstAttemptAt: null,
          lastAttemptAt: null,
          statusReason: null,
          replayedFrom: original.id,
          createdAt: now,
          updatedAt: now,
        } satisfies DeliveryRecord);
        const c = copy as DeliveryRecord;
        expect(c.id).not.toBe(original.id);
        expect(await store.deliveryGet({ id: c.id, tenantId: t.id })).toEqual(copy);
        expect(await store.deliveryGet({ id: original.id, tenantId: t.id })).toEqual(original);
        // Due at once.
        const leased = await lease(now);
        expect(leased.map((x) => [x.delivery.id, x.delivery.webhookId, x.event.id])).toEqual([
          [c.id, original.webhookId, ev!.id],
        ]);
        // A replay of a replay keeps the webhook-id too.
        const again = (await store.deliveryReplay({
          id: c.id,
          tenantId: t.id,
          now: now + 1,
          ids,
        })) as DeliveryRecord;
        expect(again).toMatchObject({ webhookId: original.webhookId, replayedFrom: c.id });

        expect(await store.deliveryReplay({ id: id('delivery'), tenantId: t.id, now, ids })).toBe(
          'not_found',
        );
        expect(await store.deliveryReplay({ id: original.id, tenantId: other.id, now, ids })).toBe(
          'not_found',
        );
        await store.endpointDelete({ id: ep.id, tenantId: t.id, now: now + 2 });
        expect(await store.deliveryReplay({ id: original.id, tenantId: t.id, now: now + 3, ids })).toBe(
          'endpoint_gone',
        );
      });

      test('deliveryReplay to a disabled endpoint waits until it is enabled', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id);
        await publish(t.id, 1);
        const [l] = await lease(NOW + SECOND);
        await complete([l!], NOW + 2 * SECOND, {
          failure: 'permanent',
          next: { status: 'dead', reason: 'permanent_failure' },
        });
        await store.endpointSetStatus({
          id: ep.id,
          tenantId: t.id,
          status: 'disabled',
          reason: 'x',
          now: NOW + 3,
        });
        const copy = await store.deliveryReplay({ id: l!.delivery.id, tenantId: t.id, now: NOW + HOUR, ids });
        expect(copy).toMatchObject({ status: 'pending', replayedFrom: l!.delivery.id });
        expect(await lease(NOW + HOUR + 1)).toEqual([]);
        await store.endpointSetStatus({
          id: ep.id,
          tenantId: t.id,
          status: 'enabled',
          reason: null,
          now: NOW + HOUR + 2,
        });
        expect((await lease(NOW + HOUR + 3)).map((x) => x.delivery.id)).toEqual([
          (copy as DeliveryRecord).id,
        ]);
      });
    });

    describe('statistics', () => {
      test('attemptStats and backlogStats count per endpoint and window', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id);
        const other = await newEndpoint(t.id);
        await publish(t.id, 5);
        const leased = await lease(NOW + SECOND);
        const [d1, d2, d3, d4, d5] = leased.filter((l) => l.endpoint.id === ep.id);
        const at = NOW + 2 * SECOND;
        await complete([d1!], at, { attempt: { platformMs: 3, consumerMs: 117 } });
        await complete([d2!], at, { failure: 'retryable', attempt: { platformMs: 5, consumerMs: null } });
        await complete([d3!], at, {
          failure: 'retryable',
          next: { status: 'dead', reason: 'max_attempts' },
          attempt: { platformMs: 7, consumerMs: 50 },
        });
        await complete([d4!], at, { failure: 'circuit_open', attempt: { platformMs: 1 } });
        await complete(
          leased.filter((l) => l.endpoint.id === other.id),
          at,
        );

        expect(await store.attemptStats({ endpointId: ep.id, since: NOW })).toEqual({
          attempts: 3,
          successes: 1,
          deadLetters: 1,
          platformMs: [3, 5, 7],
          consumerMs: [50, 117],
        });
        // The streak began with d2's failure; d3's dead letter belongs to it; d5 is still in flight.
        expect(await store.backlogStats({ endpointId: ep.id })).toEqual({
          pending: 3,
          deadLetters: 1,
          oldestCreatedAt: NOW,
        });

        const later = NOW + 2 * HOUR;
        await complete([d5!], later, { attempt: { platformMs: 9, consumerMs: 80 } });
        expect(await store.attemptStats({ endpointId: ep.id, since: NOW })).toEqual({
          attempts: 4,
          successes: 2,
          deadLetters: 1,
          platformMs: [3, 5, 7, 9],
          consumerMs: [50, 80, 117],
        });
        expect(await store.attemptStats({ endpointId: ep.id, since: NOW + HOUR })).toEqual({
          attempts: 1,
          successes: 1,
          deadLetters: 0,
          platformMs: [9],
          consumerMs: [80],
        });
        // A success ended the streak: its dead letters are no longer counted as backlog.
        expect(await store.backlogStats({ endpointId: ep.id })).toEqual({
          pending: 2,
          deadLetters: 0,
          oldestCreatedAt: NOW,
        });
        expect(await store.attemptStats({ endpointId: id('endpoint'), since: NOW })).toEqual({
          attempts: 0,
          successes: 0,
          deadLetters: 0,
          platformMs: [],
          consumerMs: [],
        });
        expect(await store.backlogStats({ endpointId: id('endpoint') })).toEqual({
          pending: 0,
          deadLetters: 0,
          oldestCreatedAt: null,
        });
      });
    });

    describe('audit', () => {
      test('auditAppend and auditList: per tenant or all, newest or oldest first, paged', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        const records: AuditRecord[] = [];
        for (let i = 0; i < 7; i++) {
          const at = NOW + i * SECOND;
          const r: AuditRecord = {
            id: id('audit', at),
            tenantId: i % 3 === 2 ? t2.id : t1.id,
            actor: i === 0 ? 'operator' : `tenant_key:key_${i}`,
            action: 'endpoint.updated',
            targetType: 'endpoint',
            targetId: `ep_${i}`,
            details: { i, nested: { list: [1, 'two', null], 'é "q"': true } },
            createdAt: at,
          };
          records.push(r);
          await store.auditAppend({ record: r });
        }
        const mine = records.filter((r) => r.tenantId === t1.id);
        expect(mine).toHaveLength(5);
        const collect = async (tenantId: string | null, ascending: boolean | undefined, limit: number) => {
          const pages: string[][] = [];
          let cursor: string | null = null;
          const out: AuditRecord[] = [];
          do {
            const p = await store.auditList({
              tenantId,
              limit,
              cursor,
              ...(ascending === undefined ? {} : { ascending }),
            });
            pages.push(p.data.map((r) => r.id));
            out.push(...p.data);
            cursor = p.nextCursor;
          } while (cursor !== null);
          return { out, pages };
        };
        const desc = await collect(t1.id, undefined, 2);
        expect(desc.out).toEqual([...mine].reverse());
        expect(desc.pages.map((p) => p.length)).toEqual([2, 2, 1]);
        const asc = await collect(t1.id, true, 2);
        expect(asc.out).toEqual(mine);
        expect(asc.pages.map((p) => p.length)).toEqual([2, 2, 1]);
        expect((await collect(t1.id, false, 10)).out).toEqual([...mine].reverse());
        expect((await collect(null, true, 3)).out).toEqual(records);
        expect((await collect(null, false, 3)).out).toEqual([...records].reverse());
        expect((await collect(t2.id, true, 1)).out).toEqual(records.filter((r) => r.tenantId === t2.id));
      });
    });
  });

  for (const name of skipped.keys()) {
    if (!seen.has(name))
      throw new Error(`runOperationsConformance: skip names unknown test ${JSON.stringify(name)}`);
  }
}
