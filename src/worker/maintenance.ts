/**
 * The maintenance role: periodic passes that are idempotent and safe to run in several processes at once —
 * returning expired leases to the queue (a crashed worker's deliveries), pruning expired idempotency keys,
 * auto-disabling endpoints after 72 h of continuous failure (ADR-14), closing digest windows, mailing the
 * notification outbox (ADR-09), the lane control loop (ADR-03: promote, demote, re-hash; see domain/lanes.ts), and
 * deleting what has outlived its retention (domain/retention.ts).
 * The outbox runs on a loop of its own: a slow or failing SMTP server (each exchange may take up to its timeouts,
 * ~20 s) only delays the mail, never the returning of expired leases or anything else here.
 */
import type { Logger } from 'pino';
import { AUTO_DISABLE_AFTER_MS } from '../domain/endpoint-health.ts';
import { IDEMPOTENCY_WINDOW_MS } from '../domain/event-rules.ts';
import { newId } from '../domain/ids.ts';
import { DEFAULT_LANE_THRESHOLDS, DEFAULT_SHARED_LANES, type LaneThresholds } from '../domain/lanes.ts';
import {
  DEFAULT_RETENTION,
  type PruneCounts,
  pruneMayHaveMore,
  type RetentionDays,
  retentionCutoffs,
} from '../domain/retention.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { Mailer } from '../ports/mailer.ts';
import type { Metrics } from '../ports/metrics.ts';
import type { Store } from '../ports/store.ts';

/**
 * A claimed notification is not claimed again for this long. Notifications are claimed one at a time, so the one
 * SMTP exchange made under a claim (at most ~20 s with the mailer's timeouts) ends well within it and no other
 * process mails it twice.
 */
const MAIL_CLAIM_MS = 60_000;
const MAIL_RETRY_BASE_MS = 30_000;
const MAIL_RETRY_MAX_MS = 3_600_000;
/**
 * The retention pass deletes in batches of this many of each kind, one short transaction each, batch after batch
 * while more has expired, for at most half the maintenance interval (and RETENTION_MAX_BATCHES): it keeps up with
 * as much as the database can delete beside its other work, and a large expired backlog (retention shortened, a
 * first run on an old database) drains over several passes rather than in one long one.
 */
const RETENTION_BATCH = 500;
/** Expired idempotency records one batch deletes at most (small rows: a few milliseconds). */
const IDEMPOTENCY_BATCH = 5_000;
/** Deliveries a retention batch deletes at most (domain/retention.ts retentionWalk): tens of milliseconds. */
const RETENTION_DELIVERY_BATCH = 5_000;
const RETENTION_MAX_BATCHES = 1_000;

export interface MaintenanceOptions {
  store: Store;
  clock: Clock;
  random: Random;
  intervalMs: number;
  /** null: no SMTP configured — notifications are listed only. */
  mailer: Mailer | null;
  logger: Logger | null;
  /** The lane scheme's shared-lane count and the promotion thresholds (defaults: domain/lanes.ts). */
  lanes?: { sharedLanes: number; thresholds: LaneThresholds };
  metrics?: Metrics | null;
  /** How long events, dead letters, attempts and audit records are kept (default: DEFAULT_RETENTION). */
  retention?: RetentionDays;
}

/**
 * The deleting steps' loop: `batch` once, then again while it says more is left and `clock` is before `until` (at
 * most RETENTION_MAX_BATCHES), with a turn of the event loop between batches — SQLite's run synchronously, and
 * without it a pass held up leases, completions and requests for its whole budget (seconds with a large backlog).
 */
async function inBatches(clock: Clock, until: number, batch: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < RETENTION_MAX_BATCHES && (i === 0 || clock.now() < until); i++) {
    if (!(await batch())) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private mailing: Promise<void> | null = null;
  /** Where the retention pass's walk through old events stopped (domain/retention.ts PruneBatch). */
  private retentionAfter: string | null = null;

  constructor(private readonly opts: MaintenanceOptions) {}

  start(): void {
    this.timer ??= setInterval(() => {
      this.running ??= this.pass().finally(() => {
        this.running = null;
      });
      this.mailing ??= this.mailOutbox().finally(() => {
        this.mailing = null;
      });
    }, this.opts.intervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await Promise.all([this.running, this.mailing]);
    await this.opts.mailer?.close();
  }

  /** One full pass and the outbox after it; tests call it directly with a fake clock. */
  async runOnce(): Promise<void> {
    await this.pass();
    await this.mailOutbox();
  }

  /** The outbox, its failure logged like a pass's step. */
  private async mailOutbox(): Promise<void> {
    try {
      await this.sendNotifications();
    } catch (err) {
      this.opts.logger?.warn({ err, step: 'outbox' }, 'maintenance step failed');
    }
  }

  /** Everything but the outbox, which the timer runs on its own loop. */
  private async pass(): Promise<void> {
    const { store, clock, random, logger } = this.opts;
    const now = clock.now();
    // The deleting steps (idempotency records, retention) share half an interval per pass, so that the other
    // steps, lease expiry first, still run every interval however large the backlogs.
    const until = now + this.opts.intervalMs / 2;
    const ids = {
      audit: () => newId('audit', now, random.bytes(10)),
      notification: () => newId('notification', now, random.bytes(10)),
    };
    const step = async (name: string, fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        logger?.warn({ err, step: name }, 'maintenance step failed');
      }
    };
    await step('housekeeping', () => store.housekeeping());
    await step('leases', async () => {
      const expired = await store.deliveryExpireLeases({ now });
      if (expired > 0) logger?.info({ expired }, 'returned expired leases to the queue');
    });
    await step('idempotency', () =>
      inBatches(clock, until, async () => {
        const olderThan = now - IDEMPOTENCY_WINDOW_MS;
        return (await store.idempotencyPrune({ olderThan, limit: IDEMPOTENCY_BATCH })) === IDEMPOTENCY_BATCH;
      }),
    );
    await step('auto-disable', async () => {
      const disabled = await store.endpointAutoDisable({ now, afterMs: AUTO_DISABLE_AFTER_MS, ids });
      for (const e of disabled)
        logger?.warn({ endpoint: e.id, tenant: e.tenantId }, 'endpoint auto-disabled');
    });
    await step('digests', () => store.notificationDigestRun({ now, ids }));
    await step('lanes', async () => {
      const { sharedLanes, thresholds } = this.opts.lanes ?? {
        sharedLanes: DEFAULT_SHARED_LANES,
        thresholds: DEFAULT_LANE_THRESHOLDS,
      };
      for (const m of await store.laneRebalance({ now, sharedLanes, thresholds })) {
        this.opts.metrics?.laneMoved(m.kind);
        logger?.info(
          { endpoint: m.endpointId, from: m.from, to: m.to, move: m.kind },
          'endpoint changed lane',
        );
      }
    });
    await step('retention', () => this.prune(until));
  }

  /**
   * Deletes what has outlived its retention, a batch at a time, until `budgetEnd` (the pass's; alone, half an
   * interval from now), at least one batch; returns the totals.
   */
  async prune(budgetEnd?: number): Promise<PruneCounts> {
    const { store, clock, logger } = this.opts;
    const cutoffs = retentionCutoffs(clock.now(), this.opts.retention ?? DEFAULT_RETENTION);
    const total: PruneCounts = { events: 0, deliveries: 0, attempts: 0, audit: 0 };
    const until = budgetEnd ?? clock.now() + this.opts.intervalMs / 2;
    await inBatches(clock, until, async () => {
      const batch = await store.retentionPrune({
        cutoffs,
        limit: RETENTION_BATCH,
        deliveryLimit: RETENTION_DELIVERY_BATCH,
        after: this.retentionAfter,
      });
      this.retentionAfter = batch.after;
      total.events += batch.events;
      total.deliveries += batch.deliveries;
      total.attempts += batch.attempts;
      total.audit += batch.audit;
      return pruneMayHaveMore(batch, RETENTION_BATCH);
    });
    if (total.events + total.attempts + total.audit > 0)
      logger?.info(total, 'deleted what outlived its retention');
    return total;
  }

  /** Mails due notifications from the outbox; a failure is rescheduled with backoff, never dropped. */
  async sendNotifications(): Promise<number> {
    const { store, clock, mailer, logger } = this.opts;
    let sent = 0;
    for (;;) {
      const now = clock.now();
      const batch = await store.notificationClaim({ now, limit: 1, leaseMs: MAIL_CLAIM_MS });
      if (batch.length === 0) return sent;
      for (const n of batch) {
        if (!mailer || !n.emailTo) {
          await store.notificationMark({ id: n.id, now, result: { kind: 'logged' } });
          continue;
        }
        try {
          await mailer.send({ to: n.emailTo, subject: n.subject, text: n.body });
          await store.notificationMark({ id: n.id, now: clock.now(), result: { kind: 'sent' } });
          sent++;
        } catch (err) {
          const delay = Math.min(MAIL_RETRY_MAX_MS, MAIL_RETRY_BASE_MS * 2 ** Math.max(0, n.attempts - 1));
          logger?.warn({ err, notification: n.id }, 'notification mail failed; will retry');
          await store.notificationMark({
            id: n.id,
            now: clock.now(),
            result: { kind: 'retry', at: clock.now() + delay, error: String((err as Error).message ?? err) },
          });
        }
      }
    }
  }
}
