/**
 * Delivery benchmark: how many delivery attempts per second Hookrail completes end to end (intake → fan-out →
 * lease → signed POST → attempt recorded) and how long an accepted event waits for its first attempt, against the
 * ceiling of a bare undici loop POSTing the same requests to the same receiver with the same concurrency.
 *
 *   npm run bench:delivery -- [--store sqlite|postgres] [--endpoints 100] [--events 50000]
 *                             [--concurrency 512] [--producer-concurrency 512] [--steady-events 2000]
 *                             [--steady-rate 200] [--warmup-events 500] [--data-bytes 1024] [--poll-ms <ms>]
 *                             [--drain-events 0] [--ceiling-runs 3] [--cpu-prof <dir>]
 *                             [--producer-client sockets|undici]
 *
 * One event = one delivery. Endpoint i subscribes to `bench.e<i>` only, and the producer cycles the event type
 * over `bench.e0 … bench.e<N-1>`, so `--events 50000` over `--endpoints 100` is 50,000 deliveries, 500 per endpoint.
 * (With `event_types: ['*']` every event would fan out to all N endpoints: 5,000,000 deliveries for the default
 * arguments, which is not a benchmark a 2-core machine finishes.)
 *
 * Processes (so that no load generator shares an event loop with what it measures): the receiver
 * (bench/delivery-receiver.ts), Hookrail (`node bin/hookrail.js start`, all roles, a fresh data directory or
 * PostgreSQL schema), the producer (bench/delivery-producer.ts, one run per phase; over plain keep-alive sockets,
 * bench/socket-client.ts, so that it takes as little of the shared cores as it can — `--producer-client undici`
 * runs it on an undici Pool, ~2× its CPU per event) and the ceiling loop
 * (bench/delivery-ceiling.ts). Phases, each waiting until the receiver has every delivery of the phase:
 *
 *   1. warm-up: --warmup-events at --steady-rate (excluded from every number).
 *   2. below saturation: --steady-events at --steady-rate; ttfa percentiles → below_saturation_ttfa_*.
 *   3. bulk: --events sent as fast as intake answers them (--producer-concurrency in flight, 512 by default: with
 *      fewer, each request waits out a whole commit turn of the pipeline, and the producer's round trips, not
 *      Hookrail's capacity, set the rate — at 128, intake and delivery ran at the same rate with ttfa p50 ~40 ms,
 *      i.e. no backlog), so a backlog builds and the delivery plane runs flat out. The phase says which it was:
 *      deliveries drained after the producer finished, or delivery only keeping pace with intake.
 *      attempts_per_s = bulk deliveries / (last − first arrival of a bulk delivery at the receiver);
 *      end_to_end_per_s = bulk deliveries / (last arrival − the producer's first send); ttfa_p50/p99 are this
 *      phase's (saturated: they include the backlog wait).
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
import {
  ceilingConcurrency,
  intOption,
  LOAD_OPTIONS,
  type LoadOptions,
  loadOptions,
  measureCeiling,
  type PhaseCtx,
  type PhaseResult,
  resultFields,
  runPhases,
  startReceiver,
  verifyReceiver,
} from './delivery-phases.ts';
import type { ProduceReport, ProduceSpec } from './delivery-producer.ts';
import {
  backendPidsOf,
  cpuMsOf,
  cpuSnapshot,
  foreignShareSince,
  freshPgSchema,
  onCleanup,
  percentile,
  postJson,
  ROOT,
  runMain,
  runWorker,
  startServer,
  waitForIdle,
} from './support.ts';

const log = (msg: string) => process.stderr.write(`[bench:delivery] ${msg}\n`);
const ALL_ROLES = 'intake,control,fanout,delivery,replay,maintenance';

// ---------------------------------------------------------------------------------------------- arguments

interface Options extends LoadOptions {
  store: 'sqlite' | 'postgres';
  drainEvents: number;
  pollMs: number | null;
  cpuProfDir: string | null;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      ...LOAD_OPTIONS,
      store: { type: 'string', default: 'sqlite' },
      'drain-events': { type: 'string', default: '0' },
      'poll-ms': { type: 'string' },
      'cpu-prof': { type: 'string' },
    },
  });
  if (values.store !== 'sqlite' && values.store !== 'postgres') {
    throw new Error('--store must be sqlite or postgres');
  }
  return {
    ...loadOptions(values),
    store: values.store,
    drainEvents: intOption('drain-events', values['drain-events'], 0),
    pollMs: values['poll-ms'] === undefined ? null : intOption('poll-ms', values['poll-ms'], 1),
    cpuProfDir: values['cpu-prof'] ? resolve(values['cpu-prof']) : null,
  };
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
    backendPids: (hookrailPid: number | undefined) => backendPidsOf(admin, hookrailPid, schema),
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
  const effectiveConcurrency = ceilingConcurrency(opts);
  log(
    `store ${opts.store}, ${opts.endpoints} endpoints, ${opts.events} events (= deliveries: each event type ` +
      `addresses one endpoint), delivery concurrency ${opts.concurrency} (effective ${effectiveConcurrency}), ` +
      `warm-up ${opts.warmupEvents} + below-saturation ${opts.steadyEvents} events at ${opts.steadyRate}/s`,
  );
  const tmp = mkdtempSync(join(tmpdir(), 'hookrail-bench-delivery-'));
  onCleanup(() => rmSync(tmp, { recursive: true, force: true }));

  // 1. The receiver.
  const { server: receiverServer, client: receiver } = await startReceiver(log);

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

  const ctx: PhaseCtx = {
    log,
    target: { url: hookrailServer.url, pid: hookrailServer.child.pid, label: 'hookrail' },
    receiver,
    receiverPid: receiverServer.child.pid,
    backendPids: () => store.backendPids(ctx.target.pid),
    backendLabel: 'its PostgreSQL backends',
    tenantId: tenant.id,
    producerKey: producer.key,
    types,
    tmp,
    producerConcurrency: opts.producerConcurrency,
    producerClient: opts.producerClient,
    dataBytes: opts.dataBytes,
    expectedSoFar: 0,
  };

  // 3. Warm-up, below saturation, bulk.
  const { phases, steady, bulk } = await runPhases(ctx, opts);

  // 3b. Optional: the delivery plane alone. Accept --drain-events with the delivery role off, then start it and
  //     time the backlog drain (no intake competing for the process).
  let drain: { deliveries: number; attemptsPerS: number; ttfaLost: number } | null = null;
  if (opts.drainEvents > 0) {
    await hookrailServer.stop();
    hookrailServer = await startHookrail('intake,control,fanout,maintenance', false);
    ctx.target = { url: hookrailServer.url, pid: hookrailServer.child.pid, label: 'hookrail' };
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
      client: opts.producerClient,
    } satisfies ProduceSpec);
    await hookrailServer.stop();
    await waitForIdle('the drain', log);
    hookrailServer = await startHookrail(ALL_ROLES, true);
    ctx.target = { url: hookrailServer.url, pid: hookrailServer.child.pid, label: 'hookrail' };
    const cpu0 = cpuMsOf(hookrailServer.child.pid);
    const snap = cpuSnapshot([
      hookrailServer.child.pid,
      receiverServer.child.pid,
      ...(await store.backendPids(hookrailServer.child.pid)),
    ]);
    ctx.expectedSoFar += produced.accepted;
    await receiver.waitFor(ctx.expectedSoFar, 'drain', log);
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
      endToEndPerS: (n * 1000) / Math.max(1, last - produced.startedAt),
      ttfa: [],
      cpuMs: cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null,
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
  const verified = await verifyReceiver(receiver, phases, log);
  const exitCode = await hookrailServer.stop();
  if (exitCode !== 0) log(`hookrail exited with code ${exitCode}`);
  const checked = await store.check();
  const storeOk =
    (checked.statuses.delivered ?? 0) === verified.accepted && checked.attempts === verified.accepted;
  log(
    `verify store: deliveries ${JSON.stringify(checked.statuses)}, ${checked.attempts} attempts: ` +
      `${storeOk ? 'OK' : 'MISMATCH'}`,
  );
  if (steady) describeTimeline(steady, checked.rows);
  describeTimeline(bulk, checked.rows);

  // 5. The ceiling: same receiver, same request shape, same concurrency, no Hookrail.
  await waitForIdle('the ceiling', log);
  const ceiling = await measureCeiling({
    log,
    receiver,
    receiverPid: receiverServer.child.pid,
    origin: receiverServer.url,
    paths,
    types,
    events: opts.events,
    concurrency: effectiveConcurrency,
    dataBytes: opts.dataBytes,
    runs: opts.ceilingRuns,
  });
  const { perS: ceilingPerS, ok: ceilingOk } = ceiling;
  await receiverServer.stop();

  // 6. The result line.
  const ratio = ceilingPerS > 0 ? bulk.attemptsPerS / ceilingPerS : 0;
  const result = {
    bench: 'delivery',
    store: opts.store,
    ...resultFields(opts, bulk, steady, ceiling),
    drain_attempts_per_s: drain ? Math.round(drain.attemptsPerS) : null,
    deliveries: verified.accepted,
    lost: verified.lost,
    duplicates: verified.duplicates,
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
  return verified.ok && storeOk && verified.failed === 0 && ceilingOk ? 0 : 1;
}

runMain(main, log);
