/**
 * Replacing a tenant's key (Store.tenantKeyReplace), the same on every store: in one transaction every live key of
 * the tenant is revoked, the new one inserted and the audit record written; other tenants' keys and producer keys
 * are untouched; a deleted or absent tenant changes nothing and asks for no record; and replacements racing each
 * other or a deletion leave at most one live key.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import type { AuditOf, AuditRecord } from '../../src/ports/delivery-store.ts';
import type { ApiKeyKind, ApiKeyRecord, Store } from '../../src/ports/store.ts';
import { createTenant, HOUR, id } from './fixtures.ts';
import { NOW, type StoreConformanceOptions, skipAwareTest } from './store-conformance.ts';

const AT = NOW + HOUR;

function keyRecord(kind: ApiKeyKind, tenantId: string | null, at = NOW): ApiKeyRecord {
  const secret = `${kind === 'producer' ? 'hkp' : 'hkt'}_${randomBytes(16).toString('hex')}`;
  return {
    id: id('apiKey', at),
    kind,
    tenantId,
    name: null,
    hash: createHash('sha256').update(secret).digest('hex'),
    prefix: secret.slice(0, 12),
    createdAt: at,
    revokedAt: null,
  };
}

export function runTenantKeyReplaceConformance(opts: StoreConformanceOptions): void {
  const { test, checkSkips } = skipAwareTest('runTenantKeyReplaceConformance', opts);

  describe(`Tenant key replacement conformance: ${opts.name}`, () => {
    let store: Store;
    beforeEach(async () => {
      store = await opts.createStore();
      await store.migrate();
    });
    afterEach(async () => {
      if (opts.destroyStore) await opts.destroyStore(store);
      else await store.close();
    });

    /** A tenant with a second live key of its own (createTenant's key has a hash nobody knows). */
    const tenantWithKey = async () => {
      const tenant = await createTenant(store, NOW);
      const key = keyRecord('tenant', tenant.id);
      await store.apiKeyCreate({ key });
      return { tenant, key };
    };
    const liveTenantKeys = async (tenantId: string) =>
      (await store.apiKeyList({ kind: 'tenant', limit: 100, cursor: null })).data
        .filter((k) => k.tenantId === tenantId)
        .map((k) => k.id);
    const recordOf =
      (tenantId: string, key: ApiKeyRecord): AuditOf<void> =>
      (): AuditRecord => ({
        id: id('audit', AT),
        tenantId,
        actor: 'operator',
        action: 'tenant.key_replaced',
        targetType: 'tenant',
        targetId: tenantId,
        details: { key_id: key.id, prefix: key.prefix },
        createdAt: AT,
      });

    test('revokes every live key of the tenant, inserts the new one and writes the record', async () => {
      const { tenant, key: old } = await tenantWithKey();
      const { tenant: other, key: otherKey } = await tenantWithKey();
      const producer = keyRecord('producer', null);
      await store.apiKeyCreate({ key: producer });
      const fresh = keyRecord('tenant', tenant.id, AT);

      expect(
        await store.tenantKeyReplace({
          tenantId: tenant.id,
          key: fresh,
          now: AT,
          audit: recordOf(tenant.id, fresh),
        }),
      ).toBe(true);

      expect(await store.apiKeyFindByHash({ hash: old.hash })).toBeNull();
      expect(await store.apiKeyFindByHash({ hash: fresh.hash })).toEqual(fresh);
      // Both of the tenant's earlier keys (the one made with it, too) are gone; the new one is its only key.
      expect(await liveTenantKeys(tenant.id)).toEqual([fresh.id]);
      // Another tenant's keys and producer keys are untouched.
      expect(await store.apiKeyFindByHash({ hash: otherKey.hash })).toEqual(otherKey);
      expect(await liveTenantKeys(other.id)).toHaveLength(2);
      expect(await store.apiKeyFindByHash({ hash: producer.hash })).toEqual(producer);

      const trail = (await store.auditList({ tenantId: tenant.id, limit: 10, cursor: null })).data;
      expect(trail.map((a) => [a.action, a.targetType, a.targetId, a.details])).toEqual([
        ['tenant.key_replaced', 'tenant', tenant.id, { key_id: fresh.id, prefix: fresh.prefix }],
      ]);
      expect((await store.auditList({ tenantId: other.id, limit: 10, cursor: null })).data).toEqual([]);

      // A second replacement revokes the first one's key.
      const third = keyRecord('tenant', tenant.id, AT + 1);
      expect(await store.tenantKeyReplace({ tenantId: tenant.id, key: third, now: AT + 1 })).toBe(true);
      expect(await store.apiKeyFindByHash({ hash: fresh.hash })).toBeNull();
      expect(await liveTenantKeys(tenant.id)).toEqual([third.id]);
    });

    test('a deleted or absent tenant: false, nothing written, no record asked for', async () => {
      const { tenant } = await tenantWithKey();
      expect(await store.tenantDelete({ id: tenant.id, now: AT })).toBe(true);
      let asked = 0;
      const audit: AuditOf<void> = () => {
        asked++;
        return null;
      };
      const fresh = keyRecord('tenant', tenant.id, AT);
      expect(await store.tenantKeyReplace({ tenantId: tenant.id, key: fresh, now: AT, audit })).toBe(false);
      // apiKeyList does not look at the tenant: a key inserted for a deleted tenant would be listed here.
      expect(await liveTenantKeys(tenant.id)).toEqual([]);
      expect(await store.apiKeyFindByHash({ hash: fresh.hash })).toBeNull();

      const absent = id('tenant');
      const stray = keyRecord('tenant', absent, AT);
      expect(await store.tenantKeyReplace({ tenantId: absent, key: stray, now: AT, audit })).toBe(false);
      expect(asked).toBe(0);
      expect((await store.auditList({ tenantId: null, limit: 10, cursor: null })).data).toEqual([]);
    });

    test('a record that cannot be written rolls the replacement back: the old key still works', async () => {
      const { tenant, key: old } = await tenantWithKey();
      const first = keyRecord('tenant', tenant.id, AT);
      const taken = recordOf(tenant.id, first)() as AuditRecord;
      await store.auditAppend({ record: taken });
      const before = await liveTenantKeys(tenant.id);

      await expect(
        store.tenantKeyReplace({ tenantId: tenant.id, key: first, now: AT, audit: () => taken }),
      ).rejects.toThrow();
      expect(await store.apiKeyFindByHash({ hash: old.hash })).toEqual(old);
      expect(await store.apiKeyFindByHash({ hash: first.hash })).toBeNull();
      expect(await liveTenantKeys(tenant.id)).toEqual(before);
    });

    test('replacements at once leave exactly one live key, one of theirs', async () => {
      const { tenant } = await tenantWithKey();
      const fresh = Array.from({ length: 4 }, (_, i) => keyRecord('tenant', tenant.id, AT + i));
      const done = await Promise.all(
        fresh.map((key, i) =>
          store.tenantKeyReplace({ tenantId: tenant.id, key, now: AT + i, audit: recordOf(tenant.id, key) }),
        ),
      );
      expect(done).toEqual([true, true, true, true]);
      const live = await liveTenantKeys(tenant.id);
      expect(live).toHaveLength(1);
      expect(fresh.map((k) => k.id)).toContain(live[0]);
      expect((await store.auditList({ tenantId: tenant.id, limit: 10, cursor: null })).data).toHaveLength(4);
    });

    test('a replacement racing the deletion of its tenant leaves no live key', async () => {
      for (let round = 0; round < 3; round++) {
        const { tenant } = await tenantWithKey();
        const fresh = keyRecord('tenant', tenant.id, AT);
        const [replaced] = await Promise.all([
          store.tenantKeyReplace({ tenantId: tenant.id, key: fresh, now: AT }),
          store.tenantDelete({ id: tenant.id, now: AT }),
        ]);
        expect(typeof replaced).toBe('boolean');
        expect(await liveTenantKeys(tenant.id)).toEqual([]);
        expect(await store.apiKeyFindByHash({ hash: fresh.hash })).toBeNull();
      }
    });
  });

  checkSkips();
}
