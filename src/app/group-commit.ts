/**
 * Group commit for the accepted-event log. Requests that arrive while a commit is in flight (or in the same
 * turn of the event loop) are written together in one transaction — one fsync for many events — and each
 * request is answered only after the transaction holding its own event is durable. Under light load a batch
 * is a single event and nothing waits; under heavy load batches grow by themselves, which is the point.
 *
 * Where several commits may be in flight (PostgreSQL), a further one starts only once MIN_CONCURRENT_BATCH events
 * are waiting; fewer wait until the commits in flight are done (or more arrive). Otherwise the slots fill with
 * commits of one or two events whose round trips cost as much as a full batch's (bench/intake.ts: +25-35 %
 * events/s at 64 connections).
 */
import { type EventInsertOutcome, type NewEvent, type Store, StoreUnavailableError } from '../ports/store.ts';
import type { Tracing } from '../ports/tracing.ts';

/** Events worth a commit of their own while another commit is already in flight. */
const MIN_CONCURRENT_BATCH = 16;

interface Waiter {
  event: NewEvent;
  resolve: (o: EventInsertOutcome) => void;
  reject: (e: unknown) => void;
}

export interface GroupCommitterOptions {
  store: Store;
  now: () => number;
  idempotencyWindowMs: number;
  maxBatch: number;
  /** Commits that may be in flight at once (1 on SQLite, a few on PostgreSQL to overlap round trips). */
  maxInFlight: number;
  /** Called after each durable commit that created events (wakes fan-out in this process). */
  onCommit?: () => void;
  /**
   * Called as soon as a batch has been handed to the store, before it is durable. Where the store runs the writes
   * of one event-loop turn in one transaction (`capabilities.sharedTurn`), waking fan-out here lets its pass join
   * the batch's transaction: the events and their deliveries are committed and synced once, not twice.
   */
  onSubmit?: () => void;
  /** A span per batch, from hand-over to durable commit; null or absent: no tracing. */
  tracing?: Tracing | null;
}

export class GroupCommitter {
  private queue: Waiter[] = [];
  private inFlight = 0;
  private scheduled = false;
  private drainWaiters: Array<() => void> = [];

  constructor(private readonly opts: GroupCommitterOptions) {}

  submit(event: NewEvent): Promise<EventInsertOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ event, resolve, reject });
      this.schedule();
    });
  }

  /** Resolves once every submitted event has been committed or failed. */
  drain(): Promise<void> {
    if (this.queue.length === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Whether a commit may start now: a slot is free, and either nothing is in flight or the batch is worth it. */
  private mayStart(): boolean {
    if (this.inFlight >= this.opts.maxInFlight) return false;
    return this.inFlight === 0 || this.queue.length >= Math.min(MIN_CONCURRENT_BATCH, this.opts.maxBatch);
  }

  private schedule(): void {
    if (this.scheduled || !this.mayStart()) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.queue.length === 0 || !this.mayStart()) return;
    const batch = this.queue.splice(0, this.opts.maxBatch);
    const tracing = this.opts.tracing;
    this.inFlight++;
    const now = this.opts.now();
    try {
      const inserted = this.opts.store.eventInsertBatch({
        events: batch.map((w) => w.event),
        now,
        idempotencyWindowMs: this.opts.idempotencyWindowMs,
      });
      this.opts.onSubmit?.();
      const outcomes = await inserted;
      for (let i = 0; i < batch.length; i++) (batch[i] as Waiter).resolve(outcomes[i] as EventInsertOutcome);
      this.opts.onCommit?.();
      if (tracing) {
        let created = 0;
        for (const o of outcomes) if (o.kind === 'created') created++;
        tracing.intakeBatch({
          events: batch.length,
          created,
          startedAt: now,
          finishedAt: this.opts.now(),
          error: null,
        });
      }
    } catch (err) {
      tracing?.intakeBatch({
        events: batch.length,
        created: 0,
        startedAt: now,
        finishedAt: this.opts.now(),
        error: err,
      });
      for (const w of batch) w.reject(err);
      // The store is unreachable: fail everything queued behind this batch now (503, retry with the same
      // Idempotency-Key) rather than let each request wait out its own timeout in turn.
      if (err instanceof StoreUnavailableError) for (const w of this.queue.splice(0)) w.reject(err);
    } finally {
      this.inFlight--;
      if (this.queue.length > 0) this.schedule();
      else if (this.inFlight === 0) for (const done of this.drainWaiters.splice(0)) done();
    }
  }
}
