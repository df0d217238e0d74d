/**
 * Operations conformance: re-enabling with `deliver` re-queues the streak's dead letters the way a bulk replay
 * picks them (docs/failure-handling.md, Replay): each dead letter once — those a bulk replay already queued while
 * the endpoint was disabled are not replayed again — and only of event types the endpoint still subscribes to.
 */
import { describe, expect } from 'vitest';
import { AUTO_DISABLE_AFTER_MS } from '../../../src/domain/endpoint-health.ts';
import type { DeliveryRecord } from '../../../src/ports/delivery-store.ts';
import type { NewEvent } from '../../../src/ports/store.ts';
import { NOW } from '../store-conformance.ts';
import { DAY, FINISH, id, ids, type OperationsSection, SECOND } from './harness.ts';

export function enableAfterReplayConformance({ h, test }: OperationsSection): void {
  describe('re-enable after a bulk replay', () => {
    /** An endpoint auto-disabled with `n` dead letters of `a.b` and `extra` of `x.y`, all of one streak. */
    async function autoDisabledWithDeadLetters(n: number, extra = 0) {
      const t = await h.newTenant();
      const ep = await h.newEndpoint(t.id);
      await h.publish(t.id, n);
      if (extra > 0) {
        const evs: NewEvent[] = Array.from({ length: extra }, () => ({
          id: id('event'),
          tenantId: t.id,
          type: 'x.y',
          resourceId: null,
          data: '{}',
          idempotencyKey: null,
          requestHash: null,
          createdAt: NOW,
        }));
        await h.store.eventInsertBatch({ events: evs, now: NOW, idempotencyWindowMs: DAY });
        await h.store.fanoutRun({ now: NOW, limit: 1_000, ids });
      }
      const leased = await h.lease(NOW + SECOND);
      expect(leased).toHaveLength(n + extra);
      await h.complete(leased, NOW + 2 * SECOND, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_attempts' },
      });
      const due = NOW + 2 * SECOND + FINISH + AUTO_DISABLE_AFTER_MS;
      const disabled = await h.store.endpointAutoDisable({
        now: due,
        afterMs: AUTO_DISABLE_AFTER_MS,
        ids: { audit: () => id('audit', due), notification: () => id('notification', due) },
      });
      expect(disabled.map((e) => e.id)).toEqual([ep.id]);
      return { t, ep, at: due };
    }

    const bulkReplay = (tenantId: string, endpointId: string, now: number, max = 10_000) =>
      h.store.deliveryReplayBulk({
        endpointId,
        tenantId,
        statuses: ['dead'],
        since: null,
        until: now,
        now,
        ratePerSecond: 10,
        confirmAbove: null,
        max,
        ids,
      });

    /** Per original (dead) delivery, its replays. */
    const replaysByOriginal = (all: DeliveryRecord[]) => {
      const m = new Map<string, DeliveryRecord[]>();
      for (const d of all) if (d.replayedFrom === null) m.set(d.id, []);
      for (const d of all) if (d.replayedFrom !== null) m.get(d.replayedFrom)?.push(d);
      return m;
    };

    test("endpointEnable 'deliver' after a bulk replay while disabled replays each dead letter once in total", async () => {
      const n = 4;
      const { t, ep, at } = await autoDisabledWithDeadLetters(n);
      const replay = await bulkReplay(t.id, ep.id, at + SECOND);
      expect(replay).toMatchObject({ found: n, created: n, more: false });
      expect(await h.deliveriesOf(ep.id, 'pending')).toHaveLength(n);

      const now = at + 2 * SECOND;
      const res = await h.store.endpointEnable({
        id: ep.id,
        tenantId: t.id,
        choice: { kind: 'deliver' },
        now,
        ids,
      });
      // The n pending replays made due now; no dead letter queued a second time.
      expect(res).toMatchObject({ requeued: n, skipped: 0 });
      const all = await h.deliveriesOf(ep.id);
      expect(all).toHaveLength(2 * n);
      const byOriginal = replaysByOriginal(all);
      expect(byOriginal.size).toBe(n);
      for (const [original, replays] of byOriginal) {
        expect(replays, original).toHaveLength(1);
        expect(replays[0]).toMatchObject({ status: 'pending', nextAttemptAt: now });
      }
      // Nothing is left to replay: asking again finds nothing.
      expect(await bulkReplay(t.id, ep.id, now + SECOND)).toMatchObject({ found: 0, created: 0 });
    });

    test("endpointEnable 'deliver' re-queues only what a bulk replay would: not replayed before, still subscribed", async () => {
      const { t, ep, at } = await autoDisabledWithDeadLetters(4, 1);
      // The endpoint stops subscribing to x.y while disabled; a partial bulk replay queues the oldest 3 of a.b.
      await h.store.endpointUpdate({ id: ep.id, tenantId: t.id, patch: { eventTypes: ['a.*'] }, now: at });
      expect(await bulkReplay(t.id, ep.id, at + SECOND, 3)).toMatchObject({
        found: 3,
        created: 3,
        more: true,
      });

      const now = at + 2 * SECOND;
      const res = await h.store.endpointEnable({
        id: ep.id,
        tenantId: t.id,
        choice: { kind: 'deliver' },
        now,
        ids,
      });
      // 3 pending replays made due now, and the 4th a.b dead letter replayed; the x.y one left dead.
      expect(res).toMatchObject({ requeued: 4, skipped: 0 });
      const all = await h.deliveriesOf(ep.id);
      const byOriginal = replaysByOriginal(all);
      const replayCounts = [...byOriginal].map(([orig, replays]) => [
        all.find((d) => d.id === orig)!.eventType,
        replays.length,
      ]);
      expect(replayCounts.sort()).toEqual([
        ['a.b', 1],
        ['a.b', 1],
        ['a.b', 1],
        ['a.b', 1],
        ['x.y', 0],
      ]);
      expect(all.filter((d) => d.status === 'pending').every((d) => d.nextAttemptAt === now)).toBe(true);
    });
  });
}
