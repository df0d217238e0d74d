/** The pipeline thread's own composition (see pipeline-thread.ts): its store connection, sender and loops. */
import { parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { createLocalKeyService, loadOrCreateMasterKey } from '../adapters/crypto/envelope.ts';
import { createThreadAttemptMetrics } from '../adapters/metrics/prom-metrics.ts';
import { createWriteLock } from '../adapters/sqlite/write-lock.ts';
import { systemClock, systemRandom } from '../adapters/system-clock.ts';
import type { Config } from '../config/config.ts';
import type { Metrics } from '../ports/metrics.ts';
import { createSender } from './create-sender.ts';
import { createStore } from './create-store.ts';
import { createTracing } from './create-tracing.ts';
import { listenForWakes } from './thread-wake.ts';
import { VERSION } from './version.ts';
import { createWorkers } from './workers.ts';

export interface PipelineThreadData {
  /** With roles narrowed to the pipeline's. */
  config: Config;
  lockBuffer: SharedArrayBuffer;
  /** Fan-out's pokes (thread-wake.ts). */
  wakeBuffer: SharedArrayBuffer;
  tsxApi: string;
  entry: string;
}

type LaneMove = Parameters<Metrics['laneMoved']>[0];

/** From the thread to the API thread. */
export type PipelineMessage =
  | { kind: 'ready' }
  | { kind: 'stopped' }
  | { kind: 'laneMoves'; laneMoves: LaneMove[] }
  | { kind: 'metricsText'; no: number; text: string };

/** From the API thread to the thread. */
export type PipelineRequest = 'stop' | { kind: 'metricsText'; no: number };

const port = parentPort;
if (port) {
  const { config, lockBuffer, wakeBuffer } = workerData as PipelineThreadData;
  const logger = pino({ level: config.logLevel });
  const store = createStore(config, { writeLock: createWriteLock(lockBuffer), second: true });
  const keys = createLocalKeyService({
    masterKey: loadOrCreateMasterKey({ env: config.masterKey ?? undefined, dataDir: config.dataDir }),
  });
  const sender =
    config.roles.includes('delivery') || config.roles.includes('replay')
      ? createSender(config, systemClock)
      : null;

  // The API thread serves /metrics: it asks for the attempt metrics' text at each scrape (pipeline-thread.ts). Lane
  // moves go to it in one message per event-loop turn (they also drop its cached lane gauges).
  const attemptMetrics = createThreadAttemptMetrics();
  let laneMoves: LaneMove[] = [];
  const forwardLaneMoves = () => {
    port.postMessage({ kind: 'laneMoves', laneMoves } satisfies PipelineMessage);
    laneMoves = [];
  };
  const metrics: Metrics = {
    eventAccepted() {},
    attemptRecorded: attemptMetrics.attemptRecorded,
    laneMoved(kind) {
      if (laneMoves.length === 0) setImmediate(forwardLaneMoves);
      laneMoves.push(kind);
    },
    render: () => Promise.reject(new Error('metrics are served by the API thread')),
  };

  // The thread's own exporter: spans are not sent across threads (the SDK is loaded only when configured).
  const tracing = await createTracing(config);
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
    tracing,
  });
  const stopListening = listenForWakes(wakeBuffer, () => workers.deliveriesCreated.poke());
  port.on('message', (m: PipelineRequest) => {
    if (typeof m === 'object' && m.kind === 'metricsText') {
      void attemptMetrics.text().then((text) => {
        port.postMessage({ kind: 'metricsText', no: m.no, text } satisfies PipelineMessage);
      });
    } else if (m === 'stop') {
      stopListening();
      void (async () => {
        await workers.stop();
        if (sender) await sender.close();
        try {
          await tracing?.shutdown();
        } finally {
          await store.close();
        }
        port.postMessage({ kind: 'stopped' } satisfies PipelineMessage);
      })();
    }
  });
  workers.start();
  port.postMessage({ kind: 'ready' } satisfies PipelineMessage);
}
