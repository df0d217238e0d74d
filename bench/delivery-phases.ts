/**
 * What bench/delivery.ts (Hookrail) and bench/bullmq.ts (a BullMQ-based sender) share, so both measure the same
 * way: a phase of the producer's load with every delivery awaited at the receiver (rate, time to first attempt,
 * CPU of the system, of its storage processes and of the machine), and the ceiling — a bare undici loop POSTing the
 * same requests to the same receiver.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CeilingReport, CeilingSpec } from './delivery-ceiling.ts';
import type { ProduceReport, ProduceSpec } from './delivery-producer.ts';
import { ReceiverClient } from './receiver-client.ts';
import {
  cpuMsOf,
  cpuShare,
  cpuSnapshot,
  cpuTimesOf,
  foreignShareSince,
  type Log,
  type MachineCpu,
  machineCpu,
  percentile,
  ROOT,
  round,
  runWorker,
  type Server,
  startServer,
  waitForIdle,
} from './support.ts';

/** The receiver (bench/delivery-receiver.ts) in a process of its own, and a client for its control port. */
export async function startReceiver(log: Log): Promise<{ server: Server; client: ReceiverClient }> {
  const server = await startServer(
    'receiver',
    ['--import', 'tsx', join(ROOT, 'bench/delivery-receiver.ts')],
    process.env,
  );
  const control = /control (http:\/\/\S+)/.exec(server.banner)?.[1];
  if (!control) throw new Error(`receiver announced no control port: ${server.banner}`);
  log(`receiver on ${server.url} (control ${control})`);
  return { server, client: new ReceiverClient(control) };
}

/** The load and ceiling options both benchmarks take, with bench:delivery's defaults. */
export const LOAD_OPTIONS = {
  endpoints: { type: 'string', default: '100' },
  events: { type: 'string', default: '50000' },
  concurrency: { type: 'string', default: '512' },
  'producer-concurrency': { type: 'string', default: '512' },
  'steady-events': { type: 'string', default: '2000' },
  'steady-rate': { type: 'string', default: '200' },
  'warmup-events': { type: 'string', default: '500' },
  'ceiling-runs': { type: 'string', default: '3' },
  'data-bytes': { type: 'string', default: '1024' },
  'producer-client': { type: 'string', default: 'sockets' },
} as const;

export interface LoadOptions {
  endpoints: number;
  events: number;
  concurrency: number;
  producerConcurrency: number;
  steadyEvents: number;
  steadyRate: number;
  warmupEvents: number;
  ceilingRuns: number;
  dataBytes: number;
  /** The producer's HTTP client (delivery-producer.ts): `sockets`, or `undici` (more of the machine's CPU). */
  producerClient: 'sockets' | 'undici';
}

/** Hookrail's default per-endpoint in-flight cap (PRODUCT.md §6); the bench endpoints keep it. */
const PER_ENDPOINT_CAP = 10;

/**
 * The ceiling's requests in flight: Hookrail's effective concurrency, its worker cap and the per-endpoint caps,
 * so that the ceiling is the same for every system measured against it.
 */
export const ceilingConcurrency = (o: LoadOptions) => Math.min(o.concurrency, o.endpoints * PER_ENDPOINT_CAP);

/** An integer option at least `min`, or a clear error. */
export function intOption(name: string, v: string, min: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}`);
  return n;
}

function producerClient(v: string): 'sockets' | 'undici' {
  if (v !== 'sockets' && v !== 'undici') throw new Error('--producer-client must be sockets or undici');
  return v;
}

/** LOAD_OPTIONS as parsed by parseArgs, checked. */
export function loadOptions(values: { [K in keyof typeof LOAD_OPTIONS]: string }): LoadOptions {
  return {
    endpoints: intOption('endpoints', values.endpoints, 1),
    events: intOption('events', values.events, 1),
    concurrency: intOption('concurrency', values.concurrency, 1),
    producerConcurrency: intOption('producer-concurrency', values['producer-concurrency'], 1),
    steadyEvents: intOption('steady-events', values['steady-events'], 0),
    steadyRate: intOption('steady-rate', values['steady-rate'], 1),
    warmupEvents: intOption('warmup-events', values['warmup-events'], 0),
    ceilingRuns: intOption('ceiling-runs', values['ceiling-runs'], 1),
    dataBytes: intOption('data-bytes', values['data-bytes'], 400),
    producerClient: producerClient(values['producer-client']),
  };
}

export interface PhaseResult {
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
  /**
   * Deliveries / (last arrival − the producer's first send): the rate of the whole phase, intake included. Unlike
   * attemptsPerS it does not improve when a system holds deliveries back until intake is over.
   */
  endToEndPerS: number;
  ttfa: number[];
  /** CPU of the system under test's own process over the phase. */
  cpuMs: number | null;
  machineBusy: number | null;
  machineSteal: number | null;
  /** CPU used on the machine by processes other than this benchmark's, as a share of all cores. */
  foreignShare: number | null;
}

export interface PhaseCtx {
  log: Log;
  /** The system under test: where the producer sends its events, its process, and its name in the log. */
  target: { url: string; pid: number | undefined; label: string };
  receiver: ReceiverClient;
  receiverPid: number | undefined;
  /** Processes doing the system's storage work outside its own (PostgreSQL backends, Redis), and their name. */
  backendPids: () => Promise<number[]>;
  backendLabel: string;
  tenantId: string;
  producerKey: string;
  types: string[];
  tmp: string;
  producerConcurrency: number;
  producerClient: 'sockets' | 'undici';
  dataBytes: number;
  /** Distinct deliveries expected at the receiver once the previous phases are complete. */
  expectedSoFar: number;
}

export async function runPhase(
  ctx: PhaseCtx,
  name: string,
  count: number,
  ratePerS: number | null,
): Promise<PhaseResult> {
  const { log } = ctx;
  const outFile = join(ctx.tmp, `${name}.json`);
  const spec: ProduceSpec = {
    origin: ctx.target.url,
    producerKey: ctx.producerKey,
    tenantId: ctx.tenantId,
    types: ctx.types,
    count,
    concurrency: ratePerS === null ? ctx.producerConcurrency : Math.max(ctx.producerConcurrency, 256),
    ratePerS,
    dataBytes: ctx.dataBytes,
    outFile,
    client: ctx.producerClient,
  };
  log(
    `${name}: sending ${count} events ${ratePerS === null ? 'as fast as intake takes them' : `at ${ratePerS}/s`}`,
  );
  const backends0 = new Map((await ctx.backendPids()).map((pid) => [pid, cpuMsOf(pid) ?? 0]));
  const split0 = cpuTimesOf(ctx.target.pid);
  const cpu0 = cpuMsOf(ctx.target.pid);
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
  await ctx.receiver.waitFor(ctx.expectedSoFar, name, log);
  const split1 = cpuTimesOf(ctx.target.pid);
  const cpu1 = cpuMsOf(ctx.target.pid);
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
    endToEndPerS: (deliveries * 1000) / Math.max(1, last - produce.startedAt),
    ttfa,
    cpuMs: cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null,
    machineBusy: m0 && m1 ? cpuShare(m0 as MachineCpu, m1 as MachineCpu, 'busy') : null,
    machineSteal: m0 && m1 ? cpuShare(m0 as MachineCpu, m1 as MachineCpu, 'steal') : null,
    foreignShare,
  };
  const phaseMs = last - produce.startedAt;
  log(
    `${name}: ${deliveries} delivered${lost ? `, ${lost} LOST` : ''}; ${Math.round(r.attemptsPerS)} attempts/s over ` +
      `${(windowMs / 1000).toFixed(2)} s (first → last arrival), ${Math.round(r.endToEndPerS)}/s end to end (first ` +
      `send → last arrival); ttfa p50 ${percentile(ttfa, 0.5).toFixed(1)} ms, ` +
      `p90 ${percentile(ttfa, 0.9).toFixed(1)} ms, p99 ${percentile(ttfa, 0.99).toFixed(1)} ms, ` +
      `max ${percentile(ttfa, 1).toFixed(1)} ms` +
      (r.cpuMs !== null
        ? `; ${ctx.target.label} CPU ${Math.round((100 * r.cpuMs) / phaseMs)}% of a core, ` +
          `${Math.round((r.cpuMs * 1000) / Math.max(1, deliveries))} µs per event (intake+delivery` +
          (split0 && split1
            ? `; ${Math.round((100 * (split1.system - split0.system)) / Math.max(1, r.cpuMs))}% of it in the kernel)`
            : ')') +
          (backendMs > 0
            ? `; ${ctx.backendLabel} ${Math.round((100 * backendMs) / phaseMs)}% of a core, ` +
              `${Math.round((backendMs * 1000) / Math.max(1, deliveries))} µs per event`
            : '')
        : '') +
      (rcpu0 !== null && rcpu1 !== null
        ? `; producer ${Math.round((produce.sendCpuMs * 1000) / Math.max(1, deliveries))}, receiver ` +
          `${Math.round(((rcpu1 - rcpu0) * 1000) / Math.max(1, deliveries))} µs per event`
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

/** Warm-up (excluded from every number), below saturation, bulk: the three phases of both benchmarks. */
export async function runPhases(
  ctx: PhaseCtx,
  o: LoadOptions,
): Promise<{ phases: PhaseResult[]; steady: PhaseResult | null; bulk: PhaseResult }> {
  await waitForIdle('the warm-up', ctx.log);
  const phases: PhaseResult[] = [];
  if (o.warmupEvents > 0) phases.push(await runPhase(ctx, 'warm-up', o.warmupEvents, o.steadyRate));
  const steady =
    o.steadyEvents > 0 ? await runPhase(ctx, 'below-saturation', o.steadyEvents, o.steadyRate) : null;
  if (steady) phases.push(steady);
  await waitForIdle('the bulk phase', ctx.log);
  const bulk = await runPhase(ctx, 'bulk', o.events, null);
  phases.push(bulk);
  return { phases, steady, bulk };
}

/** Everything accepted arrived at the receiver, once per webhook-id (duplicates are reported, not failed). */
export async function verifyReceiver(
  receiver: ReceiverClient,
  phases: PhaseResult[],
  log: Log,
): Promise<{ ok: boolean; accepted: number; failed: number; lost: number; duplicates: number }> {
  const rstats = await receiver.stats();
  const accepted = phases.reduce((a, p) => a + p.produce.accepted, 0);
  const failed = phases.reduce((a, p) => a + p.produce.failed, 0);
  const lost = phases.reduce((a, p) => a + p.lost, 0);
  const ok = rstats.distinctWebhookIds === accepted && rstats.distinctEvents === accepted && lost === 0;
  log(
    `verify receiver: ${accepted} events accepted, ${rstats.requests} requests received, ` +
      `${rstats.distinctWebhookIds} distinct webhook-ids, ${rstats.distinctEvents} distinct events, ` +
      `${rstats.duplicates} duplicates, ${rstats.malformed} malformed, ${rstats.distinctPaths} paths: ` +
      `${ok ? 'OK' : 'MISMATCH'}`,
  );
  return { ok, accepted, failed, lost, duplicates: rstats.duplicates };
}

/** The result line's fields both benchmarks share; `ratio` = bulk attempts/s ÷ ceiling (rounded here). */
export function resultFields(
  o: LoadOptions,
  bulk: PhaseResult,
  steady: PhaseResult | null,
  ceiling: { perS: number; foreign: number | null },
) {
  const ratio = ceiling.perS > 0 ? bulk.attemptsPerS / ceiling.perS : 0;
  const ms = (xs: number[], q: number) => (xs.length ? round(percentile(xs, q), 1) : null);
  return {
    endpoints: o.endpoints,
    events: o.events,
    attempts_per_s: Math.round(bulk.attemptsPerS),
    end_to_end_per_s: Math.round(bulk.endToEndPerS),
    ttfa_p50_ms: ms(bulk.ttfa, 0.5),
    ttfa_p99_ms: ms(bulk.ttfa, 0.99),
    ceiling_attempts_per_s: Math.round(ceiling.perS),
    ratio: round(ratio, 3),
    below_saturation_ttfa_p99_ms: steady ? ms(steady.ttfa, 0.99) : null,
    below_saturation_ttfa_p50_ms: steady ? ms(steady.ttfa, 0.5) : null,
    below_saturation_rate: o.steadyRate,
    bulk_foreign_cpu_share: bulk.foreignShare === null ? null : round(bulk.foreignShare, 2),
    ceiling_foreign_cpu_share: ceiling.foreign === null ? null : round(ceiling.foreign, 2),
  };
}

export interface CeilingSpecIn {
  log: Log;
  receiver: ReceiverClient;
  receiverPid: number | undefined;
  origin: string;
  paths: string[];
  types: string[];
  events: number;
  concurrency: number;
  dataBytes: number;
  runs: number;
}

/**
 * The ceiling: the best of `runs` runs of bench/delivery-ceiling.ts (a ceiling is what the machine can do, and
 * another job only ever lowers it). Runs another job skewed (> 10 % of the machine) do not count towards `runs`;
 * at most twice as many runs. Rate over the receiver's window, like the system's.
 */
export async function measureCeiling(
  c: CeilingSpecIn,
): Promise<{ perS: number; foreign: number | null; ok: boolean }> {
  const { log, receiver } = c;
  const spec: CeilingSpec = {
    origin: c.origin,
    paths: c.paths,
    types: c.types,
    count: c.events,
    warmupCount: Math.min(c.events, Math.max(2000, Math.floor(c.events / 10))),
    concurrency: c.concurrency,
    dataBytes: c.dataBytes,
  };
  log(`ceiling: ${spec.warmupCount} warm-up + ${c.events} requests, ${c.concurrency} in flight`);
  let best = 0;
  let bestForeign: number | null = null;
  let ok = true;
  let cleanRuns = 0;
  for (let run = 1; cleanRuns < c.runs && run <= 2 * c.runs; run++) {
    await receiver.reset();
    if (run > 1) await waitForIdle(`ceiling run ${run}`, log);
    const snap = cpuSnapshot([c.receiverPid]);
    const rcpu0 = snap.pids[0]?.ms ?? null; // the receiver's CPU, read by the snapshot
    const ceiling = await runWorker<CeilingReport>('bench/delivery-ceiling.ts', spec);
    const rcpu1 = cpuMsOf(c.receiverPid);
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
        (rcpu0 !== null && rcpu1 !== null
          ? `; client ${Math.round((ceiling.cpuMs * 1000) / (c.events + spec.warmupCount))}, receiver ` +
            `${Math.round(((rcpu1 - rcpu0) * 1000) / (c.events + spec.warmupCount))} µs per request (warm-up and the ` +
            `client's start-up included)`
          : '') +
        (foreign !== null ? `; ${Math.round(100 * foreign)}% of the machine used by other processes` : ''),
    );
    if (ceiling.failed > 0 || cCount !== c.events) ok = false;
    if (foreign === null || foreign <= 0.1) cleanRuns++;
    if (perS > best) {
      best = perS;
      bestForeign = foreign;
    }
  }
  return { perS: best, foreign: bestForeign, ok };
}
