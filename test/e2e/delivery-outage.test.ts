/**
 * PRODUCT.md §6: an event answered 202 is delivered or dead-lettered, never lost — across a database outage too.
 *
 * PostgreSQL, one Hookrail process with every role (delivery runs on its pipeline thread with a pool of its own),
 * talking to the database through a TCP relay (test/support/tcp-relay.ts). In the middle of a steady load to two
 * endpoints the test takes the database away for 4 s, then brings it back on the same address: either cut (every
 * connection destroyed, new ones refused) or partitioned (bytes stop flowing, nothing is closed: statements wait
 * for their 3 s deadline). At that moment attempts are in flight, leases are held and completions are about to be
 * written; the outage outlasts the 2 s leases. The producer retries 503s and broken requests with its
 * Idempotency-Key.
 *
 * Afterwards, with no restart of the process: every accepted event has exactly one delivery per endpoint, and it is
 * delivered; the receiver saw each (event, endpoint) only under that delivery's webhook-id, with a 2xx (duplicates,
 * allowed by at-least-once, are counted); nothing is left leased, in flight or waiting for fan-out.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  createEndpoint,
  createTenant,
  type DeliveryJson,
  deliveryE2eStore,
  listDeliveries,
  printWorkerOutputOnFailure,
  startHookrailProcess,
  steadyEvents,
} from '../support/delivery-e2e.ts';
import { useCleanups, useHookrailProcesses } from '../support/hookrail-process.ts';
import { sleep } from '../support/intake-load.ts';
import { Receiver } from '../support/receiver.ts';
import { postgresRelay } from '../support/tcp-relay.ts';

useHookrailProcesses();
printWorkerOutputOnFailure();

const ADMIN_TOKEN = 'hka_e2e_delivery_outage_operator_token';
const EVENTS_PER_SECOND = 40;
const OUTAGE_MS = 4_000;
const PATHS = ['/a', '/b'] as const;

const cleanups = useCleanups();

describe.each(['cut', 'partition'] as const)('PostgreSQL outage under delivery load (%s)', (mode) => {
  it('every event answered 202 is delivered to every endpoint once the database is back, without a restart', {
    timeout: 90_000,
  }, async () => {
    const { env, leaseState } = await deliveryE2eStore({
      kind: 'postgres',
      label: 'doutage',
      adminToken: ADMIN_TOKEN,
      cleanups,
      env: { HOOKRAIL_LEASE_MS: '2000', HOOKRAIL_MAINTENANCE_MS: '500' },
    });
    // The process reaches the database only through the relay; the test reads the store directly.
    const { relay, url: viaRelay } = await postgresRelay(env.DATABASE_URL as string);
    cleanups.push(() => relay.stop());

    const receiver = await Receiver.start();
    cleanups.push(() => receiver.close());
    const heard: Array<{ path: string; webhookId: string; eventId: string }> = [];
    receiver.answer((req) => {
      heard.push({
        path: req.path,
        webhookId: req.headers['webhook-id'] ?? '',
        eventId: String(JSON.parse(req.body.toString('utf8')).id),
      });
      return { status: 204 };
    });

    const proc = await startHookrailProcess({
      env: {
        ...env,
        DATABASE_URL: viaRelay,
        HOOKRAIL_ROLES: 'intake,control,fanout,delivery,maintenance',
      },
      name: 'postgres all roles',
    });
    const base = proc.url!;
    const { tenantId, tenantKey, producerKey } = await createTenant(base, ADMIN_TOKEN);
    const endpoints = new Map<string, string>();
    for (const path of PATHS) endpoints.set(path, await createEndpoint(base, tenantKey, receiver.url(path)));

    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    const load = steadyEvents({
      target: () => base,
      producerKey,
      tenantId,
      run: `delivery-outage-${mode}`,
      perSecond: EVENTS_PER_SECOND,
      signal: stop.signal,
      retryForMs: 30_000,
    });
    await sleep(1_500);
    const heardAtCut = heard.length;
    const leasedAtCut = (await leaseState()).leased.length;
    if (mode === 'cut') await relay.stop();
    else relay.partition();
    await sleep(OUTAGE_MS);
    const heardDuringOutage = heard.length - heardAtCut;
    if (mode === 'cut') await relay.start();
    else relay.heal();
    await sleep(2_000);
    stop.abort();
    const sent = await load;

    const notAccepted = sent.filter((s) => s.eventId === null);
    expect(
      notAccepted.slice(0, 3).map((s) => s.lastError),
      `${notAccepted.length} of ${sent.length} events never accepted`,
    ).toEqual([]);
    const accepted = sent.map((s) => s.eventId!);

    // Drained: nothing pending on any endpoint and every accepted event has its delivery there.
    const all = new Map<string, DeliveryJson[]>();
    const drainStarted = performance.now();
    for (let why = 'not read yet'; why; ) {
      if (performance.now() - drainStarted > 40_000) throw new Error(`not drained within 40 s: ${why}`);
      await sleep(250);
      why = '';
      for (const [path, id] of endpoints) {
        const ds = await listDeliveries(base, tenantKey, id);
        all.set(path, ds);
        const pending = ds.filter((d) => d.status === 'pending').length;
        const have = new Set(ds.map((d) => d.event_id));
        const missing = accepted.filter((e) => !have.has(e)).length;
        if (pending > 0 || missing > 0) why = `${path}: ${pending} pending, ${missing} without a delivery`;
      }
    }

    let duplicates = 0;
    for (const [path, ds] of all) {
      expect(new Set(ds.map((d) => d.event_id)).size, `${path}: an event fanned out twice`).toBe(ds.length);
      expect(
        ds.filter((d) => d.status !== 'delivered').map((d) => [d.id, d.status, d.status_reason]),
      ).toEqual([]);
      const requests = new Map<string, Set<string>>();
      for (const h of heard.filter((x) => x.path === path)) {
        const ids = requests.get(h.eventId) ?? new Set<string>();
        ids.add(h.webhookId);
        requests.set(h.eventId, ids);
      }
      const wrong = ds.filter((d) => {
        const ids = requests.get(d.event_id);
        return ids?.size !== 1 || !ids.has(d.webhook_id);
      });
      expect(
        wrong.slice(0, 3).map((d) => ({ event: d.event_id, seen: [...(requests.get(d.event_id) ?? [])] })),
        `${path}: deliveries not received, or received under another webhook-id`,
      ).toEqual([]);
      duplicates += heard.filter((x) => x.path === path).length - ds.length;
    }
    expect(await leaseState()).toEqual({ leased: [], inflight: [], fanoutPending: 0 });
    // The outage hit both planes: intake answered 503 or broke requests that were then retried, and the delivery
    // plane's store calls failed and were retried (logged at warn; the whole kept stdout, not output()'s last 8 KB,
    // which the other loops' failures can fill).
    expect(sent.filter((s) => s.tries > 1).length).toBeGreaterThan(0);
    expect(proc.stdout).toMatch(/lease failed; retrying|recording attempts failed; retrying/);
    console.log(
      `[delivery-outage ${mode}] ${accepted.length} events accepted (${sent.filter((s) => s.tries > 1).length} after ` +
        `retries); at the cut ${leasedAtCut} leased and ${heardAtCut} requests received, ${heardDuringOutage} ` +
        `more during the ${OUTAGE_MS} ms outage; drained ${Math.round(performance.now() - drainStarted)} ms ` +
        `after the load; ${duplicates} duplicate requests (same webhook-id)`,
    );
  });
});
