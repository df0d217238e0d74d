/**
 * The fan-out role's loop: turns committed events into deliveries, in batches, exactly once (the store does the
 * matching and the writes in one transaction). Several fan-out processes may run on PostgreSQL.
 */
import type { Logger } from 'pino';
import type { Signal } from '../app/signal.ts';
import { newId } from '../domain/ids.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { Store } from '../ports/store.ts';
import type { Tracing } from '../ports/tracing.ts';

export interface FanoutWorkerOptions {
  store: Store;
  clock: Clock;
  random: Random;
  /** Events per pass at most. */
  batch: number;
  /** A pass ends after the event that brings its deliveries to this many (events matching many endpoints). */
  deliveryBatch: number;
  pollMs: number;
  /** Poked by intake in this process. */
  wake: Signal;
  /** Poked when deliveries were created. */
  deliveriesCreated: Signal;
  logger: Logger | null;
  /** A span per pass that took events, or failed; null or absent: no tracing. */
  tracing?: Tracing | null;
}

export class FanoutWorker {
  private running = false;
  private loop: Promise<void> | null = null;

  constructor(private readonly opts: FanoutWorkerOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.opts.wake.poke();
    await this.loop;
  }

  /** One pass; exported for tests that drive the plane step by step. */
  async runOnce(): Promise<{ events: number; deliveries: number }> {
    const { store, clock, random, batch, deliveryBatch } = this.opts;
    const now = clock.now();
    const tracing = this.opts.tracing;
    let result: { events: number; deliveries: number };
    try {
      result = await store.fanoutRun({
        now,
        limit: batch,
        deliveryLimit: deliveryBatch,
        ids: {
          delivery: () => newId('delivery', now, random.bytes(10)),
          webhookId: () => newId('message', now, random.bytes(10)),
        },
      });
    } catch (err) {
      tracing?.fanoutPass({ events: 0, deliveries: 0, startedAt: now, finishedAt: clock.now(), error: err });
      throw err;
    }
    if (result.deliveries > 0) this.opts.deliveriesCreated.poke();
    // Idle polls (every pollMs) are not traced: a span would say only that there was nothing to do.
    if (tracing && result.events > 0)
      tracing.fanoutPass({ ...result, startedAt: now, finishedAt: clock.now(), error: null });
    return result;
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        const { events, deliveries } = await this.runOnce();
        // A full pass (by either limit) may have left more: go again at once.
        if (events < this.opts.batch && deliveries < this.opts.deliveryBatch) {
          await this.opts.wake.wait(this.opts.pollMs);
        }
      } catch (err) {
        this.opts.logger?.warn({ err }, 'fan-out pass failed; retrying');
        await this.opts.wake.wait(this.opts.pollMs * 10);
      }
    }
  }
}
