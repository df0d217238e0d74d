/**
 * The delivery, replay and maintenance roles in a worker thread of their own, beside intake, control and fan-out.
 *
 * Why: one event loop did the HTTP work of both planes (and, on SQLite, every statement, since better-sqlite3 runs
 * them on the calling thread), so a process running every role used one core. With delivery in its own thread, the
 * API thread takes events (HTTP, validation, the group commit) and fans them out while the pipeline thread leases,
 * signs, sends and records attempts: two cores. Each thread has its own database connection (pool); on SQLite their
 * turn commits share a write lock (adapters/sqlite/write-lock.ts). On PostgreSQL it applies to a process that runs
 * delivery with intake or fan-out (the default `hookrail start`); measured (bench:delivery, PostgreSQL, alternated)
 * 2,118–2,194 → 2,353–2,454 attempts/s, with the machine then 92 % busy.
 *
 * Wiring: the API thread's fan-out pokes delivery after each pass that created deliveries (as the in-process
 * signal did), through shared memory (thread-wake.ts). The pipeline thread keeps its attempt metrics on a registry
 * of its own, whose text the API thread asks for when /metrics is scraped (nothing crosses per attempt); its lane
 * moves, which are rare, are forwarded as messages. The thread exits with the process: a kill -9 takes both, and
 * the next start returns the leases left behind. An error that stops the thread stops the process (a supervisor
 * restarts it), rather than leaving an API that accepts events no one delivers.
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { WriteLock } from '../adapters/sqlite/write-lock.ts';
import type { Config, Role } from '../config/config.ts';
import type { Metrics } from '../ports/metrics.ts';
import type { PipelineMessage, PipelineThreadData } from './pipeline-thread-main.ts';
import { createThreadWake } from './thread-wake.ts';

/**
 * The roles that run in the pipeline thread. Fan-out stays on the API thread: it is all SQL, which the two threads
 * take turns at anyway, and its writes join the same turn's transaction as intake's. Measured (bench:delivery,
 * alternated): the same attempts/s either way (3,386 and 3,523/s here against 3,453 and 3,630/s with fan-out in
 * the pipeline thread), but here delivery keeps pace with intake (ttfa p99 ~0.2 s against ~1.8 s of backlog). On
 * PostgreSQL, where the threads share no lock, fan-out in the pipeline thread was slower (alternated: 1,840 and
 * 1,604/s here against 1,679 and 1,496/s there).
 */
export const PIPELINE_ROLES: readonly Role[] = ['delivery', 'replay', 'maintenance'];

/**
 * The thread's young generation (V8's default for a worker is ~48 MiB: two 16 MiB semi-spaces and the rest). Every
 * attempt allocates its request, headers, response and completion, and with 512 attempts in flight a scavenge
 * copies many still-live ones; a larger young generation scavenges less often and copies fewer of them. Measured
 * (bench:delivery, SQLite, 6 alternated pairs): 3,839 against 3,618 attempts/s on average (5 pairs of 6), 343
 * against 362 µs of CPU per event; GC was ~9 % of the thread before. Costs up to ~48 MiB more resident memory.
 */
const PIPELINE_YOUNG_GENERATION_MB = 96;

export interface PipelineThread {
  /** Fan-out created deliveries: wake delivery. */
  poke(): void;
  /** The exposition text of the thread's attempt metrics ('' once the thread is stopping or gone). */
  metricsText(): Promise<string>;
  /** Stops the loops (in-flight attempts finish and are recorded), closes the thread's store. */
  stop(): Promise<void>;
}

export async function startPipelineThread(deps: {
  config: Config;
  lock: WriteLock;
  metrics: Metrics;
  logger: Logger | null;
  onFatal: (err: unknown) => void;
}): Promise<PipelineThread> {
  const wake = createThreadWake();
  const data: PipelineThreadData = {
    config: deps.config,
    lockBuffer: deps.lock.buffer,
    wakeBuffer: wake.buffer,
    tsxApi: import.meta.resolve('tsx/esm/api'),
    entry: new URL('./pipeline-thread-main.ts', import.meta.url).href,
  };
  // The sources are TypeScript run through tsx's loader, which is registered per thread.
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
     import(workerData.tsxApi).then((tsx) => { tsx.register(); return import(workerData.entry); });`,
    {
      eval: true,
      workerData: data,
      resourceLimits: { maxYoungGenerationSizeMb: PIPELINE_YOUNG_GENERATION_MB },
    },
  );
  // Read now: once the thread has exited, worker.threadId is -1.
  const workerThreadId = worker.threadId;
  let stopping = false;
  let failed = false;
  const fail = (err: unknown) => {
    if (failed) return; // an 'error' is followed by an 'exit'
    failed = true;
    deps.logger?.fatal({ err }, 'pipeline thread failed');
    deps.onFatal(err);
  };
  // Scrapes waiting for the thread's metrics text, by request number; answered with '' if the thread goes.
  const scrapes = new Map<number, (text: string) => void>();
  let scrapeNo = 0;
  let stopped: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    stopped = () => {
      for (const answer of scrapes.values()) answer('');
      scrapes.clear();
      resolve();
    };
  });
  const ready = new Promise<void>((resolve, reject) => {
    worker.on('message', (m: PipelineMessage) => {
      if (m.kind === 'ready') resolve();
      else if (m.kind === 'stopped') stopped();
      else if (m.kind === 'laneMoves') {
        for (const l of m.laneMoves) deps.metrics.laneMoved(l);
      } else if (m.kind === 'metricsText') {
        scrapes.get(m.no)?.(m.text);
        scrapes.delete(m.no);
      }
    });
    worker.on('error', (err) => {
      reject(err);
      fail(err);
    });
    worker.on('exit', (code) => {
      // A thread that ended in the middle of its turn left the write lock held; nothing else would free it.
      deps.lock.releaseIfHeldBy(workerThreadId);
      stopped();
      if (!stopping) {
        const err = new Error(`pipeline thread exited (code ${code})`);
        reject(err);
        fail(err);
      }
    });
  });
  await ready;
  return {
    poke: wake.poke,
    metricsText() {
      if (stopping || failed) return Promise.resolve('');
      const no = ++scrapeNo;
      return new Promise<string>((resolve) => {
        scrapes.set(no, resolve);
        worker.postMessage({ kind: 'metricsText', no });
      });
    },
    async stop() {
      if (stopping) return done;
      stopping = true;
      worker.postMessage('stop');
      await done;
      await worker.terminate();
    },
  };
}
