/**
 * PRODUCT.md §6: "An event answered 202 is delivered or dead-lettered; it is never lost — including across `kill -9`
 * of any process at any moment … Duplicates are allowed (at-least-once) and always carry the same `webhook-id`."
 *
 * Hookrail runs as real child processes under a steady event load — on SQLite one process with every role, on
 * PostgreSQL three (intake+control+maintenance, fanout, delivery) on one schema — delivering to three loopback
 * endpoints: two answer 204, one answers 500/503 to a random 20% of requests (a 500 on the first request of a
 * webhook-id, so the computed backoff of at most 5 s applies; 503 with `Retry-After: 1` later). Three times, at
 * random moments, the fan-out and delivery processes (SQLite: the one process) are SIGKILLed and restarted. The
 * producer retries a request that broke on the kill with the same Idempotency-Key. Leases are 2 s and the
 * maintenance pass runs every 500 ms, so a killed worker's deliveries come back quickly.
 *
 * Once every accepted event has a delivery per endpoint and none is pending:
 * - every accepted event reached every endpoint (a 2xx answered by the receiver), or is dead-lettered;
 * - each (event, endpoint) has exactly one delivery (fan-out never ran twice for an event) and every request the
 *   receiver saw for it carried that delivery's webhook-id — duplicates only ever with the same webhook-id;
 * - nothing is left leased: no delivery holds a lease, every endpoint's in-flight count is back to 0, and the
 *   fan-out stream is empty (read from the store itself: the API does not expose leases).
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  createEndpoint,
  createTenant,
  type DeliveryJson,
  deliveryE2eStore,
  listDeliveries,
  printWorkerOutputOnFailure,
  type SentEvent,
  startHookrailProcess,
  steadyEvents,
  type WorkerProcess,
} from '../support/delivery-e2e.ts';
import { useCleanups, useHookrailProcesses } from '../support/hookrail-process.ts';
import { sleep } from '../support/intake-load.ts';
import { Receiver } from '../support/receiver.ts';

useHookrailProcesses();
printWorkerOutputOnFailure();

const ADMIN_TOKEN = 'hka_e2e_delivery_crash_operator_token';
const EVENTS_PER_SECOND = 40;
const FLAKY_FAILURE_RATE = 0.2;
const PATHS = ['/a', '/b', '/flaky'] as const;

const cleanups = useCleanups();

type Role = 'all' | 'intake' | 'fanout' | 'delivery';

interface Heard {
  path: string;
  webhookId: string;
  eventId: string;
  status: number;
}

/** One receiver, three endpoints; records what it answered to every request. */
async function startReceiver(): Promise<{ receiver: Receiver; heard: Heard[] }> {
  const receiver = await Receiver.start();
  const heard: Heard[] = [];
  const flakySeen = new Set<string>();
  receiver.answer((req) => {
    const webhookId = req.headers['webhook-id'] ?? '';
    const eventId = String(JSON.parse(req.body.toString('utf8')).id);
    let status = 204;
    let headers: Record<string, string> = {};
    if (req.path === '/flaky') {
      if (Math.random() < FLAKY_FAILURE_RATE) {
        // First time: a plain 500 (computed backoff, first retry within 5 s); later: a 503 asking for 1 s.
        if (flakySeen.has(webhookId)) {
          status = 503;
          headers = { 'retry-after': '1' };
        } else status = 500;
      }
      flakySeen.add(webhookId);
    }
    heard.push({ path: req.path, webhookId, eventId, status });
    return { status, headers };
  });
  return { receiver, heard };
}

/** Kill rounds: SQLite kills its one process; PostgreSQL the delivery worker, the fan-out worker, and both. */
function killRounds(kind: 'sqlite' | 'postgres'): Role[][] {
  if (kind === 'sqlite') return [['all'], ['all'], ['all']];
  const rounds: Role[][] = [['delivery'], ['fanout'], ['fanout', 'delivery']];
  return rounds.sort(() => Math.random() - 0.5);
}

describe.each(['sqlite', 'postgres'] as const)('kill -9 of fan-out and delivery under load (%s)', (kind) => {
  it('every accepted event is delivered to every endpoint, fanned out once, nothing left leased', {
    timeout: 60_000,
  }, async () => {
    const { env, leaseState } = await deliveryE2eStore({
      kind,
      label: 'dcrash',
      adminToken: ADMIN_TOKEN,
      cleanups,
      env: { HOOKRAIL_LEASE_MS: '2000', HOOKRAIL_MAINTENANCE_MS: '500' },
    });

    const { receiver, heard } = await startReceiver();
    cleanups.push(() => receiver.close());

    const ROLES: Record<Role, string> = {
      all: 'intake,control,fanout,delivery,replay,maintenance', // SQLite: one process runs every role
      intake: 'intake,control,maintenance',
      fanout: 'fanout',
      delivery: 'delivery',
    };
    const generation: Record<Role, number> = { all: 0, intake: 0, fanout: 0, delivery: 0 };
    const procs = new Map<Role, WorkerProcess>();
    const start = async (role: Role) => {
      const p = await startHookrailProcess({
        env: { ...env, HOOKRAIL_ROLES: ROLES[role] },
        name: `${kind} ${role}#${generation[role]++}`,
      });
      procs.set(role, p);
      return p;
    };
    if (kind === 'sqlite') await start('all');
    else {
      await start('intake'); // migrates the schema first
      await Promise.all([start('fanout'), start('delivery')]);
    }
    const intake = () => procs.get(kind === 'sqlite' ? 'all' : 'intake')!;
    const base = () => intake().url!;

    const { tenantId, tenantKey, producerKey } = await createTenant(base(), ADMIN_TOKEN);
    const endpoints = new Map<string, string>(); // path → endpoint id
    for (const path of PATHS)
      endpoints.set(path, await createEndpoint(base(), tenantKey, receiver.url(path)));

    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    const loadStarted = performance.now();
    const load = steadyEvents({
      target: base,
      producerKey,
      tenantId,
      run: `delivery-crash-${kind}`,
      perSecond: EVENTS_PER_SECOND,
      signal: stop.signal,
      retryForMs: 15_000,
    });

    const kills: string[] = [];
    for (const victims of killRounds(kind)) {
      await sleep(500 + Math.random() * 1_000);
      const at = Math.round(performance.now() - loadStarted);
      const heardBefore = heard.length;
      const exits = await Promise.all(victims.map((v) => procs.get(v)!.kill('SIGKILL')));
      for (const [i, exit] of exits.entries())
        expect(exit.signal, procs.get(victims[i]!)!.output()).toBe('SIGKILL');
      // The queue at the kill (best effort on SQLite: the file may be mid-recovery).
      const left = await leaseState().catch(() => null);
      await Promise.all(victims.map((v) => start(v)));
      kills.push(
        `${victims.join('+')} at ${at} ms (${heardBefore} requests received so far; leases held at that moment: ` +
          `${left ? left.leased.length : 'n/a'}, events not yet fanned out: ${left ? left.fanoutPending : 'n/a'}; ` +
          `back after ${Math.round(performance.now() - loadStarted - at)} ms)`,
      );
    }
    await sleep(500);
    stop.abort();
    const sent: SentEvent[] = await load;
    const loadMs = performance.now() - loadStarted;

    // Every event was accepted in the end (a request broken by the kill was retried with its Idempotency-Key).
    const notAccepted = sent.filter((s) => s.eventId === null);
    expect(notAccepted.slice(0, 5), `${notAccepted.length} of ${sent.length} events never accepted`).toEqual(
      [],
    );
    const accepted = sent.map((s) => s.eventId!);
    expect(new Set(accepted).size).toBe(accepted.length);
    const replayedKeys = sent.filter((s) => s.replayed).length;

    // Wait until every accepted event has a delivery for every endpoint and none is pending.
    const drainStarted = performance.now();
    let all = new Map<string, DeliveryJson[]>();
    let lastWhy = '';
    for (;;) {
      let why = '';
      for (const [path, id] of endpoints) {
        const pending = await listDeliveries(base(), tenantKey, id, { status: 'pending', max: 1 });
        if (pending.length > 0) why = `${path} has pending deliveries`;
      }
      if (!why) {
        all = new Map();
        for (const [path, id] of endpoints) all.set(path, await listDeliveries(base(), tenantKey, id));
        for (const [path, ds] of all) {
          const have = new Set(ds.map((d) => d.event_id));
          const missing = accepted.filter((e) => !have.has(e)).length;
          if (missing > 0) why = `${path}: ${missing} accepted events without a delivery`;
        }
        if (!why) break;
      }
      lastWhy = why;
      if (performance.now() - drainStarted > 35_000) throw new Error(`not drained within 35 s: ${lastWhy}`);
      await sleep(250);
    }
    const drainMs = performance.now() - drainStarted;

    // Fan-out ran once per event: exactly one delivery per (event, endpoint), none of them a replay.
    const acceptedSet = new Set(accepted);
    const report: string[] = [];
    let totalDuplicates = 0;
    let totalRequests = 0;
    let totalRecordedAttempts = 0;
    for (const [path, ds] of all) {
      expect(ds.filter((d) => d.replayed_from !== null)).toEqual([]);
      const perEvent = new Map<string, DeliveryJson[]>();
      for (const d of ds) perEvent.set(d.event_id, [...(perEvent.get(d.event_id) ?? []), d]);
      const twice = [...perEvent].filter(([, v]) => v.length > 1);
      expect(
        twice.slice(0, 3).map(([e, v]) => ({ event: e, deliveries: v.map((d) => d.id) })),
        `${path}: ${twice.length} events fanned out more than once`,
      ).toEqual([]);

      // Delivered or dead-lettered; a 204 receiver leaves nothing dead.
      const statuses: Record<string, number> = {};
      for (const d of ds) statuses[d.status] = (statuses[d.status] ?? 0) + 1;
      expect(Object.keys(statuses).filter((s) => s !== 'delivered' && s !== 'dead')).toEqual([]);
      const dead = ds.filter((d) => d.status === 'dead');
      if (path !== '/flaky') expect(dead.map((d) => [d.id, d.status_reason])).toEqual([]);

      // The receiver's view: one webhook-id per (event, endpoint), the delivery's; a 2xx for every delivered one.
      const requests = heard.filter((h) => h.path === path);
      const byEvent = new Map<string, Heard[]>();
      for (const h of requests) byEvent.set(h.eventId, [...(byEvent.get(h.eventId) ?? []), h]);
      const badIds: unknown[] = [];
      const notReached: string[] = [];
      let duplicates = 0;
      for (const [eventId, [d]] of perEvent) {
        const got = byEvent.get(eventId) ?? [];
        const ids = new Set(got.map((h) => h.webhookId));
        if (got.length > 0 && (ids.size !== 1 || !ids.has(d!.webhook_id)))
          badIds.push({ eventId, delivery: d!.webhook_id, seen: [...ids] });
        const ok = got.filter((h) => h.status >= 200 && h.status < 300).length;
        if (d!.status === 'delivered' && ok === 0) notReached.push(eventId);
        if (ok > 1) duplicates += ok - 1;
        totalRecordedAttempts += d!.attempts;
      }
      // Nothing arrived for an event that has no delivery on this endpoint.
      const stray = [...byEvent.keys()].filter((e) => !perEvent.has(e));
      expect(stray, `${path}: requests for events without a delivery`).toEqual([]);
      expect(
        badIds.slice(0, 5),
        `${path}: (event, endpoint) pairs with a foreign or second webhook-id`,
      ).toEqual([]);
      expect(notReached.slice(0, 5), `${path}: delivered per the API but no 2xx at the receiver`).toEqual([]);
      // Every accepted event reached this endpoint (or is dead-lettered).
      const unaccounted = accepted.filter((e) => {
        const d = perEvent.get(e)?.[0];
        return !d || (d.status !== 'delivered' && d.status !== 'dead');
      });
      expect(unaccounted.slice(0, 5)).toEqual([]);

      totalDuplicates += duplicates;
      totalRequests += requests.length;
      const failures = requests.filter((h) => h.status >= 300).length;
      report.push(
        `${path}: ${ds.length} deliveries (${JSON.stringify(statuses)}; ${ds.filter((d) => !acceptedSet.has(d.event_id)).length} ` +
          `for events whose 202 never arrived), ${requests.length} requests (${failures} answered 5xx), ` +
          `${duplicates} duplicate 2xx (same webhook-id)`,
      );
    }
    // A webhook-id belongs to exactly one (event, endpoint).
    const owners = new Map<string, string>();
    for (const h of heard) {
      const pair = `${h.path} ${h.eventId}`;
      expect(owners.get(h.webhookId) ?? pair, `webhook-id ${h.webhookId} reused`).toBe(pair);
      owners.set(h.webhookId, pair);
    }
    // Every recorded attempt was a real request; the difference is requests whose outcome died with a worker.
    expect(totalRequests).toBeGreaterThanOrEqual(totalRecordedAttempts);

    // Nothing stuck: no lease, no in-flight slot held, nothing left to fan out.
    const state = await leaseState();
    expect(state).toEqual({ leased: [], inflight: [], fanoutPending: 0 });

    console.log(
      `[delivery-crash ${kind}] ${accepted.length} events accepted over ${Math.round(loadMs)} ms ` +
        `(${replayedKeys} answered with the original event on an Idempotency-Key retry after a kill), drained ${Math.round(drainMs)} ms ` +
        `after the load; duplicates at the receivers: ${totalDuplicates}; requests ${totalRequests} vs recorded ` +
        `attempts ${totalRecordedAttempts} (${totalRequests - totalRecordedAttempts} unrecorded, sent by killed workers)\n  ` +
        `kills: ${kills.join('\n         ')}\n  ${report.join('\n  ')}`,
    );
    await Promise.all([...procs.values()].map((p) => p.kill('SIGTERM')));
  });
});
