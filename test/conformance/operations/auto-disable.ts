/** Operations conformance: auto-disable and re-enable. */
import { describe, expect } from 'vitest';
import { AUTO_DISABLE_AFTER_MS } from '../../../src/domain/endpoint-health.ts';
import { noticeText } from '../../../src/domain/notice-text.ts';
import type { AuditRecord, DeliveryRecord, EndpointRecord } from '../../../src/ports/delivery-store.ts';
import type { NewEvent } from '../../../src/ports/store.ts';
import { NOW } from '../store-conformance.ts';
import { DAY, FINISH, HOUR, id, ids, MINUTE, type OperationsSection, SECOND } from './harness.ts';

export function autoDisableConformance({ h, test }: OperationsSection): void {
  const {
    newTenant,
    newEndpoint,
    publish,
    lease,
    complete,
    runtimeOf,
    deliveriesOf,
    notificationsOf,
    modes,
  } = h;
  describe('auto-disable and re-enable', () => {
    test('endpointAutoDisable disables after 72 h of failures with no success, not before, once', async () => {
      const t = await newTenant(NOW, 'ops@t.test');
      const bad = await newEndpoint(t.id);
      const recovered = await newEndpoint(t.id);
      const fine = await newEndpoint(t.id);
      await publish(t.id, 2);
      const ls = await lease(NOW + SECOND);
      const of = (ep: EndpointRecord) => ls.filter((l) => l.endpoint.id === ep.id);
      await complete(of(bad).slice(0, 1), NOW + 2 * SECOND, { failure: 'retryable' });
      await complete(of(recovered).slice(0, 1), NOW + 2 * SECOND, { failure: 'retryable' });
      await complete(of(recovered).slice(1), NOW + 3 * SECOND);
      await complete(of(fine), NOW + 2 * SECOND);
      const failingSince = NOW + 2 * SECOND + FINISH;
      expect((await runtimeOf(bad.id)).failingSince).toBe(failingSince);

      const due = failingSince + AUTO_DISABLE_AFTER_MS;
      const disableIds = (at: number) => ({
        audit: () => id('audit', at),
        notification: () => id('notification', at),
      });
      expect(
        await h.store.endpointAutoDisable({
          now: due - 1,
          afterMs: AUTO_DISABLE_AFTER_MS,
          ids: disableIds(due),
        }),
      ).toEqual([]);
      // Still failing later on (another failure does not restart the streak).
      await complete(of(bad).slice(1), NOW + HOUR, { failure: 'retryable' });
      expect((await runtimeOf(bad.id)).failingSince).toBe(failingSince);

      const disabled = await h.store.endpointAutoDisable({
        now: due,
        afterMs: AUTO_DISABLE_AFTER_MS,
        ids: disableIds(due),
      });
      const expected: EndpointRecord = {
        ...bad,
        status: 'disabled',
        disabledReason: 'auto_disabled',
        updatedAt: due,
      };
      expect(disabled).toEqual([expected]);
      expect(await h.store.endpointGet({ id: bad.id, tenantId: t.id })).toEqual(expected);
      expect((await h.store.endpointGet({ id: recovered.id, tenantId: t.id }))?.status).toBe('enabled');
      expect((await h.store.endpointGet({ id: fine.id, tenantId: t.id }))?.status).toBe('enabled');
      expect(await runtimeOf(bad.id)).toMatchObject({
        failingSince,
        health: 'disabled',
        healthReasons: expect.arrayContaining(['disabled']),
      });

      const audit = (await h.store.auditList({ tenantId: t.id, limit: 10, cursor: null })).data;
      expect(audit).toEqual([
        {
          id: expect.stringMatching(/^aud_/),
          tenantId: t.id,
          actor: 'system',
          action: 'endpoint.auto_disabled',
          targetType: 'endpoint',
          targetId: bad.id,
          details: { failing_since: failingSince, reason: 'auto_disabled' },
          createdAt: due,
        } satisfies AuditRecord,
      ]);
      const notices = (await notificationsOf(t.id)).filter((n) => n.kind === 'auto_disabled');
      expect(notices).toEqual([
        expect.objectContaining({
          endpointId: bad.id,
          ...noticeText('auto_disabled', { endpointId: bad.id, url: bad.url, at: due, count: 0 }),
          emailTo: 'ops@t.test',
          status: 'pending',
          nextAttemptAt: due,
          createdAt: due,
        }),
      ]);

      // Once: a second pass (or another process) finds nothing more to do.
      expect(
        await h.store.endpointAutoDisable({
          now: due + HOUR,
          afterMs: AUTO_DISABLE_AFTER_MS,
          ids: disableIds(due),
        }),
      ).toEqual([]);
      expect((await h.store.auditList({ tenantId: t.id, limit: 10, cursor: null })).data).toHaveLength(1);
      // Nothing is leased for it any more, even once its retries are due.
      expect((await lease(NOW + 2 * DAY + HOUR)).filter((l) => l.endpoint.id === bad.id)).toEqual([]);
    });

    test('concurrent endpointAutoDisable calls disable each endpoint exactly once', async () => {
      const t = await newTenant(NOW, 'ops@t.test');
      const eps: EndpointRecord[] = [];
      for (let i = 0; i < 4; i++) eps.push(await newEndpoint(t.id));
      await publish(t.id, 1);
      await complete(await lease(NOW + SECOND), NOW + 2 * SECOND, { failure: 'retryable' });
      const due = NOW + 2 * SECOND + FINISH + AUTO_DISABLE_AFTER_MS;
      const passIds = { audit: () => id('audit', due), notification: () => id('notification', due) };
      const pass = () =>
        h.store.endpointAutoDisable({ now: due, afterMs: AUTO_DISABLE_AFTER_MS, ids: passIds });
      const runs = await Promise.all([pass(), pass(), pass()]);
      // Each disabled exactly once, whichever pass got there first.
      expect(
        runs
          .flat()
          .map((e) => e.id)
          .sort(),
      ).toEqual(eps.map((e) => e.id).sort());
      expect(await pass()).toEqual([]);
      expect((await h.store.auditList({ tenantId: t.id, limit: 100, cursor: null })).data).toHaveLength(4);
      expect((await notificationsOf(t.id)).filter((n) => n.kind === 'auto_disabled')).toHaveLength(4);
    });

    /**
     * A disabled endpoint with a backlog: a dead letter of an earlier streak, a success, then the current
     * streak with two dead letters and two pending retries, and one delivery never attempted.
     *
     *   ev0 @0m dead (old streak) · ev1 @1m delivered · ev2 @2m dead · ev3 @3m retry pending · ev4 @4m dead ·
     *   ev5 @5m retry pending · ev6 @6m pending · disabled @7m
     */
    async function disabledWithBacklog() {
      const t = await newTenant();
      const ep = await newEndpoint(t.id);
      const evs: NewEvent[] = [];
      const deliveryOf = new Map<string, DeliveryRecord>();
      const step = async (i: number, outcome: 'dead' | 'delivered' | 'retry' | null) => {
        const at = NOW + i * MINUTE;
        const [ev] = await publish(t.id, 1, at);
        evs.push(ev!);
        if (outcome === null) return;
        const ls = await lease(at + SECOND);
        expect(ls).toHaveLength(1);
        deliveryOf.set(ev!.id, ls[0]!.delivery);
        await complete(ls, at + 2 * SECOND, {
          failure: outcome === 'delivered' ? null : 'retryable',
          ...(outcome === 'dead' ? { next: { status: 'dead' as const, reason: 'max_attempts' } } : {}),
        });
      };
      await step(0, 'dead');
      await step(1, 'delivered');
      await step(2, 'dead');
      await step(3, 'retry');
      await step(4, 'dead');
      await step(5, 'retry');
      await step(6, null);
      expect((await runtimeOf(ep.id)).failingSince).toBe(NOW + 2 * MINUTE + 2 * SECOND + FINISH);
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'manual',
        now: NOW + 7 * MINUTE,
      });
      const byEvent = async () => {
        const m = new Map<string, DeliveryRecord[]>();
        for (const d of await deliveriesOf(ep.id)) m.set(d.eventId, [...(m.get(d.eventId) ?? []), d]);
        // Per event: the original first, then its copies (delivery ids of one instant do not sort by time).
        const originalFirst = (a: DeliveryRecord, b: DeliveryRecord) =>
          Number(a.replayedFrom !== null) - Number(b.replayedFrom !== null);
        return evs.map((e) => (m.get(e.id) ?? []).sort(originalFirst));
      };
      return { t, ep, evs, byEvent };
    }

    test("endpointEnable 'deliver': pending due now, the streak's dead letters re-queued with their webhook-id", async () => {
      const { t, ep, byEvent } = await disabledWithBacklog();
      const before = await byEvent();
      const now = NOW + 8 * MINUTE;
      const res = await h.store.endpointEnable({
        id: ep.id,
        tenantId: t.id,
        choice: { kind: 'deliver' },
        now,
        ids,
      });
      expect(res).toEqual({
        endpoint: { ...ep, status: 'enabled', disabledReason: null, updatedAt: now },
        requeued: 5,
        skipped: 0,
      });
      const after = await byEvent();
      // ev0: dead letter of an earlier streak, not re-queued; ev1 delivered.
      expect(after[0]).toEqual(before[0]);
      expect(after[1]).toEqual(before[1]);
      for (const i of [2, 4]) {
        const [original, copy] = after[i]!;
        expect(original).toEqual(before[i]![0]);
        expect(copy).toEqual({
          id: expect.stringMatching(/^dlv_/),
          tenantId: t.id,
          endpointId: ep.id,
          eventId: original!.eventId,
          eventType: original!.eventType,
          resourceId: null,
          webhookId: original!.webhookId,
          status: 'pending',
          attempts: 0,
          nextAttemptAt: now,
          firstAttemptAt: null,
          lastAttemptAt: null,
          statusReason: null,
          replayedFrom: original!.id,
          createdAt: now,
          updatedAt: now,
        } satisfies DeliveryRecord);
      }
      for (const i of [3, 5, 6]) {
        expect(after[i]).toEqual([{ ...before[i]![0]!, nextAttemptAt: now, updatedAt: now }]);
      }
      // The ramp starts: 1 of 10 at once, mode send.
      const runtime = await runtimeOf(ep.id);
      expect(runtime.circuit).toMatchObject({ state: 'closed', consecutiveFailures: 0, closedAt: now });
      // Recovered, though the streak's dead letters are recent (they were just re-queued).
      expect(runtime).toMatchObject({
        failingSince: null,
        health: 'degraded',
        healthReasons: ['recent_dead_letter'],
      });
      const first = await lease(now + SECOND);
      expect(modes(first)).toEqual(['send']);
      expect((await lease(now + 5 * MINUTE)).length).toBe(4);
      // Not disabled any more: null.
      expect(
        await h.store.endpointEnable({ id: ep.id, tenantId: t.id, choice: { kind: 'deliver' }, now, ids }),
      ).toBeNull();
    });

    test("endpointEnable 'skip': pending deliveries become skipped, nothing re-queued", async () => {
      const { t, ep, byEvent } = await disabledWithBacklog();
      const before = await byEvent();
      const now = NOW + 8 * MINUTE;
      const res = await h.store.endpointEnable({
        id: ep.id,
        tenantId: t.id,
        choice: { kind: 'skip' },
        now,
        ids,
      });
      expect(res).toEqual({
        endpoint: { ...ep, status: 'enabled', disabledReason: null, updatedAt: now },
        requeued: 0,
        skipped: 3,
      });
      const after = await byEvent();
      for (const i of [0, 1, 2, 4]) expect(after[i]).toEqual(before[i]);
      for (const i of [3, 5, 6]) {
        expect(after[i]).toEqual([
          {
            ...before[i]![0]!,
            status: 'skipped',
            statusReason: 'skipped_on_enable',
            nextAttemptAt: null,
            updatedAt: now,
          },
        ]);
      }
      expect(await lease(NOW + 2 * DAY)).toEqual([]);
    });

    test("endpointEnable 'resume_from': events accepted before the point are skipped, the rest delivered", async () => {
      const { t, ep, byEvent } = await disabledWithBacklog();
      const before = await byEvent();
      const now = NOW + 8 * MINUTE;
      const at = NOW + 3 * MINUTE + 30 * SECOND;
      const res = await h.store.endpointEnable({
        id: ep.id,
        tenantId: t.id,
        choice: { kind: 'resume_from', at },
        now,
        ids,
      });
      expect(res).toMatchObject({ requeued: 3, skipped: 1, endpoint: { status: 'enabled' } });
      const after = await byEvent();
      for (const i of [0, 1, 2]) expect(after[i]).toEqual(before[i]);
      expect(after[3]).toEqual([
        {
          ...before[3]![0]!,
          status: 'skipped',
          statusReason: 'skipped_on_enable',
          nextAttemptAt: null,
          updatedAt: now,
        },
      ]);
      expect(after[4]).toHaveLength(2);
      expect(after[4]![1]).toMatchObject({
        webhookId: before[4]![0]!.webhookId,
        replayedFrom: before[4]![0]!.id,
        status: 'pending',
        nextAttemptAt: now,
      });
      for (const i of [5, 6])
        expect(after[i]).toEqual([{ ...before[i]![0]!, nextAttemptAt: now, updatedAt: now }]);
    });

    test('endpointEnable is null for an endpoint that is absent, of another tenant, deleted or not disabled', async () => {
      const t = await newTenant();
      const other = await newTenant(NOW + 1);
      const enabled = await newEndpoint(t.id);
      const disabled = await newEndpoint(t.id, { status: 'disabled', disabledReason: 'manual' });
      const deleted = await newEndpoint(t.id, { status: 'disabled', disabledReason: 'manual' });
      await h.store.endpointDelete({ id: deleted.id, tenantId: t.id, now: NOW });
      const enable = (endpointId: string, tenantId = t.id) =>
        h.store.endpointEnable({ id: endpointId, tenantId, choice: { kind: 'deliver' }, now: NOW + 1, ids });
      expect(await enable(enabled.id)).toBeNull();
      expect(await enable(id('endpoint'))).toBeNull();
      expect(await enable(disabled.id, other.id)).toBeNull();
      expect(await enable(deleted.id)).toBeNull();
      expect(await h.store.endpointGet({ id: disabled.id, tenantId: null })).toEqual(disabled);
      expect(await enable(disabled.id)).toMatchObject({ requeued: 0, skipped: 0 });
    });
  });
}
