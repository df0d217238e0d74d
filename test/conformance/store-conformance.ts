/**
 * The Store conformance suite: the behaviour every storage adapter (SQLite, PostgreSQL) must show, written once
 * against the port. Adapter files call `runStoreConformance` with a factory; the suite knows nothing about SQL and
 * branches on `store.capabilities` only. Every test gets a fresh, migrated store and a fixed fake `now`, so results
 * never depend on the wall clock or on other tests.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.ts';
import type { ApiKeyKind, ApiKeyRecord, NewEvent, Store, TenantRecord } from '../../src/ports/store.ts';

export interface StoreConformanceOptions {
  name: string;
  /** A new, empty store; the suite calls migrate() itself (which must be idempotent anyway). */
  createStore: () => Promise<Store>;
  /** Defaults to `store.close()`; e.g. also drop the schema or delete the file. */
  destroyStore?: (store: Store) => Promise<void>;
  /** Tests an adapter cannot pass yet, by exact test name, with the reason shown in the report. */
  skip?: Array<{ reason: string; tests: string[] }>;
  /**
   * Runs SQL (what both dialects accept) on the store's database through a connection of its own: only for the
   * sections that must break what the port keeps consistent (the queue rebuild's drifted rows).
   */
  rawSql?: (store: Store, sql: string) => Promise<void>;
}

/**
 * A suite's `it` that honours `opts.skip`, and the check to call once the suite is declared: a skip that names no
 * test of the suite is an error (a renamed test must not stay skipped silently).
 */
export function skipAwareTest(suite: string, opts: StoreConformanceOptions) {
  const skipped = new Map<string, string>();
  for (const s of opts.skip ?? []) for (const t of s.tests) skipped.set(t, s.reason);
  const seen = new Set<string>();
  const test = (name: string, fn: () => Promise<void>) => {
    seen.add(name);
    const reason = skipped.get(name);
    if (reason !== undefined) it.skip(`${name} [skipped: ${reason}]`, fn);
    else it(name, fn);
  };
  const checkSkips = () => {
    for (const name of skipped.keys()) {
      if (!seen.has(name)) throw new Error(`${suite}: skip names unknown test ${JSON.stringify(name)}`);
    }
  };
  return { test, checkSkips };
}

export type ConformanceTest = ReturnType<typeof skipAwareTest>['test'];

/** 2025-01-01T00:00:00Z: a fixed clock makes ids, windows and timestamps reproducible. */
export const NOW = Date.UTC(2025, 0, 1);
const HOUR = 3_600_000;
const WINDOW = 24 * HOUR;

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const id = (kind: Parameters<typeof newId>[0], at = NOW) => newId(kind, at, randomBytes(10));

function tenantRecord(at = NOW): TenantRecord {
  return {
    id: id('tenant', at),
    name: `tenant ${at}`,
    totpSeedSealed: `sealed:${randomBytes(8).toString('hex')}`,
    createdAt: at,
    deletedAt: null,
  };
}

function apiKeyRecord(kind: ApiKeyKind, tenantId: string | null, at = NOW): ApiKeyRecord {
  const secret = `${kind === 'producer' ? 'hkp' : 'hkt'}_${randomBytes(16).toString('hex')}`;
  return {
    id: id('apiKey', at),
    kind,
    tenantId,
    name: kind === 'producer' ? 'backend' : null,
    hash: sha256(secret),
    prefix: secret.slice(0, 8),
    createdAt: at,
    revokedAt: null,
  };
}

function eventRecord(
  tenantId: string,
  o: { at?: number; type?: string; key?: string | null; body?: unknown } = {},
): NewEvent {
  const at = o.at ?? NOW;
  const type = o.type ?? 'order.created';
  const data = JSON.stringify(o.body ?? { n: 1 });
  return {
    id: id('event', at),
    tenantId,
    type,
    resourceId: null,
    data,
    idempotencyKey: o.key ?? null,
    requestHash: o.key ? sha256(`${type}\n\n${data}`) : null,
    createdAt: at,
  };
}

export function runStoreConformance(opts: StoreConformanceOptions): void {
  const { test, checkSkips } = skipAwareTest('runStoreConformance', opts);

  describe(`Store conformance: ${opts.name}`, () => {
    let store: Store;

    beforeEach(async () => {
      store = await opts.createStore();
      await store.migrate();
    });
    afterEach(async () => {
      if (opts.destroyStore) await opts.destroyStore(store);
      else await store.close();
    });

    async function newTenant(at = NOW): Promise<{ tenant: TenantRecord; key: ApiKeyRecord }> {
      const tenant = tenantRecord(at);
      const key = apiKeyRecord('tenant', tenant.id, at);
      await store.tenantCreate({ tenant, tenantKey: key });
      return { tenant, key };
    }
    const insert = (events: NewEvent[], now = NOW) =>
      store.eventInsertBatch({ events, now, idempotencyWindowMs: WINDOW });

    describe('lifecycle', () => {
      test('migrate is idempotent and ping answers', async () => {
        await store.migrate();
        await store.ping();
        expect(typeof store.capabilities.multiProcess).toBe('boolean');
        expect(typeof store.capabilities.sharedTurn).toBe('boolean');
      });
    });

    describe('tenants', () => {
      test('tenantCreate then tenantGet returns the record', async () => {
        const { tenant } = await newTenant();
        expect(await store.tenantGet({ id: tenant.id })).toEqual(tenant);
        expect(await store.tenantGet({ id: id('tenant') })).toBeNull();
      });

      for (const who of ['tenant', 'operator'] as const)
        test(`step-up state (${who}): each TOTP step accepted once, tries counted first and capped per window`, async () => {
          const { tenant } = await newTenant();
          // The operator's state (tenantId null) is its own: a tenant's tries and accepts never touch it.
          const t = who === 'tenant' ? tenant.id : null;
          const WINDOW = 300_000;
          expect(await store.stepUpState({ tenantId: t })).toEqual({
            lastStep: null,
            failures: 0,
            failuresSince: null,
          });
          expect(await store.stepUpState({ tenantId: id('tenant') })).toBeNull();
          const other = who === 'tenant' ? null : tenant.id;
          const otherBefore = await store.stepUpState({ tenantId: other });
          // Concurrent tries (a PostgreSQL pool runs them at once): exactly the budget is counted.
          const charge = (now: number) => store.stepUpCharge({ tenantId: t, now, windowMs: WINDOW, max: 5 });
          const tries = await Promise.all(Array.from({ length: 12 }, () => charge(NOW)));
          expect(tries.filter(Boolean)).toHaveLength(5);
          expect(await store.stepUpState({ tenantId: t })).toEqual({
            lastStep: null,
            failures: 5,
            failuresSince: NOW,
          });
          expect(await charge(NOW + WINDOW - 1)).toBe(false);
          // A new window counts from one again.
          expect(await charge(NOW + WINDOW)).toBe(true);
          expect(await store.stepUpState({ tenantId: t })).toMatchObject({
            failures: 1,
            failuresSince: NOW + WINDOW,
          });
          // Concurrent accepts of one step: one wins; an older step never; a newer one does. A win clears the count.
          const accepts = await Promise.all(
            Array.from({ length: 6 }, () => store.stepUpAccept({ tenantId: t, step: 100 })),
          );
          expect(accepts.filter(Boolean)).toHaveLength(1);
          expect(await store.stepUpState({ tenantId: t })).toEqual({
            lastStep: 100,
            failures: 0,
            failuresSince: null,
          });
          expect(await store.stepUpAccept({ tenantId: t, step: 99 })).toBe(false);
          expect(await store.stepUpAccept({ tenantId: t, step: 101 })).toBe(true);
          expect(await store.stepUpAccept({ tenantId: id('tenant'), step: 1 })).toBe(false);
          expect(
            await store.stepUpCharge({ tenantId: id('tenant'), now: NOW, windowMs: WINDOW, max: 5 }),
          ).toBe(false);
          // The tenant record itself, and the other party's step-up state, are unchanged by all this.
          expect(await store.tenantGet({ id: tenant.id })).toEqual(tenant);
          expect(await store.stepUpState({ tenantId: other })).toEqual(otherBefore);
        });

      test('tenantList pages newest first with a cursor', async () => {
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) ids.push((await newTenant(NOW + i)).tenant.id);
        const newestFirst = [...ids].reverse();
        const p1 = await store.tenantList({ limit: 2, cursor: null });
        expect(p1.data.map((t) => t.id)).toEqual(newestFirst.slice(0, 2));
        expect(p1.nextCursor).toBe(newestFirst[1]);
        const p2 = await store.tenantList({ limit: 2, cursor: p1.nextCursor });
        expect(p2.data.map((t) => t.id)).toEqual(newestFirst.slice(2, 4));
        const p3 = await store.tenantList({ limit: 2, cursor: p2.nextCursor });
        expect(p3.data.map((t) => t.id)).toEqual(newestFirst.slice(4));
        expect(p3.nextCursor).toBeNull();
        const all = await store.tenantList({ limit: 5, cursor: null });
        expect(all.data).toHaveLength(5);
        expect(all.nextCursor).toBeNull();
      });

      test('tenantDelete hides the tenant and revokes its key', async () => {
        const { tenant, key } = await newTenant();
        const other = await newTenant(NOW + 1);
        expect(await store.apiKeyFindByHash({ hash: key.hash })).toEqual(key);
        expect(await store.tenantDelete({ id: tenant.id, now: NOW + HOUR })).toBe(true);
        expect(await store.tenantGet({ id: tenant.id })).toBeNull();
        expect(await store.apiKeyFindByHash({ hash: key.hash })).toBeNull();
        expect((await store.tenantList({ limit: 10, cursor: null })).data.map((t) => t.id)).toEqual([
          other.tenant.id,
        ]);
        expect(await store.tenantDelete({ id: tenant.id, now: NOW + 2 * HOUR })).toBe(false);
        expect(await store.tenantDelete({ id: id('tenant'), now: NOW })).toBe(false);
        // The other tenant is untouched.
        expect(await store.apiKeyFindByHash({ hash: other.key.hash })).toEqual(other.key);
      });
    });

    describe('api keys', () => {
      test('apiKeyFindByHash finds live producer and tenant keys', async () => {
        const producer = apiKeyRecord('producer', null);
        await store.apiKeyCreate({ key: producer });
        const { key } = await newTenant();
        expect(await store.apiKeyFindByHash({ hash: producer.hash })).toEqual(producer);
        expect(await store.apiKeyFindByHash({ hash: key.hash })).toEqual(key);
        expect(await store.apiKeyFindByHash({ hash: sha256('nope') })).toBeNull();
      });

      test('apiKeyList pages one kind newest first', async () => {
        const producers: string[] = [];
        for (let i = 0; i < 3; i++) {
          const k = apiKeyRecord('producer', null, NOW + i);
          await store.apiKeyCreate({ key: k });
          producers.push(k.id);
        }
        const { key: tenantKey } = await newTenant(NOW + 10);
        const p1 = await store.apiKeyList({ kind: 'producer', limit: 2, cursor: null });
        expect(p1.data.map((k) => k.id)).toEqual([producers[2], producers[1]]);
        expect(p1.data[0]!.kind).toBe('producer');
        const p2 = await store.apiKeyList({ kind: 'producer', limit: 2, cursor: p1.nextCursor });
        expect(p2.data.map((k) => k.id)).toEqual([producers[0]]);
        expect(p2.nextCursor).toBeNull();
        const tenants = await store.apiKeyList({ kind: 'tenant', limit: 10, cursor: null });
        expect(tenants.data).toEqual([tenantKey]);
      });

      test('apiKeyRevoke revokes once, only for the right kind', async () => {
        const k = apiKeyRecord('producer', null);
        await store.apiKeyCreate({ key: k });
        expect(await store.apiKeyRevoke({ id: k.id, kind: 'tenant', now: NOW })).toBe(false);
        expect(await store.apiKeyRevoke({ id: k.id, kind: 'producer', now: NOW + 1 })).toBe(true);
        expect(await store.apiKeyFindByHash({ hash: k.hash })).toBeNull();
        expect(await store.apiKeyRevoke({ id: k.id, kind: 'producer', now: NOW + 2 })).toBe(false);
        expect(await store.apiKeyRevoke({ id: id('apiKey'), kind: 'producer', now: NOW })).toBe(false);
        expect((await store.apiKeyList({ kind: 'producer', limit: 10, cursor: null })).data).toEqual([]);
      });
    });

    describe('eventInsertBatch', () => {
      test('an empty batch is a no-op', async () => {
        expect(await insert([])).toEqual([]);
        expect(await store.fanoutPendingCount()).toBe(0);
      });

      test('creates an event and records it exactly', async () => {
        const { tenant } = await newTenant();
        const ev = {
          ...eventRecord(tenant.id, { body: { a: [1, 'é', null], s: 'back\\slash "q" {x,y} NULL' } }),
          resourceId: 'ord_1',
        };
        expect(await insert([ev])).toEqual([{ kind: 'created', event: ev }]);
        expect(await store.eventGet({ id: ev.id, tenantId: tenant.id })).toEqual(ev);
        expect(await store.fanoutPendingCount()).toBe(1);
      });

      test('creates many events per batch, results in input order', async () => {
        const { tenant } = await newTenant();
        const evs = Array.from({ length: 500 }, (_, i) =>
          eventRecord(tenant.id, { at: NOW + (i % 7), body: { i } }),
        );
        const out = await insert(evs);
        expect(out).toHaveLength(500);
        out.forEach((o, i) => {
          expect(o.kind).toBe('created');
          expect(o.event).toEqual(evs[i]);
        });
        expect(await store.fanoutPendingCount()).toBe(500);
      });

      test('mixed batch keeps input order', async () => {
        const { tenant } = await newTenant();
        const [first] = await insert([eventRecord(tenant.id, { key: 'k-old' })]);
        const batch = [
          eventRecord(tenant.id, { body: { i: 0 } }),
          eventRecord(tenant.id, { key: 'k-old' }),
          eventRecord(tenant.id, { key: 'k-new', body: { i: 2 } }),
          eventRecord(tenant.id, { body: { i: 3 } }),
          eventRecord(tenant.id, { key: 'k-old', body: { other: true } }),
        ];
        const out = await insert(batch);
        expect(out.map((o) => o.kind)).toEqual([
          'created',
          'duplicate',
          'created',
          'created',
          'key_conflict',
        ]);
        expect(out[0]!.event.id).toBe(batch[0]!.id);
        expect(out[1]!.event).toEqual(first!.event);
        expect(out[2]!.event.id).toBe(batch[2]!.id);
        expect(out[3]!.event.id).toBe(batch[3]!.id);
        expect(out[4]!.event).toEqual(first!.event);
        expect(await store.fanoutPendingCount()).toBe(4);
      });

      test('same key and same request returns the original as duplicate', async () => {
        const { tenant } = await newTenant();
        const a = eventRecord(tenant.id, { key: 'order-42' });
        const b = { ...eventRecord(tenant.id, { key: 'order-42', at: NOW + HOUR }) };
        expect((await insert([a]))[0]).toEqual({ kind: 'created', event: a });
        expect((await insert([b], NOW + HOUR))[0]).toEqual({ kind: 'duplicate', event: a });
        expect(await store.eventGet({ id: b.id, tenantId: null })).toBeNull();
        expect(await store.fanoutPendingCount()).toBe(1);
      });

      test('same key with a different request is a key_conflict with the original', async () => {
        const { tenant } = await newTenant();
        const a = eventRecord(tenant.id, { key: 'order-42' });
        const b = eventRecord(tenant.id, { key: 'order-42', body: { n: 2 } });
        await insert([a]);
        expect((await insert([b], NOW + 1))[0]).toEqual({ kind: 'key_conflict', event: a });
        expect(await store.fanoutPendingCount()).toBe(1);
      });

      test('same key twice in one batch resolves to the same event', async () => {
        const { tenant } = await newTenant();
        const a = eventRecord(tenant.id, { key: 'dup' });
        const b = eventRecord(tenant.id, { key: 'dup' });
        const c = eventRecord(tenant.id, { key: 'dup', body: { n: 3 } });
        const out = await insert([a, b, c]);
        expect(out).toEqual([
          { kind: 'created', event: a },
          { kind: 'duplicate', event: a },
          { kind: 'key_conflict', event: a },
        ]);
        expect((await store.eventList({ tenantId: tenant.id, limit: 10, cursor: null })).data).toEqual([a]);
        expect(await store.fanoutPendingCount()).toBe(1);
      });

      test('a key older than the window is free again', async () => {
        const { tenant } = await newTenant();
        const a = eventRecord(tenant.id, { key: 'k' });
        await insert([a]);
        const within = eventRecord(tenant.id, { key: 'k', at: NOW + WINDOW - 1 });
        expect((await insert([within], NOW + WINDOW - 1))[0]).toEqual({ kind: 'duplicate', event: a });
        const later = NOW + WINDOW + 1;
        const b = eventRecord(tenant.id, { key: 'k', at: later });
        expect((await insert([b], later))[0]).toEqual({ kind: 'created', event: b });
        // The key now belongs to the new event for a full window.
        const again = eventRecord(tenant.id, { key: 'k', at: later + 1 });
        expect((await insert([again], later + 1))[0]).toEqual({ kind: 'duplicate', event: b });
        expect(await store.eventGet({ id: a.id, tenantId: tenant.id })).toEqual(a);
        expect(await store.fanoutPendingCount()).toBe(2);
      });

      test('the same key in different tenants is independent', async () => {
        const t1 = (await newTenant()).tenant;
        const t2 = (await newTenant(NOW + 1)).tenant;
        const a = eventRecord(t1.id, { key: 'shared' });
        const b = eventRecord(t2.id, { key: 'shared' });
        expect(await insert([a, b])).toEqual([
          { kind: 'created', event: a },
          { kind: 'created', event: b },
        ]);
      });

      test('concurrent batches with the same key create exactly one event', async () => {
        const { tenant } = await newTenant();
        const batches = Array.from({ length: 10 }, (_, i) => [
          eventRecord(tenant.id, { key: 'race' }),
          eventRecord(tenant.id, { body: { filler: i } }),
        ]);
        const outs = await Promise.all(batches.map((b) => insert(b)));
        const keyed = outs.map((o) => o[0]!);
        expect(keyed.filter((o) => o.kind === 'created')).toHaveLength(1);
        expect(keyed.filter((o) => o.kind === 'duplicate')).toHaveLength(9);
        expect(new Set(keyed.map((o) => o.event.id)).size).toBe(1);
        const winner = keyed[0]!.event;
        expect(batches.some((b) => b[0]!.id === winner.id)).toBe(true);
        const listed = await store.eventList({ tenantId: tenant.id, limit: 100, cursor: null });
        expect(listed.data.filter((e) => e.idempotencyKey === 'race')).toEqual([winner]);
        expect(listed.data).toHaveLength(11);
        expect(await store.fanoutPendingCount()).toBe(11);
      });

      test('concurrent batches with overlapping keys in opposite orders', async () => {
        // Guards against lock-order deadlocks as much as against duplicates.
        const { tenant } = await newTenant();
        const keys = Array.from({ length: 50 }, (_, i) => `k${String(i).padStart(2, '0')}`);
        const batches = Array.from({ length: 8 }, (_, i) => {
          const ks = i % 2 === 0 ? keys : [...keys].reverse();
          return ks.map((k) => eventRecord(tenant.id, { key: k, body: { k } }));
        });
        const outs = await Promise.all(batches.map((b) => insert(b)));
        for (const k of keys) {
          const forKey = outs.flat().filter((o) => o.event.idempotencyKey === k);
          expect(forKey.filter((o) => o.kind === 'created')).toHaveLength(1);
          expect(new Set(forKey.map((o) => o.event.id)).size).toBe(1);
          expect(forKey.every((o) => o.kind !== 'key_conflict')).toBe(true);
        }
        expect(await store.fanoutPendingCount()).toBe(keys.length);
      });
    });

    describe('event reads', () => {
      test('eventGet is scoped to the tenant', async () => {
        const t1 = (await newTenant()).tenant;
        const t2 = (await newTenant(NOW + 1)).tenant;
        const ev = eventRecord(t1.id);
        await insert([ev]);
        expect(await store.eventGet({ id: ev.id, tenantId: t1.id })).toEqual(ev);
        expect(await store.eventGet({ id: ev.id, tenantId: t2.id })).toBeNull();
        expect(await store.eventGet({ id: ev.id, tenantId: null })).toEqual(ev);
        expect(await store.eventGet({ id: id('event'), tenantId: null })).toBeNull();
      });

      test('eventList pages newest first, per tenant or across tenants', async () => {
        const t1 = (await newTenant()).tenant;
        const t2 = (await newTenant(NOW + 1)).tenant;
        const mine = Array.from({ length: 5 }, (_, i) => eventRecord(t1.id, { at: NOW + i * 10 }));
        const theirs = eventRecord(t2.id, { at: NOW + 5 });
        await insert([...mine.slice(0, 2), theirs]);
        await insert(mine.slice(2));
        const newest = [...mine].reverse().map((e) => e.id);
        const p1 = await store.eventList({ tenantId: t1.id, limit: 2, cursor: null });
        expect(p1.data.map((e) => e.id)).toEqual(newest.slice(0, 2));
        const p2 = await store.eventList({ tenantId: t1.id, limit: 2, cursor: p1.nextCursor });
        expect(p2.data.map((e) => e.id)).toEqual(newest.slice(2, 4));
        const p3 = await store.eventList({ tenantId: t1.id, limit: 2, cursor: p2.nextCursor });
        expect(p3.data.map((e) => e.id)).toEqual(newest.slice(4));
        expect(p3.nextCursor).toBeNull();
        const all = await store.eventList({ tenantId: null, limit: 10, cursor: null });
        expect(all.data.map((e) => e.id)).toEqual(
          [...mine, theirs].sort((a, b) => (a.id < b.id ? 1 : -1)).map((e) => e.id),
        );
        expect(all.nextCursor).toBeNull();
      });

      test('eventList filters by type', async () => {
        const { tenant } = await newTenant();
        const evs = ['order.created', 'order.paid', 'order.created', 'invoice.sent'].map((type, i) =>
          eventRecord(tenant.id, { type, at: NOW + i }),
        );
        await insert(evs);
        const created = await store.eventList({
          tenantId: tenant.id,
          type: 'order.created',
          limit: 1,
          cursor: null,
        });
        expect(created.data.map((e) => e.id)).toEqual([evs[2]!.id]);
        const rest = await store.eventList({
          tenantId: tenant.id,
          type: 'order.created',
          limit: 1,
          cursor: created.nextCursor,
        });
        expect(rest.data.map((e) => e.id)).toEqual([evs[0]!.id]);
        expect(rest.nextCursor).toBeNull();
        expect(
          (await store.eventList({ tenantId: null, type: 'invoice.sent', limit: 10, cursor: null })).data,
        ).toEqual([evs[3]]);
        expect(
          (await store.eventList({ tenantId: tenant.id, type: null, limit: 10, cursor: null })).data,
        ).toHaveLength(4);
      });
    });

    describe('fan-out stream and idempotency records', () => {
      test('fanoutPendingCount grows with every created event only', async () => {
        const { tenant } = await newTenant();
        expect(await store.fanoutPendingCount()).toBe(0);
        await insert([eventRecord(tenant.id), eventRecord(tenant.id, { key: 'x' })]);
        expect(await store.fanoutPendingCount()).toBe(2);
        await insert([eventRecord(tenant.id, { key: 'x' }), eventRecord(tenant.id)]);
        expect(await store.fanoutPendingCount()).toBe(3);
      });

      test('idempotencyPrune deletes records older than the cut-off', async () => {
        const { tenant } = await newTenant();
        const old = eventRecord(tenant.id, { key: 'old', at: NOW - 3 * HOUR });
        await insert([old], NOW - 3 * HOUR);
        const fresh = eventRecord(tenant.id, { key: 'fresh' });
        await insert([fresh]);
        // A second old key: a batch of one deletes the oldest first, the next the other.
        const older = eventRecord(tenant.id, { key: 'older', at: NOW - 4 * HOUR });
        await insert([older], NOW - 4 * HOUR);
        expect(await store.idempotencyPrune({ olderThan: NOW - HOUR, limit: 1 })).toBe(1);
        expect((await insert([eventRecord(tenant.id, { key: 'older' })]))[0]?.kind).toBe('created');
        expect(await store.idempotencyPrune({ olderThan: NOW - HOUR, limit: 10 })).toBe(1);
        expect(await store.idempotencyPrune({ olderThan: NOW - HOUR, limit: 10 })).toBe(0);
        // The pruned key is free (even though its window had not passed); the kept one still deduplicates.
        const reuse = eventRecord(tenant.id, { key: 'old' });
        expect((await insert([reuse]))[0]).toEqual({ kind: 'created', event: reuse });
        expect((await insert([eventRecord(tenant.id, { key: 'fresh' })]))[0]).toEqual({
          kind: 'duplicate',
          event: fresh,
        });
        // Events themselves are never pruned here.
        expect(await store.eventGet({ id: old.id, tenantId: null })).toEqual(old);
      });
    });
  });

  checkSkips();
}
