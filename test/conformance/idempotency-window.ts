/**
 * The idempotency window's boundary, the same on every store: a key recorded at `c` is live for [c, c + window) —
 * a retry 1 ms before the end gets the original event, one at exactly `c + window` creates a new event, which then
 * holds the key for a window of its own. Batches inserted at their own `now`, as the intake does.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { newId } from '../../src/domain/ids.ts';
import type { NewEvent, Store } from '../../src/ports/store.ts';
import { createTenant, HOUR } from './fixtures.ts';
import { NOW, type StoreConformanceOptions, skipAwareTest } from './store-conformance.ts';

const WINDOW = 24 * HOUR;

function keyed(tenantId: string, key: string, at: number, n = 1): NewEvent {
  const data = JSON.stringify({ n });
  return {
    id: newId('event', at, randomBytes(10)),
    tenantId,
    type: 'order.created',
    resourceId: null,
    data,
    idempotencyKey: key,
    requestHash: createHash('sha256').update(`order.created\n\n${data}`).digest('hex'),
    createdAt: at,
  };
}

export function runIdempotencyWindowConformance(opts: StoreConformanceOptions): void {
  const { test, checkSkips } = skipAwareTest('runIdempotencyWindowConformance', opts);

  describe(`Idempotency window conformance: ${opts.name}`, () => {
    let store: Store;
    beforeEach(async () => {
      store = await opts.createStore();
      await store.migrate();
    });
    afterEach(async () => {
      if (opts.destroyStore) await opts.destroyStore(store);
      else await store.close();
    });
    const insert = async (e: NewEvent) =>
      (await store.eventInsertBatch({ events: [e], now: e.createdAt, idempotencyWindowMs: WINDOW }))[0];

    test('a key is live for [created_at, created_at + window): 1 ms before the end deduplicates, at the end it is free', async () => {
      const tenant = await createTenant(store, NOW);
      const a = keyed(tenant.id, 'k', NOW);
      expect(await insert(a)).toEqual({ kind: 'created', event: a });

      const last = NOW + WINDOW - 1;
      expect(await insert(keyed(tenant.id, 'k', last))).toEqual({ kind: 'duplicate', event: a });
      expect(await insert(keyed(tenant.id, 'k', last, 2))).toEqual({ kind: 'key_conflict', event: a });

      const b = keyed(tenant.id, 'k', NOW + WINDOW);
      expect(await insert(b)).toEqual({ kind: 'created', event: b });
      // The key is the new event's now, for a window of its own.
      expect(await insert(keyed(tenant.id, 'k', NOW + WINDOW))).toEqual({ kind: 'duplicate', event: b });
      expect(await insert(keyed(tenant.id, 'k', NOW + 2 * WINDOW - 1))).toEqual({
        kind: 'duplicate',
        event: b,
      });
      expect((await store.eventList({ tenantId: tenant.id, limit: 10, cursor: null })).data).toHaveLength(2);
    });

    test('at exactly the end of the window a different request under the key creates an event, no conflict', async () => {
      const tenant = await createTenant(store, NOW);
      const a = keyed(tenant.id, 'k', NOW);
      await insert(a);
      const other = keyed(tenant.id, 'k', NOW + WINDOW, 2);
      expect(await insert(other)).toEqual({ kind: 'created', event: other });
      expect(await store.eventGet({ id: a.id, tenantId: tenant.id })).toEqual(a);
    });
  });

  checkSkips();
}
