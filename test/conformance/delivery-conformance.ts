/**
 * The delivery-plane conformance suite (src/ports/delivery-store.ts): endpoints and secrets, fan-out, leasing,
 * completion and cancellation, written once against the port and run on every Store adapter. Like
 * store-conformance.ts it knows no SQL, gets a fresh migrated store per test and drives every timestamp with
 * fixed fake times. The concurrency tests (Promise.all of several fan-out runs / leasing workers on one store) must
 * pass on single-process stores too.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.ts';
import type {
  AttemptCompletion,
  AttemptRecord,
  DeliveryIdFactory,
  DeliveryRecord,
  EndpointRecord,
  LeasedDelivery,
  SecretRecord,
} from '../../src/ports/delivery-store.ts';
import type { NewEvent, Store, TenantRecord } from '../../src/ports/store.ts';
import { NOW, type StoreConformanceOptions } from './store-conformance.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const WINDOW = 24 * HOUR;
const LEASE_MS = 30 * SECOND;

const id = (kind: Parameters<typeof newId>[0], at = NOW) => newId(kind, at, randomBytes(10));
const ids: DeliveryIdFactory = { delivery: () => id('delivery'), webhookId: () => id('message') };

function endpointRecord(tenantId: string, o: Partial<EndpointRecord> = {}): EndpointRecord {
  const at = o.createdAt ?? NOW;
  return {
    id: id('endpoint', at),
    tenantId,
    url: 'https://example.com/hooks',
    description: null,
    eventTypes: ['*'],
    ordering: 'none',
    maxConcurrency: 10,
    headers: {},
    status: 'enabled',
    disabledReason: null,
    createdAt: at,
    updatedAt: at,
    ...o,
  };
}

function secretRecord(ep: EndpointRecord, o: Partial<SecretRecord> = {}): SecretRecord {
  const at = o.createdAt ?? ep.createdAt;
  return {
    id: id('secret', at),
    endpointId: ep.id,
    tenantId: ep.tenantId,
    sealed: `sealed:${randomBytes(8).toString('hex')}`,
    activeFrom: at,
    activeUntil: null,
    createdAt: at,
    ...o,
  };
}

function eventRecord(tenantId: string, type: string, at = NOW, resourceId: string | null = null): NewEvent {
  return {
    id: id('event', at),
    tenantId,
    type,
    resourceId,
    data: JSON.stringify({ type, n: randomBytes(4).toString('hex'), s: 'é "q" \\ {}' }),
    idempotencyKey: null,
    requestHash: null,
    createdAt: at,
  };
}

/** The attempt a worker would record for a leased delivery. */
function attemptFor(l: LeasedDelivery, at: number, o: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    id: id('attempt', at),
    deliveryId: l.delivery.id,
    endpointId: l.endpoint.id,
    tenantId: l.endpoint.tenantId,
    attemptNo: l.delivery.attempts + 1,
    url: l.endpoint.url,
    dueAt: l.delivery.nextAttemptAt ?? at,
    startedAt: at,
    finishedAt: at + 120,
    outcome: 'delivered',
    statusCode: 200,
    errorClass: null,
    errorMessage: null,
    request: {
      hops: [{ url: l.endpoint.url, headers: { 'webhook-id': l.delivery.webhookId }, status: 200 }],
    },
    responseHeaders: { 'content-type': 'text/plain' },
    responseBody: Buffer.from('ok').toString('base64'),
    queueMs: at - (l.delivery.nextAttemptAt ?? at),
    platformMs: 3,
    consumerMs: 117,
    ...o,
  };
}

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
    let store: Store;

    beforeEach(async () => {
      store = await opts.createStore();
      await store.migrate();
    });
    afterEach(async () => {
      if (opts.destroyStore) await opts.destroyStore(store);
      else await store.close();
    });

    async function newTenant(at = NOW): Promise<TenantRecord> {
      const tenant: TenantRecord = {
        id: id('tenant', at),
        name: `tenant ${at}`,
        totpSeedSealed: 'sealed:x',
        createdAt: at,
        deletedAt: null,
      };
      await store.tenantCreate({
        tenant,
        tenantKey: {
          id: id('apiKey', at),
          kind: 'tenant',
          tenantId: tenant.id,
          name: null,
          hash: randomBytes(32).toString('hex'),
          prefix: 'hkt_abcd',
          createdAt: at,
          revokedAt: null,
        },
      });
      return tenant;
    }

    async function newEndpoint(tenantId: string, o: Partial<EndpointRecord> = {}): Promise<EndpointRecord> {
      const ep = endpointRecord(tenantId, o);
      await store.endpointCreate({ endpoint: ep, secret: secretRecord(ep) });
      return ep;
    }

    /** Inserts events (in order, so in event_seq order) and fans them all out at `at`. */
    async function publish(tenantId: string, types: string[], at = NOW): Promise<NewEvent[]> {
      const evs = types.map((t) => eventRecord(tenantId, t, at));
      await store.eventInsertBatch({ events: evs, now: at, idempotencyWindowMs: WINDOW });
      await store.fanoutRun({ now: at, limit: 1_000, ids });
      return evs;
    }

    const lease = (o: {
      owner?: string;
      now?: number;
      limit?: number;
      perEndpoint?: number;
      leaseMs?: number;
    }) =>
      store.deliveryLease({
        owner: o.owner ?? 'w1',
        now: o.now ?? NOW + SECOND,
        limit: o.limit ?? 100,
        perEndpoint: o.perEndpoint ?? 100,
        leaseMs: o.leaseMs ?? LEASE_MS,
      });

    const complete = (
      l: LeasedDelivery,
      next: AttemptCompletion['next'],
      at = NOW + 2 * SECOND,
      o: { owner?: string; attempt?: Partial<AttemptRecord> } = {},
    ) => {
      const attempt = attemptFor(l, at, o.attempt);
      return store
        .deliveryComplete({ completions: [{ attempt, leaseOwner: o.owner ?? 'w1', next }], now: at + 200 })
        .then(() => attempt);
    };

    const deliveriesOf = async (endpointId: string, status: DeliveryRecord['status'] | null = null) =>
      (await store.deliveryList({ endpointId, tenantId: null, status, limit: 10_000, cursor: null })).data;

    describe('endpoints', () => {
      test('endpointCreate then endpointGet, scoped to the tenant', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        const ep = await newEndpoint(t1.id, {
          description: 'orders → ERP',
          eventTypes: ['order.*', 'invoice.sent'],
          ordering: 'endpoint',
          maxConcurrency: 3,
          headers: { 'x-api-key': 'k "1" é', 'x-b': '' },
        });
        expect(await store.endpointGet({ id: ep.id, tenantId: t1.id })).toEqual(ep);
        expect(await store.endpointGet({ id: ep.id, tenantId: null })).toEqual(ep);
        expect(await store.endpointGet({ id: ep.id, tenantId: t2.id })).toBeNull();
        expect(await store.endpointGet({ id: id('endpoint'), tenantId: null })).toBeNull();
      });

      test('endpointList pages newest first, per tenant or across tenants', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        const mine: string[] = [];
        for (let i = 0; i < 5; i++) mine.push((await newEndpoint(t1.id, { createdAt: NOW + i * 10 })).id);
        const theirs = (await newEndpoint(t2.id, { createdAt: NOW + 5 })).id;
        const newest = [...mine].reverse();
        const p1 = await store.endpointList({ tenantId: t1.id, limit: 2, cursor: null });
        expect(p1.data.map((e) => e.id)).toEqual(newest.slice(0, 2));
        expect(p1.nextCursor).toBe(newest[1]);
        const p2 = await store.endpointList({ tenantId: t1.id, limit: 2, cursor: p1.nextCursor });
        expect(p2.data.map((e) => e.id)).toEqual(newest.slice(2, 4));
        const p3 = await store.endpointList({ tenantId: t1.id, limit: 2, cursor: p2.nextCursor });
        expect(p3.data.map((e) => e.id)).toEqual(newest.slice(4));
        expect(p3.nextCursor).toBeNull();
        const all = await store.endpointList({ tenantId: null, limit: 10, cursor: null });
        expect(all.data.map((e) => e.id)).toEqual([...mine, theirs].sort().reverse());
        expect(all.nextCursor).toBeNull();
        // Deleted endpoints are absent.
        await store.endpointDelete({ id: mine[4]!, tenantId: t1.id, now: NOW + HOUR });
        const after = await store.endpointList({ tenantId: t1.id, limit: 10, cursor: null });
        expect(after.data.map((e) => e.id)).toEqual(newest.slice(1));
      });

      test('endpointUpdate applies the patch, scoped to the tenant', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        const ep = await newEndpoint(t1.id, { description: 'old', headers: { a: '1' } });
        const patch = {
          url: 'https://example.org/new',
          description: null,
          maxConcurrency: 4,
          ordering: 'endpoint' as const,
          headers: { b: '2' },
        };
        expect(await store.endpointUpdate({ id: ep.id, tenantId: t2.id, patch, now: NOW + HOUR })).toBeNull();
        expect(await store.endpointGet({ id: ep.id, tenantId: null })).toEqual(ep);
        const updated = await store.endpointUpdate({ id: ep.id, tenantId: t1.id, patch, now: NOW + HOUR });
        const expected = { ...ep, ...patch, updatedAt: NOW + HOUR };
        expect(updated).toEqual(expected);
        expect(await store.endpointGet({ id: ep.id, tenantId: t1.id })).toEqual(expected);
        expect(
          await store.endpointUpdate({ id: id('endpoint'), tenantId: t1.id, patch: { url: 'x' }, now: NOW }),
        ).toBeNull();
      });

      test('endpointDelete removes it once, scoped to the tenant', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        const ep = await newEndpoint(t1.id);
        expect(await store.endpointDelete({ id: ep.id, tenantId: t2.id, now: NOW + 1 })).toBe(false);
        expect(await store.endpointDelete({ id: ep.id, tenantId: t1.id, now: NOW + 2 })).toBe(true);
        expect(await store.endpointGet({ id: ep.id, tenantId: null })).toBeNull();
        expect(await store.endpointDelete({ id: ep.id, tenantId: t1.id, now: NOW + 3 })).toBe(false);
        expect(
          await store.endpointUpdate({ id: ep.id, tenantId: t1.id, patch: { url: 'x' }, now: NOW }),
        ).toBeNull();
        expect(
          await store.endpointSetStatus({
            id: ep.id,
            tenantId: t1.id,
            status: 'disabled',
            reason: 'x',
            now: NOW,
          }),
        ).toBeNull();
      });

      test('endpointSetStatus disables with a reason and enables again', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        const ep = await newEndpoint(t1.id);
        expect(
          await store.endpointSetStatus({
            id: ep.id,
            tenantId: t2.id,
            status: 'disabled',
            reason: 'x',
            now: NOW,
          }),
        ).toBeNull();
        const disabled = await store.endpointSetStatus({
          id: ep.id,
          tenantId: t1.id,
          status: 'disabled',
          reason: 'failing',
          now: NOW + 10,
        });
        expect(disabled).toEqual({
          ...ep,
          status: 'disabled',
          disabledReason: 'failing',
          updatedAt: NOW + 10,
        });
        expect(await store.endpointGet({ id: ep.id, tenantId: t1.id })).toEqual(disabled);
        const enabled = await store.endpointSetStatus({
          id: ep.id,
          tenantId: t1.id,
          status: 'enabled',
          reason: 'ignored',
          now: NOW + 20,
        });
        expect(enabled).toEqual({ ...ep, status: 'enabled', disabledReason: null, updatedAt: NOW + 20 });
      });
    });

    describe('secrets', () => {
      test('secretRotate keeps at most two active and honours previousActiveUntil', async () => {
        const t = await newTenant();
        const ep = endpointRecord(t.id);
        const s1 = secretRecord(ep);
        await store.endpointCreate({ endpoint: ep, secret: s1 });
        expect(await store.secretListActive({ endpointId: ep.id, now: NOW })).toEqual([s1]);

        const s2 = secretRecord(ep, { createdAt: NOW + 1 });
        await store.secretRotate({ secret: s2, previousActiveUntil: NOW + HOUR, now: NOW + 1 });
        expect(await store.secretListActive({ endpointId: ep.id, now: NOW + 2 })).toEqual([
          s2,
          { ...s1, activeUntil: NOW + HOUR },
        ]);
        // The overlap ends at previousActiveUntil.
        expect(await store.secretListActive({ endpointId: ep.id, now: NOW + HOUR })).toEqual([s2]);

        // Rotating during the overlap retires the oldest at once: never three active.
        const s3 = secretRecord(ep, { createdAt: NOW + 3 });
        await store.secretRotate({ secret: s3, previousActiveUntil: NOW + 2 * HOUR, now: NOW + 3 });
        expect(await store.secretListActive({ endpointId: ep.id, now: NOW + 4 })).toEqual([
          s3,
          { ...s2, activeUntil: NOW + 2 * HOUR },
        ]);
        expect(await store.secretListActive({ endpointId: ep.id, now: NOW + 2 })).toEqual([
          { ...s2, activeUntil: NOW + 2 * HOUR },
          { ...s1, activeUntil: NOW + 3 },
        ]);

        // An active secret that already ends earlier keeps its earlier end (min).
        const ep2 = endpointRecord(t.id);
        const e1 = secretRecord(ep2, { activeUntil: NOW + 30 * MINUTE });
        await store.endpointCreate({ endpoint: ep2, secret: e1 });
        const e2 = secretRecord(ep2, { createdAt: NOW + 1 });
        await store.secretRotate({ secret: e2, previousActiveUntil: NOW + HOUR, now: NOW + 1 });
        expect(await store.secretListActive({ endpointId: ep2.id, now: NOW + 2 })).toEqual([e2, e1]);
        expect(await store.secretListActive({ endpointId: ep2.id, now: NOW + 30 * MINUTE })).toEqual([e2]);
        // Not a secret of another endpoint.
        expect((await store.secretListActive({ endpointId: ep.id, now: NOW + 4 })).map((s) => s.id)).toEqual([
          s3.id,
          s2.id,
        ]);
      });

      test('secretRetire retires a secret but refuses the last active one', async () => {
        const t = await newTenant();
        const ep = endpointRecord(t.id);
        const s1 = secretRecord(ep);
        await store.endpointCreate({ endpoint: ep, secret: s1 });
        expect(await store.secretRetire({ id: s1.id, endpointId: ep.id, now: NOW + 1 })).toBe('last');
        const s2 = secretRecord(ep, { createdAt: NOW + 2 });
        await store.secretRotate({ secret: s2, previousActiveUntil: NOW + HOUR, now: NOW + 2 });
        expect(await store.secretRetire({ id: id('secret'), endpointId: ep.id, now: NOW + 3 })).toBe(
          'not_found',
        );
        expect(await store.secretRetire({ id: s1.id, endpointId: id('endpoint'), now: NOW + 3 })).toBe(
          'not_found',
        );
        expect(await store.secretRetire({ id: s2.id, endpointId: ep.id, now: NOW + 3 })).toBe('retired');
        expect(await store.secretListActive({ endpointId: ep.id, now: NOW + 4 })).toEqual([
          { ...s1, activeUntil: NOW + HOUR },
        ]);
        expect(await store.secretRetire({ id: s2.id, endpointId: ep.id, now: NOW + 4 })).toBe('not_found');
        expect(await store.secretRetire({ id: s1.id, endpointId: ep.id, now: NOW + 4 })).toBe('last');
      });
    });

    describe('fan-out', () => {
      test('each pass matches against the endpoints as they are when it runs (created, changed, deleted)', async () => {
        const t = await newTenant();
        const a = await newEndpoint(t.id, { eventTypes: ['order.*'] });
        const typesOf = async (ep: EndpointRecord) =>
          (await deliveriesOf(ep.id)).map((d) => d.eventType).sort();
        await publish(t.id, ['order.created', 'invoice.sent'], NOW);
        expect(await typesOf(a)).toEqual(['order.created']);

        await store.endpointUpdate({
          id: a.id,
          tenantId: t.id,
          patch: { eventTypes: ['invoice.*'] },
          now: NOW + 1,
        });
        const b = await newEndpoint(t.id, { eventTypes: ['order.paid'] });
        await publish(t.id, ['order.paid', 'invoice.sent'], NOW + 2);
        expect(await typesOf(a)).toEqual(['invoice.sent', 'order.created']);
        expect(await typesOf(b)).toEqual(['order.paid']);

        await store.endpointDelete({ id: a.id, tenantId: t.id, now: NOW + 3 });
        await publish(t.id, ['invoice.sent', 'order.paid'], NOW + 4);
        expect(await typesOf(a)).toEqual(['invoice.sent', 'order.created']);
        expect(await typesOf(b)).toEqual(['order.paid', 'order.paid']);

        await store.tenantDelete({ id: t.id, now: NOW + 5 });
        await publish(t.id, ['order.paid'], NOW + 6);
        expect(await typesOf(b)).toEqual(['order.paid', 'order.paid']);
      });

      test('fanoutRun creates one delivery per matching, non-deleted endpoint, exactly once', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        const gone = await newTenant(NOW + 2);
        const all = await newEndpoint(t1.id, { eventTypes: ['*'] });
        const orders = await newEndpoint(t1.id, {
          eventTypes: ['order.*'],
          status: 'disabled',
          disabledReason: 'x',
        });
        const invoices = await newEndpoint(t1.id, { eventTypes: ['invoice.sent'] });
        const deleted = await newEndpoint(t1.id, { eventTypes: ['*'] });
        await store.endpointDelete({ id: deleted.id, tenantId: t1.id, now: NOW });
        const other = await newEndpoint(t2.id, { eventTypes: ['user.*'] });
        const ofGone = await newEndpoint(gone.id, { eventTypes: ['*'] });
        await store.tenantDelete({ id: gone.id, now: NOW });

        const evs = [
          { ...eventRecord(t1.id, 'order.created'), resourceId: 'ord_1' },
          eventRecord(t1.id, 'invoice.sent'),
          eventRecord(t1.id, 'user.created'),
          eventRecord(t2.id, 'order.created'),
          eventRecord(gone.id, 'order.created'),
        ];
        await store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
        const at = NOW + 5 * SECOND;
        expect(await store.fanoutRun({ now: at, limit: 100, ids })).toEqual({ events: 5, deliveries: 5 });
        expect(await store.fanoutPendingCount()).toBe(0);
        expect(await store.fanoutRun({ now: at + 1, limit: 100, ids })).toEqual({ events: 0, deliveries: 0 });

        const typesOf = async (ep: EndpointRecord) =>
          (await deliveriesOf(ep.id)).map((d) => d.eventType).sort();
        expect(await typesOf(all)).toEqual(['invoice.sent', 'order.created', 'user.created']);
        expect(await typesOf(orders)).toEqual(['order.created']);
        expect(await typesOf(invoices)).toEqual(['invoice.sent']);
        expect(await typesOf(deleted)).toEqual([]);
        expect(await typesOf(other)).toEqual([]);
        expect(await typesOf(ofGone)).toEqual([]);

        const [d] = await deliveriesOf(orders.id);
        expect(d).toEqual({
          id: expect.stringMatching(/^dlv_/),
          tenantId: t1.id,
          endpointId: orders.id,
          eventId: evs[0]!.id,
          eventType: 'order.created',
          resourceId: 'ord_1',
          webhookId: expect.stringMatching(/^msg_/),
          status: 'pending',
          attempts: 0,
          nextAttemptAt: at,
          firstAttemptAt: null,
          lastAttemptAt: null,
          statusReason: null,
          replayedFrom: null,
          createdAt: at,
          updatedAt: at,
        } satisfies DeliveryRecord);
        // Every delivery has its own webhook id.
        const allDeliveries = [...(await deliveriesOf(all.id)), ...(await deliveriesOf(invoices.id)), d!];
        expect(new Set(allDeliveries.map((x) => x.webhookId)).size).toBe(5);
      });

      test('fanoutRun takes at most `limit` events, oldest first', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id);
        const evs = Array.from({ length: 5 }, () => eventRecord(t.id, 'a.b'));
        await store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
        expect(await store.fanoutRun({ now: NOW, limit: 2, ids })).toEqual({ events: 2, deliveries: 2 });
        expect((await deliveriesOf(ep.id)).map((d) => d.eventId).sort()).toEqual(
          evs
            .slice(0, 2)
            .map((e) => e.id)
            .sort(),
        );
        expect(await store.fanoutPendingCount()).toBe(3);
        expect(await store.fanoutRun({ now: NOW, limit: 10, ids })).toEqual({ events: 3, deliveries: 3 });
        expect(await store.fanoutPendingCount()).toBe(0);
      });

      test('fanoutRun ends a pass after the event that reaches `deliveryLimit`; the rest wait', async () => {
        const t = await newTenant();
        const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
        const evs = Array.from({ length: 5 }, () => eventRecord(t.id, 'a.b'));
        await store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
        const run = (deliveryLimit: number) => store.fanoutRun({ now: NOW, limit: 10, deliveryLimit, ids });
        // Three deliveries per event: the limit of 4 is reached by the second event, which is taken whole.
        expect(await run(4)).toEqual({ events: 2, deliveries: 6 });
        expect(await store.fanoutPendingCount()).toBe(3);
        // An event is taken whole even when it alone exceeds the limit, so a pass always makes progress.
        expect(await run(1)).toEqual({ events: 1, deliveries: 3 });
        expect(await run(0)).toEqual({ events: 1, deliveries: 3 });
        expect(await run(100)).toEqual({ events: 1, deliveries: 3 });
        expect(await store.fanoutPendingCount()).toBe(0);
        for (const ep of eps) {
          expect((await deliveriesOf(ep.id)).map((d) => d.eventId).sort()).toEqual(
            evs.map((e) => e.id).sort(),
          );
        }
      });

      test('concurrent fanoutRun calls create each delivery exactly once', async () => {
        const t = await newTenant();
        const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
        const evs = Array.from({ length: 60 }, (_, i) => eventRecord(t.id, `type.n${i % 4}`));
        await store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
        let events = 0;
        let deliveries = 0;
        for (let round = 0; round < 50 && (await store.fanoutPendingCount()) > 0; round++) {
          const outs = await Promise.all(
            Array.from({ length: 4 }, () => store.fanoutRun({ now: NOW, limit: 7, ids })),
          );
          for (const o of outs) {
            events += o.events;
            deliveries += o.deliveries;
          }
        }
        expect(events).toBe(60);
        expect(deliveries).toBe(180);
        for (const ep of eps) {
          const ds = await deliveriesOf(ep.id);
          expect(ds).toHaveLength(60);
          expect(new Set(ds.map((d) => d.eventId))).toEqual(new Set(evs.map((e) => e.id)));
        }
      });
    });

    describe('leasing', () => {
      test('deliveryLease returns what a worker needs, and the delivery as stored', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id, { url: 'https://example.com/in', headers: { 'x-k': 'v' } });
        const [ev] = await publish(t.id, ['order.created']);
        const leased = await lease({ owner: 'w1', now: NOW + SECOND });
        expect(leased).toHaveLength(1);
        const l = leased[0]!;
        expect(l.endpoint).toEqual({ id: ep.id, tenantId: t.id, url: ep.url, headers: { 'x-k': 'v' } });
        expect(l.event).toEqual({ id: ev!.id, type: 'order.created', createdAt: NOW, data: ev!.data });
        expect(l.leaseUntil).toBe(NOW + SECOND + LEASE_MS);
        expect(l.delivery).toMatchObject({
          eventId: ev!.id,
          status: 'pending',
          attempts: 0,
          nextAttemptAt: NOW,
        });
        expect(await store.deliveryGet({ id: l.delivery.id, tenantId: t.id })).toEqual(l.delivery);
        // Leased: not leased again.
        expect(await lease({ owner: 'w2', now: NOW + 2 * SECOND })).toEqual([]);
      });

      test('deliveryLease respects max_concurrency', async () => {
        const t = await newTenant();
        await newEndpoint(t.id, { maxConcurrency: 2 });
        await publish(t.id, ['a.b', 'a.b', 'a.b', 'a.b', 'a.b']);
        const first = await lease({});
        expect(first).toHaveLength(2);
        expect(await lease({})).toEqual([]);
        await complete(first[0]!, { status: 'delivered' });
        const more = await lease({ now: NOW + 3 * SECOND });
        expect(more).toHaveLength(1);
        expect(more[0]!.delivery.id).not.toBe(first[1]!.delivery.id);
        expect(await lease({ now: NOW + 3 * SECOND })).toEqual([]);
      });

      test('deliveryLease takes at most perEndpoint per endpoint per call, oldest due first', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id, { maxConcurrency: 10 });
        await publish(t.id, ['a.b', 'a.b', 'a.b', 'a.b', 'a.b']);
        const got: string[] = [];
        for (const n of [2, 2, 1, 0]) {
          const l = await lease({ perEndpoint: 2 });
          expect(l).toHaveLength(n);
          got.push(...l.map((x) => x.delivery.id));
        }
        expect(got.sort()).toEqual((await deliveriesOf(ep.id)).map((d) => d.id).sort());
      });

      test('deliveryLease is fair across endpoints (least recently served first)', async () => {
        const t = await newTenant();
        const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
        await publish(
          t.id,
          Array.from({ length: 10 }, () => 'a.b'),
        );
        const round = await lease({ limit: 3, perEndpoint: 1 });
        expect(round.map((l) => l.endpoint.id).sort()).toEqual(eps.map((e) => e.id).sort());
        // One at a time: the rotation visits every endpoint before any twice.
        const served: string[] = [];
        for (let i = 0; i < 6; i++) {
          const [l] = await lease({ limit: 1, perEndpoint: 1, now: NOW + (10 + i) * SECOND });
          served.push(l!.endpoint.id);
        }
        expect(new Set(served.slice(0, 3)).size).toBe(3);
        expect(served.slice(3)).toEqual(served.slice(0, 3));
        // `limit` caps the total across endpoints.
        expect(await lease({ limit: 4, perEndpoint: 10, now: NOW + 20 * SECOND })).toHaveLength(4);
      });

      test('deliveryLease leases only due deliveries', async () => {
        const t = await newTenant();
        await newEndpoint(t.id);
        await publish(t.id, ['a.b'], NOW + MINUTE);
        expect(await lease({ now: NOW + MINUTE - 1 })).toEqual([]);
        const [l] = await lease({ now: NOW + MINUTE });
        expect(l).toBeDefined();
        // A retry scheduled in the future waits for its time.
        await complete(l!, { status: 'pending', nextAttemptAt: NOW + 10 * MINUTE }, NOW + MINUTE + 1, {
          attempt: { outcome: 'retryable', statusCode: 503, errorClass: 'http_status' },
        });
        expect(await lease({ now: NOW + 10 * MINUTE - 1 })).toEqual([]);
        const [again] = await lease({ now: NOW + 10 * MINUTE });
        expect(again?.delivery.id).toBe(l!.delivery.id);
        expect(again?.delivery.attempts).toBe(1);
      });

      test('a disabled endpoint is leased nothing until enabled again', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id);
        await publish(t.id, ['a.b', 'a.b']);
        await store.endpointSetStatus({
          id: ep.id,
          tenantId: t.id,
          status: 'disabled',
          reason: 'x',
          now: NOW,
        });
        expect(await lease({})).toEqual([]);
        // New work for a disabled endpoint is kept pending, not leased.
        await publish(t.id, ['a.b'], NOW + SECOND);
        expect(await deliveriesOf(ep.id, 'pending')).toHaveLength(3);
        expect(await lease({ now: NOW + 2 * SECOND })).toEqual([]);
        await store.endpointSetStatus({
          id: ep.id,
          tenantId: t.id,
          status: 'enabled',
          reason: null,
          now: NOW,
        });
        expect(await lease({ now: NOW + 2 * SECOND })).toHaveLength(3);
      });

      test("ordering 'endpoint' leases only the head, and nothing while one is in flight", async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id, { ordering: 'endpoint', maxConcurrency: 5 });
        const evs = await publish(t.id, ['a.b', 'a.c', 'a.d']);
        const byEvent = async (n: number) =>
          (await deliveriesOf(ep.id)).find((d) => d.eventId === evs[n]!.id)!.id;
        const [head] = await lease({});
        expect(head?.delivery.id).toBe(await byEvent(0));
        expect(await lease({})).toEqual([]);
        // A failed head blocks the rest until it is due again, even though they are due.
        await complete(head!, { status: 'pending', nextAttemptAt: NOW + MINUTE }, NOW + 2 * SECOND, {
          attempt: { outcome: 'retryable', statusCode: 500, errorClass: 'http_status' },
        });
        expect(await lease({ now: NOW + 30 * SECOND })).toEqual([]);
        const [retry] = await lease({ now: NOW + MINUTE });
        expect(retry?.delivery.id).toBe(await byEvent(0));
        await complete(retry!, { status: 'delivered' }, NOW + MINUTE + 1);
        const [second] = await lease({ now: NOW + MINUTE + 2 });
        expect(second?.delivery.id).toBe(await byEvent(1));
        expect(await lease({ now: NOW + MINUTE + 2 })).toEqual([]);
      });

      test("ordering 'resource' keeps each resource in order, one in flight each, resources in parallel", async () => {
        const t = await newTenant();
        await newEndpoint(t.id, { ordering: 'resource', maxConcurrency: 10 });
        // a1 b1 a2 b2 (none) a3, accepted in that order.
        const evs = [
          eventRecord(t.id, 'r.x', NOW, 'a'),
          eventRecord(t.id, 'r.x', NOW, 'b'),
          eventRecord(t.id, 'r.x', NOW, 'a'),
          eventRecord(t.id, 'r.x', NOW, 'b'),
          eventRecord(t.id, 'r.x', NOW, null),
          eventRecord(t.id, 'r.x', NOW, 'a'),
        ];
        await store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: WINDOW });
        await store.fanoutRun({ now: NOW, limit: 1_000, ids });
        const eventOf = (l: LeasedDelivery) => evs.findIndex((e) => e.id === l.event.id);
        const first = await lease({ limit: 10, perEndpoint: 10 });
        // The heads of a and b, and the unordered one; nothing else while they are in flight.
        expect(first.map(eventOf).sort()).toEqual([0, 1, 4]);
        expect(await lease({ limit: 10, perEndpoint: 10 })).toEqual([]);
        // a's head fails and is rescheduled: a stays blocked behind it, b moves on when its head is delivered.
        const a1 = first.find((l) => eventOf(l) === 0)!;
        const b1 = first.find((l) => eventOf(l) === 1)!;
        await complete(a1, { status: 'pending', nextAttemptAt: NOW + MINUTE }, NOW + SECOND, {
          attempt: { outcome: 'retryable', statusCode: 500, errorClass: 'http_status' },
        });
        await complete(b1, { status: 'delivered' }, NOW + SECOND);
        const next = await lease({ now: NOW + 2 * SECOND, limit: 10, perEndpoint: 10 });
        expect(next.map(eventOf)).toEqual([3]);
        const again = await lease({ now: NOW + MINUTE, limit: 10, perEndpoint: 10 });
        expect(again.map(eventOf)).toEqual([0]);
        await complete(again[0]!, { status: 'dead', reason: 'max_attempts' }, NOW + MINUTE + 1, {
          attempt: { outcome: 'retryable', statusCode: 500, errorClass: 'http_status' },
        });
        // A dead-lettered head unblocks its resource.
        const after = await lease({ now: NOW + MINUTE + 2, limit: 10, perEndpoint: 10 });
        expect(after.map(eventOf)).toEqual([2]);
      });

      test('concurrent workers never lease one delivery twice nor exceed the cap', async () => {
        const t = await newTenant();
        const cap = 3;
        const eps = await Promise.all(
          Array.from({ length: 5 }, () => newEndpoint(t.id, { maxConcurrency: cap })),
        );
        await publish(
          t.id,
          Array.from({ length: 20 }, () => 'a.b'),
        );
        const leasedOnce = new Set<string>();
        const ownerOf = new Map<string, string>();
        const inflight = new Map<string, LeasedDelivery[]>(eps.map((e) => [e.id, []]));
        let now = NOW + SECOND;
        for (let round = 0; round < 200 && leasedOnce.size < 100; round++) {
          now += 10;
          const owners = ['w1', 'w2', 'w3', 'w4'];
          const outs = await Promise.all(
            owners.map((owner) => lease({ owner, now, limit: 4, perEndpoint: 2 })),
          );
          outs.forEach((out, i) => {
            for (const l of out) {
              expect(leasedOnce.has(l.delivery.id)).toBe(false);
              leasedOnce.add(l.delivery.id);
              ownerOf.set(l.delivery.id, owners[i]!);
              inflight.get(l.endpoint.id)!.push(l);
            }
          });
          for (const list of inflight.values()) expect(list.length).toBeLessThanOrEqual(cap);
          // Complete about half of what is in flight (the oldest), each batch by the worker that leased it.
          const done = [...inflight.values()].flatMap((list) => list.splice(0, Math.ceil(list.length / 2)));
          await Promise.all(
            owners.map((owner) =>
              store.deliveryComplete({
                completions: done
                  .filter((l) => ownerOf.get(l.delivery.id) === owner)
                  .map((l) => ({
                    attempt: attemptFor(l, now + 1),
                    leaseOwner: owner,
                    next: { status: 'delivered' },
                  })),
                now: now + 2,
              }),
            ),
          );
        }
        expect(leasedOnce.size).toBe(100);
        for (const ep of eps) {
          const ds = await deliveriesOf(ep.id);
          expect(ds.filter((d) => d.status === 'delivered').length + inflight.get(ep.id)!.length).toBe(20);
          expect(ds.every((d) => d.attempts <= 1)).toBe(true);
        }
      });
    });

    describe('completion', () => {
      test('deliveryComplete appends attempts and updates the projection', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        await newEndpoint(t1.id);
        await publish(t1.id, ['a.b', 'a.c']);
        const [l1, l2] = await lease({ now: NOW + SECOND });
        const d1 = l1!.delivery.id;

        const a1 = await complete(l1!, { status: 'pending', nextAttemptAt: NOW + MINUTE }, NOW + 2 * SECOND, {
          attempt: {
            outcome: 'retryable',
            statusCode: 503,
            errorClass: 'http_status',
            errorMessage: 'Service Unavailable',
            request: {
              hops: [
                {
                  url: 'https://example.com/hooks',
                  headers: { 'webhook-id': 'msg_x', 'webhook-signature': 'v1,abc= v1,def=' },
                  status: 307,
                },
                {
                  url: 'https://example.com/hooks2',
                  headers: { 'webhook-id': 'msg_x', 'x-é': '"q"' },
                  status: 503,
                },
              ],
            },
            responseHeaders: { 'retry-after': '30', 'content-type': 'application/json' },
            responseBody: Buffer.from('{"error":"busy"}').toString('base64'),
            consumerMs: null,
          },
        });
        expect(await store.deliveryGet({ id: d1, tenantId: t1.id })).toMatchObject({
          status: 'pending',
          attempts: 1,
          nextAttemptAt: NOW + MINUTE,
          firstAttemptAt: NOW + 2 * SECOND,
          lastAttemptAt: NOW + 2 * SECOND,
          statusReason: null,
        });
        expect(await store.attemptList({ deliveryId: d1, tenantId: t1.id })).toEqual([a1]);
        expect(await store.attemptGet({ id: a1.id, tenantId: t1.id })).toEqual(a1);
        expect(await store.attemptGet({ id: a1.id, tenantId: null })).toEqual(a1);
        expect(await store.attemptGet({ id: a1.id, tenantId: t2.id })).toBeNull();
        expect(await store.attemptList({ deliveryId: d1, tenantId: t2.id })).toEqual([]);
        expect(await store.attemptGet({ id: id('attempt'), tenantId: null })).toBeNull();

        // Retried and delivered: a second attempt, first_attempt_at kept.
        const [again] = await lease({ now: NOW + MINUTE });
        expect(again?.delivery.id).toBe(d1);
        const a2 = await complete(again!, { status: 'delivered' }, NOW + MINUTE + 5);
        expect(await store.deliveryGet({ id: d1, tenantId: null })).toMatchObject({
          status: 'delivered',
          attempts: 2,
          nextAttemptAt: null,
          firstAttemptAt: NOW + 2 * SECOND,
          lastAttemptAt: NOW + MINUTE + 5,
          statusReason: null,
          updatedAt: NOW + MINUTE + 205,
        });
        expect(await store.attemptList({ deliveryId: d1, tenantId: null })).toEqual([a1, a2]);

        // Dead-lettered with a reason.
        await complete(l2!, { status: 'dead', reason: 'permanent_failure' }, NOW + 3 * SECOND, {
          attempt: {
            outcome: 'permanent',
            statusCode: 410,
            errorClass: 'http_status',
            responseHeaders: null,
          },
        });
        expect(await store.deliveryGet({ id: l2!.delivery.id, tenantId: null })).toMatchObject({
          status: 'dead',
          statusReason: 'permanent_failure',
          attempts: 1,
          nextAttemptAt: null,
        });
        expect(await lease({ now: NOW + HOUR })).toEqual([]);
      });

      test('JSON texts come back byte for byte, escaped control characters and NULLs included, in one batch', async () => {
        const t = await newTenant();
        await newEndpoint(t.id, { maxConcurrency: 10 });
        const data = JSON.stringify({ sep: '\u001e', nul: '\u0000', q: '"\\', e: 'é', empty: '' });
        const ev = { ...eventRecord(t.id, 'a.b', NOW), data };
        await store.eventInsertBatch({
          events: [ev, eventRecord(t.id, 'a.b', NOW)],
          now: NOW,
          idempotencyWindowMs: WINDOW,
        });
        await store.fanoutRun({ now: NOW, limit: 1_000, ids });
        const leased = await lease({});
        expect(leased).toHaveLength(2);
        expect(leased.find((l) => l.event.id === ev.id)?.event.data).toBe(data);
        const at = NOW + 2 * SECOND;
        const attempts = [
          attemptFor(leased[0]!, at, {
            request: {
              hops: [
                { url: 'https://example.com/a', headers: { 'x-sep': 'a\u001eb', 'x-q': '"\\' }, status: 200 },
              ],
            },
            responseHeaders: null,
          }),
          attemptFor(leased[1]!, at, { responseHeaders: { 'x-sep': '\u001e', 'x-empty': '' } }),
        ];
        await store.deliveryComplete({
          completions: attempts.map((attempt) => ({
            attempt,
            leaseOwner: 'w1',
            next: { status: 'delivered' as const },
          })),
          now: at + 200,
        });
        for (const a of attempts) expect(await store.attemptGet({ id: a.id, tenantId: null })).toEqual(a);
      });

      test('a completion with the wrong leaseOwner does not change the delivery', async () => {
        const t = await newTenant();
        await newEndpoint(t.id, { maxConcurrency: 1 });
        await publish(t.id, ['a.b', 'a.b']);
        const [l] = await lease({ owner: 'w1' });
        const before = await store.deliveryGet({ id: l!.delivery.id, tenantId: null });
        await complete(l!, { status: 'pending', nextAttemptAt: NOW + HOUR }, NOW + 2 * SECOND, {
          owner: 'w2',
        });
        await complete(l!, { status: 'delivered' }, NOW + 3 * SECOND, { owner: 'w2' });
        expect(await store.deliveryGet({ id: l!.delivery.id, tenantId: null })).toEqual(before);
        // The in-flight slot is still taken by w1.
        expect(await lease({ owner: 'w3', now: NOW + 4 * SECOND })).toEqual([]);
        await complete(l!, { status: 'delivered' }, NOW + 5 * SECOND, { owner: 'w1' });
        expect(await lease({ owner: 'w3', now: NOW + 6 * SECOND })).toHaveLength(1);
      });

      test('deliveryExpireLeases returns expired leases to the queue', async () => {
        const t = await newTenant();
        await newEndpoint(t.id, { maxConcurrency: 1 });
        await publish(t.id, ['a.b']);
        const [l] = await lease({ owner: 'w1', now: NOW, leaseMs: LEASE_MS });
        expect(await store.deliveryExpireLeases({ now: NOW + LEASE_MS - 1 })).toBe(0);
        expect(await lease({ owner: 'w2', now: NOW + LEASE_MS - 1 })).toEqual([]);
        expect(await store.deliveryExpireLeases({ now: NOW + LEASE_MS })).toBe(1);
        expect(await store.deliveryExpireLeases({ now: NOW + LEASE_MS })).toBe(0);
        const [again] = await lease({ owner: 'w2', now: NOW + LEASE_MS + 1 });
        expect(again?.delivery.id).toBe(l!.delivery.id);
        // The late worker's failure changes nothing: w2 holds the lease now.
        await complete(l!, { status: 'pending', nextAttemptAt: NOW + HOUR }, NOW + LEASE_MS + 2, {
          owner: 'w1',
        });
        expect(await store.deliveryGet({ id: l!.delivery.id, tenantId: null })).toMatchObject({
          status: 'pending',
          attempts: 0,
        });
        await complete(again!, { status: 'delivered' }, NOW + LEASE_MS + 3, { owner: 'w2' });
        expect((await store.deliveryGet({ id: l!.delivery.id, tenantId: null }))?.status).toBe('delivered');
      });

      test('deliveryExpireLeases returns every expired lease, however many (a store may work in batches)', async () => {
        const t = await newTenant();
        const eps = [];
        for (let i = 0; i < 11; i++)
          eps.push(await newEndpoint(t.id, { maxConcurrency: 100, eventTypes: [`many.${i}`] }));
        const types = eps.flatMap((_, i) => Array.from({ length: 100 }, () => `many.${i}`));
        await publish(t.id, types.slice(0, 550));
        await publish(t.id, types.slice(550));
        let leased = 0;
        for (let round = 0; round < 20 && leased < 1_100; round++)
          leased += (await lease({ limit: 500 })).length;
        expect(leased).toBe(1_100);
        expect(await store.deliveryExpireLeases({ now: NOW + SECOND + LEASE_MS })).toBe(1_100);
        expect(await store.deliveryExpireLeases({ now: NOW + SECOND + LEASE_MS })).toBe(0);
        let again = 0;
        for (let round = 0; round < 20 && again < 1_100; round++)
          again += (await lease({ owner: 'w2', now: NOW + 2 * SECOND + LEASE_MS, limit: 500 })).length;
        expect(again).toBe(1_100);
      });

      test('a late success after the lease expired still marks the delivery delivered', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id, { maxConcurrency: 1 });
        await publish(t.id, ['a.b']);
        const [l] = await lease({ owner: 'w1', now: NOW });
        expect(await store.deliveryExpireLeases({ now: NOW + LEASE_MS })).toBe(1);
        await complete(l!, { status: 'delivered' }, NOW + LEASE_MS + 1, { owner: 'w1' });
        expect((await deliveriesOf(ep.id))[0]?.status).toBe('delivered');
        expect(await lease({ now: NOW + HOUR })).toEqual([]);
      });
    });

    describe('reads', () => {
      test('deliveryGet and deliveryList are scoped to the tenant, page newest first, filter by status', async () => {
        const t1 = await newTenant();
        const t2 = await newTenant(NOW + 1);
        const ep = await newEndpoint(t1.id, { maxConcurrency: 1 });
        await publish(t1.id, ['a.b', 'a.b', 'a.b', 'a.b', 'a.b']);
        const all = await deliveriesOf(ep.id);
        expect(all).toHaveLength(5);
        const newest = all.map((d) => d.id);
        expect([...newest].sort().reverse()).toEqual(newest);
        expect(await store.deliveryGet({ id: newest[0]!, tenantId: t1.id })).toEqual(all[0]);
        expect(await store.deliveryGet({ id: newest[0]!, tenantId: t2.id })).toBeNull();
        expect(await store.deliveryGet({ id: id('delivery'), tenantId: null })).toBeNull();
        const page = (cursor: string | null, tenantId: string | null = t1.id) =>
          store.deliveryList({ endpointId: ep.id, tenantId, status: null, limit: 2, cursor });
        const p1 = await page(null);
        expect(p1.data.map((d) => d.id)).toEqual(newest.slice(0, 2));
        const p2 = await page(p1.nextCursor);
        expect(p2.data.map((d) => d.id)).toEqual(newest.slice(2, 4));
        const p3 = await page(p2.nextCursor);
        expect(p3.data.map((d) => d.id)).toEqual(newest.slice(4));
        expect(p3.nextCursor).toBeNull();
        expect((await page(null, t2.id)).data).toEqual([]);
        const [l] = await lease({});
        await complete(l!, { status: 'delivered' });
        const delivered = await store.deliveryList({
          endpointId: ep.id,
          tenantId: t1.id,
          status: 'delivered',
          limit: 10,
          cursor: null,
        });
        expect(delivered.data.map((d) => d.id)).toEqual([l!.delivery.id]);
        expect(await deliveriesOf(ep.id, 'pending')).toHaveLength(4);
      });
    });

    describe('cancellation', () => {
      test('endpointUpdate narrowing event types cancels pending non-matching deliveries', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id, { eventTypes: ['*'], maxConcurrency: 10 });
        await publish(t.id, ['order.created', 'invoice.sent', 'order.paid', 'invoice.sent']);
        // Not narrowing event types cancels nothing.
        await store.endpointUpdate({
          id: ep.id,
          tenantId: t.id,
          patch: { url: 'https://x.test/' },
          now: NOW,
        });
        expect(await deliveriesOf(ep.id, 'pending')).toHaveLength(4);
        const at = NOW + 10 * SECOND;
        const updated = await store.endpointUpdate({
          id: ep.id,
          tenantId: t.id,
          patch: { eventTypes: ['order.*'] },
          now: at,
        });
        expect(updated?.eventTypes).toEqual(['order.*']);
        const cancelled = await deliveriesOf(ep.id, 'cancelled');
        expect(cancelled.map((d) => d.eventType)).toEqual(['invoice.sent', 'invoice.sent']);
        for (const d of cancelled) {
          expect(d).toMatchObject({ statusReason: 'unsubscribed', nextAttemptAt: null, updatedAt: at });
        }
        const leased = await lease({ now: at + 1 });
        expect(leased.map((l) => l.event.type).sort()).toEqual(['order.created', 'order.paid']);
        // Later events follow the new subscription.
        await publish(t.id, ['invoice.sent', 'order.shipped'], at + 2);
        expect((await deliveriesOf(ep.id)).filter((d) => d.eventType === 'order.shipped')).toHaveLength(1);
        expect(await deliveriesOf(ep.id)).toHaveLength(5);
      });

      test('endpointDelete cancels pending deliveries and leases nothing more', async () => {
        const t = await newTenant();
        const ep = await newEndpoint(t.id, { maxConcurrency: 1 });
        const keep = await newEndpoint(t.id);
        await publish(t.id, ['a.b', 'a.b', 'a.b']);
        const at = NOW + 10 * SECOND;
        expect(await store.endpointDelete({ id: ep.id, tenantId: t.id, now: at })).toBe(true);
        const ds = await deliveriesOf(ep.id);
        expect(ds).toHaveLength(3);
        for (const d of ds) {
          expect(d).toMatchObject({
            status: 'cancelled',
            statusReason: 'endpoint_deleted',
            nextAttemptAt: null,
            updatedAt: at,
          });
        }
        // Kept as records, readable by id.
        expect(await store.deliveryGet({ id: ds[0]!.id, tenantId: t.id })).toEqual(ds[0]);
        const leased = await lease({ now: at + 1 });
        expect(leased.map((l) => l.endpoint.id)).toEqual([keep.id, keep.id, keep.id]);
        await publish(t.id, ['a.b'], at + 2);
        expect(await deliveriesOf(ep.id)).toHaveLength(3);
      });

      test('tenantDelete cancels pending deliveries and leases nothing afterwards', async () => {
        const t = await newTenant();
        const other = await newTenant(NOW + 1);
        const eps = [
          await newEndpoint(t.id),
          await newEndpoint(t.id, { status: 'disabled', disabledReason: 'x' }),
        ];
        const theirs = await newEndpoint(other.id);
        await publish(t.id, ['a.b', 'a.b']);
        await publish(other.id, ['a.b']);
        const [inFlight] = await lease({ limit: 1, perEndpoint: 1 });
        const at = NOW + 10 * SECOND;
        expect(await store.tenantDelete({ id: t.id, now: at })).toBe(true);
        for (const ep of eps) {
          expect(await store.endpointGet({ id: ep.id, tenantId: null })).toBeNull();
          for (const d of await deliveriesOf(ep.id)) {
            expect(d).toMatchObject({
              status: 'cancelled',
              statusReason: 'tenant_deleted',
              nextAttemptAt: null,
            });
          }
        }
        expect(await deliveriesOf(eps[0]!.id)).toHaveLength(2);
        expect(await deliveriesOf(eps[1]!.id)).toHaveLength(2);
        // Only the other tenant's work is leased, now and after the in-flight lease would have expired.
        const after = await lease({ now: at + 1 });
        const expected = inFlight?.endpoint.id === theirs.id ? [] : [theirs.id];
        expect(after.map((l) => l.endpoint.id)).toEqual(expected);
        await store.deliveryExpireLeases({ now: at + HOUR });
        expect((await lease({ now: at + HOUR + 1 })).filter((l) => l.endpoint.tenantId === t.id)).toEqual([]);
        // Events accepted for the deleted tenant fan out to nothing.
        await publish(t.id, ['a.b'], at + 2);
        expect(await deliveriesOf(eps[0]!.id)).toHaveLength(2);
      });
    });
  });

  for (const name of skipped.keys()) {
    if (!seen.has(name))
      throw new Error(`runDeliveryConformance: skip names unknown test ${JSON.stringify(name)}`);
  }
}
