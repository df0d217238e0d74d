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
 * Crash safety: a lease expires (`leaseMs`), so a worker killed mid-attempt strands nothing; the maintenance loop
 * returns the delivery to the queue and it is retried with the same webhook-id (at-least-once).
 */
import type { Logger } from 'pino';
import { type AttemptDeps, deliverAttempt } from '../app/deliver-attempt.ts';
import type { Signal } from '../app/signal.ts';
import { newId } from '../domain/ids.ts';
import type { LaneBinding } from '../domain/lanes.ts';
import type { AttemptCompletion, LeasedDelivery } from '../ports/delivery-store.ts';
import type { Metrics } from '../ports/metrics.ts';
import type { Store } from '../ports/store.ts';

export interface DeliveryWorkerOptions {
  store: Store;
  attempt: AttemptDeps;
  owner: string;
  /** Attempts in flight in this process at most. */
  concurrency: number;
  /** Most deliveries leased for one endpoint per lease call, so one endpoint cannot take every free slot. */
  perEndpoint: number;
  leaseMs: number;
  /** The lanes this worker leases from (`--lanes`, domain/lanes.ts); absent: every lane. */
  lanes?: LaneBinding;
  pollMs: number;
  /** Poked by fan-out in this process when new work exists. */
  wake: Signal;
  logger: Logger | null;
  metrics: Metrics | null;
}

export class DeliveryWorker {
  private running = false;
  private active = 0;
  private loop: Promise<void> | null = null;
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
    while (this.active > 0 || this.pending.length > 0 || this.writing) {
      await new Promise<void>((resolve) => this.idle.push(resolve));
    }
  }

  get inFlight(): number {
    return this.active;
  }

  private async run(): Promise<void> {
    const { store, owner, concurrency, perEndpoint, leaseMs, pollMs, wake, attempt } = this.opts;
    while (this.running) {
      const free = concurrency - this.active;
      let leased: LeasedDelivery[] = [];
      let leasedAt = 0;
      if (free > 0) {
        try {
          leasedAt = attempt.clock.now();
          leased = await store.deliveryLease({
            owner,
            now: leasedAt,
            limit: free,
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
      else if (this.active >= concurrency) await wake.wait(pollMs);
      // Let the rest of this turn's completions and pokes land (and their write go first): one lease for them all.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  private startAttempt(leased: LeasedDelivery, leasedAt: number): void {
    this.active++;
    deliverAttempt(this.opts.attempt, leased, this.opts.owner, leasedAt)
      .then((completion) => {
        const a = completion.attempt;
        this.opts.metrics?.attemptRecorded({
          outcome: a.outcome,
          errorClass: a.errorClass,
          deadLettered: completion.next.status === 'dead',
          queueMs: a.queueMs,
          platformMs: a.platformMs,
          consumerMs: a.consumerMs,
        });
        this.pending.push(completion);
        this.scheduleFlush();
      })
      .catch((err) => {
        // A bug, not an endpoint failure: leave the lease to expire so the delivery is retried.
        this.opts.logger?.error({ err, delivery: leased.delivery.id }, 'attempt crashed');
      })
      .finally(() => {
        this.active--;
        this.opts.wake.poke();
        this.settle();
      });
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
          // expire meanwhile, then the delivery is sent again — a duplicate with the same webhook-id).
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
