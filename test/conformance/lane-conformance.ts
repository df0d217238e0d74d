/**
 * Queue-lane conformance (ADR-03; src/domain/lanes.ts, `deliveryLease({ lanes })`, `laneRebalance`,
 * `endpointLane`, `laneStats`), written once against the port and run on every Store adapter with fixed fake times.
 * What it holds: a bound worker leases only its lanes; the rebalance pass promotes, demotes (hysteresis, dwell) and
 * re-hashes; a move never orphans nor duplicates a delivery leased before it, which drains and completes normally;
 * concurrent passes make each move once.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import {
  dedicatedLane,
  type LaneBinding,
  type LaneThresholds,
  parseLaneBinding,
  sharedLane,
} from '../../src/domain/lanes.ts';
import type { AttemptCompletion, EndpointRecord, LeasedDelivery } from '../../src/ports/delivery-store.ts';
import type { Store } from '../../src/ports/store.ts';
import { id, ids } from './fixtures.ts';
import { NOW, type StoreConformanceOptions, skipAwareTest } from './store-conformance.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const DAY = 24 * 60 * MINUTE;

const bind = (spec: string): LaneBinding | undefined => parseLaneBinding(spec, 8) ?? undefined;

export function runLaneConformance(opts: StoreConformanceOptions): void {
  const { test, checkSkips } = skipAwareTest('runLaneConformance', opts);

  describe(`Lane conformance: ${opts.name}`, () => {
    let store: Store;
    let tenantId: string;

    beforeEach(async () => {
      store = await opts.createStore();
      await store.migrate();
      tenantId = id('tenant');
      await store.tenantCreate({
        tenant: { id: tenantId, name: 'lanes', totpSeedSealed: 'sealed:x', createdAt: NOW, deletedAt: null },
        tenantKey: {
          id: id('apiKey'),
          kind: 'tenant',
          tenantId,
          name: null,
          hash: randomBytes(32).toString('hex'),
          prefix: 'hkt_abcd',
          createdAt: NOW,
          revokedAt: null,
        },
      });
    });
    afterEach(async () => {
      if (opts.destroyStore) await opts.destroyStore(store);
      else await store.close();
    });

    async function newEndpoint(o: Partial<EndpointRecord> = {}): Promise<EndpointRecord> {
      const ep: EndpointRecord = {
        id: id('endpoint'),
        tenantId,
        url: 'https://example.com/hooks',
        description: null,
        eventTypes: [`only.${randomBytes(4).toString('hex')}`],
        ordering: 'none',
        maxConcurrency: 100,
        headers: {},
        status: 'enabled',
        disabledReason: null,
        createdAt: NOW,
        updatedAt: NOW,
        ...o,
      };
      await store.endpointCreate({
        endpoint: ep,
        secret: {
          id: id('secret'),
          endpointId: ep.id,
          tenantId,
          sealed: 'sealed:s',
          activeFrom: NOW,
          activeUntil: null,
          createdAt: NOW,
        },
      });
      return ep;
    }

    /** `n` events only `ep` subscribes to, fanned out at `at`. */
    async function publish(ep: EndpointRecord, n: number, at = NOW): Promise<void> {
      const events = Array.from({ length: n }, () => ({
        id: id('event', at),
        tenantId,
        type: ep.eventTypes[0]!,
        resourceId: null,
        data: '{}',
        idempotencyKey: null,
        requestHash: null,
        createdAt: at,
      }));
      await store.eventInsertBatch({ events, now: at, idempotencyWindowMs: DAY });
      while ((await store.fanoutRun({ now: at, limit: 1_000, ids })).events > 0);
    }

    const lease = (lanes: LaneBinding | undefined, at: number, o: { owner?: string; limit?: number } = {}) =>
      store.deliveryLease({
        owner: o.owner ?? 'w1',
        now: at,
        limit: o.limit ?? 1_000,
        perEndpoint: o.limit ?? 1_000,
        leaseMs: 10 * MINUTE,
        lanes,
      });

    const deliver = (leased: LeasedDelivery[], at: number, owner = 'w1') => {
      const completions: AttemptCompletion[] = leased.map((l) => ({
        leaseOwner: owner,
        next: { status: 'delivered' },
        attempt: {
          id: id('attempt', at),
          deliveryId: l.delivery.id,
          endpointId: l.endpoint.id,
          tenantId,
          eventId: l.delivery.eventId,
          attemptNo: l.delivery.attempts + 1,
          url: l.endpoint.url,
          dueAt: l.delivery.nextAttemptAt ?? at,
          startedAt: at,
          finishedAt: at + 10,
          outcome: 'delivered',
          statusCode: 204,
          errorClass: null,
          errorMessage: null,
          request: { hops: [{ url: l.endpoint.url, headers: {}, status: 204 }] },
          responseHeaders: null,
          responseBody: null,
          queueMs: 0,
          platformMs: 1,
          consumerMs: 9,
        },
      }));
      return store.deliveryComplete({ completions, now: at + 10 });
    };

    const laneOf = async (ep: EndpointRecord) => (await store.endpointLane({ endpointId: ep.id }))!.lane;
    const rebalance = (at: number, thresholds: LaneThresholds, sharedLanes = 8) =>
      store.laneRebalance({ now: at, sharedLanes, thresholds });
    const endpointsOf = (ls: LeasedDelivery[]) => [...new Set(ls.map((l) => l.endpoint.id))].sort();
    const pending = async (ep: EndpointRecord) =>
      (
        await store.deliveryList({
          endpointId: ep.id,
          tenantId: null,
          status: 'pending',
          limit: 1000,
          cursor: null,
        })
      ).data;

    /** Backlog thresholds low, rates out of reach (so fan-out volume never decides), no dwell unless given. */
    const byBacklog = (promote: number, demote: number, minDwellMs = 0): LaneThresholds => ({
      promoteBacklog: promote,
      demoteBacklog: demote,
      promoteRatePerMin: 1_000_000,
      demoteRatePerMin: 999_999,
      minDwellMs,
    });

    test('endpointCreate puts an endpoint in its scheme-v1 shared lane', async () => {
      const ep = await newEndpoint();
      expect(await store.endpointLane({ endpointId: ep.id })).toEqual({
        lane: sharedLane(ep.id, 8),
        since: NOW,
        previous: null,
        draining: 0,
      });
      expect(await store.endpointLane({ endpointId: id('endpoint') })).toBeNull();
      // Nothing to move for a quiet endpoint in its home lane.
      expect(await rebalance(NOW + SECOND, byBacklog(10, 1))).toEqual([]);
    });

    test('a worker bound to shared:0 never leases an endpoint in another lane', async () => {
      const inZero: EndpointRecord[] = [];
      const elsewhere: EndpointRecord[] = [];
      for (let i = 0; i < 200 && (inZero.length < 2 || elsewhere.length < 3); i++) {
        const ep = await newEndpoint();
        (sharedLane(ep.id, 8) === 'shared:0' ? inZero : elsewhere).push(ep);
      }
      // One of the others is promoted: a dedicated lane is not shared:0 either.
      const hot = elsewhere[elsewhere.length - 1]!;
      for (const ep of [...inZero, ...elsewhere]) await publish(ep, ep === hot ? 5 : 3);
      expect((await rebalance(NOW + SECOND, byBacklog(5, 3))).map((m) => m.endpointId)).toEqual([hot.id]);

      const t = NOW + 5 * SECOND;
      const zero = await lease(bind('shared:0'), t);
      expect(endpointsOf(zero)).toEqual(inZero.map((e) => e.id).sort());
      expect(zero).toHaveLength(3 * inZero.length);
      expect(await lease(bind('shared:0'), t)).toEqual([]);
      const dedicated = await lease(bind('dedicated'), t);
      expect(endpointsOf(dedicated)).toEqual([hot.id]);
      expect(dedicated).toHaveLength(5);
      const shared = await lease(bind('shared'), t);
      const rest = elsewhere.slice(0, -1);
      expect(endpointsOf(shared)).toEqual(rest.map((e) => e.id).sort());
      expect(shared).toHaveLength(3 * rest.length);
      const everyId = [...zero, ...dedicated, ...shared].map((l) => l.delivery.id);
      expect(new Set(everyId).size).toBe(everyId.length);
    });

    test('rebalance promotes a backlogged endpoint and demotes it after dwell, with hysteresis', async () => {
      const t: LaneThresholds = byBacklog(5, 1, 10 * MINUTE);
      const a = await newEndpoint();
      const b = await newEndpoint();
      const home = sharedLane(a.id, 8);
      await publish(a, 6);
      await publish(b, 2);
      const t1 = NOW + SECOND;
      expect(await rebalance(t1, t)).toEqual([
        { endpointId: a.id, from: home, to: dedicatedLane(a.id), kind: 'promoted' },
      ]);
      expect(await store.endpointLane({ endpointId: a.id })).toEqual({
        lane: dedicatedLane(a.id),
        since: t1,
        previous: home,
        draining: 0,
      });
      expect(await rebalance(t1 + SECOND, t)).toEqual([]);
      // Shared workers no longer lease for it; dedicated ones do.
      expect(endpointsOf(await lease(bind('shared'), t1 + SECOND, { owner: 'w1' }))).toEqual([b.id]);
      const leasedA = await lease(bind('dedicated'), t1 + SECOND);
      expect(leasedA).toHaveLength(6);
      // Backlog 1: low enough, but it has been dedicated only 5 minutes (dwell).
      await deliver(leasedA.slice(0, 5), t1 + MINUTE);
      expect(await rebalance(t1 + 5 * MINUTE, t)).toEqual([]);
      // Backlog 3: inside the hysteresis band (above demote, below promote): no move either way.
      await publish(a, 2, t1 + 6 * MINUTE);
      expect(await rebalance(t1 + 11 * MINUTE, t)).toEqual([]);
      expect(await laneOf(a)).toBe(dedicatedLane(a.id));
      // Backlog 0 after dwell: demoted to its hash lane.
      await deliver(
        [...leasedA.slice(5), ...(await lease(bind('dedicated'), t1 + 11 * MINUTE))],
        t1 + 11 * MINUTE,
      );
      expect(await pending(a)).toEqual([]);
      const t2 = t1 + 12 * MINUTE;
      expect(await rebalance(t2, t)).toEqual([
        { endpointId: a.id, from: dedicatedLane(a.id), to: home, kind: 'demoted' },
      ]);
      expect(await store.endpointLane({ endpointId: a.id })).toEqual({
        lane: home,
        since: t2,
        previous: dedicatedLane(a.id),
        draining: 0,
      });
      expect(await rebalance(t2 + SECOND, t)).toEqual([]);
    });

    test('rebalance promotes on fan-out volume per minute and demotes once it has faded', async () => {
      const t: LaneThresholds = {
        promoteBacklog: 1_000,
        demoteBacklog: 10,
        promoteRatePerMin: 20,
        demoteRatePerMin: 5,
        minDwellMs: 30 * SECOND,
      };
      const a = await newEndpoint();
      const b = await newEndpoint();
      await publish(a, 12, NOW);
      await publish(a, 13, NOW + 30 * SECOND);
      await publish(b, 19, NOW);
      expect((await rebalance(NOW + 40 * SECOND, t)).map((m) => [m.endpointId, m.kind])).toEqual([
        [a.id, 'promoted'],
      ]);
      await deliver(await lease(undefined, NOW + 41 * SECOND), NOW + 41 * SECOND);
      // Backlog 0 and dwell passed, but 25 in the last window still weigh (25 · 30/60 = 12.5 > 5).
      expect(await rebalance(NOW + 90 * SECOND, t)).toEqual([]);
      expect((await rebalance(NOW + 2 * MINUTE, t)).map((m) => [m.endpointId, m.kind])).toEqual([
        [a.id, 'demoted'],
      ]);
    });

    test('a delivery leased before a move completes normally after it, drains, and is never leased twice', async () => {
      const t = byBacklog(3, 1);
      const a = await newEndpoint();
      const home = sharedLane(a.id, 8);
      await publish(a, 4);
      const before = await lease(bind('shared'), NOW + SECOND, { owner: 'w-shared', limit: 1 });
      expect(before).toHaveLength(1);
      expect(await rebalance(NOW + 2 * SECOND, t)).toEqual([
        { endpointId: a.id, from: home, to: dedicatedLane(a.id), kind: 'promoted' },
      ]);
      expect(await store.endpointLane({ endpointId: a.id })).toMatchObject({ previous: home, draining: 1 });
      // The new lane's workers take the rest, never the one still in flight; the old lane's take nothing.
      expect(await lease(bind('shared'), NOW + 3 * SECOND)).toEqual([]);
      const after = await lease(bind('dedicated'), NOW + 3 * SECOND, { owner: 'w-dedicated' });
      expect(after.map((l) => l.delivery.id).sort()).toEqual(
        (await pending(a))
          .map((d) => d.id)
          .filter((x) => x !== before[0]!.delivery.id)
          .sort(),
      );
      expect(await lease(undefined, NOW + 3 * SECOND)).toEqual([]);
      await deliver(after, NOW + 4 * SECOND, 'w-dedicated');
      expect(await store.endpointLane({ endpointId: a.id })).toMatchObject({ draining: 1 });
      // Demotion is due (backlog 1, no dwell) but waits for the drain.
      expect(await rebalance(NOW + 5 * SECOND, t)).toEqual([]);
      // The old lease completes as usual.
      await deliver(before, NOW + 6 * SECOND, 'w-shared');
      expect(await store.endpointLane({ endpointId: a.id })).toMatchObject({ draining: 0 });
      const d = await store.deliveryGet({ id: before[0]!.delivery.id, tenantId: null });
      expect(d).toMatchObject({ status: 'delivered', attempts: 1 });
      const all = (
        await store.deliveryList({ endpointId: a.id, tenantId: null, status: null, limit: 100, cursor: null })
      ).data;
      expect(all.map((x) => [x.status, x.attempts])).toEqual(Array(4).fill(['delivered', 1]));
      for (const x of all)
        expect(await store.attemptList({ deliveryId: x.id, tenantId: null })).toHaveLength(1);
      expect((await store.endpointRuntime({ endpointId: a.id }))!.inflight).toBe(0);
      expect((await rebalance(NOW + 7 * SECOND, t)).map((m) => m.kind)).toEqual(['demoted']);
    });

    test('a changed shared-lane count re-hashes shared endpoints, keeps dedicated ones, and settles', async () => {
      const eps: EndpointRecord[] = [];
      for (let i = 0; i < 12; i++) eps.push(await newEndpoint());
      const hot = eps[0]!;
      await publish(hot, 5);
      const t = byBacklog(5, 1, 10 * MINUTE);
      expect((await rebalance(NOW + SECOND, t)).map((m) => m.kind)).toEqual(['promoted']);
      const moves = await rebalance(NOW + 2 * SECOND, t, 3);
      const expected = eps
        .slice(1)
        .filter((e) => sharedLane(e.id, 3) !== sharedLane(e.id, 8))
        .map((e) => ({
          endpointId: e.id,
          from: sharedLane(e.id, 8),
          to: sharedLane(e.id, 3),
          kind: 'rehashed',
        }));
      expect([...moves].sort((x, y) => (x.endpointId < y.endpointId ? -1 : 1))).toEqual(
        expected.sort((x, y) => (x.endpointId < y.endpointId ? -1 : 1)),
      );
      for (const e of eps.slice(1)) expect(await laneOf(e)).toBe(sharedLane(e.id, 3));
      expect(await laneOf(hot)).toBe(dedicatedLane(hot.id));
      expect(await rebalance(NOW + 3 * SECOND, t, 3)).toEqual([]);
      // Demoted under the new count, to its new home.
      await deliver(await lease(bind('dedicated'), NOW + 4 * SECOND), NOW + 4 * SECOND);
      expect(await rebalance(NOW + 11 * MINUTE, t, 3)).toEqual([
        { endpointId: hot.id, from: dedicatedLane(hot.id), to: sharedLane(hot.id, 3), kind: 'demoted' },
      ]);
    });

    test('concurrent rebalance passes make each move once', async () => {
      const hot: EndpointRecord[] = [];
      for (let i = 0; i < 10; i++) {
        const ep = await newEndpoint();
        if (i % 2 === 0) {
          hot.push(ep);
          await publish(ep, 4);
        }
      }
      const t = byBacklog(4, 1);
      const passes = await Promise.all([1, 2, 3, 4].map(() => rebalance(NOW + SECOND, t)));
      const moves = passes.flat();
      expect(moves.map((m) => m.endpointId).sort()).toEqual(hot.map((e) => e.id).sort());
      expect(moves.every((m) => m.kind === 'promoted')).toBe(true);
      for (const e of hot)
        expect(await store.endpointLane({ endpointId: e.id })).toMatchObject({
          lane: dedicatedLane(e.id),
          previous: sharedLane(e.id, 8),
        });
      expect((await Promise.all([1, 2].map(() => rebalance(NOW + 2 * SECOND, t)))).flat()).toEqual([]);
    });

    test('laneStats counts dedicated endpoints and pending deliveries per lane (dedicated lanes together)', async () => {
      const a = await newEndpoint();
      const b = await newEndpoint();
      const c = await newEndpoint();
      await publish(a, 3);
      await publish(b, 3);
      await publish(c, 1);
      await rebalance(NOW + SECOND, byBacklog(3, 1));
      const stats = await store.laneStats();
      expect(stats.dedicatedEndpoints).toBe(2);
      expect(stats.pendingByLane).toEqual({ dedicated: 6, [sharedLane(c.id, 8)]: 1 });
      // Deleted endpoints are not counted as dedicated.
      await store.endpointDelete({ id: a.id, tenantId, now: NOW + 2 * SECOND });
      expect((await store.laneStats()).dedicatedEndpoints).toBe(1);
    });
  });

  checkSkips();
}
