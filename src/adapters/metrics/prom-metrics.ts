/**
 * Prometheus metrics with prom-client, on a registry of this instance's own (never the global default, so several
 * instances in one test process do not share counters). Gauges that describe the shared queue are read from the
 * store at scrape time, so every process reports the same, current numbers; the lane gauges' answer is reused for
 * LANE_STATS_TTL_MS.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { judgesEndpoint } from '../../domain/outcome.ts';
import type { Metrics } from '../../ports/metrics.ts';

const MS_BUCKETS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 15000];
/**
 * How long one laneStats() answer serves the lane gauges. It is a GROUP BY over every pending delivery: a Prometheus
 * scrape every few seconds must not run an O(backlog) count each time, and lane backlogs move slowly.
 */
export const LANE_STATS_TTL_MS = 15_000;
/** Within a scrape the two queue gauges share one read: reused for this long (a scrape takes milliseconds). */
const QUEUE_STATS_REUSE_MS = 1_000;

type LaneStats = { dedicatedEndpoints: number; pendingByLane: Record<string, number> };
/** `answeredAt`: null while the call runs. */
type LaneCache = { stats: Promise<LaneStats>; answeredAt: number | null };

type AttemptRecorded = Metrics['attemptRecorded'];

/** The attempt metrics on `registry`; returns the function that records one attempt. */
function registerAttemptMetrics(registry: Registry): AttemptRecorded {
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
  // Deliveries by how they ended (PRODUCT.md §10): an attempt that delivers, or one after which the delivery is
  // dead. As this process decided it: a delivery cancelled while its failing attempt was in flight stays cancelled
  // in the store though it counts as dead-lettered here (rare: an unsubscribe racing a last attempt).
  const deliveries = new Counter({
    name: 'hookrail_deliveries_total',
    help: 'Deliveries that ended in this process, by outcome: delivered or dead_lettered.',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const delivered = deliveries.labels('delivered');
  const deadLettered = deliveries.labels('dead_lettered');
  const split = new Histogram({
    name: 'hookrail_attempt_duration_ms',
    help: 'Attempt time split: queue wait (due → start), platform (start → on the wire), consumer (wire → response).',
    labelNames: ['part'],
    buckets: MS_BUCKETS,
    registers: [registry],
  });
  // Bound once: observing through a label object builds a closure and the label set per call, three per attempt.
  const queueSplit = split.labels('queue');
  const platformSplit = split.labels('platform');
  const consumerSplit = split.labels('consumer');
  return (a) => {
    attempts.inc({ outcome: a.outcome, error_class: a.errorClass ?? 'none' });
    if (a.outcome === 'delivered') delivered.inc();
    if (a.deadLettered) {
      deadLetters.inc();
      deadLettered.inc();
    }
    queueSplit.observe(a.queueMs);
    // Only attempts that were sent: a circuit_open or platform_error record has no wire time (its platform time
    // would be the whole attempt).
    if (judgesEndpoint(a.errorClass)) {
      platformSplit.observe(a.platformMs);
      if (a.consumerMs !== null) consumerSplit.observe(a.consumerMs);
    }
  };
}

/**
 * The attempt metrics of a thread that records attempts but does not serve /metrics (the pipeline thread): kept
 * where they happen, so that no message crosses threads per attempt, and read as text only when a scrape asks.
 */
export function createThreadAttemptMetrics(): { attemptRecorded: AttemptRecorded; text(): Promise<string> } {
  const registry = new Registry();
  return { attemptRecorded: registerAttemptMetrics(registry), text: () => registry.metrics() };
}

export function createPromMetrics(opts: {
  queueStats: () => Promise<{ pending: number; circuitsOpen: number }>;
  /** Lane gauges (ADR-03); omitted: not reported. */
  laneStats?: () => Promise<LaneStats>;
  defaultMetrics?: boolean;
  /**
   * Given where another thread of this process records the attempts, on a registry of its own
   * (createThreadAttemptMetrics): its exposition text, appended at each scrape. This registry then has no attempt
   * metrics, so that each family appears once.
   */
  attemptsElsewhere?: () => Promise<string>;
  /** Milliseconds, for the lane stats cache (LANE_STATS_TTL_MS) and the queue gauges' shared read; default Date.now. */
  now?: () => number;
}): Metrics {
  const now = opts.now ?? Date.now;
  const registry = new Registry();
  if (opts.defaultMetrics !== false)
    collectDefaultMetrics({ register: registry, prefix: 'hookrail_process_' });

  const events = new Counter({
    name: 'hookrail_events_accepted_total',
    help: 'Events accepted (answered 202) by this process.',
    registers: [registry],
  });
  const attemptRecorded = opts.attemptsElsewhere ? () => {} : registerAttemptMetrics(registry);
  // One read of the queue for the two gauges of a scrape (each counts every pending delivery), not one each.
  let queueRead: { at: number; stats: ReturnType<typeof opts.queueStats> } | null = null;
  const queueStats = () => {
    const at = now();
    if (queueRead === null || at - queueRead.at > QUEUE_STATS_REUSE_MS) {
      queueRead = { at, stats: opts.queueStats() };
    }
    return queueRead.stats;
  };
  new Gauge({
    name: 'hookrail_backlog_deliveries',
    help: 'Pending deliveries across all endpoints (shared queue).',
    registers: [registry],
    async collect() {
      this.set((await queueStats()).pending);
    },
  });
  new Gauge({
    name: 'hookrail_circuits_open',
    help: 'Enabled endpoints whose circuit is open or half-open.',
    registers: [registry],
    async collect() {
      this.set((await queueStats()).circuitsOpen);
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
  // One laneStats() call serves both lane gauges of a scrape (they share its promise while it runs) and every
  // scrape for LANE_STATS_TTL_MS after it answered. A failure is not kept: that scrape fails, as before, and the next
  // one asks again. A lane move by this process drops the answer, so its own moves show at the next scrape.
  let laneCache: LaneCache | null = null;
  const { laneStats } = opts;
  const cachedLaneStats = (load: () => Promise<LaneStats>): Promise<LaneStats> => {
    const c = laneCache;
    if (c && (c.answeredAt === null || now() - c.answeredAt < LANE_STATS_TTL_MS)) return c.stats;
    const entry: LaneCache = { stats: load(), answeredAt: null };
    laneCache = entry;
    entry.stats.then(
      () => {
        entry.answeredAt = now();
      },
      () => {
        if (laneCache === entry) laneCache = null;
      },
    );
    return entry.stats;
  };
  if (laneStats) {
    new Gauge({
      name: 'hookrail_lane_dedicated_endpoints',
      help: 'Endpoints in dedicated lanes (shared queue).',
      registers: [registry],
      async collect() {
        this.set((await cachedLaneStats(laneStats)).dedicatedEndpoints);
      },
    });
    new Gauge({
      name: 'hookrail_lane_backlog_deliveries',
      help: 'Pending deliveries by lane; every dedicated lane is counted as lane="dedicated".',
      labelNames: ['lane'],
      registers: [registry],
      async collect() {
        const { pendingByLane } = await cachedLaneStats(laneStats);
        this.reset();
        for (const [lane, n] of Object.entries(pendingByLane)) this.set({ lane }, n);
      },
    });
  }

  return {
    eventAccepted: () => events.inc(),
    laneMoved(direction) {
      laneMoves.inc({ direction });
      laneCache = null;
    },
    attemptRecorded,
    async render() {
      const body = await registry.metrics();
      const elsewhere = opts.attemptsElsewhere ? await opts.attemptsElsewhere() : '';
      return { contentType: registry.contentType, body: elsewhere ? `${body}\n${elsewhere}` : body };
    },
  };
}
