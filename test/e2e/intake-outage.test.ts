/**
 * PRODUCT.md §2/§6 and issue 2: while PostgreSQL is unreachable, intake answers 503 `store_unavailable` with
 * Retry-After — quickly, never a hang — and /readyz answers 503; when the database comes back the same process
 * recovers by itself (no restart), and every event answered 202 before, during or after the outage is readable.
 *
 * The child talks to PostgreSQL through a TCP relay (test/support/tcp-relay.ts) that the test cuts (every connection
 * destroyed, new ones refused) and restores on the same port — or, in the second test, partitions (bytes stop
 * flowing, nothing is closed) and heals.
 */
import { describe, expect, it } from 'vitest';
import {
  createChildSchema,
  spawnHookrail,
  tempDir,
  useCleanups,
  useHookrailProcesses,
  withSearchPath,
} from '../support/hookrail-process.ts';
import {
  errorCode,
  findUnreadable,
  http,
  runLoad,
  type SendRecord,
  setupTenant,
  sleep,
  tally,
  waitUntil,
} from '../support/intake-load.ts';
import { postgresUrl } from '../support/postgres.ts';
import { postgresRelay } from '../support/tcp-relay.ts';

useHookrailProcesses();

const ADMIN_TOKEN = 'hka_e2e_outage_operator_token';
/** Longer than the auth/tenant caches (5 s), so the outage also hits the authentication lookups. */
const OUTAGE_MS = 6_000;
/** What "quickly" means for an answer while the database is down (the pool's connect timeout is 2 s). */
const FAST_MS = 5_000;

const cleanups = useCleanups();

/**
 * Hookrail (intake,control) whose DATABASE_URL points at a relay in front of the test PostgreSQL, in a fresh schema,
 * with a tenant and a producer key.
 */
async function startBehindRelay(label: string) {
  const { relay, url: viaRelay } = await postgresRelay(postgresUrl());
  cleanups.push(() => relay.stop());
  const pgSchema = await createChildSchema(postgresUrl(), label);
  cleanups.push(pgSchema.drop);
  const dataDir = tempDir(cleanups, label);
  const proc = await spawnHookrail({
    env: {
      HOOKRAIL_ROLES: 'intake,control',
      HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
      HOOKRAIL_DATA_DIR: dataDir,
      DATABASE_URL: withSearchPath(viaRelay, pgSchema.schema),
    },
  });
  const { tenantId, producerKey } = await setupTenant(proc.url, ADMIN_TOKEN);
  const post = (label: string, timeoutMs = 15_000) =>
    http(proc.url, {
      path: '/v1/events',
      token: producerKey,
      body: { tenant_id: tenantId, type: 'load.test', data: { seq: -1, run: label } },
      timeoutMs,
    });
  const readyz = (timeoutMs = 15_000) => http(proc.url, { path: '/readyz', timeoutMs });
  const startLoad = (signal: AbortSignal, run: string) =>
    runLoad({
      targets: [proc.url],
      producerKey,
      tenantId,
      concurrency: 8,
      run,
      signal,
      backoffMs: 100,
      timeoutMs: 15_000,
    });
  return { relay, proc, tenantId, producerKey, post, readyz, startLoad };
}

type Probe = {
  what: string;
  status: number;
  ms: number;
  code?: string;
  retryAfter?: unknown;
  /** performance.now() when the answer arrived. */
  endedAt?: number;
};

/**
 * POST /v1/events and /readyz side by side, every 250 ms until `untilMs` after `since`: what a client sees during
 * the outage. A probe that gets no answer within 10 s is recorded as a hang (status 0), not thrown.
 */
async function probeDuring(h: Awaited<ReturnType<typeof startBehindRelay>>, since: number, untilMs: number) {
  const probes: Probe[] = [];
  const hang = (what: string, started: number) => (err: unknown) =>
    ({ what, status: 0, ms: Math.round(performance.now() - started), code: errorCode(err) }) as Probe;
  while (performance.now() - since < untilMs) {
    const started = performance.now();
    const [p, r] = await Promise.all([
      h.post('during', 10_000).then(
        (p): Probe => ({
          what: 'POST /v1/events',
          status: p.status,
          ms: Math.round(p.ms),
          code: p.body?.error?.code,
          retryAfter: p.headers['retry-after'],
          endedAt: performance.now(),
        }),
        hang('POST /v1/events', started),
      ),
      h.readyz(10_000).then(
        (r): Probe => ({
          what: 'GET /readyz',
          status: r.status,
          ms: Math.round(r.ms),
          code: r.body?.reason,
          retryAfter: r.headers['retry-after'],
        }),
        hang('GET /readyz', started),
      ),
    ]);
    probes.push(p, r);
    await sleep(250);
  }
  return probes;
}

/**
 * Every probe a quick 503 with Retry-After and code (readiness: reason) store_unavailable. An event that was still being
 * committed when the network healed may legitimately be accepted: a 202 answered after `healedAt` is fine.
 */
function expectFast503s(probes: Probe[], healedAt = Number.POSITIVE_INFINITY): void {
  expect(probes.length).toBeGreaterThan(0);
  const wrong = probes.filter(
    (p) =>
      !(p.status === 202 && p.what === 'POST /v1/events' && (p.endedAt ?? 0) >= healedAt && p.ms < FAST_MS) &&
      (p.status !== 503 ||
        p.ms >= FAST_MS ||
        !(Number(p.retryAfter) > 0) ||
        // Readiness names the condition only: the driver's message (an address, a user) stays in the log.
        p.code !== 'store_unavailable'),
  );
  expect(
    wrong,
    `answers while the database was unreachable (want 503 + Retry-After within ${FAST_MS} ms)`,
  ).toEqual([]);
}

/**
 * Waits until intake and readiness are back, stops the load and checks its records: only 202 and 503
 * store_unavailable (with Retry-After), nothing slow, only 202 after recovery, and every 202 readable.
 */
async function recoverAndVerify(
  h: Awaited<ReturnType<typeof startBehindRelay>>,
  load: { stop: AbortController; records: Promise<SendRecord[]> },
  times: { downAt: number; backAt: number },
) {
  const recoveredMs = await waitUntil(
    'POST /v1/events answers 202 again',
    async () => (await h.post('after')).status === 202,
    {
      timeoutMs: 10_000,
      intervalMs: 100,
    },
  );
  await waitUntil('/readyz answers 200 again', async () => (await h.readyz()).status === 200, {
    timeoutMs: 10_000,
  });
  await sleep(1_000);
  load.stop.abort();
  const records = await load.records;
  expect(h.proc.running, h.proc.output()).toBe(true);

  const recoveredAt = times.backAt + recoveredMs;
  const phases = { before: [] as SendRecord[], outage: [] as SendRecord[], after: [] as SendRecord[] };
  for (const r of records) {
    phases[r.endedAt < times.downAt ? 'before' : r.startedAt >= recoveredAt ? 'after' : 'outage'].push(r);
  }
  const odd = records.filter(
    (r) =>
      !(
        r.status === 202 ||
        (r.status === 503 && (r.body as any)?.error?.code === 'store_unavailable' && Number(r.retryAfter) > 0)
      ),
  );
  expect(odd.map((r) => ({ status: r.status, error: r.errorCode, body: r.body, ra: r.retryAfter }))).toEqual(
    [],
  );
  const slowest = Math.max(...records.map((r) => r.endedAt - r.startedAt));
  expect(slowest, 'slowest request during the whole run (ms)').toBeLessThan(FAST_MS);
  expect(phases.before.length).toBeGreaterThan(0);
  expect(tally(phases.before)).toEqual({ 202: phases.before.length });
  expect(phases.after.length).toBeGreaterThan(0);
  expect(tally(phases.after)).toEqual({ 202: phases.after.length });

  // Every 202 — before, during (answered just before the outage bit) and after — is readable.
  const accepted = records.filter((r) => r.status === 202);
  const missing = await findUnreadable(h.proc.url, ADMIN_TOKEN, accepted, { tenantId: h.tenantId });
  expect(missing.slice(0, 5), `${missing.length} of ${accepted.length} unreadable`).toEqual([]);
  expect((await h.proc.kill('SIGTERM')).code).toBe(0);
  return {
    summary:
      `recovered ${Math.round(recoveredMs)} ms after the database came back; slowest request ${Math.round(slowest)} ms; ` +
      `load before ${JSON.stringify(tally(phases.before))}, during ${JSON.stringify(tally(phases.outage))}, ` +
      `after ${JSON.stringify(tally(phases.after))}; ${accepted.length} accepted, all readable`,
  };
}

function backgroundLoad(h: Awaited<ReturnType<typeof startBehindRelay>>, run: string) {
  const stop = new AbortController();
  return { stop, records: h.startLoad(stop.signal, run) };
}

describe('PostgreSQL outage under intake load', () => {
  it('database gone (connections cut, new ones refused): 503 + Retry-After at once, recovery without a restart', {
    timeout: 60_000,
  }, async () => {
    const h = await startBehindRelay('outage');
    expect((await h.readyz()).status).toBe(200);
    expect((await h.post('before')).status).toBe(202);
    const load = backgroundLoad(h, 'outage');
    await sleep(500);

    const downAt = performance.now();
    await h.relay.stop();
    const firstDown = await waitUntil(
      'POST /v1/events answers 503 after the cut',
      async () => (await h.post('probe')).status === 503,
      {
        timeoutMs: FAST_MS,
        intervalMs: 50,
      },
    );
    const probes = await probeDuring(h, downAt, OUTAGE_MS);
    expectFast503s(probes);

    const backAt = performance.now();
    await h.relay.start();
    const { summary } = await recoverAndVerify(h, load, { downAt, backAt });
    console.log(
      `[intake-outage cut] first 503 ${Math.round(firstDown)} ms after the cut; probes during the outage: ` +
        `${probes.length}, slowest ${Math.max(...probes.map((p) => p.ms))} ms; ${summary}`,
    );
  });

  /**
   * A partition (bytes stop flowing, nothing is refused): statements on pooled connections hit the 3 s query
   * timeout and fail as unavailable (those connections are destroyed), queued commits fail with them, so intake
   * answers 503 with Retry-After within seconds and recovers once the network heals.
   */
  it('network partition (bytes stop, nothing refused): 503 + Retry-After within seconds, recovery after it heals', {
    timeout: 60_000,
  }, async () => {
    const h = await startBehindRelay('partition');
    const load = backgroundLoad(h, 'partition');
    await sleep(500);

    const downAt = performance.now();
    h.relay.partition();
    // Heals on a timer, whether or not the probes are answered meanwhile.
    let backAt = 0;
    const healed = sleep(OUTAGE_MS).then(() => {
      backAt = performance.now();
      h.relay.heal();
    });
    const probes = await probeDuring(h, downAt, OUTAGE_MS - 500);
    await healed;
    expectFast503s(probes, backAt);
    const { summary } = await recoverAndVerify(h, load, { downAt, backAt });
    console.log(`[intake-outage partition] ${summary}`);
  });
});
