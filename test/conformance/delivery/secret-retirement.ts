/**
 * Retiring a signing secret never leaves the endpoint without one once the overlaps end: retiring the new secret
 * of a rotation lifts the end of the one it replaced (the rotation is undone); retiring the previous one early
 * leaves the new one as it was.
 */
import { describe, expect } from 'vitest';
import { NOW } from '../store-conformance.ts';
import { DAY, type DeliverySection, endpointRecord, HOUR, secretRecord } from './harness.ts';

export function secretRetirementConformance({ h, test }: DeliverySection): void {
  describe('secret retirement', () => {
    const withRotation = async () => {
      const t = await h.newTenant();
      const ep = endpointRecord(t.id);
      const s1 = secretRecord(ep);
      await h.store.endpointCreate({ endpoint: ep, secret: s1 });
      const s2 = secretRecord(ep, { createdAt: NOW + 1 });
      await h.store.secretRotate({ secret: s2, previousActiveUntil: NOW + HOUR, now: NOW + 1 });
      return { ep, s1, s2 };
    };

    test('secretRetire of the new secret during the overlap keeps the previous one in force', async () => {
      const { ep, s1, s2 } = await withRotation();
      // A change whose record cannot be written writes nothing: neither the retirement nor the lifted end.
      const failing = () => {
        throw new Error('audit write failed');
      };
      await expect(
        h.store.secretRetire({ id: s2.id, endpointId: ep.id, now: NOW + 2, audit: failing }),
      ).rejects.toThrow('audit write failed');
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 2 })).toEqual([
        s2,
        { ...s1, activeUntil: NOW + HOUR },
      ]);
      let audited = 0;
      const audit = () => {
        audited++;
        return null;
      };
      expect(await h.store.secretRetire({ id: s2.id, endpointId: ep.id, now: NOW + 2, audit })).toBe(
        'retired',
      );
      expect(audited).toBe(1);
      const kept = { ...s1, activeUntil: null };
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 3 })).toEqual([kept]);
      // Past the overlap the endpoint still has its secret, and it is the last one.
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + HOUR })).toEqual([kept]);
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 30 * DAY })).toEqual([kept]);
      expect(await h.store.secretRetire({ id: s1.id, endpointId: ep.id, now: NOW + HOUR + 1 })).toBe('last');
    });

    test('secretRetire of the previous secret during the overlap leaves the new one as it was', async () => {
      const { ep, s1, s2 } = await withRotation();
      expect(await h.store.secretRetire({ id: s1.id, endpointId: ep.id, now: NOW + 2 })).toBe('retired');
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 3 })).toEqual([s2]);
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 30 * DAY })).toEqual([s2]);
    });

    test('secretRetire of the newest after two rotations keeps the one before it, not the one already retired', async () => {
      const { ep, s1, s2 } = await withRotation();
      const s3 = secretRecord(ep, { createdAt: NOW + 2 });
      await h.store.secretRotate({ secret: s3, previousActiveUntil: NOW + 2 * HOUR, now: NOW + 2 });
      expect(await h.store.secretRetire({ id: s3.id, endpointId: ep.id, now: NOW + 3 })).toBe('retired');
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 30 * DAY })).toEqual([
        { ...s2, activeUntil: null },
      ]);
      // The first one stays retired: it ended when the second rotation happened.
      expect(await h.store.secretListActive({ endpointId: ep.id, now: NOW + 1 })).toEqual([
        { ...s2, activeUntil: null },
        { ...s1, activeUntil: NOW + 2 },
      ]);
    });
  });
}
