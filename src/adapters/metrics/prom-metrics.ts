/**
 * Prometheus metrics with prom-client, on a registry of this instance's own (never the global default, so several
 * instances in one test process do not share counters). Gauges that describe the shared queue are read from the
 * store at scrape time, so every process reports the same, current numbers.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Metrics } from '../../ports/metrics.ts';

const MS_BUCKETS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 15000];

export function createPromMetrics(opts: {
  queueStats: () => Promise<{ pending: number; circuitsOpen: number }>;
  /** Lane gauges (ADR-03); omitted: not reported. */
  laneStats?: () => Promise<{ dedicatedEndpoints: number; pendingByLane: Record<string, number> }>;
  defaultMetrics?: boolean;
}): Metrics {
  const registry = new Registry();
  if (opts.defaultMetrics !== false)
    collectDefaultMetrics({ register: registry, prefix: 'hookrail_process_' });

  const events = new Counter({
    name: 'hookrail_events_accepted_total',
    help: 'Events accepted (answered 202) by this process.',
    registers: [registry],
  });
  const attempts = new Counter({
    name: 'hookrail_attempts_total',
    help: 'Delivery attempts recorded by this process, by outcome and error class.',
    labelNames: ['outcome', 'error_class'],
    registers: [registry],
  });
  const deadLetters = new Counter({
    name: 'hookrail_dead_letters_total',
    help: 'Deliveries dead-lettered by this process.',
    registers: [registry],
  });
  const split = new Histogram({
    name: 'hookrail_attempt_duration_ms',
    help: 'Attempt time split: queue wait (due → start), platform (start → on the wire), consumer (wire → response).',
    labelNames: ['part'],
    buckets: MS_BUCKETS,
    registers: [registry],
  });
  new Gauge({
    name: 'hookrail_backlog_deliveries',
    help: 'Pending deliveries across all endpoints (shared queue).',
    registers: [registry],
    async collect() {
      this.set((await opts.queueStats()).pending);
    },
  });
  new Gauge({
    name: 'hookrail_circuits_open',
    help: 'Endpoints whose circuit is open or half-open.',
    registers: [registry],
    async collect() {
      this.set((await opts.queueStats()).circuitsOpen);
    },
  });

  // Lane labels are bounded: `direction` has three values, `lane` is `shared:<n>` (at most HOOKRAIL_SHARED_LANES),
  // `dedicated` (every dedicated lane together) or `unassigned` — never an endpoint id.
  const laneMoves = new Counter({
    name: 'hookrail_lane_moves_total',
    help: 'Lane moves made by this process (maintenance role), by direction.',
    labelNames: ['direction'],
    registers: [registry],
  });
  for (const direction of ['promoted', 'demoted', 'rehashed']) laneMoves.inc({ direction }, 0);
  const { laneStats } = opts;
  if (laneStats) {
    new Gauge({
      name: 'hookrail_lane_dedicated_endpoints',
      help: 'Endpoints in dedicated lanes (shared queue).',
      registers: [registry],
      async collect() {
        this.set((await laneStats()).dedicatedEndpoints);
      },
    });
    new Gauge({
      name: 'hookrail_lane_backlog_deliveries',
      help: 'Pending deliveries by lane; every dedicated lane is counted as lane="dedicated".',
      labelNames: ['lane'],
      registers: [registry],
      async collect() {
        const { pendingByLane } = await laneStats();
        this.reset();
        for (const [lane, n] of Object.entries(pendingByLane)) this.set({ lane }, n);
      },
    });
  }

  return {
    eventAccepted: () => events.inc(),
    laneMoved: (direction) => laneMoves.inc({ direction }),
    attemptRecorded(a) {
      attempts.inc({ outcome: a.outcome, error_class: a.errorClass ?? 'none' });
      if (a.deadLettered) deadLetters.inc();
      split.observe({ part: 'queue' }, a.queueMs);
      if (a.errorClass !== 'circuit_open') {
        split.observe({ part: 'platform' }, a.platformMs);
        if (a.consumerMs !== null) split.observe({ part: 'consumer' }, a.consumerMs);
      }
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
