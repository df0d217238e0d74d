/** Builds the background loops for the roles a process runs (part of the composition root). */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { createSmtpMailer } from '../adapters/smtp/smtp-mailer.ts';
import { SecretCache } from '../app/secret-cache.ts';
import { Signal } from '../app/signal.ts';
import type { Config } from '../config/config.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { HttpSender } from '../ports/http-sender.ts';
import type { KeyService } from '../ports/key-service.ts';
import type { Metrics } from '../ports/metrics.ts';
import type { Store } from '../ports/store.ts';
import type { Tracing } from '../ports/tracing.ts';
import { DeliveryWorker } from '../worker/delivery-worker.ts';
import { FanoutWorker } from '../worker/fanout-worker.ts';
import { Maintenance } from '../worker/maintenance.ts';

/**
 * Fan-out's pass size. Per pass, every endpoint that got deliveries has its queue row updated once, so larger passes
 * cost less per event under load (bench:delivery, PostgreSQL, 4 alternated pairs: 1,024 events against 256 gave
 * +16 % end to end and −25 % backend CPU per event; 2,048 no more; SQLite +2–3 %). Below saturation a pass carries
 * what has arrived, one or two events. The delivery bound keeps a pass one modest transaction when events match
 * many endpoints (1,024 events × 100 wildcard endpoints would be ~100,000 rows).
 */
const FANOUT_EVENTS = 1_024;
const FANOUT_DELIVERIES = 4_096;

export interface Workers {
  /** Poke after events were committed in this process. */
  eventsCommitted: Signal;
  /** Poked by fan-out when it created deliveries (and from another thread's fan-out). */
  deliveriesCreated: Signal;
  fanout: FanoutWorker | null;
  delivery: DeliveryWorker | null;
  maintenance: Maintenance | null;
  start(): void;
  stop(): Promise<void>;
}

export function createWorkers(deps: {
  config: Config;
  store: Store;
  keys: KeyService;
  clock: Clock;
  random: Random;
  logger: Logger | null;
  sender: HttpSender | null;
  userAgent: string;
  metrics: Metrics | null;
  /** Spans for fan-out passes and delivery attempts (create-tracing.ts); null: tracing is off. */
  tracing?: Tracing | null;
  /** Called whenever this process's fan-out created deliveries (to wake a delivery role in another thread). */
  onDeliveriesCreated?: () => void;
}): Workers {
  const { config, store, clock, random, logger } = deps;
  const roles = new Set(config.roles);
  const eventsCommitted = new Signal();
  const deliveriesCreated = new Signal(deps.onDeliveriesCreated ?? null);

  const fanout = roles.has('fanout')
    ? new FanoutWorker({
        store,
        clock,
        random,
        batch: FANOUT_EVENTS,
        deliveryBatch: FANOUT_DELIVERIES,
        pollMs: config.pollMs,
        wake: eventsCommitted,
        deliveriesCreated,
        logger,
        tracing: deps.tracing ?? null,
      })
    : null;

  let delivery: DeliveryWorker | null = null;
  // One worker for both roles: `delivery` gives it the first deliveries' slots, `replay` the replays' own.
  if (roles.has('delivery') || roles.has('replay')) {
    if (!deps.sender) throw new Error('the delivery and replay roles need an HTTP sender');
    const secrets = new SecretCache({ store, keys: deps.keys, clock, ttlMs: config.secretCacheMs });
    delivery = new DeliveryWorker({
      store,
      owner: `${hostname()}:${process.pid}:${random.bytes(4).toString('hex')}`,
      concurrency: roles.has('delivery') ? config.deliveryConcurrency : 0,
      replayConcurrency: roles.has('replay') ? config.replayConcurrency : 0,
      perEndpoint: 10,
      leaseMs: config.leaseMs,
      lanes: config.lanes ?? undefined,
      pollMs: config.pollMs,
      wake: deliveriesCreated,
      logger,
      metrics: deps.metrics,
      tracing: deps.tracing ?? null,
      attempt: {
        sender: deps.sender,
        clock,
        random,
        userAgent: deps.userAgent,
        secretsFor: (tenantId, endpointId) => secrets.get(tenantId, endpointId),
      },
    });
  }

  const maintenance = roles.has('maintenance')
    ? new Maintenance({
        store,
        clock,
        random,
        intervalMs: config.maintenanceMs,
        mailer: config.smtpUrl ? createSmtpMailer({ url: config.smtpUrl, from: config.mailFrom }) : null,
        logger,
        lanes: { sharedLanes: config.sharedLanes, thresholds: config.laneThresholds },
        metrics: deps.metrics,
        retention: config.retention,
      })
    : null;

  return {
    eventsCommitted,
    deliveriesCreated,
    fanout,
    delivery,
    maintenance,
    start() {
      fanout?.start();
      delivery?.start();
      maintenance?.start();
    },
    async stop() {
      await fanout?.stop();
      await delivery?.stop();
      await maintenance?.stop();
    },
  };
}
