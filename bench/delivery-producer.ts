/**
 * Event producer for bench/delivery.ts, in a process of its own: POSTs `count` events to Hookrail's /v1/events
 * with at most `concurrency` requests in flight, either as fast as intake answers (`ratePerS` null) or at a
 * fixed rate (request i is sent at t0 + i / rate, unless `concurrency` requests are still out). The event type
 * cycles through `types`, so each event is addressed to one endpoint.
 *
 * For every 202 it records the event id and the time the answer arrived on the machine's monotonic clock
 * (support.ts machineMs), written as [[id, ms, typeIndex], …] to `outFile` (typeIndex: the event's position in
 * `types`, i.e. which endpoint it addresses); the receiver's arrival times are on the same clock, so arrival − 202
 * is the time to first attempt. Prints one JSON line (ProduceReport) on stdout.
 */
import { writeFileSync } from 'node:fs';
import { Pool } from 'undici';
import { requestBytes, SocketPool } from './socket-client.ts';
import { eventData, machineMs, percentile } from './support.ts';

export interface ProduceSpec {
  origin: string;
  producerKey: string;
  tenantId: string;
  types: string[];
  count: number;
  concurrency: number;
  ratePerS: number | null;
  dataBytes: number;
  outFile: string;
  /** `sockets` (socket-client.ts, the default) or `undici` (a Pool, the producer before 2026-12-02; more CPU). */
  client?: 'sockets' | 'undici';
}

export interface ProduceReport {
  accepted: number;
  failed: number;
  statuses: Record<string, number>;
  errors: string[];
  /** machineMs of the first send and of the last answer. */
  startedAt: number;
  finishedAt: number;
  acceptedPerS: number;
  /** Intake latency (send → 202) percentiles, ms. */
  p50Ms: number;
  p99Ms: number;
  /** How far behind schedule the last send was (rate mode; > 0 means the rate was not held). */
  maxLagMs: number;
  /** CPU time of this process over its whole life, ms. */
  cpuMs: number;
  /** CPU time from the first send on (start-up excluded), ms. */
  sendCpuMs: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as ProduceSpec;
  const data = JSON.stringify(eventData(spec.dataBytes));
  const bodies = spec.types.map((type) =>
    Buffer.from(
      `{"tenant_id":${JSON.stringify(spec.tenantId)},"type":${JSON.stringify(type)},"data":${data}}`,
    ),
  );
  const headers = { authorization: `Bearer ${spec.producerKey}`, 'content-type': 'application/json' };
  let post: (typeIndex: number) => Promise<{ status: number; body: string }>;
  let close: () => Promise<void>;
  if (spec.client === 'undici') {
    const pool = new Pool(spec.origin, { connections: spec.concurrency, pipelining: 1 });
    post = async (t) => {
      const res = await pool.request({
        path: '/v1/events',
        method: 'POST',
        headers,
        body: bodies[t] as Buffer,
      });
      return { status: res.statusCode, body: await res.body.text() };
    };
    close = () => pool.close();
  } else {
    const pool = new SocketPool(spec.origin);
    const requests = bodies.map((b) => requestBytes(spec.origin, '/v1/events', headers, b));
    post = (t) => pool.request(requests[t] as Buffer);
    close = async () => pool.close();
  }

  const times: Array<[string, number, number]> = [];
  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  const errors: string[] = [];
  let failed = 0;
  let inFlight = 0;
  let slotFreed: (() => void) | null = null;
  let maxLagMs = 0;

  const sendOne = async (i: number) => {
    const t0 = machineMs();
    try {
      const res = await post(i % bodies.length);
      const at = machineMs();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status === 202) {
        times.push([(JSON.parse(res.body) as { id: string }).id, at, i % bodies.length]);
        latencies.push(at - t0);
      } else {
        failed++;
        if (errors.length < 5) errors.push(`${res.status} ${res.body.slice(0, 200)}`);
      }
    } catch (err) {
      failed++;
      if (errors.length < 5) errors.push(String(err));
    } finally {
      inFlight--;
      slotFreed?.();
    }
  };

  const cpuAtStart = process.cpuUsage();
  const startedAt = machineMs();
  const all: Promise<void>[] = [];
  for (let i = 0; i < spec.count; i++) {
    if (spec.ratePerS !== null) {
      const due = startedAt + (i * 1000) / spec.ratePerS;
      const wait = due - machineMs();
      if (wait > 0) await sleep(wait);
      else maxLagMs = Math.max(maxLagMs, -wait);
    }
    while (inFlight >= spec.concurrency) {
      await new Promise<void>((r) => {
        slotFreed = r;
      });
      slotFreed = null;
    }
    inFlight++;
    all.push(sendOne(i));
  }
  await Promise.all(all);
  const finishedAt = machineMs();
  await close();

  const cpuTotal = process.cpuUsage();
  writeFileSync(spec.outFile, JSON.stringify(times));
  latencies.sort((a, b) => a - b);
  const report: ProduceReport = {
    accepted: times.length,
    failed,
    statuses: Object.fromEntries([...statuses].map(([k, v]) => [String(k), v])),
    errors,
    startedAt,
    finishedAt,
    acceptedPerS: (times.length * 1000) / Math.max(1, finishedAt - startedAt),
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    maxLagMs,
    cpuMs: (cpuTotal.user + cpuTotal.system) / 1000,
    sendCpuMs: (cpuTotal.user - cpuAtStart.user + cpuTotal.system - cpuAtStart.system) / 1000,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(
      `delivery-producer: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
