/** Operations conformance: notifications. */
import { describe, expect } from 'vitest';
import { noticeText } from '../../../src/domain/notice-text.ts';
import type { EndpointRecord, NotificationRecord } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import { DAY, FINISH, HOUR, id, MINUTE, type OperationsSection, SECOND, WRITE_DELAY } from './harness.ts';

export function notificationsConformance({ h, test }: OperationsSection): void {
  const { newTenant, newEndpoint, publish, lease, complete, runtimeOf, notificationsOf } = h;
  describe('notifications', () => {
    test('a deleted endpoint, or an endpoint of a deleted tenant, gets no digest of what it had pending', async () => {
      for (const gone of ['endpoint', 'tenant'] as const) {
        const t = await newTenant(NOW, 'ops@gone.test');
        const ep = await newEndpoint(t.id);
        await publish(t.id, 2);
        const mine = (await lease(NOW + SECOND)).filter((l) => l.endpoint.id === ep.id);
        const at = NOW + 2 * SECOND;
        await complete(mine.slice(0, 1), at, {
          failure: 'retryable',
          next: { status: 'dead', reason: 'max_attempts' },
        });
        await complete(mine.slice(1, 2), at + HOUR, {
          failure: 'retryable',
          next: { status: 'dead', reason: 'max_attempts' },
        });
        expect((await runtimeOf(ep.id)).notices.dead_letter.pending).toBe(1);
        // The first dead letter's notice is still waiting for the mail server.
        expect((await notificationsOf(t.id)).map((n) => n.status)).toEqual(['pending']);
        if (gone === 'endpoint') {
          await h.store.endpointDelete({ id: ep.id, tenantId: t.id, now: at + 2 * HOUR });
        } else {
          await h.store.tenantDelete({ id: t.id, now: at + 2 * HOUR });
          // A deleted tenant is mailed nothing more: its waiting notice stays listed, not sent.
          expect((await notificationsOf(t.id)).map((n) => [n.status, n.nextAttemptAt])).toEqual([
            ['logged', null],
          ]);
          const claimed = await h.store.notificationClaim({ now: at + 3 * HOUR, limit: 10, leaseMs: 60_000 });
          expect(claimed.filter((n) => n.tenantId === t.id)).toEqual([]);
        }
        const dueAt = at + FINISH + DAY;
        expect(
          await h.store.notificationDigestRun({
            now: dueAt,
            ids: { notification: () => id('notification', dueAt) },
          }),
        ).toBe(0);
        expect(
          (await notificationsOf(t.id)).map((n) => n.kind),
          gone,
        ).toEqual(['dead_letter']);
        expect((await runtimeOf(ep.id)).notices.dead_letter.pending, gone).toBe(0);
      }
    });

    test('the first dead letter notifies once (pending with a channel, logged without); later ones are digested', async () => {
      const t1 = await newTenant(NOW, 'ops@one.test');
      const t2 = await newTenant(NOW + 1);
      const e1 = await newEndpoint(t1.id);
      const e2 = await newEndpoint(t2.id);
      await publish(t1.id, 5);
      await publish(t2.id, 1);
      const all = await lease(NOW + SECOND);
      const mine = all.filter((l) => l.endpoint.id === e1.id);
      const theirs = all.filter((l) => l.endpoint.id === e2.id);
      expect(mine).toHaveLength(5);

      const at = NOW + 2 * SECOND;
      const n1 = id('notification', at);
      await complete(mine.slice(0, 1), at, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_attempts' },
        notificationIds: [n1],
      });
      expect(await notificationsOf(t1.id)).toEqual([
        {
          id: n1,
          tenantId: t1.id,
          endpointId: e1.id,
          kind: 'dead_letter',
          ...noticeText('dead_letter', { endpointId: e1.id, url: e1.url, at: at + FINISH, count: 0 }),
          emailTo: 'ops@one.test',
          status: 'pending',
          attempts: 0,
          nextAttemptAt: at + WRITE_DELAY,
          lastError: null,
          createdAt: at + WRITE_DELAY,
          sentAt: null,
        } satisfies NotificationRecord,
      ]);
      // Health changed in the same transaction (ADR-09: before any notice is sent).
      expect(await runtimeOf(e1.id)).toMatchObject({
        lastDeadLetterAt: at + FINISH,
        health: 'degraded',
        notices: { dead_letter: { lastNoticeAt: at + FINISH, pending: 0 } },
      });

      // No channel: listed only.
      await complete(theirs, at, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_attempts' },
      });
      expect(await notificationsOf(t2.id)).toEqual([
        expect.objectContaining({
          tenantId: t2.id,
          endpointId: e2.id,
          kind: 'dead_letter',
          emailTo: null,
          status: 'logged',
          nextAttemptAt: null,
          attempts: 0,
        }),
      ]);

      // The second dead letter within 24 h is aggregated: no new row.
      await complete(mine.slice(1, 2), at + HOUR, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_age' },
      });
      expect(await notificationsOf(t1.id)).toHaveLength(1);
      expect((await runtimeOf(e1.id)).notices.dead_letter).toEqual({
        lastNoticeAt: at + FINISH,
        pending: 1,
      });
      // A completion that does not hold the lease writes no dead letter, so no notice either.
      await complete(mine.slice(2, 3), at + HOUR, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_age' },
        owner: 'w2',
      });
      expect((await runtimeOf(e1.id)).notices.dead_letter.pending).toBe(1);
      // A rejection is another cause with its own window: notified at once.
      await complete(mine.slice(3, 4), at + 2 * HOUR, {
        failure: 'permanent',
        next: { status: 'dead', reason: 'permanent_failure' },
      });
      const afterReject = await notificationsOf(t1.id);
      expect(afterReject.map((n) => n.kind)).toEqual(['permanent_failure', 'dead_letter']);
      expect(afterReject[0]).toMatchObject({
        ...noticeText('permanent_failure', {
          endpointId: e1.id,
          url: e1.url,
          at: at + 2 * HOUR + FINISH,
          count: 0,
        }),
        status: 'pending',
      });

      // The digest is due 24 h after the notice: one digest, once.
      const dueAt = at + FINISH + DAY;
      const digestIds = () => ({ notification: () => id('notification', dueAt) });
      expect(await h.store.notificationDigestRun({ now: dueAt - 1, ids: digestIds() })).toBe(0);
      expect(await notificationsOf(t1.id)).toHaveLength(2);
      expect(await h.store.notificationDigestRun({ now: dueAt, ids: digestIds() })).toBe(1);
      const digests = (await notificationsOf(t1.id)).filter((n) => n.kind === 'digest');
      expect(digests).toEqual([
        expect.objectContaining({
          endpointId: e1.id,
          ...noticeText('digest', { endpointId: e1.id, url: e1.url, at: dueAt, count: 1 }),
          emailTo: 'ops@one.test',
          status: 'pending',
          nextAttemptAt: dueAt,
          createdAt: dueAt,
        }),
      ]);
      expect((await runtimeOf(e1.id)).notices.dead_letter).toEqual({ lastNoticeAt: dueAt, pending: 0 });
      expect(await h.store.notificationDigestRun({ now: dueAt + HOUR, ids: digestIds() })).toBe(0);
      expect(await h.store.notificationDigestRun({ now: dueAt + 2 * DAY, ids: digestIds() })).toBe(0);
      expect(await notificationsOf(t1.id)).toHaveLength(3);
      // Across tenants (operator view), newest first.
      const everyone = await notificationsOf(null);
      expect(everyone).toHaveLength(4);
      expect(everyone.map((n) => n.id)).toEqual(
        everyone
          .map((n) => n.id)
          .sort()
          .reverse(),
      );
    });

    test('notificationClaim and notificationMark: sent, retried later, logged; pages newest first', async () => {
      const t = await newTenant(NOW, 'ops@t.test');
      const eps = [await newEndpoint(t.id), await newEndpoint(t.id), await newEndpoint(t.id)];
      await publish(t.id, 1);
      const ls = await lease(NOW + SECOND);
      // One dead letter per endpoint, a minute apart: three notifications due a minute apart.
      const nids: string[] = [];
      for (const [i, ep] of eps.entries()) {
        const at = NOW + (i + 1) * MINUTE;
        nids.push(id('notification', at));
        await complete(
          ls.filter((l) => l.endpoint.id === ep.id),
          at,
          {
            failure: 'retryable',
            next: { status: 'dead', reason: 'max_attempts' },
            notificationIds: [nids[i]!],
          },
        );
      }
      const dueAt = (i: number) => NOW + (i + 1) * MINUTE + WRITE_DELAY;
      expect(await h.store.notificationClaim({ now: dueAt(0) - 1, limit: 10, leaseMs: MINUTE })).toEqual([]);

      const now = NOW + HOUR;
      const c1 = await h.store.notificationClaim({ now, limit: 2, leaseMs: MINUTE });
      expect(c1.map((n) => [n.id, n.attempts, n.nextAttemptAt])).toEqual([
        [nids[0], 1, dueAt(0)],
        [nids[1], 1, dueAt(1)],
      ]);
      // Claimed rows are pushed out by the lease: the next claim gets the rest only.
      const c2 = await h.store.notificationClaim({ now, limit: 10, leaseMs: MINUTE });
      expect(c2.map((n) => n.id)).toEqual([nids[2]]);
      expect(await h.store.notificationClaim({ now: now + MINUTE - 1, limit: 10, leaseMs: MINUTE })).toEqual(
        [],
      );

      await h.store.notificationMark({ id: nids[0]!, now: now + SECOND, result: { kind: 'sent' } });
      await h.store.notificationMark({
        id: nids[1]!,
        now: now + SECOND,
        result: { kind: 'retry', at: now + 10 * MINUTE, error: 'smtp 451' },
      });
      await h.store.notificationMark({ id: nids[2]!, now: now + SECOND, result: { kind: 'logged' } });
      const byId = new Map((await notificationsOf(t.id)).map((n) => [n.id, n]));
      expect(byId.get(nids[0]!)).toMatchObject({
        status: 'sent',
        sentAt: now + SECOND,
        nextAttemptAt: null,
      });
      expect(byId.get(nids[1]!)).toMatchObject({
        status: 'pending',
        attempts: 1,
        nextAttemptAt: now + 10 * MINUTE,
        lastError: 'smtp 451',
        sentAt: null,
      });
      expect(byId.get(nids[2]!)).toMatchObject({ status: 'logged', nextAttemptAt: null, sentAt: null });

      // The lease has run out, but sent and logged ones are never claimed again; the retry waits for its time.
      expect(await h.store.notificationClaim({ now: now + 2 * MINUTE, limit: 10, leaseMs: MINUTE })).toEqual(
        [],
      );
      const again = await h.store.notificationClaim({ now: now + 10 * MINUTE, limit: 10, leaseMs: MINUTE });
      expect(again.map((n) => [n.id, n.attempts, n.lastError])).toEqual([[nids[1], 2, 'smtp 451']]);

      // Pages, newest first.
      const p1 = await h.store.notificationList({ tenantId: t.id, limit: 2, cursor: null });
      expect(p1.data.map((n) => n.id)).toEqual([nids[2], nids[1]]);
      const p2 = await h.store.notificationList({ tenantId: t.id, limit: 2, cursor: p1.nextCursor });
      expect(p2.data.map((n) => n.id)).toEqual([nids[0]]);
      expect(p2.nextCursor).toBeNull();
      expect(
        (await h.store.notificationList({ tenantId: id('tenant'), limit: 2, cursor: null })).data,
      ).toEqual([]);
    });

    test('concurrent notificationClaim calls never return the same notification', async () => {
      const t = await newTenant(NOW, 'ops@t.test');
      const eps: EndpointRecord[] = [];
      for (let i = 0; i < 12; i++) eps.push(await newEndpoint(t.id));
      await publish(t.id, 1);
      const ls = await lease(NOW + SECOND);
      expect(ls).toHaveLength(12);
      await complete(ls, NOW + 2 * SECOND, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_attempts' },
      });
      expect(await notificationsOf(t.id)).toHaveLength(12);
      const now = NOW + HOUR;
      const claims = await Promise.all(
        [0, 1, 2, 3].map(() => h.store.notificationClaim({ now, limit: 5, leaseMs: MINUTE })),
      );
      const claimed = claims.flat().map((n) => n.id);
      expect(new Set(claimed).size).toBe(claimed.length);
      const rest = await h.store.notificationClaim({ now, limit: 100, leaseMs: MINUTE });
      const all = [...claimed, ...rest.map((n) => n.id)];
      expect(new Set(all).size).toBe(all.length);
      expect(all.sort()).toEqual((await notificationsOf(t.id)).map((n) => n.id).sort());
      expect(claims.flat().every((n) => n.attempts === 1)).toBe(true);
    });

    test('tenant notification e-mail round trip', async () => {
      expect(await h.store.tenantNotificationEmail({ tenantId: id('tenant') })).toBeNull();
      const t = await newTenant();
      const other = await newTenant(NOW + 1, 'other@x.test');
      expect(await h.store.tenantNotificationEmail({ tenantId: t.id })).toBeNull();
      await h.store.tenantSetNotificationEmail({ tenantId: t.id, email: 'ops@t.test', now: NOW + 2 });
      expect(await h.store.tenantNotificationEmail({ tenantId: t.id })).toBe('ops@t.test');
      expect(await h.store.tenantNotificationEmail({ tenantId: other.id })).toBe('other@x.test');
      await h.store.tenantSetNotificationEmail({ tenantId: t.id, email: null, now: NOW + 3 });
      expect(await h.store.tenantNotificationEmail({ tenantId: t.id })).toBeNull();
      expect(await h.store.tenantNotificationEmail({ tenantId: other.id })).toBe('other@x.test');
    });
  });
}
