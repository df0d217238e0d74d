/**
 * The ceiling for bench/delivery.ts, in a process of its own: a bare undici loop that POSTs delivery-shaped
 * requests (the same body shape and size, the same Standard Webhooks headers with a placeholder signature) to the
 * same receiver paths, with the same total concurrency as Hookrail's delivery worker, through an Agent configured
 * like Hookrail's (unlimited sockets per origin, same keep-alive). No database, no signing, no leasing: whatever
 * Hookrail does beyond this is what the ratio measures.
 *
 * A warm-up of `warmupCount` requests (ids prefixed `warm`) runs first; then `count` measured requests (ids
 * prefixed `ceil`). Prints one JSON line (CeilingReport) on stdout.
 */
import { Agent } from 'undici';
import { eventData, machineMs } from './support.ts';

export interface CeilingSpec {
  origin: string;
  paths: string[];
  types: string[];
  count: number;
  warmupCount: number;
  concurrency: number;
  dataBytes: number;
}

export interface CeilingReport {
  sent: number;
  ok: number;
  failed: number;
  errors: string[];
  startedAt: number;
  finishedAt: number;
  attemptsPerS: number;
  /** CPU time of this process over its whole life, ms. */
  cpuMs: number;
}

/** 26 characters, like a ULID. */
const pad26 = (prefix: string, n: number) => `${prefix}${String(n).padStart(26 - prefix.length, '0')}`;

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as CeilingSpec;
  const data = JSON.stringify(eventData(spec.dataBytes));
  const timestamp = new Date().toISOString();
  const signature = `v1,${Buffer.alloc(32, 7).toString('base64')}`;
  const agent = new Agent({ keepAliveTimeout: 4_000, keepAliveMaxTimeout: 10_000 });

  let failed = 0;
  let ok = 0;
  const errors: string[] = [];

  const phase = async (prefix: string, count: number) => {
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < count; i = next++) {
        const id = pad26(prefix, i);
        const k = i % spec.paths.length;
        const body = `{"id":"evt_${id}","type":"${spec.types[k]}","timestamp":"${timestamp}","data":${data}}`;
        try {
          const res = await agent.request({
            origin: spec.origin,
            path: spec.paths[k] as string,
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'user-agent': 'Hookrail/0.0.0-ceiling',
              'webhook-id': `msg_${id}`,
              'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
              'webhook-signature': signature,
              'accept-encoding': 'identity',
            },
            body,
          });
          await res.body.dump();
          if (res.statusCode >= 200 && res.statusCode < 300) ok++;
          else failed++;
        } catch (err) {
          failed++;
          if (errors.length < 5) errors.push(String(err));
        }
      }
    };
    await Promise.all(Array.from({ length: spec.concurrency }, worker));
  };

  if (spec.warmupCount > 0) await phase('warm', spec.warmupCount);
  ok = 0;
  const startedAt = machineMs();
  await phase('ceil', spec.count);
  const finishedAt = machineMs();
  await agent.close();

  const report: CeilingReport = {
    sent: spec.count,
    ok,
    failed,
    errors,
    startedAt,
    finishedAt,
    attemptsPerS: (ok * 1000) / Math.max(1, finishedAt - startedAt),
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(
      `delivery-ceiling: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
