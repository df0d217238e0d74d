/** Operations conformance: runtime. */
import { describe, expect } from 'vitest';
import { PROBE_INTERVAL_MS } from '../../../src/domain/circuit-breaker.ts';
import { initialRuntime } from '../../../src/domain/endpoint-runtime.ts';
import type { AttemptCompletion, LeasedDelivery } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import { attemptFor, DAY, FINISH, id, ids, MINUTE, type OperationsSection, SECOND } from './harness.ts';

export function runtimeConformance({ h, test }: OperationsSection): void {
  const {
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
  } = h;
  describe('runtime', () => {
    test('endpointRuntime: absent for an unknown endpoint, initial for a new one, counts in-flight', async () => {
      expect(await h.store.endpointRuntime({ endpointId: id('endpoint') })).toBeNull();
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      expect(await h.store.endpointRuntime({ endpointId: ep.id })).toEqual({
        endpointId: ep.id,
        inflight: 0,
        runtime: initialRuntime(),
      });
      await publish(t.id, 3);
      const ls = await lease(NOW + SECOND);
      expect(modes(ls)).toEqual(['send', 'send', 'send']);
      expect((await h.store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(3);
      await complete(ls.slice(0, 1), NOW + 2 * SECOND);
      const view = await h.store.endpointRuntime({ endpointId: ep.id });
      expect(view?.inflight).toBe(2);
      expect(view?.runtime).toMatchObject({
        lastSuccessAt: NOW + 2 * SECOND + FINISH,
        lastFailureAt: null,
        failingSince: null,
        health: 'healthy',
      });
      await complete(ls.slice(1), NOW + 3 * SECOND, { failure: 'retryable' });
      expect(await h.store.endpointRuntime({ endpointId: ep.id })).toMatchObject({
        inflight: 0,
        runtime: {
          circuit: { state: 'closed', consecutiveFailures: 2 },
          lastFailureAt: NOW + 3 * SECOND + FINISH,
          failingSince: NOW + 3 * SECOND + FINISH,
          health: 'healthy',
        },
      });
    });

    test("a deleted or disabled endpoint's open circuit is not counted among the open circuits", async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 20 });
      await publish(t.id, 20);
      await complete(await lease(NOW + SECOND), NOW + 2 * SECOND, { failure: 'retryable' });
      expect((await runtimeOf(ep.id)).circuit.state).toBe('open');
      expect((await h.store.queueStats()).circuitsOpen).toBe(1);
      // Disabled (by hand, or auto-disabled after days down) it keeps its circuit open, but nothing is attempted.
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'manual',
        now: NOW + MINUTE,
      });
      expect((await runtimeOf(ep.id)).circuit.state).toBe('open');
      expect((await h.store.queueStats()).circuitsOpen).toBe(0);
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'enabled',
        reason: null,
        now: NOW + MINUTE,
      });
      expect((await h.store.queueStats()).circuitsOpen).toBe(1);
      await h.store.endpointDelete({ id: ep.id, tenantId: t.id, now: NOW + MINUTE });
      expect((await h.store.queueStats()).circuitsOpen).toBe(0);
    });

    test('the circuit opens after 20 failures, probes once per 5 minutes, closes on success and ramps', async () => {
      const t = await newTenant();
      const ep = await newEndpoint(t.id, { maxConcurrency: 10 });
      const other = await newEndpoint(t.id, { maxConcurrency: 10 });
      await publish(t.id, 60);
      expect(await h.store.queueStats()).toEqual({ pending: 120, circuitsOpen: 0 });
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
      expect(await h.store.endpointRuntime({ endpointId: ep.id })).toEqual({
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
      expect((await h.store.queueStats()).circuitsOpen).toBe(1);
      // The other endpoint of the tenant is unaffected.
      expect((await runtimeOf(other.id)).circuit.state).toBe('closed');

      // While open the endpoint is blocked until its probe is due: a lease passes over it, and the circuit-open
      // pass records its due deliveries as circuit_open, unleased; recording them moves nothing.
      const probeAt = openedAt + PROBE_INTERVAL_MS;
      expect(only(await lease(NOW + 5 * SECOND, { perEndpoint: 5 }))).toEqual([]);
      const skip = await skipBlocked(NOW + 5 * SECOND, 5);
      expect(skipped(skip, ep.id)).toEqual(Array(5).fill('circuit_open'));
      expect(skip.every((x) => x.attempt.endpointId === ep.id)).toBe(true);
      const view = await h.store.endpointRuntime({ endpointId: ep.id });
      expect(view?.inflight).toBe(0);
      expect(view?.runtime.circuit).toMatchObject({ state: 'open', consecutiveFailures: 20 });
      expect(view?.runtime.lastFailureAt).toBe(openedAt);
      // Recorded: an attempt each, rescheduled, not leased.
      const first = (await h.store.deliveryGet({ id: skip[0]!.attempt.deliveryId, tenantId: null }))!;
      expect(first).toMatchObject({
        status: 'pending',
        attempts: 1,
        nextAttemptAt: NOW + 5 * SECOND + DAY,
      });
      expect(
        (await h.store.attemptList({ deliveryId: first.id, tenantId: null })).map((a) => a.errorClass),
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
      expect((await h.store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(1);
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
      expect(skipped(await skipBlocked(probeAt + PROBE_INTERVAL_MS - 1, 1), ep.id)).toEqual(['circuit_open']);
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
      expect((await h.store.queueStats()).circuitsOpen).toBe(0);

      // The ramp: 1 of 10 right after the close, 5 at half-way, all 10 after five minutes.
      const a = only(await lease(closedAt + SECOND));
      expect(modes(a)).toEqual(['send']);
      expect(only(await lease(closedAt + 2 * SECOND))).toEqual([]);
      const b = only(await lease(closedAt + 150 * SECOND));
      expect(b).toHaveLength(4);
      const c = only(await lease(closedAt + 5 * MINUTE));
      expect(c).toHaveLength(5);
      expect(modes([...b, ...c]).every((m) => m === 'send')).toBe(true);
      expect((await h.store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(10);
      // Successes while closed keep closedAt (the ramp is not restarted).
      await complete([...a, ...b, ...c], closedAt + 6 * MINUTE);
      expect((await runtimeOf(ep.id)).circuit.closedAt).toBe(closedAt);
      expect(only(await lease(closedAt + 7 * MINUTE))).toHaveLength(10);
      expect((await h.store.queueStats()).pending).toBe(
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
        h.store.deliverySkipBlocked({
          now,
          limit: 100,
          skip: (d) => ({ attempt: attemptFor(d, now, 'circuit_open', { finishedAt: now }), next }),
          ids: { notification: () => id('notification', now) },
        });
      const skip = await skipAt(at, { status: 'pending', nextAttemptAt: at + SECOND });
      expect(skip.map((x) => [x.attempt.deliveryId, x.attempt.attemptNo])).toEqual([
        [skip[0]!.attempt.deliveryId, 21],
      ]);
      const head = (await h.store.deliveryGet({ id: skip[0]!.attempt.deliveryId, tenantId: null }))!;
      expect(head.eventId).toBe(evs[0]!.id);
      // A skip that uses the last attempt dead-letters the delivery, with its notice, in the same transaction.
      const dead = await skipAt(at + SECOND, { status: 'dead', reason: 'max_attempts' });
      expect(dead.map((x) => x.attempt.deliveryId)).toEqual([head.id]);
      expect(await h.store.deliveryGet({ id: head.id, tenantId: null })).toMatchObject({
        status: 'dead',
        attempts: 22,
      });
      expect((await notificationsOf(t.id)).map((n) => n.kind)).toEqual(['dead_letter']);
      expect((await h.store.endpointRuntime({ endpointId: ep.id }))?.inflight).toBe(0);
      // The next event is the head now.
      const next = await skipBlocked(at + 2 * SECOND);
      const nextHead = (await h.store.deliveryGet({ id: next[0]!.attempt.deliveryId, tenantId: null }))!;
      expect([next.length, nextHead.eventId]).toEqual([1, evs[1]!.id]);
    });

    test('an endpoint at its ramped cap does not hold up leasing for the others', async () => {
      const t = await newTenant();
      const ramping = await newEndpoint(t.id, { maxConcurrency: 10 });
      const other = await newEndpoint(t.id, { maxConcurrency: 10 });
      await publish(t.id, 5);
      await h.store.endpointSetStatus({
        id: ramping.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'x',
        now: NOW,
      });
      const enabled = await h.store.endpointEnable({
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
}
