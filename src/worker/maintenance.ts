/**
 * The maintenance role: periodic, idempotent passes that are safe to run in several processes at once —
 * returning expired leases to the queue (a crashed worker's deliveries) and pruning expired idempotency keys.
 */
import type { Logger } from 'pino';
import { IDEMPOTENCY_WINDOW_MS } from '../domain/event-rules.ts';
import type { Clock } from '../ports/clock.ts';
import type { Store } from '../ports/store.ts';

export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly opts: { store: Store; clock: Clock; intervalMs: number; logger: Logger | null },
  ) {}

  start(): void {
    this.timer ??= setInterval(() => {
      this.running ??= this.runOnce().finally(() => {
        this.running = null;
      });
    }, this.opts.intervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  async runOnce(): Promise<void> {
    const now = this.opts.clock.now();
    try {
      const expired = await this.opts.store.deliveryExpireLeases({ now });
      if (expired > 0) this.opts.logger?.info({ expired }, 'returned expired leases to the queue');
      await this.opts.store.idempotencyPrune({ olderThan: now - IDEMPOTENCY_WINDOW_MS });
    } catch (err) {
      this.opts.logger?.warn({ err }, 'maintenance pass failed');
    }
  }
}
