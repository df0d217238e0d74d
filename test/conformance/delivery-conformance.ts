/**
 * The delivery-plane conformance suite (src/ports/delivery-store.ts): endpoints and secrets, fan-out, leasing,
 * completion and cancellation, written once against the port and run on every Store adapter. Like
 * store-conformance.ts it knows no SQL, gets a fresh migrated store per test and drives every timestamp with
 * fixed fake times. The concurrency tests (Promise.all of several fan-out runs / leasing workers on one store) must
 * pass on single-process stores too.
 */
import { afterEach, beforeEach, describe } from 'vitest';
import { completionConformance } from './delivery/completion.ts';
import { endpointsSecretsConformance } from './delivery/endpoints-secrets.ts';
import { fanoutConformance } from './delivery/fanout.ts';
import { createDeliveryHarness } from './delivery/harness.ts';
import { leaseFencingConformance } from './delivery/lease-fencing.ts';
import { leasingConformance } from './delivery/leasing.ts';
import { readsCancellationConformance } from './delivery/reads-cancellation.ts';
import { replayBudgetConformance } from './delivery/replay-budget.ts';
import { replayPacingConformance } from './delivery/replay-pacing.ts';
import { secretRetirementConformance } from './delivery/secret-retirement.ts';
import { type StoreConformanceOptions, skipAwareTest } from './store-conformance.ts';

export function runDeliveryConformance(opts: StoreConformanceOptions): void {
  const { test, checkSkips } = skipAwareTest('runDeliveryConformance', opts);

  describe(`Delivery store conformance: ${opts.name}`, () => {
    const h = createDeliveryHarness();

    beforeEach(async () => {
      h.store = await opts.createStore();
      await h.store.migrate();
    });
    afterEach(async () => {
      if (opts.destroyStore) await opts.destroyStore(h.store);
      else await h.store.close();
    });

    endpointsSecretsConformance({ h, test });
    fanoutConformance({ h, test });
    leasingConformance({ h, test });
    completionConformance({ h, test });
    leaseFencingConformance({ h, test });
    readsCancellationConformance({ h, test });
    replayBudgetConformance({ h, test });
    replayPacingConformance({ h, test });
    secretRetirementConformance({ h, test });
  });

  checkSkips();
}
