/**
 * The delivery-plane conformance suite (src/ports/delivery-store.ts): endpoints and secrets, fan-out, leasing,
 * completion and cancellation, written once against the port and run on every Store adapter. Like
 * store-conformance.ts it knows no SQL, gets a fresh migrated store per test and drives every timestamp with
 * fixed fake times. The concurrency tests (Promise.all of several fan-out runs / leasing workers on one store) must
 * pass on single-process stores too.
 */
import { afterEach, beforeEach, describe, it } from 'vitest';
import { completionConformance } from './delivery/completion.ts';
import { endpointsSecretsConformance } from './delivery/endpoints-secrets.ts';
import { fanoutConformance } from './delivery/fanout.ts';
import { createDeliveryHarness } from './delivery/harness.ts';
import { leasingConformance } from './delivery/leasing.ts';
import { readsCancellationConformance } from './delivery/reads-cancellation.ts';
import type { StoreConformanceOptions } from './store-conformance.ts';

export function runDeliveryConformance(opts: StoreConformanceOptions): void {
  const skipped = new Map<string, string>();
  for (const s of opts.skip ?? []) for (const t of s.tests) skipped.set(t, s.reason);
  const seen = new Set<string>();
  const test = (name: string, fn: () => Promise<void>) => {
    seen.add(name);
    const reason = skipped.get(name);
    if (reason !== undefined) it.skip(`${name} [skipped: ${reason}]`, fn);
    else it(name, fn);
  };

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
    readsCancellationConformance({ h, test });
  });

  for (const name of skipped.keys()) {
    if (!seen.has(name))
      throw new Error(`runDeliveryConformance: skip names unknown test ${JSON.stringify(name)}`);
  }
}
