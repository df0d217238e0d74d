/**
 * Operations conformance: every tenant change writes its audit record in its own transaction (AuditOf, ADR-16).
 * For each change: the record is written with what the change did; a record that cannot be written (its id is
 * taken) rolls the whole change back; a refused change never asks for a record.
 */
import { describe, expect } from 'vitest';
import type { AuditOf, AuditRecord } from '../../../src/ports/delivery-store.ts';
import type { NewEvent, Store } from '../../../src/ports/store.ts';
import { endpointRecord, secretRecord } from '../fixtures.ts';
import { NOW } from '../store-conformance.ts';
import { HOUR, id, ids, type OperationsHarness, type OperationsSection, SECOND } from './harness.ts';

const AT = NOW + HOUR;

/** A change under test: set up, then made with `audit`; `state` reads everything it may touch. */
interface Change {
  name: string;
  setup(h: OperationsHarness): Promise<Ctx>;
  run(s: Store, c: Ctx, audit: AuditOf<unknown>): Promise<unknown>;
  /** The same change refused (absent target, wrong state): it must not call `audit`. */
  refused?(s: Store, c: Ctx, audit: AuditOf<unknown>): Promise<unknown>;
}

interface Ctx {
  tenantId: string;
  endpointId: string;
  /** A delivery of the endpoint (delivered), when the change needs one. */
  deliveryId?: string;
  secretIds?: string[];
}

/** Everything a change in this file may write, read back through the port. */
async function state(h: OperationsHarness, c: Ctx) {
  const s = h.store;
  const ep = await s.endpointGet({ id: c.endpointId, tenantId: null });
  return {
    endpoint: ep,
    secrets: ep ? await s.secretListActive({ endpointId: c.endpointId, now: AT }) : null,
    deliveries: (await h.deliveriesOf(c.endpointId)).map((d) => [
      d.id,
      d.status,
      d.nextAttemptAt,
      d.replayedFrom,
    ]),
    email: await s.tenantNotificationEmail({ tenantId: c.tenantId }),
    audit: (await s.auditList({ tenantId: c.tenantId, limit: 100, cursor: null })).data,
  };
}

/** A tenant, an endpoint subscribed to `a.*` and one delivered `a.b` event (its delivery: ctx.deliveryId). */
async function withDelivered(h: OperationsHarness): Promise<Ctx> {
  const t = await h.newTenant();
  const ep = await h.newEndpoint(t.id, { eventTypes: ['a.*'] });
  await h.publish(t.id, 1);
  const leased = await h.lease(NOW + SECOND);
  await h.complete(leased, NOW + SECOND);
  return { tenantId: t.id, endpointId: ep.id, deliveryId: leased[0]!.delivery.id };
}

/** As withDelivered, plus one pending (never attempted) `a.b` delivery. */
async function withPending(h: OperationsHarness): Promise<Ctx> {
  const c = await withDelivered(h);
  await h.publish(c.tenantId, 1, NOW + 2 * SECOND);
  return c;
}

const testEvent = (tenantId: string): NewEvent => ({
  id: id('event', AT),
  tenantId,
  type: 'hookrail.test',
  resourceId: null,
  data: '{}',
  idempotencyKey: null,
  requestHash: null,
  createdAt: AT,
});

/** A bulk replay at AT of the endpoint's deliveries with `status`. */
const bulkReplay = (s: Store, c: Ctx, status: 'delivered' | 'dead', audit: AuditOf<unknown>) =>
  s.deliveryReplayBulk({
    endpointId: c.endpointId,
    tenantId: c.tenantId,
    statuses: [status],
    since: null,
    until: AT,
    now: AT,
    ratePerSecond: 10,
    confirmAbove: null,
    max: 100,
    ids,
    audit,
  });

const CHANGES: Change[] = [
  {
    name: 'endpointCreate',
    async setup(h) {
      const t = await h.newTenant();
      return { tenantId: t.id, endpointId: id('endpoint') };
    },
    run: (s, c, audit) => {
      const endpoint = endpointRecord(c.tenantId, { id: c.endpointId, createdAt: AT, updatedAt: AT });
      return s.endpointCreate({ endpoint, secret: secretRecord(endpoint), audit });
    },
  },
  {
    name: 'endpointUpdate (narrowing event_types cancels a pending delivery)',
    setup: withPending,
    run: (s, c, audit) =>
      s.endpointUpdate({
        id: c.endpointId,
        tenantId: c.tenantId,
        patch: { eventTypes: ['x.*'] },
        now: AT,
        audit,
      }),
    refused: (s, c, audit) =>
      s.endpointUpdate({
        id: id('endpoint'),
        tenantId: c.tenantId,
        patch: { description: 'x' },
        now: AT,
        audit,
      }),
  },
  {
    name: 'endpointDelete',
    setup: withPending,
    run: (s, c, audit) => s.endpointDelete({ id: c.endpointId, tenantId: c.tenantId, now: AT, audit }),
    refused: (s, c, audit) => s.endpointDelete({ id: id('endpoint'), tenantId: c.tenantId, now: AT, audit }),
  },
  {
    name: 'tenantDelete',
    setup: withPending,
    run: (s, c, audit) => s.tenantDelete({ id: c.tenantId, now: AT, audit }),
    refused: (s, c, audit) => s.tenantDelete({ id: id('tenant'), now: AT, audit }),
  },
  {
    name: 'endpointSetStatus',
    setup: withPending,
    run: (s, c, audit) =>
      s.endpointSetStatus({
        id: c.endpointId,
        tenantId: c.tenantId,
        status: 'disabled',
        reason: 'disabled_by_tenant',
        now: AT,
        audit,
      }),
    refused: (s, c, audit) =>
      s.endpointSetStatus({
        id: c.endpointId,
        tenantId: id('tenant'),
        status: 'disabled',
        reason: 'disabled_by_tenant',
        now: AT,
        audit,
      }),
  },
  {
    name: 'endpointEnable (skip: the pending delivery is skipped)',
    async setup(h) {
      const c = await withPending(h);
      await h.store.endpointSetStatus({
        id: c.endpointId,
        tenantId: c.tenantId,
        status: 'disabled',
        reason: 'disabled_by_tenant',
        now: NOW + 3 * SECOND,
      });
      return c;
    },
    run: (s, c, audit) =>
      s.endpointEnable({
        id: c.endpointId,
        tenantId: c.tenantId,
        choice: { kind: 'skip' },
        now: AT,
        ids,
        audit,
      }),
    // Enabled already: nothing to re-enable.
    refused: async (s, c, audit) => {
      await s.endpointEnable({
        id: c.endpointId,
        tenantId: c.tenantId,
        choice: { kind: 'skip' },
        now: AT,
        ids,
      });
      return s.endpointEnable({
        id: c.endpointId,
        tenantId: c.tenantId,
        choice: { kind: 'skip' },
        now: AT,
        ids,
        audit,
      });
    },
  },
  {
    name: 'secretRotate',
    async setup(h) {
      const t = await h.newTenant();
      const ep = await h.newEndpoint(t.id);
      return { tenantId: t.id, endpointId: ep.id };
    },
    run: async (s, c, audit) => {
      const ep = (await s.endpointGet({ id: c.endpointId, tenantId: null }))!;
      return s.secretRotate({
        secret: secretRecord(ep, { createdAt: AT }),
        previousActiveUntil: AT + HOUR,
        now: AT,
        audit,
      });
    },
  },
  {
    name: 'secretRetire',
    async setup(h) {
      const t = await h.newTenant();
      const ep = await h.newEndpoint(t.id);
      const second = secretRecord(ep, { createdAt: NOW + SECOND });
      await h.store.secretRotate({ secret: second, previousActiveUntil: NOW + 2 * HOUR, now: NOW + SECOND });
      const active = await h.store.secretListActive({ endpointId: ep.id, now: NOW + SECOND });
      return { tenantId: t.id, endpointId: ep.id, secretIds: active.map((s) => s.id) };
    },
    run: (s, c, audit) => s.secretRetire({ id: c.secretIds![1]!, endpointId: c.endpointId, now: AT, audit }),
    // The last active one.
    refused: async (s, c, audit) => {
      await s.secretRetire({ id: c.secretIds![1]!, endpointId: c.endpointId, now: AT });
      return s.secretRetire({ id: c.secretIds![0]!, endpointId: c.endpointId, now: AT, audit });
    },
  },
  {
    name: 'tenantSetNotificationEmail',
    async setup(h) {
      const t = await h.newTenant();
      const ep = await h.newEndpoint(t.id);
      return { tenantId: t.id, endpointId: ep.id };
    },
    run: (s, c, audit) =>
      s.tenantSetNotificationEmail({ tenantId: c.tenantId, email: 'ops@example.com', now: AT, audit }),
  },
  {
    name: 'deliveryReplay',
    setup: withDelivered,
    run: (s, c, audit) =>
      s.deliveryReplay({ id: c.deliveryId!, tenantId: c.tenantId, now: AT, ratePerSecond: 10, ids, audit }),
    refused: (s, c, audit) =>
      s.deliveryReplay({ id: id('delivery'), tenantId: c.tenantId, now: AT, ratePerSecond: 10, ids, audit }),
  },
  {
    name: 'deliveryReplayBulk',
    setup: withDelivered,
    run: (s, c, audit) => bulkReplay(s, c, 'delivered', audit),
    // Nothing matches (no dead letters): nothing is created, so nothing is recorded.
    refused: (s, c, audit) => bulkReplay(s, c, 'dead', audit),
  },
  {
    name: 'endpointTestEvent',
    setup: withDelivered,
    run: (s, c, audit) =>
      s.endpointTestEvent({
        endpointId: c.endpointId,
        tenantId: c.tenantId,
        event: testEvent(c.tenantId),
        now: AT,
        ids,
        audit,
      }),
    refused: (s, c, audit) =>
      s.endpointTestEvent({
        endpointId: id('endpoint'),
        tenantId: c.tenantId,
        event: testEvent(c.tenantId),
        now: AT,
        ids,
        audit,
      }),
  },
];

const record = (c: Ctx, recordId: string, details: Record<string, unknown>): AuditRecord => ({
  id: recordId,
  tenantId: c.tenantId,
  actor: 'tenant_key:key_a',
  action: 'test.change',
  targetType: 'endpoint',
  targetId: c.endpointId,
  details,
  createdAt: AT,
});

export function auditInTransactionConformance({ h, test }: OperationsSection): void {
  describe('audit records in the change’s transaction (AuditOf)', () => {
    for (const change of CHANGES) {
      test(`${change.name}: the record is written with the change, from what it did`, async () => {
        const c = await change.setup(h);
        const results: unknown[] = [];
        const recordId = id('audit', AT);
        const result = await change.run(h.store, c, (r) => {
          results.push(r);
          return record(c, recordId, { saw: r === undefined ? null : 'result' });
        });
        // Called once, with what the store answers (nothing for a change that answers only that it was made).
        expect(results).toHaveLength(1);
        if (results[0] !== undefined) expect(results[0]).toEqual(result);
        const trail = (await h.store.auditList({ tenantId: c.tenantId, limit: 100, cursor: null })).data;
        expect(trail).toEqual([record(c, recordId, { saw: results[0] === undefined ? null : 'result' })]);
      });

      test(`${change.name}: a record that cannot be written rolls the change back`, async () => {
        const c = await change.setup(h);
        const taken = record(c, id('audit', AT), { first: true });
        await h.store.auditAppend({ record: taken });
        const before = await state(h, c);
        await expect(
          change.run(h.store, c, () => ({ ...taken, details: { second: true } })),
        ).rejects.toThrow();
        expect(await state(h, c)).toEqual(before);
      });

      if (change.refused) {
        const refused = change.refused;
        test(`${change.name}: a refused change asks for no record`, async () => {
          const c = await change.setup(h);
          let asked = 0;
          await refused(h.store, c, () => {
            asked++;
            return record(c, id('audit', AT), {});
          });
          expect(asked).toBe(0);
          expect((await h.store.auditList({ tenantId: c.tenantId, limit: 100, cursor: null })).data).toEqual(
            [],
          );
        });
      }
    }

    test('null from the builder records nothing, and the change is made', async () => {
      const c = await withDelivered(h);
      await h.store.endpointUpdate({
        id: c.endpointId,
        tenantId: c.tenantId,
        patch: { description: 'quiet' },
        now: AT,
        audit: () => null,
      });
      expect((await h.store.endpointGet({ id: c.endpointId, tenantId: null }))?.description).toBe('quiet');
      expect((await h.store.auditList({ tenantId: c.tenantId, limit: 100, cursor: null })).data).toEqual([]);
    });
  });
}
