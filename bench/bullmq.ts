/**
 * The delivery benchmark run against a BullMQ-based sender (bench/bullmq-sender.ts) instead of Hookrail: the same
 * receiver, producer, phases and ceiling as bench:delivery (bench/delivery-phases.ts), so its ratio reads beside
 * Hookrail's.
 *
 *   npm run bench:bullmq -- [--fsync always|everysec] [--worker-process] [--endpoints 100] [--events 50000] [--concurrency 512]
 *                           [--producer-concurrency 512] [--steady-events 2000] [--steady-rate 200]
 *                           [--warmup-events 500] [--data-bytes 1024] [--ceiling-runs 3]
 *
 * `--worker-process` runs the BullMQ Worker in a process of its own (how BullMQ is usually deployed; its CPU is
 * then reported with Redis's) instead of beside intake in the sender's process.
 *
 * Redis is a server of the benchmark's own (`redis-server` on a free port, a fresh directory, AOF on, no RDB
 * snapshots), so the durability of a 202 is set here and not by the machine's Redis: `--fsync always` (the default)
 * syncs the AOF before Redis answers, which is what Hookrail promises for a 202 (on disk before the answer);
 * `everysec`, Redis's usual production setting, may lose the last second of acknowledged events in a power loss.
 *
 * Verified: the receiver saw exactly one distinct webhook-id per accepted event, and the queue holds nothing
 * waiting, delayed, active or failed at the end. The last stdout line is one JSON object; exit code 1 when
 * anything was lost, failed or did not finish.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { SenderSpec } from './bullmq-sender.ts';
import {
  ceilingConcurrency,
  LOAD_OPTIONS,
  type LoadOptions,
  loadOptions,
  measureCeiling,
  type PhaseCtx,
  resultFields,
  runPhases,
  startReceiver,
  verifyReceiver,
} from './delivery-phases.ts';
import { deadPort } from './receiver-client.ts';
import { onCleanup, ROOT, runMain, startServer, waitForIdle } from './support.ts';

const log = (msg: string) => process.stderr.write(`[bench:bullmq] ${msg}\n`);

interface Options extends LoadOptions {
  fsync: 'always' | 'everysec';
  /** The Worker in a process of its own (BullMQ's usual deployment) instead of beside intake. */
  split: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      ...LOAD_OPTIONS,
      fsync: { type: 'string', default: 'always' },
      'worker-process': { type: 'boolean', default: false },
    },
  });
  if (values.fsync !== 'always' && values.fsync !== 'everysec') {
    throw new Error('--fsync must be always or everysec');
  }
  return { ...loadOptions(values), fsync: values.fsync, split: values['worker-process'] };
}

/** A redis-server of this run's own; resolves once it accepts connections. */
async function startRedis(
  dir: string,
  fsync: Options['fsync'],
): Promise<{ port: number; child: ChildProcess }> {
  const port = await deadPort();
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      fsync,
      // BullMQ's requirement: keys with a TTL must not be evicted under memory pressure.
      '--maxmemory-policy',
      'noeviction',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  onCleanup(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  });
  await new Promise<void>((resolveReady, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${out}`)), 15_000);
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolveReady();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (code ${code}):\n${out}`));
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run redis-server (bench:bullmq needs Redis installed): ${err.message}`));
    });
  });
  return { port, child };
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const ceilingInflight = ceilingConcurrency(opts);
  log(
    `BullMQ sender, Redis AOF appendfsync ${opts.fsync}, ${opts.endpoints} endpoints, ${opts.events} events, ` +
      `worker concurrency ${opts.concurrency}, warm-up ${opts.warmupEvents} + below-saturation ` +
      `${opts.steadyEvents} events at ${opts.steadyRate}/s`,
  );
  const tmp = mkdtempSync(join(tmpdir(), 'hookrail-bench-bullmq-'));
  onCleanup(() => rmSync(tmp, { recursive: true, force: true }));

  // 1. The receiver, Redis, the sender.
  const { server: receiverServer, client: receiver } = await startReceiver(log);
  const redis = await startRedis(tmp, opts.fsync);
  log(`redis-server on 127.0.0.1:${redis.port} (pid ${redis.child.pid})`);
  const types = Array.from({ length: opts.endpoints }, (_, i) => `bench.e${i}`);
  const paths = types.map((_, i) => `/e${i}`);
  const spec: SenderSpec = {
    redisPort: redis.port,
    producerKey: `pk_${randomBytes(16).toString('hex')}`,
    secret: `whsec_${randomBytes(32).toString('base64')}`,
    concurrency: opts.concurrency,
    endpoints: types.map((type, i) => ({ type, url: `${receiverServer.url}${paths[i]}` })),
    role: opts.split ? 'intake' : 'all',
  };
  const startSender = (name: string, s: SenderSpec) =>
    startServer(
      name,
      ['--import', 'tsx', join(ROOT, 'bench/bullmq-sender.ts'), JSON.stringify(s)],
      process.env,
    );
  const sender = await startSender('sender', spec);
  const workerProcess = opts.split ? await startSender('worker', { ...spec, role: 'worker' }) : null;
  log(
    `sender listening on ${sender.url}${workerProcess ? ' (intake only; the Worker in a process of its own)' : ''}`,
  );

  // 2. Warm-up, below saturation, bulk: as bench:delivery.
  const ctx: PhaseCtx = {
    log,
    target: { url: sender.url, pid: sender.child.pid, label: 'sender' },
    receiver,
    receiverPid: receiverServer.child.pid,
    backendPids: async () =>
      [redis.child.pid, workerProcess?.child.pid].filter((pid): pid is number => pid !== undefined),
    backendLabel: workerProcess ? 'its worker process and Redis' : 'its Redis',
    tenantId: 'bench',
    producerKey: spec.producerKey,
    types,
    tmp,
    producerConcurrency: opts.producerConcurrency,
    producerClient: opts.producerClient,
    dataBytes: opts.dataBytes,
    expectedSoFar: 0,
  };
  const { phases, steady, bulk } = await runPhases(ctx, opts);

  // 3. Everything accepted arrived, once per webhook-id; the queue is empty.
  const verified = await verifyReceiver(receiver, phases, log);
  const counts = (await (await fetch(`${sender.url}/stats`)).json()) as Record<string, number>;
  const queueOk = ['waiting', 'active', 'delayed', 'failed'].every((k) => (counts[k] ?? 0) === 0);
  log(`verify queue: ${JSON.stringify(counts)}: ${queueOk ? 'OK' : 'MISMATCH'}`);
  await sender.stop();
  await workerProcess?.stop();
  redis.child.kill('SIGTERM');

  // 4. The ceiling: as bench:delivery's.
  await waitForIdle('the ceiling', log);
  const ceiling = await measureCeiling({
    log,
    receiver,
    receiverPid: receiverServer.child.pid,
    origin: receiverServer.url,
    paths,
    types,
    events: opts.events,
    concurrency: ceilingInflight,
    dataBytes: opts.dataBytes,
    runs: opts.ceilingRuns,
  });
  await receiverServer.stop();

  // 5. The result line.
  const ratio = ceiling.perS > 0 ? bulk.attemptsPerS / ceiling.perS : 0;
  const result = {
    bench: 'bullmq',
    fsync: opts.fsync,
    worker_process: opts.split,
    ...resultFields(opts, bulk, steady, ceiling),
    deliveries: verified.accepted,
    lost: verified.lost,
    duplicates: verified.duplicates,
  };
  log(`ratio ${ratio.toFixed(4)} (bench:delivery's targets: SQLite >= 0.3, PostgreSQL >= 0.2)`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  if (!ceiling.ok) log('warning: the ceiling loop did not complete every request');
  return verified.ok && queueOk && verified.failed === 0 && ceiling.ok ? 0 : 1;
}

runMain(main, log);
