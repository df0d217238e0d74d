/**
 * Delivery benchmark: how many delivery attempts per second Hookrail completes end to end (intake → fan-out →
 * lease → signed POST → attempt recorded) and how long an accepted event waits for its first attempt, against the
 * ceiling of a bare undici loop POSTing the same requests to the same receiver with the same concurrency.
 *
 *   npm run bench:delivery -- [--store sqlite|postgres] [--endpoints 100] [--events 50000]
 *                             [--concurrency 512] [--producer-concurrency 512] [--steady-events 2000]
 *                             [--steady-rate 200] [--warmup-events 500] [--data-bytes 1024] [--poll-ms <ms>]
 *                             [--drain-events 0] [--ceiling-runs 3] [--cpu-prof <dir>]
 *
 * One event = one delivery. Endpoint i subscribes to `bench.e<i>` only, and the producer cycles the event type
 * over `bench.e0 … bench.e<N-1>`, so `--events 50000` over `--endpoints 100` is 50,000 deliveries, 500 per endpoint.
 * (With `event_types: ['*']` every event would fan out to all N endpoints: 5,000,000 deliveries for the default
 * arguments, which is not a benchmark a 2-core machine finishes.)
 *
 * Processes (so that no load generator shares an event loop with what it measures): the receiver
 * (bench/delivery-receiver.ts), Hookrail (`node bin/hookrail.js start`, all roles, a fresh data directory or
 * PostgreSQL schema), the producer (bench/delivery-producer.ts, one run per phase) and the ceiling loop
 * (bench/delivery-ceiling.ts). Phases, each waiting until the receiver has every delivery of the phase:
 *
 *   1. warm-up: --warmup-events at --steady-rate (excluded from every number).
 *   2. below saturation: --steady-events at --steady-rate; ttfa percentiles → below_saturation_ttfa_*.
 *   3. bulk: --events sent as fast as intake answers them (--producer-concurrency in flight, 512 by default: with
 *      fewer, each request waits out a whole commit turn of the pipeline, and the producer's round trips, not
 *      Hookrail's capacity, set the rate — at 128, intake and delivery ran at the same rate with ttfa p50 ~40 ms,
 *      i.e. no backlog), so a backlog builds and the delivery plane runs flat out. The phase says which it was:
 *      deliveries drained after the producer finished, or delivery only keeping pace with intake.
 *      attempts_per_s = bulk deliveries / (last − first arrival of a bulk delivery at the receiver); ttfa_p50/p99
 *      are this phase's (saturated: they include the backlog wait).
 *   3b. drain (only with --drain-events N): Hookrail is restarted without the delivery role, accepts N events,
 *      and is restarted with all roles; drain_attempts_per_s is the rate at which the delivery plane alone (no
 *      intake competing for the process) empties that ready backlog, first → last arrival.
 *   4. Hookrail is stopped gracefully and the store checked: every delivery `delivered`, one attempt each.
 *   5. ceiling: a warm-up, then --events requests with min(--concurrency, endpoints × 10) in flight (Hookrail's
 *      effective concurrency: its worker cap and the default per-endpoint cap of 10); rate over the same receiver
 *      window; the best of --ceiling-runs runs (runs that another job skewed by > 10 % of the machine are repeated,
 *      up to twice as many runs in all). ratio = attempts_per_s / ceiling_attempts_per_s.
 *
 * Another job on the machine skews everything (a 2-core box has no spare core): each phase reports the CPU share
 * used by processes other than the benchmark's own, warns above 10 %, and bulk_foreign_cpu_share is in the result.
 *
 * ttfa (time to first attempt) = arrival of the first request for the event at the receiver − arrival of the 202
 * at the producer, both on the machine's monotonic clock (CLOCK_MONOTONIC, shared by all processes).
 *
 * Verified: the receiver saw exactly one distinct webhook-id per accepted event (none lost; duplicates, allowed by
 * at-least-once, are reported), and the store agrees. Progress goes to stderr; the last stdout line is one JSON
 * object. Exit code 1 when anything was lost, failed or did not finish.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import type { CeilingReport, CeilingSpec } from './delivery-ceiling.ts';
import type { ProduceReport, ProduceSpec } from './delivery-producer.ts';
import type { ReceiverStats } from './delivery-receiver.ts';
import {
  cpuMsOf,
  cpuShare,
  cpuSnapshot,
  cpuTimesOf,
  foreignShareSince,
  freshPgSchema,
  type MachineCpu,
  machineCpu,
  onCleanup,
  percentile,
  postJson,
  ROOT,
  round,
  runMain,
  runWorker,
  startServer,
  tcpLocalPortsOf,
  waitForIdle,
} from './support.ts';

const log = (msg: string) => process.stderr.write(`[bench:delivery] ${msg}\n`);
const ALL_ROLES = 'intake,control,fanout,delivery,replay,maintenance';
/** Hookrail's default per-endpoint in-flight cap (PRODUCT.md §6); the bench endpoints keep it. */
const PER_ENDPOINT_CAP = 10;
/** A phase fails when the receiver count has not moved for this long after the producer finished. */
const STALL_MS = 60_000;

// ---------------------------------------------------------------------------------------------- arguments

interface Options {
  store: 'sqlite' | 'postgres';
  endpoints: number;
  events: number;
  concurrency: number;
  producerConcurrency: number;
  steadyEvents: number;
  steadyRate: number;
  warmupEvents: number;
  drainEvents: number;
  ceilingRuns: number;
  dataBytes: number;
  pollMs: number | null;
  cpuProfDir: string | null;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      store: { type: 'string', default: 'sqlite' },
      endpoints: { type: 'string', default: '100' },
      events: { type: 'string', default: '50000' },
      concurrency: { type: 'string', default: '512' },
      'producer-concurrency': { type: 'string', default: '512' },
      'steady-events': { type: 'string', default: '2000' },
      'steady-rate': { type: 'string', default: '200' },
      'warmup-events': { type: 'string', default: '500' },
      'drain-events': { type: 'string', default: '0' },
      'ceiling-runs': { type: 'string', default: '3' },
      'data-bytes': { type: 'string', default: '1024' },
      'poll-ms': { type: 'string' },
      'cpu-prof': { type: 'string' },
    },
  });
  const int = (name: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}`);
    return n;
  };
  if (values.store !== 'sqlite' && values.store !== 'postgres') {
    throw new Error('--store must be sqlite or postgres');
  }
  return {
    store: values.store,
    endpoints: int('endpoints', values.endpoints, 1),
    events: int('events', values.events, 1),
    concurrency: int('concurrency', values.concurrency, 1),
    producerConcurrency: int('producer-concurrency', values['producer-concurrency'], 1),
    steadyEvents: int('steady-events', values['steady-events'], 0),
    steadyRate: int('steady-rate', values['steady-rate'], 1),
    warmupEvents: int('warmup-events', values['warmup-events'], 0),
    drainEvents: int('drain-events', values['drain-events'], 0),
    ceilingRuns: int('ceiling-runs', values['ceiling-runs'], 1),
    dataBytes: int('data-bytes', values['data-bytes'], 400),
    pollMs: values['poll-ms'] === undefined ? null : int('poll-ms', values['poll-ms'], 1),
    cpuProfDir: values['cpu-prof'] ? resolve(values['cpu-prof']) : null,
  };
}

// ---------------------------------------------------------------------------------------------- receiver

class ReceiverClient {
  constructor(readonly control: string) {}

  async stats(): Promise<ReceiverStats> {
    return (await fetch(`${this.control}/stats`)).json() as Promise<ReceiverStats>;
  }

  async arrivals(): Promise<Map<string, number>> {
    return new Map((await (await fetch(`${this.control}/arrivals`)).json()) as Array<[string, number]>);
  }

  async reset(): Promise<void> {
    await (await fetch(`${this.control}/reset`, { method: 'POST' })).arrayBuffer();
  }

  /** Until `distinct` webhook-ids arrived; fails when the count stops moving for STALL_MS. */
  async waitFor(distinct: number, what: string): Promise<ReceiverStats> {
    let last = await this.stats();
    let lastMove = Date.now();
    let lastLog = Date.now();
    let logged = last.distinctWebhookIds;
    while (last.distinctWebhookIds < distinct) {
      await new Promise((r) => setTimeout(r, 100));
      const s = await this.stats();
      if (s.distinctWebhookIds !== last.distinctWebhookIds) lastMove = Date.now();
      last = s;
      if (Date.now() - lastLog >= 5000) {
        const rate = ((s.distinctWebhookIds - logged) * 1000) / (Date.now() - lastLog);
        log(
          `${what}: ${s.distinctWebhookIds}/${distinct} delivered (${Math.round(rate)}/s over the last 5 s)`,
        );
        lastLog = Date.now();
        logged = s.distinctWebhookIds;
      }
      if (Date.now() - lastMove > STALL_MS) {
        throw new Error(
          `${what}: stalled at ${s.distinctWebhookIds}/${distinct} deliveries for ${STALL_MS / 1000} s`,
        );
      }
    }
    return last;
  }
}

// ---------------------------------------------------------------------------------------------- store checks

interface AttemptRow {
  eventId: string;
  eventAt: number;
  deliveryAt: number;
  startedAt: number;
  finishedAt: number;
}

interface StoreCheck {
  statuses: Record<string, number>;
  attempts: number;
  /** Per delivered event: accepted → fanned out → attempt started → finished (Hookrail's own clock). */
  rows: AttemptRow[];
}

const TIMELINE_SQL = `SELECT e.id AS event_id, e.created_at AS ev, d.created_at AS dl, a.started_at AS st,
    a.finished_at AS fin
  FROM attempts a JOIN deliveries d ON d.id = a.delivery_id JOIN events e ON e.id = d.event_id
  WHERE a.attempt_no = 1`;

interface StoreSetup {
  env: Record<string, string>;
  check(): Promise<StoreCheck>;
  /** Processes doing Hookrail's database work outside its own process: its PostgreSQL backends. */
  backendPids(hookrailPid: number | undefined): Promise<number[]>;
}

function sqliteSetup(dataDir: string): StoreSetup {
  return {
    env: { DATABASE_URL: '' },
    backendPids: async () => [],
    check: async () => {
      const db = new Database(join(dataDir, 'hookrail.db'), { readonly: true });
      try {
        const statuses = Object.fromEntries(
          (
            db.prepare('SELECT status, count(*) AS n FROM deliveries GROUP BY status').all() as Array<{
              status: string;
              n: number;
            }>
          ).map((r) => [r.status, r.n]),
        );
        const attempts = (db.prepare('SELECT count(*) AS n FROM attempts').get() as { n: number }).n;
        const rows = (db.prepare(TIMELINE_SQL).all() as Array<Record<string, number | string>>).map(toRow);
        return { statuses, attempts, rows };
      } finally {
        db.close();
      }
    },
  };
}

async function postgresSetup(): Promise<StoreSetup> {
  const { schema, url, admin } = await freshPgSchema('bench_delivery', log);
  return {
    env: { DATABASE_URL: url },
    // Hookrail's backends: those whose client port is one of the Hookrail process's sockets.
    backendPids: async (hookrailPid: number | undefined) => {
      const ports = tcpLocalPortsOf(hookrailPid);
      const rows = (
        await admin.query<{ pid: number; port: number | null }>(
          'SELECT pid, client_port AS port FROM pg_stat_activity WHERE pid <> pg_backend_pid()',
        )
      ).rows;
      return rows.filter((r) => r.port !== null && ports.has(r.port)).map((r) => r.pid);
    },
    check: async () => {
      await admin.query(`SET search_path TO "${schema}"`);
      const statuses = Object.fromEntries(
        (await admin.query('SELECT status, count(*) AS n FROM deliveries GROUP BY status')).rows.map((r) => [
          r.status as string,
          Number(r.n),
        ]),
      );
      const attempts = Number((await admin.query('SELECT count(*) AS n FROM attempts')).rows[0].n);
      const rows = (await admin.query(TIMELINE_SQL)).rows.map(toRow);
      await admin.query('SET search_path TO DEFAULT');
      return { statuses, attempts, rows };
    },
  };
}

const toRow = (r: Record<string, number | string>): AttemptRow => ({
  eventId: String(r.event_id),
  eventAt: Number(r.ev),
  deliveryAt: Number(r.dl),
  startedAt: Number(r.st),
  finishedAt: Number(r.fin),
});

// ---------------------------------------------------------------------------------------------- phases

interface PhaseResult {
  name: string;
  produce: ProduceReport;
  /** event id → 202 time (machine clock). */
  accepted: Map<string, number>;
  deliveries: number;
  lost: number;
  /** First and last arrival of this phase's deliveries at the receiver (machine clock). */
  firstArrival: number;
  lastArrival: number;
  attemptsPerS: number;
  ttfa: number[];
  hookrailCpuMs: number | null;
  machineBusy: number | null;
  machineSteal: number | null;
  /** CPU used on the machine by processes other than this benchmark's, as a share of all cores. */
  foreignShare: number | null;
}

interface Ctx {
  opts: Options;
  hookrail: { url: string; pid: number | undefined };
  receiver: ReceiverClient;
  receiverPid: number | undefined;
  backendPids: () => Promise<number[]>;
  tenantId: string;
  producerKey: string;
  types: string[];
  tmp: string;
  /** Distinct deliveries expected at the receiver once the previous phases are complete. */
  expectedSoFar: number;
}

async function runPhase(
  ctx: Ctx,
  name: string,
  count: number,
  ratePerS: number | null,
): Promise<PhaseResult> {
  const { opts } = ctx;
  const outFile = join(ctx.tmp, `${name}.json`);
  const spec: ProduceSpec = {
    origin: ctx.hookrail.url,
    producerKey: ctx.producerKey,
    tenantId: ctx.tenantId,
    types: ctx.types,
    count,
    concurrency: ratePerS === null ? opts.producerConcurrency : Math.max(opts.producerConcurrency, 256),
    ratePerS,
    dataBytes: opts.dataBytes,
    outFile,
  };
  log(
    `${name}: sending ${count} events ${ratePerS === null ? 'as fast as intake takes them' : `at ${ratePerS}/s`}`,
  );
  const backends0 = new Map((await ctx.backendPids()).map((pid) => [pid, cpuMsOf(pid) ?? 0]));
  const split0 = cpuTimesOf(ctx.hookrail.pid);
  const cpu0 = cpuMsOf(ctx.hookrail.pid);
  const rcpu0 = cpuMsOf(ctx.receiverPid);
  const self0 = process.cpuUsage();
  const m0 = machineCpu();
  const produce = await runWorker<ProduceReport>('bench/delivery-producer.ts', spec);
  log(
    `${name}: ${produce.accepted} × 202 in ${((produce.finishedAt - produce.startedAt) / 1000).toFixed(2)} s ` +
      `(${Math.round(produce.acceptedPerS)}/s; intake p50 ${produce.p50Ms.toFixed(1)} ms, p99 ` +
      `${produce.p99Ms.toFixed(1)} ms${ratePerS !== null ? `; schedule lag max ${produce.maxLagMs.toFixed(1)} ms` : ''})` +
      (produce.failed > 0 ? `; ${produce.failed} FAILED: ${produce.errors.join(' | ')}` : ''),
  );
  ctx.expectedSoFar += produce.accepted;
  await ctx.receiver.waitFor(ctx.expectedSoFar, name);
  const split1 = cpuTimesOf(ctx.hookrail.pid);
  const cpu1 = cpuMsOf(ctx.hookrail.pid);
  const rcpu1 = cpuMsOf(ctx.receiverPid);
  const self = process.cpuUsage(self0);
  const m1 = machineCpu();
  let backendMs = 0;
  for (const pid of new Set([...backends0.keys(), ...(await ctx.backendPids())])) {
    const now = cpuMsOf(pid);
    if (now !== null) backendMs += now - (backends0.get(pid) ?? 0);
  }
  let foreignShare: number | null = null;
  if (m0 && m1 && cpu0 !== null && cpu1 !== null && rcpu0 !== null && rcpu1 !== null) {
    const ours = cpu1 - cpu0 + backendMs + (rcpu1 - rcpu0) + produce.cpuMs + (self.user + self.system) / 1000;
    foreignShare = Math.max(0, (m1.busy - m0.busy - ours) / Math.max(1, m1.total - m0.total));
  }

  const accepted = new Map(JSON.parse(readFileSync(outFile, 'utf8')) as Array<[string, number]>);
  const arrivals = await ctx.receiver.arrivals();
  const ttfa: number[] = [];
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  let lost = 0;
  for (const [id, at202] of accepted) {
    const at = arrivals.get(id);
    if (at === undefined) {
      lost++;
      continue;
    }
    ttfa.push(at - at202);
    if (at < first) first = at;
    if (at > last) last = at;
  }
  ttfa.sort((a, b) => a - b);
  const deliveries = ttfa.length;
  const windowMs = Math.max(1, last - first);
  const r: PhaseResult = {
    name,
    produce,
    accepted,
    deliveries,
    lost,
    firstArrival: first,
    lastArrival: last,
    attemptsPerS: (deliveries * 1000) / windowMs,
    ttfa,
    hookrailCpuMs: cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null,
    machineBusy: m0 && m1 ? cpuShare(m0 as MachineCpu, m1 as MachineCpu, 'busy') : null,
    machineSteal: m0 && m1 ? cpuShare(m0 as MachineCpu, m1 as MachineCpu, 'steal') : null,
    foreignShare,
  };
  const phaseMs = last - produce.startedAt;
  log(
    `${name}: ${deliveries} delivered${lost ? `, ${lost} LOST` : ''}; ${Math.round(r.attemptsPerS)} attempts/s over ` +
      `${(windowMs / 1000).toFixed(2)} s (first → last arrival); ttfa p50 ${percentile(ttfa, 0.5).toFixed(1)} ms, ` +
      `p90 ${percentile(ttfa, 0.9).toFixed(1)} ms, p99 ${percentile(ttfa, 0.99).toFixed(1)} ms, ` +
      `max ${percentile(ttfa, 1).toFixed(1)} ms` +
      (r.hookrailCpuMs !== null
        ? `; hookrail CPU ${Math.round((100 * r.hookrailCpuMs) / phaseMs)}% of a core, ` +
          `${Math.round((r.hookrailCpuMs * 1000) / Math.max(1, deliveries))} µs per event (intake+delivery` +
          (split0 && split1
            ? `; ${Math.round((100 * (split1.system - split0.system)) / Math.max(1, r.hookrailCpuMs))}% of it in the kernel)`
            : ')') +
          (backendMs > 0
            ? `; its PostgreSQL backends ${Math.round((100 * backendMs) / phaseMs)}% of a core, ` +
              `${Math.round((backendMs * 1000) / Math.max(1, deliveries))} µs per event`
            : '')
        : '') +
      (r.machineBusy !== null
        ? `; machine ${Math.round(100 * r.machineBusy)}% busy (${Math.round(100 * (r.machineSteal ?? 0))}% stolen` +
          `, ${Math.round(100 * (foreignShare ?? 0))}% by other processes)`
        : ''),
  );
  const drained = ttfa.length
    ? [...accepted.keys()].filter((id) => (arrivals.get(id) ?? 0) > produce.finishedAt)
    : [];
  if (ratePerS === null && last > produce.finishedAt) {
    // A backlog left when the producer stops is what shows that delivery, not the producer, set the rate.
    log(
      `${name}: after the producer finished, ${drained.length} deliveries ` +
        `(${((100 * drained.length) / Math.max(1, deliveries)).toFixed(1)}%) drained at ` +
        `${Math.round((drained.length * 1000) / (last - produce.finishedAt))}/s (delivery plane alone)` +
        (drained.length < deliveries / 100
          ? ": delivery kept pace with intake, so the producer's requests in flight set this rate, not the " +
            'delivery plane (raise --producer-concurrency)'
          : ''),
    );
  }
  if (foreignShare !== null && foreignShare > 0.1) {
    log(
      `warning: ${name}: other processes used ${Math.round(100 * foreignShare)}% of the machine — results skewed`,
    );
  }
  return r;
}

/** Where the time to first attempt goes, from Hookrail's own records (its wall clock, ms). */
function describeTimeline(phase: PhaseResult, rows: AttemptRow[]): void {
  const mine = rows.filter((r) => phase.accepted.has(r.eventId));
  if (mine.length === 0) return;
  const part = (f: (r: AttemptRow) => number) => {
    const xs = mine.map(f).sort((a, b) => a - b);
    return `p50 ${percentile(xs, 0.5)} / p99 ${percentile(xs, 0.99)} ms`;
  };
  log(
    `${phase.name} timeline (hookrail clock): accepted → fanned out ${part((r) => r.deliveryAt - r.eventAt)}; ` +
      `fanned out → attempt started ${part((r) => r.startedAt - r.deliveryAt)}; ` +
      `attempt started → finished ${part((r) => r.finishedAt - r.startedAt)}`,
  );
}

// ---------------------------------------------------------------------------------------------- main

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const effectiveConcurrency = Math.min(opts.concurrency, opts.endpoints * PER_ENDPOINT_CAP);
  log(
    `store ${opts.store}, ${opts.endpoints} endpoints, ${opts.events} events (= deliveries: each event type ` +
      `addresses one endpoint), delivery concurrency ${opts.concurrency} (effective ${effectiveConcurrency}), ` +
      `warm-up ${opts.warmupEvents} + below-saturation ${opts.steadyEvents} events at ${opts.steadyRate}/s`,
  );
  const tmp = mkdtempSync(join(tmpdir(), 'hookrail-bench-delivery-'));
  onCleanup(() => rmSync(tmp, { recursive: true, force: true }));

  // 1. The receiver.
  const receiverServer = await startServer(
    'receiver',
    ['--import', 'tsx', join(ROOT, 'bench/delivery-receiver.ts')],
    process.env,
  );
  const control = /control (http:\/\/\S+)/.exec(receiverServer.banner)?.[1];
  if (!control) throw new Error(`receiver announced no control port: ${receiverServer.banner}`);
  const receiver = new ReceiverClient(control);
  log(`receiver on ${receiverServer.url} (control ${control})`);

  // 2. Hookrail, all roles, on a fresh store.
  const dataDir = join(tmp, 'data');
  const store = opts.store === 'postgres' ? await postgresSetup() : sqliteSetup(dataDir);
  const adminToken = `hka_${randomBytes(32).toString('base64url')}`;
  const startHookrail = (roles: string, profile: boolean) =>
    startServer(
      'hookrail',
      [
        ...(profile && opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : []),
        join(ROOT, 'bin/hookrail.js'),
        'start',
      ],
      {
        ...process.env,
        ...store.env,
        HOOKRAIL_ROLES: roles,
        HOOKRAIL_DATA_DIR: dataDir,
        HOOKRAIL_HOST: '127.0.0.1',
        HOOKRAIL_PORT: '0',
        HOOKRAIL_ADMIN_TOKEN: adminToken,
        HOOKRAIL_LOG_LEVEL: 'warn',
        HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8',
        HOOKRAIL_DELIVERY_CONCURRENCY: String(opts.concurrency),
        ...(opts.pollMs !== null ? { HOOKRAIL_POLL_MS: String(opts.pollMs) } : {}),
      },
    );
  let hookrailServer = await startHookrail(ALL_ROLES, true);
  log(`hookrail listening on ${hookrailServer.url}`);

  const tenant = await postJson<{ id: string; tenant_key: string }>(
    hookrailServer.url,
    adminToken,
    '/v1/tenants',
    {
      name: 'bench',
    },
  );
  const producer = await postJson<{ key: string }>(hookrailServer.url, adminToken, '/v1/producer-keys', {
    name: 'bench',
  });
  const types: string[] = [];
  const paths: string[] = [];
  for (let i = 0; i < opts.endpoints; i++) {
    types.push(`bench.e${i}`);
    paths.push(`/e${i}`);
    await postJson(hookrailServer.url, tenant.tenant_key, '/v1/endpoints', {
      url: `${receiverServer.url}/e${i}`,
      event_types: [`bench.e${i}`],
    });
  }
  log(`tenant ${tenant.id}, ${opts.endpoints} endpoints (bench.e<i> → ${receiverServer.url}/e<i>)`);

  const ctx: Ctx = {
    opts,
    hookrail: { url: hookrailServer.url, pid: hookrailServer.child.pid },
    receiver,
    receiverPid: receiverServer.child.pid,
    backendPids: () => store.backendPids(ctx.hookrail.pid),
    tenantId: tenant.id,
    producerKey: producer.key,
    types,
    tmp,
    expectedSoFar: 0,
  };

  // 3. Warm-up, below saturation, bulk.
  await waitForIdle('the warm-up', log);
  const phases: PhaseResult[] = [];
  if (opts.warmupEvents > 0) phases.push(await runPhase(ctx, 'warm-up', opts.warmupEvents, opts.steadyRate));
  const steady =
    opts.steadyEvents > 0
      ? await runPhase(ctx, 'below-saturation', opts.steadyEvents, opts.steadyRate)
      : null;
  if (steady) phases.push(steady);
  await waitForIdle('the bulk phase', log);
  const bulk = await runPhase(ctx, 'bulk', opts.events, null);
  phases.push(bulk);

  // 3b. Optional: the delivery plane alone. Accept --drain-events with the delivery role off, then start it and
  //     time the backlog drain (no intake competing for the process).
  let drain: { deliveries: number; attemptsPerS: number; ttfaLost: number } | null = null;
  if (opts.drainEvents > 0) {
    await hookrailServer.stop();
    hookrailServer = await startHookrail('intake,control,fanout,maintenance', false);
    ctx.hookrail = { url: hookrailServer.url, pid: hookrailServer.child.pid };
    log(`drain: hookrail restarted without the delivery role; accepting ${opts.drainEvents} events`);
    const outFile = join(tmp, 'drain.json');
    const produced = await runWorker<ProduceReport>('bench/delivery-producer.ts', {
      origin: hookrailServer.url,
      producerKey: producer.key,
      tenantId: tenant.id,
      types,
      count: opts.drainEvents,
      concurrency: opts.producerConcurrency,
      ratePerS: null,
      dataBytes: opts.dataBytes,
      outFile,
    } satisfies ProduceSpec);
    await hookrailServer.stop();
    await waitForIdle('the drain', log);
    hookrailServer = await startHookrail(ALL_ROLES, true);
    ctx.hookrail = { url: hookrailServer.url, pid: hookrailServer.child.pid };
    const cpu0 = cpuMsOf(hookrailServer.child.pid);
    const snap = cpuSnapshot([
      hookrailServer.child.pid,
      receiverServer.child.pid,
      ...(await store.backendPids(hookrailServer.child.pid)),
    ]);
    ctx.expectedSoFar += produced.accepted;
    await receiver.waitFor(ctx.expectedSoFar, 'drain');
    const cpu1 = cpuMsOf(hookrailServer.child.pid);
    const foreign = foreignShareSince(snap, 0);
    const ids = JSON.parse(readFileSync(outFile, 'utf8')) as Array<[string, number]>;
    const arrivals = await receiver.arrivals();
    let first = Number.POSITIVE_INFINITY;
    let last = Number.NEGATIVE_INFINITY;
    let n = 0;
    for (const [id] of ids) {
      const at = arrivals.get(id);
      if (at === undefined) continue;
      n++;
      first = Math.min(first, at);
      last = Math.max(last, at);
    }
    drain = { deliveries: n, attemptsPerS: (n * 1000) / Math.max(1, last - first), ttfaLost: ids.length - n };
    phases.push({
      name: 'drain',
      produce: produced,
      accepted: new Map(ids),
      deliveries: n,
      lost: ids.length - n,
      firstArrival: first,
      lastArrival: last,
      attemptsPerS: drain.attemptsPerS,
      ttfa: [],
      hookrailCpuMs: cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null,
      machineBusy: null,
      machineSteal: null,
      foreignShare: foreign,
    });
    log(
      `drain: ${n} deliveries of a ready backlog in ${((last - first) / 1000).toFixed(2)} s = ` +
        `${Math.round(drain.attemptsPerS)} attempts/s with the delivery plane alone` +
        (cpu0 !== null && cpu1 !== null
          ? `; hookrail ${Math.round(((cpu1 - cpu0) * 1000) / Math.max(1, n))} µs CPU per delivery (incl. start-up)`
          : '') +
        (foreign !== null ? `; ${Math.round(100 * foreign)}% of the machine used by other processes` : ''),
    );
    if (foreign !== null && foreign > 0.1) log('warning: drain: other processes skewed the result');
  }

  // 4. Everything accepted arrived, once per webhook-id; then the store's view after a graceful stop.
  const rstats = await receiver.stats();
  const totalAccepted = phases.reduce((a, p) => a + p.produce.accepted, 0);
  const totalFailed = phases.reduce((a, p) => a + p.produce.failed, 0);
  const totalLost = phases.reduce((a, p) => a + p.lost, 0);
  const receiverOk =
    rstats.distinctWebhookIds === totalAccepted && rstats.distinctEvents === totalAccepted && totalLost === 0;
  log(
    `verify receiver: ${totalAccepted} events accepted, ${rstats.requests} requests received, ` +
      `${rstats.distinctWebhookIds} distinct webhook-ids, ${rstats.distinctEvents} distinct events, ` +
      `${rstats.duplicates} duplicates, ${rstats.malformed} malformed, ${rstats.distinctPaths} paths: ` +
      `${receiverOk ? 'OK' : 'MISMATCH'}`,
  );
  const exitCode = await hookrailServer.stop();
  if (exitCode !== 0) log(`hookrail exited with code ${exitCode}`);
  const checked = await store.check();
  const storeOk = (checked.statuses.delivered ?? 0) === totalAccepted && checked.attempts === totalAccepted;
  log(
    `verify store: deliveries ${JSON.stringify(checked.statuses)}, ${checked.attempts} attempts: ` +
      `${storeOk ? 'OK' : 'MISMATCH'}`,
  );
  if (steady) describeTimeline(steady, checked.rows);
  describeTimeline(bulk, checked.rows);

  // 5. The ceiling: same receiver, same request shape, same concurrency, no Hookrail.
  await waitForIdle('the ceiling', log);
  const ceilingSpec: CeilingSpec = {
    origin: receiverServer.url,
    paths,
    types,
    count: opts.events,
    warmupCount: Math.min(opts.events, Math.max(2000, Math.floor(opts.events / 10))),
    concurrency: effectiveConcurrency,
    dataBytes: opts.dataBytes,
  };
  log(
    `ceiling: ${ceilingSpec.warmupCount} warm-up + ${opts.events} requests, ${effectiveConcurrency} in flight`,
  );
  // The best of --ceiling-runs runs: a ceiling is what the machine can do, and another job only ever lowers it.
  // Runs another job skewed (> 10 % of the machine) do not count towards --ceiling-runs; at most twice as many runs.
  let ceilingPerS = 0;
  let ceilingForeign: number | null = null;
  let ceilingOk = true;
  let cleanRuns = 0;
  for (let run = 1; cleanRuns < opts.ceilingRuns && run <= 2 * opts.ceilingRuns; run++) {
    await receiver.reset();
    if (run > 1) await waitForIdle(`ceiling run ${run}`, log);
    const snap = cpuSnapshot([receiverServer.child.pid]);
    const ceiling = await runWorker<CeilingReport>('bench/delivery-ceiling.ts', ceilingSpec);
    const foreign = foreignShareSince(snap, ceiling.cpuMs);
    const carr = await receiver.arrivals();
    let cFirst = Number.POSITIVE_INFINITY;
    let cLast = Number.NEGATIVE_INFINITY;
    let cCount = 0;
    for (const [id, at] of carr) {
      if (!id.startsWith('evt_ceil')) continue;
      cCount++;
      if (at < cFirst) cFirst = at;
      if (at > cLast) cLast = at;
    }
    const perS = (cCount * 1000) / Math.max(1, cLast - cFirst);
    log(
      `ceiling run ${run}: ${ceiling.ok} ok, ${ceiling.failed} failed; ${cCount} at the receiver; ` +
        `${Math.round(perS)} attempts/s over the receiver window (${Math.round(ceiling.attemptsPerS)}/s as the ` +
        `client saw it)` +
        (foreign !== null ? `; ${Math.round(100 * foreign)}% of the machine used by other processes` : ''),
    );
    if (ceiling.failed > 0 || cCount !== opts.events) ceilingOk = false;
    if (foreign === null || foreign <= 0.1) cleanRuns++;
    if (perS > ceilingPerS) {
      ceilingPerS = perS;
      ceilingForeign = foreign;
    }
  }
  await receiverServer.stop();

  // 6. The result line.
  const ratio = ceilingPerS > 0 ? bulk.attemptsPerS / ceilingPerS : 0;
  const ms = (xs: number[], q: number) => (xs.length ? round(percentile(xs, q), 1) : null);
  const result = {
    bench: 'delivery',
    store: opts.store,
    endpoints: opts.endpoints,
    events: opts.events,
    attempts_per_s: Math.round(bulk.attemptsPerS),
    ttfa_p50_ms: ms(bulk.ttfa, 0.5),
    ttfa_p99_ms: ms(bulk.ttfa, 0.99),
    ceiling_attempts_per_s: Math.round(ceilingPerS),
    ratio: round(ratio, 3),
    below_saturation_ttfa_p99_ms: steady ? ms(steady.ttfa, 0.99) : null,
    below_saturation_ttfa_p50_ms: steady ? ms(steady.ttfa, 0.5) : null,
    below_saturation_rate: opts.steadyRate,
    drain_attempts_per_s: drain ? Math.round(drain.attemptsPerS) : null,
    bulk_foreign_cpu_share: bulk.foreignShare === null ? null : round(bulk.foreignShare, 2),
    ceiling_foreign_cpu_share: ceilingForeign === null ? null : round(ceilingForeign, 2),
    deliveries: totalAccepted,
    lost: totalLost,
    duplicates: rstats.duplicates,
  };
  const target = opts.store === 'sqlite' ? { ratio: 0.3, p99: 250 } : { ratio: 0.2, p99: null };
  // On the unrounded values: a ratio of 0.2997 prints as 0.3 but does not meet 0.3.
  const steadyP99 = steady?.ttfa.length ? percentile(steady.ttfa, 0.99) : Number.POSITIVE_INFINITY;
  const met = ratio >= target.ratio && (target.p99 === null || steadyP99 <= target.p99);
  log(
    `target (${opts.store}): ratio >= ${target.ratio} (measured ${ratio.toFixed(4)})` +
      `${target.p99 !== null ? `, below-saturation ttfa p99 <= ${target.p99} ms` : ''} → ${met ? 'met' : 'MISSED'}`,
  );
  process.stdout.write(`${JSON.stringify(result)}\n`);
  if (!ceilingOk) log('warning: the ceiling loop did not complete every request');
  return receiverOk && storeOk && totalFailed === 0 && ceilingOk ? 0 : 1;
}

runMain(main, log);
