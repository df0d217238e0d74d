/**
 * The operations conformance suite (src/ports/operations-store.ts, and the failure handling that leasing and
 * completion do in src/ports/delivery-store.ts): the shared per-endpoint runtime (circuit, probe, ramp, streak,
 * health), the notification outbox and its digests, auto-disable, re-enable with a backlog choice, replay,
 * statistics and the audit trail. Written once against the port and run on every Store adapter, like
 * delivery-conformance.ts: no SQL, a fresh migrated store per test, every timestamp a fixed fake time. The
 * concurrency tests (Promise.all on one store) must pass on single-process stores too.
 */
import { afterEach, beforeEach, describe, it } from 'vitest';
import { autoDisableConformance } from './operations/auto-disable.ts';
import { createOperationsHarness } from './operations/harness.ts';
import { notificationsConformance } from './operations/notifications.ts';
import { replayStatisticsAuditConformance } from './operations/replay-statistics-audit.ts';
import { runtimeConformance } from './operations/runtime.ts';
import type { StoreConformanceOptions } from './store-conformance.ts';

export function runOperationsConformance(opts: StoreConformanceOptions): void {
  const skipped = new Map<string, string>();
  for (const s of opts.skip ?? []) for (const t of s.tests) skipped.set(t, s.reason);
  const seen = new Set<string>();
  const test = (name: string, fn: () => Promise<void>) => {
    seen.add(name);
    const reason = skipped.get(name);
    if (reason !== undefined) it.skip(`${name} [skipped: ${reason}]`, fn);
    else it(name, fn);
  };

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
    autoDisableConformance({ h, test });
    replayStatisticsAuditConformance({ h, test });
  });

  for (const name of skipped.keys()) {
    if (!seen.has(name))
      throw new Error(`runOperationsConformance: skip names unknown test ${JSON.stringify(name)}`);
  }
}
