/**
 * Scale benchmark: does leasing cost grow with the backlog or the number of endpoints? 40,000 registered endpoints
 * and a backlog of up to 1,000,000 pending deliveries; the real `store.deliveryLease` is measured with 1 %, 10 %
 * and 100 % of that backlog in the store.
 *
 *   npm run bench:scale -- [--store postgres|sqlite] [--endpoints 40000] [--backlog 1000000] [--batch 256]
 *                          [--seconds 10] [--rounds 3] [--warmup-seconds 2] [--per-endpoint 10]
 *                          [--per-tenant 4] [--data-bytes 1024]
 *
 * Three stores, one per size (PostgreSQL: three schemas; SQLite: three files), so the sizes can be measured in
 * alternation: on a shared 2-core machine another job's load drifts, and measuring 1 % now and 100 % ten minutes
 * later would compare two different machines. The tenants and endpoints (`--per-tenant` to a tenant, each
 * subscribed to an event type of its own) are created through the store's own tenantCreate and endpointCreate in
 * the first store and copied as they are into the other two. The backlogs are written set-based
 * (bench/scale-populate.ts), one event per delivery, as fan-out makes them, and checked against the store's read
 * methods and a delivery the product's own fan-out made. Every endpoint with work has the same depth, backlog ÷
 * endpoints (25 by default), and a larger backlog gives more endpoints work: 400 endpoints at 1 %, 4,000 at 10 %,
 * all 40,000 at 100 %. So the backlog and the number of endpoints with due work both grow 100-fold, while all
 * 40,000 endpoints exist at every size.
 *
 * Measurement: `--rounds` rounds, each a window of `--seconds` per size (after `--warmup-seconds` of the same),
 * the order rotating from round to round. Before every window the store gets what a production one has between
 * bursts (PostgreSQL: VACUUM ANALYZE, which the benchmark server's disabled autovacuum would otherwise never do,
 * and a CHECKPOINT; SQLite: a WAL checkpoint). A window runs cycles of
 *   1. `deliveryLease({limit: --batch, perEndpoint: --per-endpoint})`, the delivery worker's call (its default
 *      concurrency is 512; it leases what is free, at most 10 per endpoint) — timed, with the CPU time this
 *      process and its PostgreSQL backends spent in it;
 *   2. `deliveryComplete` of everything leased, as delivered, with the attempt record a worker writes — timed
 *      separately; it releases the in-flight slots, as the worker does, so the caps never stall leasing;
 *   3. a refill, untimed: one new event per leased delivery (same tenant, same type) through `eventInsertBatch`
 *      and `fanoutRun`, the product's intake and fan-out, so the backlog and every endpoint's depth stay constant
 *      (checked by counting at the end).
 * lease_per_s = deliveries leased ÷ time inside deliveryLease, over all rounds; lease_p50_ms/p99 per call;
 * cycle_per_s = leased ÷ (lease + completion time); lease_cpu_us_per_delivery = CPU per leased delivery, which
 * another job's load inflates less than wall time. ratio = lease_per_s at 100 % ÷ at 1 % (target ≥ 0.8);
 * ratio_rounds = the same per round; cpu_ratio = CPU per delivery at 1 % ÷ at 100 %.
 *
 * One client, one call at a time: this measures what a lease call costs, not contention between workers. Each
 * round waits for an idle machine, and every window reports the share of the machine other processes used
 * (foreign_cpu_share_*: anything but this process and its PostgreSQL backends).
 *
 * PostgreSQL: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), schemas of its own, dropped at the
 * end. SQLite: a temporary directory. Progress on stderr, one JSON line on stdout; exit code 1 when a check
 * failed or leasing stalled.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createPostgresStore } from '../src/adapters/postgres/postgres-store.ts';
import { createSqliteStore } from '../src/adapters/sqlite/sqlite-store.ts';
import type { AttemptCompletion, LeasedDelivery } from '../src/ports/delivery-store.ts';
import type { NewEvent, Store } from '../src/ports/store.ts';
import {
  type BacklogItem,
  buildFixture,
  checkBacklogShape,
  checkFixture,
  createFixture,
  type Fixture,
  idFactory,
  type Populator,
  postgresPopulator,
  referenceDelivery,
  sqliteCopy,
  sqlitePopulator,
} from './scale-populate.ts';
import {
  DEFAULT_PG_URL,
  eventData,
  freshPgSchema,
  machineCpu,
  onCleanup,
  percentile,
  round,
  runMain,
  waitForIdle,
} from './support.ts';

const log = (msg: string) => process.stderr.write(`[bench:scale] ${msg}\n`);
const SIZES = [
  { name: 'small', share: 0.01 },
  { name: 'mid', share: 0.1 },
  { name: 'full', share: 1 },
] as const;
const LEASE_MS = 60_000;
const HOUR = 3_600_000;

interface Options {
  store: 'postgres' | 'sqlite';
  endpoints: number;
  backlog: number;
  batch: number;
  seconds: number;
  rounds: number;
  warmupSeconds: number;
  perEndpoint: number;
  perTenant: number;
  dataBytes: number;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      store: { type: 'string', default: 'postgres' },
      endpoints: { type: 'string', default: '40000' },
      backlog: { type: 'string', default: '1000000' },
      batch: { type: 'string', default: '256' },
      seconds: { type: 'string', default: '10' },
      rounds: { type: 'string', default: '3' },
      'warmup-seconds': { type: 'string', default: '2' },
      'per-endpoint': { type: 'string', default: '10' },
      'per-tenant': { type: 'string', default: '4' },
      'data-bytes': { type: 'string', default: '1024' },
    },
  });
  const num = (name: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min}`);
    return n;
  };
  const int = (name: string, v: string, min: number) => {
    const n = num(name, v, min);
    if (!Number.isInteger(n)) throw new Error(`--${name} must be an integer`);
    return n;
  };
  if (values.store !== 'postgres' && values.store !== 'sqlite')
    throw new Error('--store: postgres or sqlite');
  return {
    store: values.store,
    endpoints: int('endpoints', values.endpoints, 1),
    backlog: int('backlog', values.backlog, 100),
    batch: int('batch', values.batch, 1),
    seconds: num('seconds', values.seconds, 0.1),
    rounds: int('rounds', values.rounds, 1),
    warmupSeconds: num('warmup-seconds', values['warmup-seconds'], 0),
    perEndpoint: int('per-endpoint', values['per-endpoint'], 1),
    perTenant: int('per-tenant', values['per-tenant'], 1),
    dataBytes: int('data-bytes', values['data-bytes'], 100),
  };
}

// ---------------------------------------------------------------------------------------------- setup

interface Target {
  store: Store;
  pop: Populator;
}

/** One store per size, each with the fixture's tenants and endpoints, created in the first and copied. */
async function openStores(opts: Options, fx: Fixture): Promise<Target[]> {
  const parallel = opts.store === 'postgres' ? 8 : 1;
  if (opts.store === 'postgres') {
    const baseUrl = process.env.DATABASE_URL || DEFAULT_PG_URL;
    const targets: Array<Target & { schema: string; copy(from: string): Promise<void> }> = [];
    for (const _ of SIZES) {
      const { schema, url } = await freshPgSchema('bench_scale', log);
      const store = createPostgresStore({ connectionString: baseUrl, schema, queryTimeoutMs: 60_000 });
      // Registered after the schema's own cleanup, so it runs first: the pool ends before the schema is dropped.
      onCleanup(() => store.close());
      await store.migrate();
      const pop = await postgresPopulator(url);
      onCleanup(() => pop.close());
      targets.push({ store, pop, schema, copy: (from) => pop.copyRegistrations(from) });
    }
    await createFixture(targets[0]!.store, fx, parallel, log);
    for (const t of targets.slice(1)) await t.copy(targets[0]!.schema);
    return targets;
  }
  const dir = mkdtempSync(join(tmpdir(), 'hookrail-scale-'));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const files = SIZES.map((s) => join(dir, `${s.name}.db`));
  const first = createSqliteStore({ filename: files[0]! });
  await first.migrate();
  await createFixture(first, fx, parallel, log);
  await first.close();
  for (const f of files.slice(1)) sqliteCopy(files[0]!, f);
  log(`sqlite databases in ${dir}`);
  return Promise.all(
    files.map(async (filename) => {
      const store = createSqliteStore({ filename });
      onCleanup(() => store.close());
      await store.migrate();
      const pop = sqlitePopulator(filename);
      onCleanup(() => pop.close());
      return { store, pop };
    }),
  );
}

// ---------------------------------------------------------------------------------------------- measuring

/**
 * CPU time (ms) so far of this process (key 0, getrusage) and of `pids` (its PostgreSQL backends), from
 * /proc/<pid>/schedstat: nanosecond run time, where /proc/<pid>/stat counts 10 ms ticks. A pid that is gone is
 * absent (an idle pool connection closes after 30 s).
 */
function cpuSample(pids: number[]): Map<number, number> {
  const self = process.cpuUsage();
  const out = new Map([[0, (self.user + self.system) / 1000]]);
  for (const pid of pids) {
    try {
      out.set(pid, Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6);
    } catch {
      // exited, or not Linux
    }
  }
  return out;
}

/** CPU (ms) used between two samples by the processes present in both. */
function cpuSince(a: Map<number, number>, b: Map<number, number>): number {
  let ms = 0;
  for (const [pid, v] of b) ms += v - (a.get(pid) ?? v);
  return ms;
}

interface Window {
  leased: number;
  calls: number;
  leaseS: number;
  /** CPU used by this process and its database backends inside deliveryLease. */
  leaseCpuMs: number;
  completeS: number;
  refillS: number;
  latenciesMs: number[];
  foreign: number | null;
}

/** What the worker records for a successful attempt (deliver-attempt.ts), with a plausible 204 answer. */
function completionFor(l: LeasedDelivery, at: number, owner: string, id: ReturnType<typeof idFactory>) {
  const c: AttemptCompletion = {
    leaseOwner: owner,
    next: { status: 'delivered' },
    attempt: {
      id: id('attempt', at),
      deliveryId: l.delivery.id,
      endpointId: l.endpoint.id,
      tenantId: l.endpoint.tenantId,
      eventId: l.delivery.eventId,
      attemptNo: l.delivery.attempts + 1,
      url: l.endpoint.url,
      dueAt: l.delivery.nextAttemptAt ?? at,
      startedAt: at,
      finishedAt: at + 40,
      outcome: 'delivered',
      statusCode: 204,
      errorClass: null,
      errorMessage: null,
      request: {
        hops: [
          {
            url: l.endpoint.url,
            headers: {
              'content-type': 'application/json',
              'user-agent': 'Hookrail/0.1.0',
              'webhook-id': l.delivery.webhookId,
              'webhook-timestamp': String(Math.floor(at / 1000)),
              'webhook-signature': `v1,${randomBytes(32).toString('base64')}`,
            },
            status: 204,
          },
        ],
      },
      responseHeaders: { date: new Date(at).toUTCString(), connection: 'keep-alive' },
      responseBody: null,
      queueMs: Math.max(0, at - (l.delivery.nextAttemptAt ?? at)),
      platformMs: 2,
      consumerMs: 38,
    },
  };
  return c;
}

async function runWindow(
  store: Store,
  pop: Populator,
  opts: Options,
  seconds: number,
  data: string,
): Promise<Window> {
  const owner = `bench-scale:${process.pid}`;
  const id = idFactory();
  const ids = { delivery: () => id('delivery', Date.now()), webhookId: () => id('message', Date.now()) };
  const notification = { notification: () => id('notification', Date.now()) };
  const w: Window = {
    leased: 0,
    calls: 0,
    leaseS: 0,
    leaseCpuMs: 0,
    completeS: 0,
    refillS: 0,
    latenciesMs: [],
    foreign: null,
  };
  // The pool's connections are open after the warm-up; one opened later is counted from the next refresh on.
  let pids = await pop.backendPids();
  const machine0 = machineCpu();
  const ours0 = cpuSample(pids);
  const deadline = performance.now() + seconds * 1000;
  let serial = 0;
  while (performance.now() < deadline) {
    const c0 = cpuSample(pids);
    const t0 = performance.now();
    const now = Date.now();
    const leased = await store.deliveryLease({
      owner,
      now,
      limit: opts.batch,
      perEndpoint: opts.perEndpoint,
      leaseMs: LEASE_MS,
    });
    const t1 = performance.now();
    w.leaseCpuMs += cpuSince(c0, cpuSample(pids));
    if (leased.length === 0) throw new Error('deliveryLease returned nothing with a full backlog');
    if (leased.some((l) => l.mode !== 'send')) throw new Error('a lease came back other than `send`');
    const done = Date.now();
    const completions = leased.map((l) => completionFor(l, now, owner, id));
    const t2 = performance.now();
    await store.deliveryComplete({ completions, now: done, ids: notification });
    const t3 = performance.now();
    const events: NewEvent[] = leased.map((l) => ({
      id: id('event', done),
      tenantId: l.endpoint.tenantId,
      type: l.delivery.eventType,
      resourceId: null,
      data: `{"r":${++serial},${data.slice(1)}`,
      idempotencyKey: null,
      requestHash: null,
      createdAt: done,
    }));
    await store.eventInsertBatch({ events, now: done, idempotencyWindowMs: 24 * HOUR });
    let fanned = 0;
    while (fanned < events.length) {
      const r = await store.fanoutRun({ now: Date.now(), limit: 256, ids });
      if (r.events === 0) throw new Error('fan-out of the refill stalled');
      fanned += r.events;
    }
    w.refillS += (performance.now() - t3) / 1000;
    w.leased += leased.length;
    w.calls++;
    w.leaseS += (t1 - t0) / 1000;
    w.completeS += (t3 - t2) / 1000;
    w.latenciesMs.push(t1 - t0);
    if (w.calls % 50 === 0) pids = await pop.backendPids();
  }
  // Another job's share of the machine: busy time that neither this process nor its backends account for.
  const machine1 = machineCpu();
  if (machine0 && machine1) {
    const busy = machine1.busy - machine0.busy - cpuSince(ours0, cpuSample(pids));
    w.foreign = Math.max(0, busy / Math.max(1, machine1.total - machine0.total));
  }
  return w;
}

interface SizeResult {
  name: string;
  backlog: number;
  endpointsWithWork: number;
  windows: Window[];
}

const leasePerS = (ws: Window[]) => sum(ws, (w) => w.leased) / sum(ws, (w) => w.leaseS);
const sum = (ws: Window[], f: (w: Window) => number) => ws.reduce((a, w) => a + f(w), 0);

// ---------------------------------------------------------------------------------------------- main

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const data = JSON.stringify(eventData(opts.dataBytes));
  const t0 = Date.now();
  const fx = buildFixture(opts.endpoints, opts.perTenant, t0 - 2 * HOUR);
  const targets = await openStores(opts, fx);
  for (const t of targets) await checkFixture(t.store, fx, Date.now());
  log(
    `${fx.tenants.length} tenants, ${fx.endpoints.length} endpoints in each of ${targets.length} stores in ` +
      `${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );

  // Every endpoint with work holds `depth` deliveries; a larger backlog gives more endpoints work.
  const depth = Math.max(1, Math.round(opts.backlog / opts.endpoints));
  const first = fx.endpoints[0]!;
  const results: SizeResult[] = [];
  for (const [i, size] of SIZES.entries()) {
    const { store, pop } = targets[i]!;
    const backlog = Math.round(opts.backlog * size.share);
    const withWork = Math.min(opts.endpoints, Math.ceil(backlog / depth));
    const referenceId = i === 0 ? await referenceDelivery(store, first, data) : null;
    const items: BacklogItem[] = [];
    for (let e = 0; e < withWork; e++) {
      const want = e < withWork - 1 ? depth : backlog - depth * (withWork - 1);
      const count = want - (e === 0 && referenceId ? 1 : 0);
      if (count > 0) items.push({ endpoint: fx.endpoints[e]!, count });
    }
    const p0 = Date.now();
    const added = await pop.addBacklog(items, Date.now() - HOUR, Date.now(), data);
    await pop.settle();
    const pending = await pop.pendingCount();
    log(
      `${size.name}: ${added} deliveries written in ${((Date.now() - p0) / 1000).toFixed(1)} s; ${pending} ` +
        `pending over ${withWork} endpoints (${depth} each)`,
    );
    if (pending !== backlog) throw new Error(`populated ${pending} pending deliveries, expected ${backlog}`);
    if (referenceId) await checkBacklogShape(store, first.id, referenceId);
    results.push({ name: size.name, backlog, endpointsWithWork: withWork, windows: [] });
  }

  for (let r = 0; r < opts.rounds; r++) {
    await waitForIdle(`round ${r + 1}`, log);
    for (let k = 0; k < SIZES.length; k++) {
      const i = (r + k) % SIZES.length;
      const { store, pop } = targets[i]!;
      const res = results[i]!;
      // Before every window, what autovacuum would have done meanwhile: a hot small backlog rewrites the same
      // queue and delivery rows over and over, and without vacuuming their dead versions it slows down round
      // after round (measured: 120 → 190 µs of CPU per delivery over three rounds at 1 %).
      await pop.settle();
      if (opts.warmupSeconds > 0) await runWindow(store, pop, opts, opts.warmupSeconds, data);
      const w = await runWindow(store, pop, opts, opts.seconds, data);
      res.windows.push(w);
      log(
        `round ${r + 1}, ${res.name} (${res.backlog} pending): ${w.leased} leased in ${w.calls} calls, ` +
          `${Math.round(w.leased / w.leaseS)}/s inside deliveryLease, ` +
          `${Math.round((w.leaseCpuMs * 1000) / w.leased)} µs CPU per delivery (this process and its backends); ` +
          `completion ${Math.round(w.leased / w.completeS)}/s; refill ${w.refillS.toFixed(1)} s; ` +
          `other processes ${w.foreign === null ? '?' : Math.round(w.foreign * 100)} % of the machine`,
      );
    }
  }
  for (const [i, res] of results.entries()) {
    const pending = await targets[i]!.pop.pendingCount();
    if (pending !== res.backlog)
      throw new Error(`${res.name}: backlog drifted to ${pending}, not ${res.backlog}`);
  }

  const [small, mid, full] = results as [SizeResult, SizeResult, SizeResult];
  const result: Record<string, unknown> = {
    bench: 'scale',
    store: opts.store,
    endpoints: opts.endpoints,
    backlog: opts.backlog,
    batch: opts.batch,
    lease_per_s_small: Math.round(leasePerS(small.windows)),
    lease_per_s_full: Math.round(leasePerS(full.windows)),
    ratio: round(leasePerS(full.windows) / leasePerS(small.windows), 3),
    lease_per_s_mid: Math.round(leasePerS(mid.windows)),
    ratio_rounds: full.windows.map((w, r) => round(leasePerS([w]) / leasePerS([small.windows[r]!]), 2)),
  };
  for (const res of results) {
    const sorted = Float64Array.from(res.windows.flatMap((w) => w.latenciesMs)).sort();
    result[`lease_p50_ms_${res.name}`] = round(percentile(sorted, 0.5), 2);
    result[`lease_p99_ms_${res.name}`] = round(percentile(sorted, 0.99), 2);
  }
  const cpuUs = (ws: Window[]) => (sum(ws, (w) => w.leaseCpuMs) * 1000) / sum(ws, (w) => w.leased);
  for (const res of results) result[`lease_cpu_us_per_delivery_${res.name}`] = Math.round(cpuUs(res.windows));
  result.cpu_ratio = round(cpuUs(small.windows) / cpuUs(full.windows), 3);
  for (const res of results) {
    const ws = res.windows;
    result[`cycle_per_s_${res.name}`] = Math.round(
      sum(ws, (w) => w.leased) / sum(ws, (w) => w.leaseS + w.completeS),
    );
  }
  for (const res of results) {
    result[`leased_per_call_${res.name}`] = round(
      sum(res.windows, (w) => w.leased) / sum(res.windows, (w) => w.calls),
      1,
    );
  }
  for (const res of results) {
    const shares = res.windows.map((w) => w.foreign);
    result[`foreign_cpu_share_${res.name}`] = shares.every((x) => x !== null)
      ? round(shares.reduce((a, x) => a + x, 0) / shares.length, 2)
      : null;
  }
  result.seconds = opts.seconds;
  result.rounds = opts.rounds;
  process.stdout.write(`${JSON.stringify(result)}\n`);
  return 0;
}

runMain(main, log);
