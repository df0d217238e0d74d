/**
 * Queue lanes end to end (ADR-03, issue 6): promotion and demotion under load with a `kill -9` in the middle of a
 * move — nothing lost, nothing in flight twice.
 *
 * PostgreSQL, one schema, five real processes: intake+control+fanout; maintenance alone with low thresholds
 * (promote at a backlog of 40, demote at 5 after 3 s in the dedicated lane, every 200 ms); two delivery processes
 * bound to different lanes, `--lanes shared` and `--lanes dedicated`. Leases are 4 s. A local receiver answers the
 * two calm endpoints at once and holds /hot requests (cap 6, so its backlog grows under 40 events/s): 2.5 s while
 * the endpoint has not been promoted — a shared worker leases a whole batch at once, and a short hold would let that
 * batch end just before the move, leaving no drain window to kill into — and 300 ms afterwards, so the backlog
 * drains quickly. It tracks, per webhook-id, how many requests are in flight at once.
 *
 * 1. Load /hot until maintenance promotes it. A sampler reads the leased deliveries every 10 ms; the moment it sees
 *    the hot endpoint in its dedicated lane while the shared process still holds leases taken under the old lane
 *    (the drain window), that process is SIGKILLed. Its leases expire, maintenance returns them, the dedicated
 *    process sends them (same webhook-id). The shared process is restarted (calm endpoints wait meanwhile).
 * 2. The backlog drains; after the dwell time maintenance demotes /hot back to its shared lane.
 * Then: every accepted event delivered to its endpoint; no webhook-id ever in flight twice at the receiver; every
 * lease taken under a shared lane held by a `shared` process and every dedicated one by the `dedicated` process;
 * the health API showed the move with `draining` > 0 right after the kill; nothing left leased.
 */
import pg from 'pg';
import { expect, it, onTestFinished } from 'vitest';
import {
  createEndpoint,
  createTenant,
  type DeliveryJson,
  deliveryE2eStore,
  listDeliveries,
  ownerPid,
  printWorkerOutputOnFailure,
  startHookrailProcess,
  steadyEvents,
  type WorkerProcess,
} from '../support/delivery-e2e.ts';
import { useCleanups, useHookrailProcesses } from '../support/hookrail-process.ts';
import { http, sleep, waitUntil } from '../support/intake-load.ts';
import { Receiver } from '../support/receiver.ts';

useHookrailProcesses();
printWorkerOutputOnFailure();

const ADMIN_TOKEN = 'hka_e2e_lanes_operator_token';
/** /hot holds requests that arrive before the promotion long, later ones briefly (see the header). */
const HOLD_BEFORE_MS = 2_500;
const HOLD_AFTER_MS = 300;
const HOT_CAP = 6;
const CALM = ['/calm1', '/calm2'] as const;

const cleanups = useCleanups();

interface LeaseSample {
  webhook_id: string;
  endpoint_id: string;
  lease_owner: string;
  lease_lane: string | null;
  lane: string | null;
}

// The waits alone may add up to 70 s (20 s to the kill, 30 s to the demotion, 20 s to the drain) besides starting
// five processes: more than 60 s on a loaded machine.
it('promotion and demotion under load, with kill -9 of a delivery process mid-move: nothing lost or doubled', {
  timeout: 120_000,
}, async () => {
  const { env, pgUrl, leaseState } = await deliveryE2eStore({
    kind: 'postgres',
    label: 'lanes',
    adminToken: ADMIN_TOKEN,
    cleanups,
    env: { HOOKRAIL_LEASE_MS: '4000', HOOKRAIL_SHARED_LANES: '4' },
  });

  // The receiver: /hot holds each request (long until the promotion is seen); every path counts what is in flight
  // per webhook-id.
  let promotionSeen = false;
  const receiver = await Receiver.start();
  cleanups.push(() => receiver.close());
  const heard: Array<{ path: string; webhookId: string; eventId: string; status: number }> = [];
  const inFlight = new Map<string, number>();
  const overlapping: string[] = [];
  receiver.answer((req) => {
    const webhookId = req.headers['webhook-id'] ?? '';
    heard.push({
      path: req.path,
      webhookId,
      eventId: String(JSON.parse(req.body.toString('utf8')).id),
      status: 204,
    });
    const same = inFlight.get(webhookId) ?? 0;
    if (same > 0) overlapping.push(webhookId);
    inFlight.set(webhookId, same + 1);
    const hold = req.path !== '/hot' ? 0 : promotionSeen ? HOLD_AFTER_MS : HOLD_BEFORE_MS;
    // Released when the answer is written (this timer is set first), or at once for the calm endpoints. A request
    // whose worker was killed counts as in flight for its whole hold: the strictest reading.
    setTimeout(() => inFlight.set(webhookId, (inFlight.get(webhookId) ?? 1) - 1), hold);
    return { status: 204, delayMs: hold };
  });

  const main = await startHookrailProcess({
    env: { ...env, HOOKRAIL_ROLES: 'intake,control,fanout' },
    name: 'intake+control+fanout',
  });
  const base = main.url!;
  const generation = { shared: 0, dedicated: 0 };
  const pids = { shared: new Set<number>(), dedicated: new Set<number>() };
  const startDelivery = async (lanes: 'shared' | 'dedicated') => {
    const p = await startHookrailProcess({
      env: { ...env, HOOKRAIL_ROLES: 'delivery' },
      args: ['--lanes', lanes],
      name: `delivery --lanes ${lanes} #${generation[lanes]++}`,
    });
    expect(p.stdout).toContain(`lanes: ${lanes})`);
    pids[lanes].add(p.pid);
    return p;
  };
  const [, sharedFirst] = await Promise.all([
    startHookrailProcess({
      env: {
        ...env,
        HOOKRAIL_ROLES: 'maintenance',
        HOOKRAIL_MAINTENANCE_MS: '200',
        HOOKRAIL_LANE_PROMOTE_BACKLOG: '40',
        HOOKRAIL_LANE_DEMOTE_BACKLOG: '5',
        HOOKRAIL_LANE_PROMOTE_RATE: '1000000', // volume never decides here: a backlog does
        HOOKRAIL_LANE_DEMOTE_RATE: '999999',
        HOOKRAIL_LANE_MIN_DWELL_MS: '3000',
        HOOKRAIL_LOG_LEVEL: 'info',
      },
      name: 'maintenance',
    }),
    startDelivery('shared'),
    startDelivery('dedicated'),
  ]);
  let shared: WorkerProcess = sharedFirst;

  const { tenantId, tenantKey, producerKey } = await createTenant(base, ADMIN_TOKEN);
  const hotId = await createEndpoint(base, tenantKey, receiver.url('/hot'), {
    event_types: ['load.test'],
    max_concurrency: HOT_CAP,
  });
  const endpoints = new Map<string, string>([['/hot', hotId]]);
  for (const path of CALM)
    endpoints.set(
      path,
      await createEndpoint(base, tenantKey, receiver.url(path), { event_types: ['calm.*'] }),
    );
  const lane = async () =>
    (await http(base, { path: `/v1/endpoints/${hotId}/health`, token: tenantKey })).body.lane as {
      id: string;
      kind: string;
      previous: string | null;
      draining: number;
    };
  const homeLane = (await lane()).id;
  expect(homeLane).toMatch(/^shared:[0-3]$/);

  // The lease sampler, and the kill it triggers.
  const sampler = new pg.Client({ connectionString: pgUrl! });
  await sampler.connect();
  const samples: Array<LeaseSample & { pid: number }> = [];
  let killed: { at: number; drainingHeld: number } | null = null;
  let sampling = true;
  const samplerErrors: string[] = [];
  const sampling$ = (async () => {
    while (sampling) {
      const rows = (
        await sampler
          .query<LeaseSample>(
            `SELECT d.webhook_id, d.endpoint_id, d.lease_owner, d.lease_lane, q.lane
             FROM deliveries d JOIN endpoint_queue q ON q.endpoint_id = d.endpoint_id
            WHERE d.lease_owner IS NOT NULL`,
          )
          .catch((err) => {
            samplerErrors.push(String(err));
            return { rows: [] as LeaseSample[] };
          })
      ).rows.map((r) => ({ ...r, pid: ownerPid(r.lease_owner) }));
      samples.push(...rows);
      const hotLane = await sampler
        .query<{ lane: string }>('SELECT lane FROM endpoint_queue WHERE endpoint_id = $1', [hotId])
        .catch(() => null);
      if (hotLane?.rows[0]?.lane.startsWith('dedicated:')) promotionSeen = true;
      if (!killed) {
        const drainingHeld = rows.filter(
          (r) => r.endpoint_id === hotId && r.lane !== r.lease_lane && r.pid === shared.pid,
        ).length;
        if (drainingHeld > 0) {
          killed = { at: performance.now(), drainingHeld };
          await shared.kill('SIGKILL');
        }
      }
      await sleep(10);
    }
  })();
  onTestFinished(async () => {
    sampling = false;
    await sampling$.catch(() => undefined);
    await sampler.end();
  });

  // Load: /hot at 40 events/s until promoted (and the kill has happened), calm events throughout.
  const stop = new AbortController();
  onTestFinished(() => stop.abort());
  const hotLoad = steadyEvents({
    target: () => base,
    producerKey,
    tenantId,
    run: 'lanes-hot',
    perSecond: 40,
    signal: stop.signal,
  });
  const calmSent: string[] = [];
  let calmRunning = true;
  const calmLoad = (async () => {
    for (let i = 0; calmRunning; i++) {
      // Idempotency-Key: a request that broke on a keep-alive race is simply sent again.
      for (let tries = 0; ; tries++) {
        try {
          const res = await http(base, {
            path: '/v1/events',
            token: producerKey,
            body: { tenant_id: tenantId, type: 'calm.tick', data: { i } },
            headers: { 'idempotency-key': `calm-${i}` },
          });
          expect([200, 202]).toContain(res.status);
          calmSent.push(res.body.id);
          break;
        } catch (err) {
          if (tries >= 5) throw err;
          await sleep(50);
        }
      }
      await sleep(100);
    }
  })();
  onTestFinished(async () => {
    calmRunning = false;
    await calmLoad.catch(() => undefined);
  });

  await waitUntil('the shared process killed mid-move', async () => killed !== null, {
    timeoutMs: 20_000,
    intervalMs: 20,
  }).catch(async (err) => {
    const seen = new Map<string, number>();
    for (const x of samples.filter((x) => x.endpoint_id === hotId)) {
      const k = `${x.pid === shared.pid ? 'shared' : x.pid}:${x.lease_lane}->${x.lane}`;
      seen.set(k, (seen.get(k) ?? 0) + 1);
    }
    throw new Error(
      `${err.message}; lane ${JSON.stringify(await lane())}; /hot requests ${heard.filter((h) => h.path === '/hot').length}; ` +
        `hot lease samples ${JSON.stringify([...seen])}; ${samples.length} samples; sampler errors ${samplerErrors}`,
    );
  });
  stop.abort();
  // Right after the kill: promoted, and the dead process's old-lane leases are the drain window. Read at once,
  // before waiting for the load's last requests: those leases expire 4 s after they were taken (then maintenance
  // returns them and `draining` falls to 0), and they were taken up to a hold (2.5 s) before the kill.
  const moved = await lane();
  expect(moved).toMatchObject({ id: `dedicated:${hotId}`, kind: 'dedicated', previous: homeLane });
  expect(moved.draining).toBeGreaterThan(0);
  const hotSent = await hotLoad;
  await sleep(300); // calm events pile up in their shared lanes while no shared process runs
  shared = await startDelivery('shared');

  // The drain window closes once the expired leases are returned and re-sent by the dedicated process; the
  // backlog drains and, after the dwell time, maintenance demotes the endpoint to its home lane.
  await waitUntil(
    'demoted back to its shared lane',
    async () => {
      const l = await lane();
      return l.id === homeLane && l.previous === `dedicated:${hotId}`;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  calmRunning = false;
  await calmLoad;

  // Everything accepted is delivered.
  expect(hotSent.filter((s) => s.status !== 202)).toEqual([]);
  const accepted = new Map<string, Set<string>>([['/hot', new Set(hotSent.map((s) => s.eventId!))]]);
  for (const path of CALM) accepted.set(path, new Set(calmSent));
  let all = new Map<string, DeliveryJson[]>();
  await waitUntil(
    'every delivery delivered',
    async () => {
      all = new Map();
      for (const [path, id] of endpoints) all.set(path, await listDeliveries(base, tenantKey, id));
      return [...all].every(
        ([path, ds]) => ds.length === accepted.get(path)!.size && ds.every((d) => d.status === 'delivered'),
      );
    },
    { timeoutMs: 20_000, intervalMs: 200 },
  );
  sampling = false;
  await sampling$;

  for (const [path, ds] of all) {
    expect(new Set(ds.map((d) => d.event_id))).toEqual(accepted.get(path));
    // Each delivery reached the receiver with its own webhook-id and a 2xx.
    const got = new Set(heard.filter((h) => h.path === path).map((h) => h.webhookId));
    expect(ds.filter((d) => !got.has(d.webhook_id)).map((d) => d.id)).toEqual([]);
  }
  // Never the same webhook-id in flight twice at once.
  expect(overlapping).toEqual([]);
  // Bound pools leased only their lanes, before, during and after the move.
  const strays = samples.filter((s) =>
    s.lease_lane?.startsWith('dedicated:') ? !pids.dedicated.has(s.pid) : !pids.shared.has(s.pid),
  );
  expect(strays.slice(0, 5)).toEqual([]);
  expect(samples.some((s) => s.lease_lane === `dedicated:${hotId}`)).toBe(true);
  expect(killed!.drainingHeld).toBeGreaterThan(0);
  // The killed process's hot deliveries were re-sent by the dedicated one (a request that died with its worker
  // may have reached the receiver too: at-least-once, same webhook-id, never overlapping).
  const hotRequests = heard.filter((h) => h.path === '/hot').length;
  expect(hotRequests).toBeGreaterThanOrEqual(accepted.get('/hot')!.size);
  // Nothing left leased or counted in flight.
  const state = await leaseState();
  expect(state.leased).toEqual([]);
  expect(state.inflight).toEqual([]);
  expect(await lane()).toMatchObject({ kind: 'shared', draining: 0 });
});
