/**
 * Operations conformance: the queue rebuild (queueRebuild, endpointIdList). The port keeps the queue rows
 * consistent, so drift is made the way it happens in the field — by SQL from outside (a restore, a hand edit),
 * through the suite's `rawSql` — and the rebuild must bring back exactly what the delivery plane had kept, leave
 * correct rows alone, write nothing on a dry run, and recreate a missing row.
 */
import { describe, expect } from 'vitest';
import { sharedLane } from '../../../src/domain/lanes.ts';
import type { QueueRebuildResult } from '../../../src/ports/operations-store.ts';
import type { Store } from '../../../src/ports/store.ts';
import { NOW } from '../store-conformance.ts';
import { MINUTE, type OperationsSection, SECOND } from './harness.ts';

/** Not the count the endpoints were created under (the default), so the recreated lane shows which was used. */
const LANES = 4;

export function queueRebuildConformance({
  h,
  test,
  rawSql,
}: OperationsSection & { rawSql: ((store: Store, sql: string) => Promise<void>) | undefined }): void {
  const { newTenant, newEndpoint, publish, lease, complete } = h;
  /** SQL both dialects accept; ids are the suite's own (no quotes in them). */
  const sql = (text: string) => {
    if (!rawSql) throw new Error('the queue rebuild section needs the suite option rawSql');
    return rawSql(h.store, text);
  };
  const corrupt = (endpointId: string, inflight: number, nextDueAt: number | null) =>
    sql(`UPDATE endpoint_queue SET inflight = ${inflight}, next_due_at = ${nextDueAt ?? 'NULL'}
          WHERE endpoint_id = '${endpointId}'`);
  const rebuild = (endpointId: string, o: { dryRun?: boolean; now?: number } = {}) =>
    h.store.queueRebuild({ endpointId, dryRun: o.dryRun ?? false, sharedLanes: LANES, now: o.now ?? NOW });
  const unchanged = (endpointId: string, inflight: number, due: number | null): QueueRebuildResult => ({
    endpointId,
    created: false,
    inflight: [inflight, inflight],
    nextDueAt: [due, due],
  });
  const inflightOf = async (endpointId: string) =>
    (await h.store.endpointRuntime({ endpointId }))?.inflight ?? null;

  /** An endpoint with three deliveries due at NOW, two of them leased: in flight 2, due NOW. */
  async function busyEndpoint() {
    const t = await newTenant();
    const ep = await newEndpoint(t.id);
    await publish(t.id, 3);
    const leased = await lease(NOW + SECOND, { limit: 2 });
    expect(leased).toHaveLength(2);
    return { t, ep, leased };
  }

  describe('queue rebuild', () => {
    test('a correct row is reported unchanged: in flight and due as the delivery plane keeps them', async () => {
      const { t, ep } = await busyEndpoint();
      const idle = await newEndpoint(t.id);
      const disabled = await newEndpoint(t.id);
      await publish(t.id, 1, NOW + MINUTE);
      await h.store.endpointSetStatus({
        id: disabled.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'test',
        now: NOW + MINUTE,
      });
      // The first endpoint's third delivery and the new one are due; the idle endpoint has only the new one.
      expect(await rebuild(ep.id)).toEqual(unchanged(ep.id, 2, NOW));
      expect(await rebuild(idle.id)).toEqual(unchanged(idle.id, 0, NOW + MINUTE));
      // A disabled endpoint keeps its backlog pending, with no due time: nothing is leased for it.
      expect(await rebuild(disabled.id)).toEqual(unchanged(disabled.id, 0, null));
      expect(
        await h.store.queueRebuild({ endpointId: 'ep_missing', dryRun: false, sharedLanes: LANES, now: NOW }),
      ).toBe(null);
    });

    test('drifted in-flight counts and due times are rebuilt from the deliveries, and leasing resumes', async () => {
      const { t, ep, leased } = await busyEndpoint();
      const idle = await newEndpoint(t.id);
      await corrupt(ep.id, 7, null);
      await corrupt(idle.id, 3, NOW + MINUTE);
      // Drifted, the busy endpoint's due delivery is never leased: it has no due time.
      expect(await lease(NOW + 2 * SECOND)).toEqual([]);
      expect(await inflightOf(ep.id)).toBe(7);

      expect(await rebuild(ep.id)).toEqual({
        endpointId: ep.id,
        created: false,
        inflight: [7, 2],
        nextDueAt: [null, NOW],
      });
      expect(await rebuild(idle.id)).toEqual({
        endpointId: idle.id,
        created: false,
        inflight: [3, 0],
        nextDueAt: [NOW + MINUTE, null],
      });
      expect(await rebuild(ep.id)).toEqual(unchanged(ep.id, 2, NOW));
      expect(await rebuild(idle.id)).toEqual(unchanged(idle.id, 0, null));

      const third = await lease(NOW + 3 * SECOND);
      expect(third.map((l) => l.delivery.endpointId)).toEqual([ep.id]);
      expect(await inflightOf(ep.id)).toBe(3);
      await complete([...leased, ...third], NOW + 4 * SECOND);
      expect(await inflightOf(ep.id)).toBe(0);
      expect(await rebuild(ep.id)).toEqual(unchanged(ep.id, 0, null));
    });

    test('a dry run reports what differs and writes nothing', async () => {
      const { ep } = await busyEndpoint();
      await corrupt(ep.id, 0, NOW + MINUTE);
      const report = { endpointId: ep.id, created: false, inflight: [0, 2], nextDueAt: [NOW + MINUTE, NOW] };
      expect(await rebuild(ep.id, { dryRun: true })).toEqual(report);
      expect(await rebuild(ep.id, { dryRun: true })).toEqual(report);
      expect(await inflightOf(ep.id)).toBe(0);

      await sql(`DELETE FROM endpoint_queue WHERE endpoint_id = '${ep.id}'`);
      expect(await rebuild(ep.id, { dryRun: true })).toEqual({
        endpointId: ep.id,
        created: true,
        inflight: [null, 2],
        nextDueAt: [null, NOW],
      });
      expect(await h.store.endpointRuntime({ endpointId: ep.id })).toBeNull();
    });

    test("a missing queue row is recreated in the endpoint's shared lane, counting the leases it had", async () => {
      const { ep, leased } = await busyEndpoint();
      await sql(`DELETE FROM endpoint_queue WHERE endpoint_id = '${ep.id}'`);
      expect(await h.store.endpointRuntime({ endpointId: ep.id })).toBeNull();

      expect(await rebuild(ep.id, { now: NOW + MINUTE })).toEqual({
        endpointId: ep.id,
        created: true,
        inflight: [null, 2],
        nextDueAt: [null, NOW],
      });
      expect(await rebuild(ep.id)).toEqual(unchanged(ep.id, 2, NOW));
      expect(await h.store.endpointLane({ endpointId: ep.id })).toMatchObject({
        lane: sharedLane(ep.id, LANES),
        since: NOW + MINUTE,
        previous: null,
      });
      // The delivery plane takes it up: the leases taken before are released on it, the due delivery is leased.
      await complete(leased, NOW + 2 * MINUTE);
      expect(await inflightOf(ep.id)).toBe(0);
      expect(await lease(NOW + 2 * MINUTE)).toHaveLength(1);
      expect(await inflightOf(ep.id)).toBe(1);
    });

    test('a delivery cancelled in flight holds its slot until its completion, on a deleted endpoint too', async () => {
      const { t, ep, leased } = await busyEndpoint();
      expect(await h.store.endpointDelete({ id: ep.id, tenantId: t.id, now: NOW + MINUTE })).toBe(true);
      await corrupt(ep.id, 0, NOW);
      expect(await rebuild(ep.id)).toEqual({
        endpointId: ep.id,
        created: false,
        inflight: [0, 2],
        nextDueAt: [NOW, null],
      });
      await complete(leased, NOW + 2 * MINUTE);
      expect(await inflightOf(ep.id)).toBe(0);
      expect(await rebuild(ep.id)).toEqual(unchanged(ep.id, 0, null));
    });

    test('endpointIdList pages every endpoint in id order, deleted ones included', async () => {
      const t = await newTenant();
      const eps = [];
      for (let i = 0; i < 5; i++) eps.push(await newEndpoint(t.id));
      await h.store.endpointDelete({ id: eps[2]!.id, tenantId: t.id, now: NOW });
      const seen: string[] = [];
      for (let after: string | null = null; ; ) {
        const page: { ids: string[]; total: number } = await h.store.endpointIdList({ after, limit: 2 });
        expect(page.total).toBe(5);
        seen.push(...page.ids);
        if (page.ids.length < 2) break;
        after = page.ids[page.ids.length - 1]!;
      }
      expect(seen).toEqual(eps.map((e) => e.id).sort());
      expect(await h.store.endpointIdList({ after: seen[4]!, limit: 2 })).toEqual({ ids: [], total: 5 });
    });
  });
}
