/**
 * Load generator for bench/intake.ts, run as a process of its own so that it never shares an event loop (or a
 * GC) with the script that measures, nor with the server under load.
 *
 *   node --import tsx bench/load-worker.ts '<LoadSpec as JSON>'
 *
 * Runs a warm-up phase and then the measured phase with autocannon, each ended gracefully: at the deadline
 * every connection stops sending and closes once its in-flight response is in, so no request is cut off half
 * way (autocannon's own `duration` destroys sockets with requests in flight, whose events the server may have
 * stored without the client ever seeing the 202 — the stored-vs-accepted check could then never be exact).
 * Prints one JSON line (LoadReport) on stdout.
 */
import autocannon, { type AutocannonClient } from 'autocannon';
import { breakdown, type CpuBreakdown, snapshot } from './proc-stats.ts';

export interface LoadSpec {
  url: string;
  headers: Record<string, string>;
  body: string;
  connections: number;
  seconds: number;
  warmupSeconds: number;
  /** The server under load, whose CPU is reported per phase. */
  serverPid: number;
}

export interface PhaseReport {
  /** Wall time from the first connection to the last response of the phase. */
  seconds: number;
  /** Responses by HTTP status. */
  statuses: Record<string, number>;
  accepted: number;
  acceptedPerSecond: number;
  /** Latency percentiles of the 202 answers, from the client's per-request timings (float ms). */
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Socket errors and timeouts reported by autocannon (requests whose fate the client does not know). */
  connErrors: number;
  timeouts: number;
  /** Requests still unanswered when the phase ended (0 unless the drain timed out). */
  unanswered: number;
  /** Where the machine's CPU went during the phase (server, load generator, PostgreSQL, anything else). */
  cpu: CpuBreakdown;
}

export interface LoadReport {
  warmup: PhaseReport | null;
  measured: PhaseReport;
}

const DRAIN_TIMEOUT_MS = 30_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i] as number;
}

async function phase(spec: LoadSpec, seconds: number): Promise<PhaseReport> {
  const clients: AutocannonClient[] = [];
  const statuses = new Map<number, number>();
  const latencies: number[] = [];
  let requests = 0;
  let responses = 0;
  let running = 0;
  let lastDone = 0;
  let allDone: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    allDone = resolve;
  });

  const s0 = snapshot();
  const t0 = performance.now();
  const instance = autocannon({
    url: spec.url,
    method: 'POST',
    headers: spec.headers,
    body: spec.body,
    connections: spec.connections,
    pipelining: 1,
    // Only a safety net: the phase is ended below, gracefully, long before this.
    duration: seconds + DRAIN_TIMEOUT_MS / 1000 + 30,
    timeout: 20,
    setupClient: (client) => {
      clients.push(client);
      running++;
      client.on('request', () => {
        requests++;
      });
      client.on('response', (status, _bytes, ms) => {
        responses++;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status === 202) latencies.push(ms);
      });
      client.on('done', () => {
        if (--running === 0) {
          lastDone = performance.now();
          allDone();
        }
      });
    },
  });

  await sleep(seconds * 1000);
  // autocannon's own request limit: a connection whose `reqsMade` reached `responseMax` closes itself instead of
  // sending the next request, i.e. right after its in-flight response has been counted.
  for (const c of clients) c.responseMax = c.reqsMade;
  const drained = await Promise.race([finished.then(() => true), sleep(DRAIN_TIMEOUT_MS).then(() => false)]);
  if (!drained) {
    lastDone = performance.now();
    instance.stop();
  }
  const s1 = snapshot();
  const result = await instance;

  const elapsed = (lastDone - t0) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  const accepted = statuses.get(202) ?? 0;
  return {
    seconds: elapsed,
    statuses: Object.fromEntries([...statuses].map(([k, v]) => [String(k), v])),
    accepted,
    acceptedPerSecond: accepted / elapsed,
    p50Ms: percentile(sorted, 0.5),
    p90Ms: percentile(sorted, 0.9),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.length ? (sorted[sorted.length - 1] as number) : 0,
    connErrors: result.errors - result.timeouts,
    timeouts: result.timeouts,
    unanswered: Math.max(0, requests - responses),
    cpu: breakdown(s0, s1, { server: spec.serverPid, loadgen: process.pid }),
  };
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (!raw) throw new Error('usage: load-worker.ts <LoadSpec JSON>');
  const spec = JSON.parse(raw) as LoadSpec;
  const warmup = spec.warmupSeconds > 0 ? await phase(spec, spec.warmupSeconds) : null;
  const measured = await phase(spec, spec.seconds);
  const report: LoadReport = { warmup, measured };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`load-worker: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
