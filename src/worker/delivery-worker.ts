/**
 * The delivery role's loop. It keeps up to `concurrency` attempts running: whenever slots are free it leases due
 * deliveries (fair across endpoints, within each endpoint's global in-flight cap — the store enforces both), starts
 * each attempt at once, and writes finished attempts back in batches (one transaction for all completions that
 * finished in the same event-loop turn or while the previous write was in flight).
 *
 * Batching is what makes it fast: attempts finish one socket read at a time, and a transaction per completion and a
 * lease call per freed slot (each a durable commit on SQLite) cost far more than the attempts themselves. Both the
 * write and the lease are therefore deferred to the end of the current event-loop turn (setImmediate), so every
 * completion and every wake-up of that turn shares one transaction each — the write first, so the lease sees the
 * endpoints' in-flight counts it released. Latency cost: one loop turn.
 *
 * Replays (ADR-10) run on a budget of their own: `replayConcurrency` slots beside the `concurrency` slots of first
 * deliveries and their retries, leased in the same calls (store.deliveryLease's firstLimit / replayLimit). However
 * many replays a tenant asks for, they hold at most their own slots, so first attempts never wait for a worker
 * slot behind them; the endpoint's own in-flight cap is shared (it is the receiver's capacity), and replays start
 * at most 10 a second per endpoint (the store's lease paces them: domain/replay-pacing.ts). The `delivery` role
 * gives a process the first budget, the `replay` role the replay budget; a process with only `replay` visits only
 * endpoints with a due replay that the pacing lets start.
 *
 * Crash safety: a lease expires (`leaseMs`), so a worker killed mid-attempt strands nothing; the maintenance loop
 * returns the delivery to the queue and it is retried with the same webhook-id (at-least-once).
 */
import type { Logger } from 'pino';
import {
  type AttemptDeps,
  deliverAttempt,
  platformFailedAttempt,
  skippedAttempt,
} from '../app/deliver-attempt.ts';
import type { Signal } from '../app/signal.ts';
import { newId } from '../domain/ids.ts';
import type { LaneBinding } from '../domain/lanes.ts';
import type { AttemptCompletion, LeasedDelivery, SkipCompletion } from '../ports/delivery-store.ts';
import type { Metrics } from '../ports/metrics.ts';
import type { Store } from '../ports/store.ts';
import type { Tracing } from '../ports/tracing.ts';

export interface DeliveryWorkerOptions {
  store: Store;
  attempt: AttemptDeps;
  owner: string;
  /** First deliveries and their retries in flight in this process at most; 0: none (the replay role alone). */
  concurrency: number;
  /** Replays in flight in this process at most, beside `concurrency`; 0 or absent: replays are not leased. */
  replayConcurrency?: number;
  /** Most deliveries leased for one endpoint per lease call, so one endpoint cannot take every free slot. */
  perEndpoint: number;
  leaseMs: number;
  /** The lanes this worker leases from (`--lanes`, domain/lanes.ts); absent: every lane. */
  lanes?: LaneBinding;
  pollMs: number;
  /** Poked by fan-out in this process when new work exists. */
  wake: Signal;
  /** How often the circuit-open pass runs (see runCircuitOpenPass); default CIRCUIT_OPEN_PASS_MS. */
  circuitOpenPassMs?: number;
  logger: Logger | null;
  metrics: Metrics | null;
  /** A span per attempt made (not per circuit-open skip of the pass below); null or absent: no tracing. */
  tracing?: Tracing | null;
}

/**
 * Interval of the circuit-open pass: a delivery of a blocked endpoint is recorded as `circuit_open` up to about this
 * long after it came due (its queue wait shows it). Short against the retry schedule's gaps (seconds and more);
 * long enough that an outage's skips are written in one or two transactions a second. Measured (bench:isolation,
 * SQLite): passes every 250 ms in batches of 50 cost the healthy endpoints more than one pass a second — every
 * transaction is a durable commit, and SQLite's transactions run on the event loop.
 */
export const CIRCUIT_OPEN_PASS_MS = 1_000;
/** Deliveries per transaction of the pass; the pass yields to other work between batches. */
const CIRCUIT_OPEN_BATCH = 500;
/** Deliveries recorded per pass at most; the rest wait for the next pass. */
const CIRCUIT_OPEN_PASS_MAX = 5_000;

export class DeliveryWorker {
  private running = false;
  private active = 0;
  private activeReplays = 0;
  private loop: Promise<void> | null = null;
  private circuitOpenPass: Promise<void> | null = null;
  private circuitOpenPassedAt = Number.NEGATIVE_INFINITY;
  private pending: AttemptCompletion[] = [];
  private writing: Promise<void> | null = null;
  private flushScheduled = false;
  private idle: Array<() => void> = [];

  constructor(private readonly opts: DeliveryWorkerOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops leasing, waits for in-flight attempts and their writes. */
  async stop(): Promise<void> {
    this.running = false;
    this.opts.wake.poke();
    await this.loop;
    await this.circuitOpenPass;
    while (this.active > 0 || this.pending.length > 0 || this.writing) {
      await new Promise<void>((resolve) => this.idle.push(resolve));
    }
  }

  get inFlight(): number {
    return this.active;
  }

  /** Clock time at which the latest finished circuit-open pass started (tests wait for it). */
  get circuitOpenPassStartedAt(): number {
    return this.circuitOpenPassedAt;
  }

  private async run(): Promise<void> {
    const { store, owner, concurrency, perEndpoint, leaseMs, pollMs, wake, attempt } = this.opts;
    const replayConcurrency = this.opts.replayConcurrency ?? 0;
    while (this.running) {
      this.maybeStartCircuitOpenPass();
      const freeReplays = replayConcurrency - this.activeReplays;
      const freeFirst = concurrency - (this.active - this.activeReplays);
      const free = freeFirst + freeReplays;
      let leased: LeasedDelivery[] = [];
      let leasedAt = 0;
      if (free > 0) {
        try {
          leasedAt = attempt.clock.now();
          leased = await store.deliveryLease({
            owner,
            now: leasedAt,
            limit: free,
            firstLimit: freeFirst,
            replayLimit: freeReplays,
            replaysOnly: concurrency === 0,
            perEndpoint,
            leaseMs,
            lanes: this.opts.lanes,
          });
        } catch (err) {
          this.opts.logger?.warn({ err }, 'lease failed; retrying');
          await wake.wait(pollMs * 5);
          continue;
        }
      }
      for (const l of leased) this.startAttempt(l, leasedAt);
      // Full batch: more may be due right now. Otherwise wait for work (fan-out poke), a free slot, or the poll.
      if (leased.length === 0 || leased.length < free) await wake.wait(pollMs);
      else if (this.active >= concurrency + replayConcurrency) await wake.wait(pollMs);
      // Let the rest of this turn's completions and pokes land (and their write go first): one lease for them all.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * The circuit-open pass, beside the main loop: the deliveries of blocked endpoints (circuit open, next probe not
   * due) that have come due are recorded as `circuit_open` attempts — no request — and rescheduled, so their
   * schedules keep running through the outage (PRODUCT.md §5). Unleased, in transactions of up to
   * CIRCUIT_OPEN_BATCH (store.deliverySkipBlocked): an outage's skips, however many, are a transaction or a few a
   * second that hold no healthy endpoint's queue row and take no attempt slot. The main loop's leases never see a
   * blocked endpoint. Started by the main loop (so it runs on the injected clock) at most every
   * `circuitOpenPassMs`, one at a time.
   */
  private maybeStartCircuitOpenPass(): void {
    const startedAt = this.opts.attempt.clock.now();
    const every = this.opts.circuitOpenPassMs ?? CIRCUIT_OPEN_PASS_MS;
    if (this.circuitOpenPass || startedAt - this.circuitOpenPassedAt < every) return;
    this.circuitOpenPass = this.runCircuitOpenPass()
      .then(() => {
        this.circuitOpenPassedAt = startedAt;
      })
      .catch((err) => {
        // Nothing was written (one transaction per batch): a later pass records them.
        this.opts.logger?.warn({ err }, 'circuit-open pass failed; retrying');
      })
      .finally(() => {
        this.circuitOpenPass = null;
      });
  }

  /** One circuit-open pass (public for tests that drive it step by step); returns the deliveries it recorded. */
  async runCircuitOpenPass(): Promise<number> {
    const { store, attempt } = this.opts;
    const { clock, random } = attempt;
    let recorded = 0;
    while (recorded < CIRCUIT_OPEN_PASS_MAX) {
      const now = clock.now();
      const written = await store.deliverySkipBlocked({
        now,
        limit: CIRCUIT_OPEN_BATCH,
        lanes: this.opts.lanes,
        skip: (skipped) => skippedAttempt(random, skipped, now),
        ids: { notification: () => newId('notification', now, random.bytes(10)) },
      });
      for (const c of written) this.recordMetrics(c);
      recorded += written.length;
      // A batch short of the limit took everything due; what comes due meanwhile is the next pass's.
      if (written.length < CIRCUIT_OPEN_BATCH) break;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return recorded;
  }

  private recordMetrics(completion: SkipCompletion): void {
    const a = completion.attempt;
    this.opts.metrics?.attemptRecorded({
      outcome: a.outcome,
      errorClass: a.errorClass,
      deadLettered: completion.next.status === 'dead',
      queueMs: a.queueMs,
      platformMs: a.platformMs,
      consumerMs: a.consumerMs,
    });
  }

  private startAttempt(leased: LeasedDelivery, leasedAt: number): void {
    this.active++;
    if (leased.delivery.replayedFrom !== null) this.activeReplays++;
    void this.runAttempt(leased, leasedAt);
  }

  /**
   * One promise per attempt (a then/catch/finally chain made three, and three closures). Never rejects.
   *
   * An attempt that throws failed on Hookrail's side (a secret it cannot open, a bug), not the endpoint's: it is
   * recorded as a `platform_error` attempt through the same completion write, so the retry schedule and its limits
   * apply and the delivery ends delivered or dead-lettered. Left to its lease instead, it came back due at once with
   * nothing recorded, failed again, and never ended (and under `endpoint` ordering held up everything behind it).
   */
  private async runAttempt(leased: LeasedDelivery, leasedAt: number): Promise<void> {
    const { attempt, owner, logger } = this.opts;
    try {
      let completion: AttemptCompletion;
      let cause: unknown = null;
      try {
        completion = await deliverAttempt(attempt, leased, owner, leasedAt);
      } catch (err) {
        cause = err;
        completion = platformFailedAttempt(attempt, leased, owner, leasedAt);
      }
      this.pending.push(completion);
      this.scheduleFlush();
      if (completion.attempt.errorClass === 'platform_error') {
        // Once per attempt, at error level: the attempt log says only that Hookrail failed; the cause is here.
        logger?.error(
          {
            ...(cause === null ? { reason: completion.attempt.errorMessage } : { err: cause }),
            delivery: leased.delivery.id,
            endpoint: leased.endpoint.id,
            attemptNo: completion.attempt.attemptNo,
            next: completion.next.status,
          },
          'attempt failed on the platform side; recorded as platform_error',
        );
      }
      this.recordMetrics(completion);
      // The span is made from the finished attempt's record: nothing per attempt when tracing is off.
      if (this.opts.tracing) this.opts.tracing.attemptFinished(leased, completion);
    } catch (err) {
      // Not even a platform_error record could be made: the lease expires and the delivery is leased again. The last
      // resort, not the path of a failed attempt. (A throw from metrics or tracing lands here too; the record is
      // already queued by then.)
      logger?.error({ err, delivery: leased.delivery.id }, 'attempt crashed');
    } finally {
      this.active--;
      if (leased.delivery.replayedFrom !== null) this.activeReplays--;
      this.opts.wake.poke();
      this.settle();
    }
  }

  /** Writes at the end of this event-loop turn, so all completions of the turn share one transaction. */
  private scheduleFlush(): void {
    if (this.flushScheduled || this.writing) return; // a write in flight flushes again when it ends
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
      this.settle();
    });
  }

  private flush(): void {
    if (this.writing || this.pending.length === 0) return;
    const batch = this.pending.splice(0);
    this.writing = (async () => {
      for (let tries = 0; ; tries++) {
        try {
          const { clock, random } = this.opts.attempt;
          const now = clock.now();
          await this.opts.store.deliveryComplete({
            completions: batch,
            now,
            ids: { notification: () => newId('notification', now, random.bytes(10)) },
          });
          return;
        } catch (err) {
          // The attempt happened; its record must not be dropped. Retry until the store is back (the lease may
          // expire meanwhile, then the delivery is sent again — a duplicate with the same webhook-id — and this
          // record, fenced to its own lease by leaseUntil, is written as a late one that leaves the new lease be).
          this.opts.logger?.warn({ err, tries }, 'recording attempts failed; retrying');
          await new Promise((r) => setTimeout(r, Math.min(5000, 100 * 2 ** tries)));
        }
      }
    })().finally(() => {
      this.writing = null;
      // The write released in-flight slots in the store: lease again now rather than at the next poll.
      this.opts.wake.poke();
      this.flush();
      this.settle();
    });
  }

  private settle(): void {
    if (this.active === 0 && this.pending.length === 0 && !this.writing && !this.flushScheduled) {
      for (const r of this.idle.splice(0)) r();
    }
  }
}
