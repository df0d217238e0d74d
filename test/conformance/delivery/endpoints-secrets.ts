/** Delivery conformance: endpoints, secrets. */
import { describe, expect } from 'vitest';
import { NOW } from '../store-conformance.ts';
import { type DeliverySection, endpointRecord, HOUR, id, MINUTE, secretRecord } from './harness.ts';

export function endpointsSecretsConformance({ h, test }: DeliverySection): void {
  const { newTenant, newEndpoint } = h;
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
      expect(await h.store.endpointGet({ id: ep.id, tenantId: t1.id })).toEqual(ep);
      expect(await h.store.endpointGet({ id: ep.id, tenantId: null })).toEqual(ep);
      expect(await h.store.endpointGet({ id: ep.id, tenantId: t2.id })).toBeNull();
      expect(await h.store.endpointGet({ id: id('endpoint'), tenantId: null })).toBeNull();
    });

    test('endpointList pages newest first, per tenant or across tenants', async () => {
      const t1 = await newTenant();
      const t2 = await newTenant(NOW + 1);
      const mine: string[] = [];
      for (let i = 0; i < 5; i++) mine.push((await newEndpoint(t1.id, { createdAt: NOW + i * 10 })).id);
      const theirs = (await newEndpoint(t2.id, { createdAt: NOW + 5 })).id;
      const newest = [...mine].reverse();
      const p1 = await h.store.endpointList({ tenantId: t1.id, limit: 2, cursor: null });
      expect(p1.data.map((e) => e.id)).toEqual(newest.slice(0, 2));
      expect(p1.nextCursor).toBe(newest[1]);
      const p2 = await h.store.endpointList({ tenantId: t1.id, limit: 2, cursor: p1.nextCursor });
      expect(p2.data.map((e) => e.id)).toEqual(newest.slice(2, 4));
      const p3 = await h.store.endpointList({ tenantId: t1.id, limit: 2, cursor: p2.nextCursor });
      expect(p3.data.map((e) => e.id)).toEqual(newest.slice(4));
      expect(p3.nextCursor).toBeNull();
      const all = await h.store.endpointList({ tenantId: null, limit: 10, cursor: null });
      expect(all.data.map((e) => e.id)).toEqual([...mine, theirs].sort().reverse());
      expect(all.nextCursor).toBeNull();
      // Deleted endpoints are absent.
      await h.store.endpointDelete({ id: mine[4]!, tenantId: t1.id, now: NOW + HOUR });
      const after = await h.store.endpointList({ tenantId: t1.id, limit: 10, cursor: null });
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
      expect(await h.store.endpointUpdate({ id: ep.id, tenantId: t2.id, patch, now: NOW + HOUR })).toBeNull();
      expect(await h.store.endpointGet({ id: ep.id, tenantId: null })).toEqual(ep);
      const updated = await h.store.endpointUpdate({ id: ep.id, tenantId: t1.id, patch, now: NOW + HOUR });
      const expected = { ...ep, ...patch, updatedAt: NOW + HOUR };
      expect(updated).toEqual(expected);
      expect(await h.store.endpointGet({ id: ep.id, tenantId: t1.id })).toEqual(expected);
      expect(
        await h.store.endpointUpdate({ id: id('endpoint'), tenantId: t1.id, patch: { url: 'x' }, now: NOW }),
      ).toBeNull();
    });

    test('endpointDelete removes it once, scoped to the tenant', async () => {
      const t1 = await newTenant();
      const t2 = await newTenant(NOW + 1);
      const ep = await newEndpoint(t1.id);
      expect(await h.store.endpointDelete({ id: ep.id, tenantId: t2.id, now: NOW + 1 })).toBe(false);
      expect(await h.store.endpointDelete({ id: ep.id, tenantId: t1.id, now: NOW + 2 })).toBe(true);
      expect(await h.store.endpointGet({ id: ep.id, tenantId: null })).toBeNull();
      expect(await h.store.endpointDelete({ id: ep.id, tenantId: t1.id, now: NOW + 3 })).toBe(false);
      expect(
        await h.store.endpointUpdate({ id: ep.id, tenantId: t1.id, patch: { url: 'x' }, now: NOW }),
      ).toBeNull();
      expect(
        await h.store.endpointSetStatus({
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
        await h.store.endpointSetStatus({
          id: ep.id,
          tenantId: t2.id,
          status: 'disabled',
          reason: 'x',
          now: NOW,
        }),
      ).toBeNull();
      const disabled = await h.store.endpointSetStatus({
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
      expect(await h.store.endpointGet({ id: ep.id, tenantId: t1.id })).toEqual(disabled);
      const enabled = await h.store.endpointSetStatus({
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
      await h.store.endpointCreate({ endpoint: ep, secret: s1 });
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW })).toEqual([s1]);

      const s2 = secretRecord(ep, { createdAt: NOW + 1 });
      await h.store.secretRotate({ secret: s2, previousActiveUntil: NOW + HOUR, now: NOW + 1 });
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 2 })).toEqual([
        s2,
        { ...s1, activeUntil: NOW + HOUR },
      ]);
      // The overlap ends at previousActiveUntil.
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + HOUR })).toEqual([s2]);

      // Rotating during the overlap retires the oldest at once: never three active.
      const s3 = secretRecord(ep, { createdAt: NOW + 3 });
      await h.store.secretRotate({ secret: s3, previousActiveUntil: NOW + 2 * HOUR, now: NOW + 3 });
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 4 })).toEqual([
        s3,
        { ...s2, activeUntil: NOW + 2 * HOUR },
      ]);
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 2 })).toEqual([
        { ...s2, activeUntil: NOW + 2 * HOUR },
        { ...s1, activeUntil: NOW + 3 },
      ]);

      // An active secret that already ends earlier keeps its earlier end (min).
      const ep2 = endpointRecord(t.id);
      const e1 = secretRecord(ep2, { activeUntil: NOW + 30 * MINUTE });
      await h.store.endpointCreate({ endpoint: ep2, secret: e1 });
      const e2 = secretRecord(ep2, { createdAt: NOW + 1 });
      await h.store.secretRotate({ secret: e2, previousActiveUntil: NOW + HOUR, now: NOW + 1 });
      expect(await h.store.secretListActive({ endpointId: ep2.id, now: NOW + 2 })).toEqual([e2, e1]);
      expect(await h.store.secretListActive({ endpointId: ep2.id, now: NOW + 30 * MINUTE })).toEqual([e2]);
      // Not a secret of another endpoint.
      expect((await h.store.secretListActive({ endpointId: ep.id, now: NOW + 4 })).map((s) => s.id)).toEqual([
        s3.id,
        s2.id,
      ]);
    });

    test('secretRetire retires a secret but refuses the last active one', async () => {
      const t = await newTenant();
      const ep = endpointRecord(t.id);
      const s1 = secretRecord(ep);
      await h.store.endpointCreate({ endpoint: ep, secret: s1 });
      expect(await h.store.secretRetire({ id: s1.id, endpointId: ep.id, now: NOW + 1 })).toBe('last');
      const s2 = secretRecord(ep, { createdAt: NOW + 2 });
      await h.store.secretRotate({ secret: s2, previousActiveUntil: NOW + HOUR, now: NOW + 2 });
      expect(await h.store.secretRetire({ id: id('secret'), endpointId: ep.id, now: NOW + 3 })).toBe(
        'not_found',
      );
      expect(await h.store.secretRetire({ id: s1.id, endpointId: id('endpoint'), now: NOW + 3 })).toBe(
        'not_found',
      );
      expect(await h.store.secretRetire({ id: s2.id, endpointId: ep.id, now: NOW + 3 })).toBe('retired');
      // Retiring the new secret undoes the rotation (secret-retirement.ts).
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 4 })).toEqual([
        { ...s1, activeUntil: null },
      ]);
      expect(await h.store.secretRetire({ id: s2.id, endpointId: ep.id, now: NOW + 4 })).toBe('not_found');
      expect(await h.store.secretRetire({ id: s1.id, endpointId: ep.id, now: NOW + 4 })).toBe('last');
    });

    test('a deleted endpoint gets no new secret and retires none: not_found, nothing written', async () => {
      const t = await newTenant();
      const ep = endpointRecord(t.id);
      const s1 = secretRecord(ep);
      await h.store.endpointCreate({ endpoint: ep, secret: s1 });
      const s2 = secretRecord(ep, { createdAt: NOW + 1 });
      await h.store.secretRotate({ secret: s2, previousActiveUntil: NOW + HOUR, now: NOW + 1 });
      expect(await h.store.endpointDelete({ id: ep.id, tenantId: t.id, now: NOW + 2 })).toBe(true);
      let audited = 0;
      const audit = () => {
        audited++;
        return null;
      };
      const s3 = secretRecord(ep, { createdAt: NOW + 3 });
      expect(
        await h.store.secretRotate({ secret: s3, previousActiveUntil: NOW + HOUR, now: NOW + 3, audit }),
      ).toBe('not_found');
      expect(await h.store.secretRetire({ id: s1.id, endpointId: ep.id, now: NOW + 3, audit })).toBe(
        'not_found',
      );
      expect(audited).toBe(0);
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 4 })).toEqual([
        s2,
        { ...s1, activeUntil: NOW + HOUR },
      ]);
    });
  });
}
