/**
 * Ordering modes (ADR-05) end to end, across a `kill -9` of delivery. Hookrail runs as real child processes — on
 * SQLite one process with every role, on PostgreSQL an intake/control/fan-out/maintenance process beside two
 * delivery processes on one schema — and delivers to a loopback receiver with two endpoints: one `endpoint`-ordered,
 * one `resource`-ordered. The producer sends events one at a time (each after the previous one's 202, so the send
 * order is the acceptance order), with a sequence number and a resource id (r1..r3, or none) in the data. Every 5th
 * request to each endpoint fails: most with 503 `Retry-After: 1`, every third of them with a plain 500 (computed
 * backoff, at most 5 s for a first failure). At a random moment a delivery process (SQLite: the one process) is
 * SIGKILLed and restarted.
 *
 * The receiver checks every request as it arrives:
 * - `endpoint`: a request for sequence s comes only once every s' < s has been answered 2xx, and never while another
 *   request to that endpoint is in flight;
 * - `resource`: the same within each resource id; events without one are unordered.
 * Afterwards every accepted event reached both endpoints with a 2xx, every delivery is `delivered`, and nothing is
 * left leased or in flight in the store.
 *
 * Leases are 3 s, well above the receiver's 15–35 ms answers (a lease shorter than an attempt could legitimately
 * send one twice at once), and the maintenance pass runs every 250 ms, so the killed worker's lease returns soon.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ROLES } from '../../src/config/config.ts';
import {
  createEndpoint,
  createTenant,
  deliveryE2eStore,
  listDeliveries,
  printWorkerOutputOnFailure,
  startHookrailProcess,
  type WorkerProcess,
} from '../support/delivery-e2e.ts';
import { useCleanups, useHookrailProcesses } from '../support/hookrail-process.ts';
import { errorCode, http, isConnectionError, sleep } from '../support/intake-load.ts';
import { Receiver } from '../support/receiver.ts';

useHookrailProcesses();
printWorkerOutputOnFailure();

const ADMIN_TOKEN = 'hka_e2e_ordering_crash_operator_token';
const EVENTS = 40;
const RESOURCES = ['r1', 'r2', 'r3', null] as const;

const cleanups = useCleanups();

interface Heard {
  path: string;
  seq: number;
  resource: string | null;
  status: number;
}

/**
 * The receiver and its ordering checks. `accepted(seq, resource)` is called by the producer on each 202, before it
 * sends the next event, so every event before a request's event is known when the request arrives.
 */
async function startOrderedReceiver() {
  const receiver = await Receiver.start();
  const heard: Heard[] = [];
  const violations: string[] = [];
  /** Per ordered line (`/endpoint`, or `/resource` + resource id): accepted seqs, 2xx-answered seqs, in flight. */
  const lines = new Map<string, { seqs: number[]; delivered: Set<number>; inFlight: number }>();
  const line = (key: string) => {
    const l = lines.get(key) ?? { seqs: [], delivered: new Set<number>(), inFlight: 0 };
    lines.set(key, l);
    return l;
  };
  const lineOf = (path: string, resource: string | null) =>
    path === '/endpoint' ? '/endpoint' : resource === null ? null : `/resource ${resource}`;
  let inFlightAtResource = 0;
  let maxInFlightAtResource = 0;

  receiver.answer((req, nth) => {
    const data = JSON.parse(req.body.toString('utf8')).data as { seq: number; resource: string | null };
    const key = lineOf(req.path, data.resource);
    const status = nth % 5 !== 0 ? 204 : nth % 15 === 0 ? 500 : 503;
    const delayMs = 15 + Math.floor(Math.random() * 20);
    heard.push({ path: req.path, seq: data.seq, resource: data.resource, status });
    if (key) {
      const l = line(key);
      const missing = l.seqs.filter((s) => s < data.seq && !l.delivered.has(s));
      if (missing.length > 0)
        violations.push(`${key}: #${data.seq} arrived before #${missing.join(', #')} got a 2xx`);
      if (l.inFlight > 0)
        violations.push(`${key}: #${data.seq} arrived with ${l.inFlight} request(s) in flight`);
      l.inFlight++;
    }
    if (req.path === '/resource')
      maxInFlightAtResource = Math.max(maxInFlightAtResource, ++inFlightAtResource);
    // Registered before the receiver's own answer timer (same delay), so it runs first: the line is free again
    // before the answer leaves, and Hookrail cannot start the next request any earlier.
    setTimeout(() => {
      if (key) {
        const l = line(key);
        l.inFlight--;
        if (status < 300) l.delivered.add(data.seq);
      }
      if (req.path === '/resource') inFlightAtResource--;
    }, delayMs);
    const headers: Record<string, string> = status === 503 ? { 'retry-after': '1' } : {};
    return { status, delayMs, headers };
  });

  const accepted = (seq: number, resource: string | null) => {
    line('/endpoint').seqs.push(seq);
    if (resource !== null) line(`/resource ${resource}`).seqs.push(seq);
  };
  return { receiver, heard, violations, accepted, maxResourceParallelism: () => maxInFlightAtResource };
}

/** Sends events 0..count-1 one after another, each retried with its Idempotency-Key across a killed intake. */
async function sendInOrder(opts: {
  target: () => string;
  producerKey: string;
  tenantId: string;
  run: string;
  count: number;
  accepted: (seq: number, resource: string | null) => void;
}): Promise<Array<{ seq: number; resource: string | null; eventId: string }>> {
  const out: Array<{ seq: number; resource: string | null; eventId: string }> = [];
  for (let seq = 0; seq < opts.count; seq++) {
    const resource = RESOURCES[Math.floor(Math.random() * RESOURCES.length)]!;
    const body = {
      tenant_id: opts.tenantId,
      type: 'order.updated',
      data: { seq, resource },
      ...(resource === null ? {} : { resource_id: resource }),
    };
    const giveUpAt = performance.now() + 20_000;
    for (;;) {
      let why: string;
      try {
        const res = await http(opts.target(), {
          path: '/v1/events',
          token: opts.producerKey,
          body,
          headers: { 'idempotency-key': `${opts.run}-${seq}` },
          timeoutMs: 5_000,
        });
        if (res.status === 202) {
          // Also a retry after the kill, answered with the event its first try had committed (idempotent-replayed).
          opts.accepted(seq, resource);
          out.push({ seq, resource, eventId: res.body.id });
          break;
        }
        why = `${res.status} ${JSON.stringify(res.body)}`;
        if (res.status !== 503) throw new Error(`event ${seq}: ${why}`);
      } catch (err) {
        why = errorCode(err);
        if (!isConnectionError(why)) throw err;
      }
      if (performance.now() > giveUpAt) throw new Error(`event ${seq} never accepted: ${why}`);
      await sleep(100);
    }
  }
  return out;
}

describe.each(['sqlite', 'postgres'] as const)('ordering across kill -9 of delivery (%s)', (kind) => {
  it('`endpoint` and `resource` order hold at a real receiver; everything accepted arrives', {
    timeout: 90_000,
  }, async () => {
    const { env, leaseState } = await deliveryE2eStore({
      kind,
      label: 'ocrash',
      adminToken: ADMIN_TOKEN,
      cleanups,
      env: { HOOKRAIL_LEASE_MS: '3000', HOOKRAIL_MAINTENANCE_MS: '250' },
    });

    const r = await startOrderedReceiver();
    cleanups.push(() => r.receiver.close());

    // SQLite: one process with every role (its only delivery process). PostgreSQL: the front process, then two
    // delivery processes, so `endpoint`'s one-in-flight has to hold across processes too.
    const roles =
      kind === 'sqlite'
        ? { main: ROLES.join(','), workers: 0 }
        : { main: 'intake,control,fanout,maintenance', workers: 2 };
    let generation = 0;
    const spawn = (which: string, roleList: string) =>
      startHookrailProcess({
        env: { ...env, HOOKRAIL_ROLES: roleList },
        name: `${kind} ${which}#${generation++}`,
      });
    let main = await spawn('main', roles.main); // migrates the schema before the workers start
    const workers: WorkerProcess[] = await Promise.all(
      Array.from({ length: roles.workers }, (_, i) => spawn(`delivery${i}`, 'delivery')),
    );
    const base = () => main.url!;

    const { tenantId, tenantKey, producerKey } = await createTenant(base(), ADMIN_TOKEN);
    const endpointId = await createEndpoint(base(), tenantKey, r.receiver.url('/endpoint'), {
      ordering: 'endpoint',
    });
    const resourceId = await createEndpoint(base(), tenantKey, r.receiver.url('/resource'), {
      ordering: 'resource',
    });

    const started = performance.now();
    const sending = sendInOrder({
      target: base,
      producerKey,
      tenantId,
      run: `ordering-crash-${kind}-${randomBytes(4).toString('hex')}`,
      count: EVENTS,
      accepted: r.accepted,
    });

    // The kill: at a random moment while events are sent and delivered.
    await sleep(300 + Math.random() * 2_500);
    const killedAt = Math.round(performance.now() - started);
    const heardAtKill = r.heard.length;
    let killed: string;
    if (kind === 'sqlite') {
      killed = main.name;
      expect((await main.kill('SIGKILL')).signal, main.output()).toBe('SIGKILL');
      main = await spawn('main', roles.main);
    } else {
      const i = Math.floor(Math.random() * workers.length);
      killed = workers[i]!.name;
      expect((await workers[i]!.kill('SIGKILL')).signal, workers[i]!.output()).toBe('SIGKILL');
      workers[i] = await spawn(`delivery${i}`, 'delivery');
    }
    const events = await sending;
    const sentMs = Math.round(performance.now() - started);

    // Wait until every accepted event has a delivery on both endpoints and none is pending.
    const waitStarted = performance.now();
    let last = '';
    for (;;) {
      const [e, s] = await Promise.all([
        listDeliveries(base(), tenantKey, endpointId),
        listDeliveries(base(), tenantKey, resourceId),
      ]);
      const open = [...e, ...s].filter((d) => d.status === 'pending').length;
      if (e.length === EVENTS && s.length === EVENTS && open === 0) {
        const notDelivered = [...e, ...s].filter((d) => d.status !== 'delivered');
        expect(notDelivered.map((d) => [d.id, d.status, d.status_reason])).toEqual([]);
        break;
      }
      last = `${e.length} + ${s.length} deliveries of ${EVENTS} events each, ${open} pending`;
      if (performance.now() - waitStarted > 45_000) throw new Error(`not delivered within 45 s: ${last}`);
      await sleep(200);
    }
    const drainedMs = Math.round(performance.now() - started);

    expect(r.violations, `${r.violations.length} ordering violations at the receiver`).toEqual([]);
    // Every accepted event reached both endpoints with a 2xx.
    for (const path of ['/endpoint', '/resource']) {
      const ok = new Set(r.heard.filter((h) => h.path === path && h.status < 300).map((h) => h.seq));
      expect(
        events.filter((ev) => !ok.has(ev.seq)).map((ev) => ev.seq),
        `${path}: never answered 2xx`,
      ).toEqual([]);
    }
    // Nothing left leased or counted in flight, nothing left to fan out.
    expect(await leaseState()).toEqual({ leased: [], inflight: [], fanoutPending: 0 });

    const count = (path: string, f: (h: Heard) => boolean) =>
      r.heard.filter((h) => h.path === path && f(h)).length;
    console.log(
      `[ordering-crash ${kind}] ${EVENTS} events sent in order by ${sentMs} ms, all delivered by ${drainedMs} ms; ` +
        `killed ${killed} at ${killedAt} ms (${heardAtKill} requests received so far)\n  ` +
        ['/endpoint', '/resource']
          .map(
            (p) =>
              `${p}: ${count(p, () => true)} requests, ${count(p, (h) => h.status >= 300)} failed, ` +
              `${count(p, (h) => h.status < 300) - EVENTS} duplicate 2xx`,
          )
          .join('; ') +
        `; at most ${r.maxResourceParallelism()} requests in flight at once on /resource`,
    );
    await Promise.all([main, ...workers].map((p) => p.kill('SIGTERM')));
  });
});
