/**
 * The operations conformance suite (src/ports/operations-store.ts, and the failure handling that leasing and
 * completion do in src/ports/delivery-store.ts): the shared per-endpoint runtime (circuit, probe, ramp, streak,
 * health), the notification outbox and its digests, auto-disable, re-enable with a backlog choice, replay,
 * statistics, the audit trail, and the operator's repairs (queue rebuild, delivery reconstruction). Written once against the port and run on every Store adapter, like
 * delivery-conformance.ts: no SQL, a fresh migrated store per test, every timestamp a fixed fake time. The
 * concurrency tests (Promise.all on one store) must pass on single-process stores too.
 */
import { afterEach, beforeEach, describe } from 'vitest';
import { auditInTransactionConformance } from './operations/audit-in-transaction.ts';
import { autoDisableConformance } from './operations/auto-disable.ts';
import { deliveryReconstructConformance } from './operations/delivery-reconstruct.ts';
import { enableAfterReplayConformance } from './operations/enable-after-replay.ts';
import { endpointSeriesConformance } from './operations/endpoint-series.ts';
import { createOperationsHarness } from './operations/harness.ts';
import { notificationsConformance } from './operations/notifications.ts';
import { queueRebuildConformance } from './operations/queue-rebuild.ts';
import { recoveryAndDisableNoticesConformance } from './operations/recovery-and-disable-notices.ts';
import { replayStatisticsAuditConformance } from './operations/replay-statistics-audit.ts';
import { retentionConformance } from './operations/retention.ts';
import { runtimeConformance } from './operations/runtime.ts';
import { type StoreConformanceOptions, skipAwareTest } from './store-conformance.ts';

export function runOperationsConformance(opts: StoreConformanceOptions): void {
  const { test, checkSkips } = skipAwareTest('runOperationsConformance', opts);

  describe(`Operations store conformance: ${opts.name}`, () => {
    const h = createOperationsHarness();

    beforeEach(async () => {
      h.store = await opts.createStore();
      await h.store.migrate();
    });
    afterEach(async () => {
      if (opts.destroyStore) await opts.destroyStore(h.store);
      else await h.store.close();
    });

    runtimeConformance({ h, test });
    notificationsConformance({ h, test });
    recoveryAndDisableNoticesConformance({ h, test });
    autoDisableConformance({ h, test });
    enableAfterReplayConformance({ h, test });
    replayStatisticsAuditConformance({ h, test });
    auditInTransactionConformance({ h, test });
    retentionConformance({ h, test });
    queueRebuildConformance({ h, test, rawSql: opts.rawSql });
    deliveryReconstructConformance({ h, test, rawSql: opts.rawSql });
    endpointSeriesConformance({ h, test });
  });

  checkSkips();
}
