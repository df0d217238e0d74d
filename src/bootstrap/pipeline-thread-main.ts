/** The pipeline thread's own composition (see pipeline-thread.ts): its store connection, sender and loops. */
import { parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { createLocalKeyService, loadOrCreateMasterKey } from '../adapters/crypto/envelope.ts';
import { createWriteLock } from '../adapters/sqlite/write-lock.ts';
import { systemClock, systemRandom } from '../adapters/system-clock.ts';
import type { Config } from '../config/config.ts';
import type { Metrics } from '../ports/metrics.ts';
import { createSender } from './create-sender.ts';
import { createStore } from './create-store.ts';
import { VERSION } from './version.ts';
import { createWorkers } from './workers.ts';

export interface PipelineThreadData {
  /** With roles narrowed to the pipeline's. */
  config: Config;
  lockBuffer: SharedArrayBuffer;
  tsxApi: string;
  entry: string;
}

type AttemptMetric = Parameters<Metrics['attemptRecorded']>[0];
type LaneMove = Parameters<Metrics['laneMoved']>[0];

export type PipelineMessage =
  | { kind: 'ready' }
  | { kind: 'stopped' }
  | { kind: 'metrics'; attempts: AttemptMetric[]; laneMoves: LaneMove[] };

const port = parentPort;
if (port) {
  const { config, lockBuffer } = workerData as PipelineThreadData;
  const logger = pino({ level: config.logLevel });
  const store = createStore(config, { writeLock: createWriteLock(lockBuffer), second: true });
  const keys = createLocalKeyService({
    masterKey: loadOrCreateMasterKey({ env: config.masterKey ?? undefined, dataDir: config.dataDir }),
  });
  const sender = config.roles.includes('delivery') ? createSender(config, systemClock) : null;

  // Metrics are the API thread's (it serves /metrics): forwarded in one message per event-loop turn.
  let attempts: AttemptMetric[] = [];
  let laneMoves: LaneMove[] = [];
  let flushing = false;
  const forward = () => {
    if (flushing) return;
    flushing = true;
    setImmediate(() => {
      flushing = false;
      port.postMessage({ kind: 'metrics', attempts, laneMoves } satisfies PipelineMessage);
      attempts = [];
      laneMoves = [];
    });
  };
  const metrics: Metrics = {
    eventAccepted() {},
    attemptRecorded(a) {
      attempts.push(a);
      forward();
    },
    laneMoved(kind) {
      laneMoves.push(kind);
      forward();
    },
    render: () => Promise.reject(new Error('metrics are served by the API thread')),
  };

  const workers = createWorkers({
    config,
    store,
    keys,
    clock: systemClock,
    random: systemRandom,
    logger,
    sender,
    userAgent: `Hookrail/${VERSION}`,
    metrics,
  });
  port.on('message', (m: unknown) => {
    if (m === 'poke') workers.deliveriesCreated.poke();
    else if (m === 'stop') {
      void (async () => {
        await workers.stop();
        if (sender) await sender.close();
        await store.close();
        port.postMessage({ kind: 'stopped' } satisfies PipelineMessage);
      })();
    }
  });
  workers.start();
  port.postMessage({ kind: 'ready' } satisfies PipelineMessage);
}
