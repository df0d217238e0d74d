/**
 * The worker on real stores: an attempt Hookrail cannot make (a secret sealed under another master key, a sender
 * that throws) is recorded as a `platform_error` attempt, retried on the schedule and dead-lettered at its limits,
 * without judging the endpoint (SQLite and PostgreSQL); replays hold only their own slots (SQLite).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { captureLog } from '../../test/support/log-capture.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { asTenant, createTestStore, STORE_KINDS, type TestStore } from '../../test/support/test-hookrail.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
import { PLATFORM_ERROR_MESSAGE } from '../app/deliver-attempt.ts';
import { createEndpoint } from '../app/manage-endpoints.ts';
import { createTenant } from '../app/manage-tenants.ts';
import { SecretCache } from '../app/secret-cache.ts';
import { Signal } from '../app/signal.ts';
import { newId } from '../domain/ids.ts';
import { MAX_AGE_MS, MAX_ATTEMPTS, maxRetryDelayMs } from '../domain/retry-schedule.ts';
import type { Random } from '../ports/clock.ts';
import type { HttpSender, SendResult } from '../ports/http-sender.ts';
import type { Store } from '../ports/store.ts';
import { DeliveryWorker } from './delivery-worker.ts';

describe('DeliveryWorker', () => {
  let ts: TestStore | undefined;
  afterEach(() => ts?.destroy());

  /** A fresh SQLite store with one tenant, on a fake clock and a seeded random source. */
  const setup = async (seed: number) => {
    ts = await createTestStore('sqlite');
    const store = ts.store;
    const clock = new FakeClock();
    const random = seededRandom(seed);
    const base = { store, clock, random, keys: createLocalKeyService({ masterKey: Buffer.alloc(32, 3) }) };
    const { tenant } = await createTenant(base, { name: 'a' });
    return { store, clock, random, base, tenant };
  };

  it('a sender that throws: the attempt is recorded as platform_error, its slot freed, nothing left leased', async () => {
    const { store, clock, random, base, tenant } = await setup(5);
    const { endpoint } = await createEndpoint(base, asTenant(tenant.id), {
      url: 'https://ok.example.com/',
      eventTypes: ['*'],
    });
    await publish(store, tenant.id, 'order.created', 1, clock.now(), random);

    const { logger, lines: logged } = captureLog();
    let sends = 0;
    const sender: HttpSender = {
      send: async () => {
        sends++;
        throw new TypeError('a bug in the sender');
      },
      close: async () => {},
    };
    const worker = new DeliveryWorker({
      store,
      attempt: { sender, clock, random, userAgent: 'test', secretsFor: async () => ['whsec_x'] },
      owner: 'worker-1',
      concurrency: 4,
      perEndpoint: 4,
      leaseMs: 60_000,
      pollMs: 5,
      wake: new Signal(),
      logger,
      metrics: null,
    });
    worker.start();
    const delivery = await waitFor(async () => {
      const [d] = (await deliveriesOf(store, tenant.id, endpoint.id)).filter((x) => x.attempts === 1);
      return d ?? null;
    });
    await worker.stop();

    expect(sends).toBe(1);
    expect(worker.inFlight).toBe(0);
    expect(delivery).toMatchObject({ status: 'pending', attempts: 1 });
    expect(delivery.nextAttemptAt).toBeGreaterThanOrEqual(clock.now());
    expect(delivery.nextAttemptAt).toBeLessThanOrEqual(clock.now() + maxRetryDelayMs(1));
    const [attempt] = await store.attemptList({ deliveryId: delivery.id, tenantId: null });
    expect(attempt).toMatchObject({
      attemptNo: 1,
      outcome: 'retryable',
      errorClass: 'platform_error',
      errorMessage: PLATFORM_ERROR_MESSAGE,
      statusCode: null,
      request: { hops: [] },
    });
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      level: 50,
      msg: 'attempt failed on the platform side; recorded as platform_error',
      err: { message: 'a bug in the sender' },
      delivery: delivery.id,
      endpoint: endpoint.id,
      attemptNo: 1,
      next: 'pending',
    });
    // Its lease was released by the record, not left to expire.
    clock.advance(60_000);
    expect(await store.deliveryExpireLeases({ now: clock.now() })).toBe(0);
    expect((await store.endpointRuntime({ endpointId: endpoint.id }))?.inflight).toBe(0);
  });

  it('replays run on their own slots: however many are due, first deliveries keep theirs', async () => {
    const { store, clock, random, base, tenant } = await setup(9);
    const endpointFor = (url: string, type: string) =>
      createEndpoint(base, asTenant(tenant.id), { url, eventTypes: [type], maxConcurrency: 100 });
    const { endpoint: first } = await endpointFor('https://first.example.com/', 'a.*');
    const { endpoint: replayed } = await endpointFor('https://replayed.example.com/', 'b.*');

    // The sender answers 204 at once until `hold`; then it keeps every request open until released.
    let hold = false;
    const open = new Map<string, number>();
    const release: Array<() => void> = [];
    const sender: HttpSender = {
      send: async (req) => {
        const host = new URL(req.url).hostname;
        const timings = {
          startedAt: clock.now(),
          wireAt: clock.now(),
          responseAt: clock.now(),
          finishedAt: clock.now(),
        };
        const answer: SendResult = {
          kind: 'response',
          status: 204,
          headers: {},
          bodyPrefix: Buffer.alloc(0),
          hops: [],
          timings,
        };
        if (!hold) return answer;
        open.set(host, (open.get(host) ?? 0) + 1);
        await new Promise<void>((resolve) => release.push(resolve));
        open.set(host, open.get(host)! - 1);
        return answer;
      },
      close: async () => {},
    };
    const wake = new Signal();
    const worker = new DeliveryWorker({
      store,
      attempt: { sender, clock, random, userAgent: 'test', secretsFor: async () => ['whsec_x'] },
      owner: 'worker-1',
      concurrency: 4,
      replayConcurrency: 2,
      perEndpoint: 10,
      leaseMs: 60_000,
      pollMs: 5,
      wake,
      logger: null,
      metrics: null,
    });
    worker.start();
    try {
      // Ten deliveries to `replayed`, delivered; then all ten replayed, and ten new events for the other endpoint.
      await publish(store, tenant.id, 'b.x', 10, clock.now(), random);
      const delivered = await waitFor(async () => {
        const page = await store.deliveryList({
          endpointId: replayed.id,
          tenantId: tenant.id,
          status: 'delivered',
          limit: 100,
          cursor: null,
        });
        return page.data.length === 10 ? page.data : null;
      });
      // One delivery to the other endpoint, so that it was served last: the replays' endpoint is first in the
      // rotation, and without a budget of their own its due replays would take every free slot.
      clock.advance(10);
      await publish(store, tenant.id, 'a.x', 1, clock.now(), random);
      await waitFor(async () => {
        const page = await store.deliveryList({
          endpointId: first.id,
          tenantId: tenant.id,
          status: 'delivered',
          limit: 100,
          cursor: null,
        });
        return page.data.length === 1 ? true : null;
      });
      hold = true;
      // Made in the clock's future, so that all come due at once when it gets there.
      const later = clock.now() + 1_000;
      for (const d of delivered)
        await store.deliveryReplay({
          id: d.id,
          tenantId: tenant.id,
          now: later,
          ratePerSecond: 1000,
          ids: idsAt(later, random),
        });
      await publish(store, tenant.id, 'a.x', 10, later, random);
      clock.set(later + 1_000);
      wake.poke();
      await waitFor(async () => (release.length === 6 ? true : null));
      await new Promise((r) => setTimeout(r, 50)); // nothing more starts
      expect(Object.fromEntries(open)).toEqual({ 'first.example.com': 4, 'replayed.example.com': 2 });
    } finally {
      hold = false;
      for (const r of release.splice(0)) r();
      const stopping = worker.stop();
      for (let i = 0; i < 100 && release.length + open.size > 0; i++) {
        for (const r of release.splice(0)) r();
        await new Promise((r) => setTimeout(r, 5));
      }
      await stopping;
    }
  });
});

describe.each(STORE_KINDS)('DeliveryWorker on %s: attempts Hookrail cannot make', (kind) => {
  let ts: TestStore | undefined;
  let worker: DeliveryWorker | undefined;
  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
    await ts?.destroy();
    ts = undefined;
  });

  /**
   * An `endpoint`-ordered endpoint whose secret was sealed under one master key, and a worker whose process has
   * another: every secret it opens fails (KeyService.open throws), so no request can be signed.
   */
  const setup = async (events: number) => {
    ts = await createTestStore(kind);
    const store = ts.store;
    const clock = new FakeClock();
    const random = seededRandom(11);
    const base = { store, clock, random, keys: createLocalKeyService({ masterKey: Buffer.alloc(32, 3) }) };
    const { tenant } = await createTenant(base, { name: 'a' });
    const { endpoint } = await createEndpoint(base, asTenant(tenant.id), {
      url: 'https://ok.example.com/',
      eventTypes: ['*'],
      ordering: 'endpoint',
    });
    await publish(store, tenant.id, 'order.created', events, clock.now(), random);
    const otherKey = createLocalKeyService({ masterKey: Buffer.alloc(32, 4) });
    const secrets = new SecretCache({ store, keys: otherKey, clock, ttlMs: 60_000 });
    const { logger, lines: logged } = captureLog();
    let sends = 0;
    const sender: HttpSender = {
      send: async () => {
        sends++;
        throw new Error('nothing may be sent without a signature');
      },
      close: async () => {},
    };
    const wake = new Signal();
    worker = new DeliveryWorker({
      store,
      attempt: {
        sender,
        clock,
        random,
        userAgent: 'test',
        secretsFor: (tenantId, endpointId) => secrets.get(tenantId, endpointId),
      },
      owner: 'worker-1',
      concurrency: 4,
      perEndpoint: 4,
      leaseMs: 60_000,
      pollMs: 5,
      wake,
      logger,
      metrics: null,
    });
    worker.start();
    const deliveries = () => deliveriesOf(store, tenant.id, endpoint.id);
    /** Waits until `n` attempts of the endpoint are recorded in all. */
    const recorded = (n: number) =>
      waitFor(async () => {
        const ds = await deliveries();
        return ds.reduce((sum, d) => sum + d.attempts, 0) === n ? ds : null;
      });
    const runtime = async () => (await store.endpointRuntime({ endpointId: endpoint.id }))!;
    return { store, clock, wake, endpoint, deliveries, recorded, runtime, logged, sends: () => sends };
  };

  // Twelve rounds of a real worker loop against a real store: well under a second alone, slower on a busy machine.
  it('recorded as platform_error on the retry schedule, dead-lettered at 12, the endpoint not judged', {
    timeout: 90_000,
  }, async () => {
    const { store, clock, wake, endpoint, deliveries, recorded, runtime, logged, sends } = await setup(2);
    let ds = await recorded(1);
    const head = ds.find((d) => d.attempts === 1)!;
    const behind = ds.find((d) => d.id !== head.id)!;
    for (let n = 1; n < MAX_ATTEMPTS; n++) {
      const d = (await deliveries()).find((x) => x.id === head.id)!;
      expect(d).toMatchObject({ status: 'pending', attempts: n });
      // Healthy all along: not one of these attempts is the endpoint's answer.
      const rt = await runtime();
      expect(rt.runtime).toMatchObject({ health: 'healthy', failingSince: null, lastFailureAt: null });
      expect(rt.runtime.circuit).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
      // Nothing behind the head starts under `endpoint` ordering, and the head waits for its retry.
      expect(ds.find((x) => x.id === behind.id)?.attempts).toBe(0);
      clock.set(d.nextAttemptAt! - 1);
      wake.poke();
      await new Promise((r) => setTimeout(r, 30));
      expect((await deliveries()).find((x) => x.id === head.id)?.attempts).toBe(n);
      clock.set(d.nextAttemptAt!);
      wake.poke();
      ds = await recorded(n + 1);
    }

    const dead = ds.find((d) => d.id === head.id)!;
    expect(dead).toMatchObject({ status: 'dead', statusReason: 'max_attempts', attempts: MAX_ATTEMPTS });
    const attempts = await store.attemptList({ deliveryId: head.id, tenantId: null });
    expect(attempts.map((a) => a.attemptNo)).toEqual(Array.from({ length: MAX_ATTEMPTS }, (_, i) => i + 1));
    for (const [i, a] of attempts.entries()) {
      expect(a).toMatchObject({
        outcome: 'retryable',
        errorClass: 'platform_error',
        errorMessage: PLATFORM_ERROR_MESSAGE,
        statusCode: null,
        request: { hops: [] },
      });
      // Nothing of the cause (a key problem) reaches the tenant's attempt log.
      expect(JSON.stringify(a)).not.toMatch(/master key/);
      // On the published schedule: each retry due within its full-jitter bound after the previous attempt.
      if (i > 0) {
        const gap = a.dueAt - attempts[i - 1]!.finishedAt;
        expect(gap).toBeGreaterThanOrEqual(0);
        expect(gap).toBeLessThanOrEqual(maxRetryDelayMs(i));
        expect(a.startedAt).toBe(a.dueAt);
      }
    }
    expect(sends()).toBe(0);

    // One error line per attempt, with the delivery and the cause.
    const lines = logged.filter((l) => l.delivery === head.id);
    expect(lines).toHaveLength(MAX_ATTEMPTS);
    for (const [i, l] of lines.entries()) {
      expect(l).toMatchObject({
        level: 50,
        msg: 'attempt failed on the platform side; recorded as platform_error',
        err: { message: 'sealed value was encrypted under a different master key' },
        endpoint: endpoint.id,
        attemptNo: i + 1,
        next: i + 1 < MAX_ATTEMPTS ? 'pending' : 'dead',
      });
    }

    // The dead letter is real and is told (a notice, and the reminder in health); nothing else judges the endpoint:
    // the circuit stays closed, no failure streak starts (so no auto-disable).
    const rt = await runtime();
    expect(rt.runtime).toMatchObject({
      health: 'degraded',
      healthReasons: ['recent_dead_letter'],
      failingSince: null,
      lastFailureAt: null,
      lastDeadLetterAt: attempts.at(-1)!.finishedAt,
    });
    expect(rt.runtime.circuit).toMatchObject({ state: 'closed', consecutiveFailures: 0 });

    // The head no longer holds up the endpoint: the next delivery (due since it was made) gets its first attempt.
    ds = await recorded(MAX_ATTEMPTS + 1);
    expect(ds.find((d) => d.id === behind.id)).toMatchObject({ status: 'pending', attempts: 1 });
    await worker?.stop();
    // Every slot was given back by a record; none waits for a lease to expire.
    expect((await runtime()).inflight).toBe(0);
    expect(await store.deliveryExpireLeases({ now: clock.now() + 60_000 })).toBe(0);
  });

  it('dead-lettered by age: a retry due more than 72 h after the first attempt is not made', async () => {
    const { store, clock, wake, deliveries, recorded, runtime } = await setup(1);
    const [first] = await recorded(1);
    expect(first).toMatchObject({ status: 'pending', attempts: 1 });
    // The process was down for three days; the delivery's next attempt comes due long after its first.
    clock.set(first!.firstAttemptAt! + MAX_AGE_MS + 1);
    wake.poke();
    const [dead] = await recorded(2);
    expect(dead).toMatchObject({ status: 'dead', statusReason: 'max_age', attempts: 2 });
    const attempts = await store.attemptList({ deliveryId: first!.id, tenantId: null });
    expect(attempts.map((a) => a.errorClass)).toEqual(['platform_error', 'platform_error']);
    expect((await runtime()).runtime.circuit).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(await deliveries()).toHaveLength(1);
  });
});

/** Inserts `n` events of `type` and fans them out. */
async function publish(store: Store, tenantId: string, type: string, n: number, now: number, random: Random) {
  await store.eventInsertBatch({
    events: Array.from({ length: n }, () => ({
      id: newId('event', now, random.bytes(10)),
      tenantId,
      type,
      resourceId: null,
      data: '{}',
      idempotencyKey: null,
      requestHash: null,
      createdAt: now,
    })),
    now,
    idempotencyWindowMs: 0,
  });
  await store.fanoutRun({
    now,
    limit: 100,
    ids: idsAt(now, random),
  });
}

const deliveriesOf = async (store: Store, tenantId: string, endpointId: string) =>
  (await store.deliveryList({ endpointId, tenantId, status: null, limit: 100, cursor: null })).data;

const idsAt = (now: number, random: Random) => ({
  delivery: () => newId('delivery', now, random.bytes(10)),
  webhookId: () => newId('message', now, random.bytes(10)),
});

async function waitFor<T>(probe: () => Promise<T | null>): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = await probe();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('timed out');
}
