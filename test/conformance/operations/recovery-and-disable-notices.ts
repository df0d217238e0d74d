/**
 * Operations conformance: the `recovered` notice written by deliveryComplete when an attempt ends a noticed
 * failure streak (domain/dead-letter-notice.ts recoveredNoticeDue), and the `disabled` notice written by
 * endpointSetStatus when it disables an enabled endpoint.
 */
import { describe, expect } from 'vitest';
import { noticeText } from '../../../src/domain/notice-text.ts';
import type { EndpointRecord, NotificationRecord } from '../../../src/ports/delivery-store.ts';
import { NOW } from '../store-conformance.ts';
import {
  attemptFor,
  FINISH,
  HOUR,
  id,
  MINUTE,
  type OperationsSection,
  SECOND,
  WRITE_DELAY,
} from './harness.ts';

export function recoveryAndDisableNoticesConformance({ h, test }: OperationsSection): void {
  const { newTenant, newEndpoint, publish, lease, complete, runtimeOf, notificationsOf } = h;
  const kinds = async (tenantId: string) => (await notificationsOf(tenantId)).map((n) => n.kind).reverse();

  /** A tenant (with a channel unless told) and an endpoint with `n` deliveries leased at once. */
  async function leased(n: number, email: string | null = 'ops@t.test') {
    const t = await newTenant(NOW, email);
    const ep = await newEndpoint(t.id, { maxConcurrency: 100 });
    await publish(t.id, n);
    const ls = await lease(NOW + SECOND);
    expect(ls).toHaveLength(n);
    return { t, ep, ls };
  }

  describe('recovered and disabled notices', () => {
    test('a success that takes a failing endpoint out of its streak after a dead-letter notice: one recovered', async () => {
      const { t, ep, ls } = await leased(30);
      // Eleven failures in a row (failing from the tenth), then a dead letter: the first failure notice.
      await complete(ls.slice(0, 11), NOW + MINUTE, { failure: 'retryable' });
      expect((await runtimeOf(ep.id)).health).toBe('failing');
      await complete(ls.slice(11, 12), NOW + 2 * MINUTE, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_attempts' },
      });
      expect(await kinds(t.id)).toEqual(['dead_letter']);

      const at = NOW + 3 * MINUTE;
      const nid = id('notification', at);
      await complete(ls.slice(12, 13), at, { notificationIds: [nid] });
      expect((await runtimeOf(ep.id)).health).not.toBe('failing');
      const recovered = (await notificationsOf(t.id)).filter((n) => n.kind === 'recovered');
      expect(recovered).toEqual([
        {
          id: nid,
          tenantId: t.id,
          endpointId: ep.id,
          kind: 'recovered',
          ...noticeText('recovered', { endpointId: ep.id, url: ep.url, at: at + FINISH, count: 0 }),
          emailTo: 'ops@t.test',
          status: 'pending',
          attempts: 0,
          nextAttemptAt: at + WRITE_DELAY,
          lastError: null,
          createdAt: at + WRITE_DELAY,
          sentAt: null,
        } satisfies NotificationRecord,
      ]);
      // Further successes, and successes in a later batch, add nothing.
      await complete(ls.slice(13, 15), NOW + 4 * MINUTE);
      expect(await kinds(t.id)).toEqual(['dead_letter', 'recovered']);

      // A second streak an hour later: its dead letter falls in the notice window (digested, not sent), so its
      // end is not noticed either.
      await complete(ls.slice(15, 26), NOW + HOUR, { failure: 'retryable' });
      await complete(ls.slice(26, 27), NOW + HOUR + MINUTE, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_attempts' },
      });
      expect((await runtimeOf(ep.id)).health).toBe('failing');
      expect((await runtimeOf(ep.id)).notices.dead_letter.pending).toBe(1);
      await complete(ls.slice(27, 28), NOW + HOUR + 2 * MINUTE);
      expect((await runtimeOf(ep.id)).health).not.toBe('failing');
      expect(await kinds(t.id)).toEqual(['dead_letter', 'recovered']);
    });

    test('failing and the success in one batch: recovered written with the batch, after its dead-letter notice', async () => {
      const { t, ls } = await leased(12, null);
      await complete(ls.slice(0, 10), NOW + MINUTE, { failure: 'retryable' });
      const at = NOW + 2 * MINUTE;
      const nids = [id('notification', at), id('notification', at + 1)];
      await h.store.deliveryComplete({
        completions: [
          {
            attempt: attemptFor(ls[10]!, at, 'retryable'),
            leaseOwner: 'w1',
            probe: false,
            next: { status: 'dead', reason: 'max_attempts' },
          },
          {
            attempt: attemptFor(ls[11]!, at + SECOND),
            leaseOwner: 'w1',
            probe: false,
            next: { status: 'delivered' },
          },
        ],
        now: at + WRITE_DELAY,
        // Increasing ids: the list is newest first by id.
        ids: { notification: () => nids.shift()! },
      });
      const listed = await notificationsOf(t.id);
      expect(listed.map((n) => [n.kind, n.status, n.emailTo])).toEqual([
        ['recovered', 'logged', null],
        ['dead_letter', 'logged', null],
      ]);
    });

    test('a success ending a failing streak with no failure notice writes nothing', async () => {
      const { t, ep, ls } = await leased(13);
      await complete(ls.slice(0, 12), NOW + MINUTE, { failure: 'retryable' });
      expect((await runtimeOf(ep.id)).health).toBe('failing');
      await complete(ls.slice(12), NOW + 2 * MINUTE);
      expect((await runtimeOf(ep.id)).health).toBe('healthy');
      expect(await notificationsOf(t.id)).toEqual([]);
    });

    test('a rejection noticed before the streak does not make the streak’s end noticed', async () => {
      const { t, ep, ls } = await leased(14);
      await complete(ls.slice(0, 1), NOW + MINUTE, {
        failure: 'permanent',
        next: { status: 'dead', reason: 'permanent_failure' },
      });
      await complete(ls.slice(1, 2), NOW + 2 * MINUTE);
      // Streak after the notice, then a success: not an outage the tenant was told of.
      await complete(ls.slice(2, 13), NOW + HOUR, { failure: 'retryable' });
      expect((await runtimeOf(ep.id)).health).toBe('failing');
      await complete(ls.slice(13), NOW + 2 * HOUR);
      expect(await kinds(t.id)).toEqual(['permanent_failure']);
    });

    test('a success recorded after the endpoint was disabled is not a recovery', async () => {
      const { t, ep, ls } = await leased(12);
      await complete(ls.slice(0, 11), NOW + MINUTE, {
        failure: 'retryable',
        next: { status: 'dead', reason: 'max_attempts' },
      });
      expect(await kinds(t.id)).toEqual(['dead_letter']);
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'disabled',
        reason: 'disabled_by_tenant',
        now: NOW + 2 * MINUTE,
      });
      await complete(ls.slice(11), NOW + 3 * MINUTE);
      expect((await runtimeOf(ep.id)).health).toBe('disabled');
      expect(await kinds(t.id)).toEqual(['dead_letter', 'disabled']);
    });

    test('endpointSetStatus: disabling an enabled endpoint writes one disabled notice; re-disabling none', async () => {
      const t = await newTenant(NOW, 'ops@t.test');
      const ep = await newEndpoint(t.id);
      const other = await newEndpoint(t.id);
      const disable = (e: EndpointRecord, at: number, nid?: string) =>
        h.store.endpointSetStatus({
          id: e.id,
          tenantId: t.id,
          status: 'disabled',
          reason: 'disabled_by_tenant',
          now: at,
          ...(nid ? { ids: { notification: () => nid } } : {}),
        });
      const at = NOW + MINUTE;
      const nid = id('notification', at);
      expect(await disable(ep, at, nid)).toMatchObject({ id: ep.id, status: 'disabled' });
      const expected: NotificationRecord = {
        id: nid,
        tenantId: t.id,
        endpointId: ep.id,
        kind: 'disabled',
        ...noticeText('disabled', { endpointId: ep.id, url: ep.url, at, count: 0 }),
        emailTo: 'ops@t.test',
        status: 'pending',
        attempts: 0,
        nextAttemptAt: at,
        lastError: null,
        createdAt: at,
        sentAt: null,
      };
      expect(await notificationsOf(t.id)).toEqual([expected]);

      // Again while disabled: the status is written, no second notice.
      expect(await disable(ep, at + MINUTE)).toMatchObject({ status: 'disabled' });
      expect(await notificationsOf(t.id)).toEqual([expected]);
      // Enabling writes none; disabling once more is a new disable.
      await h.store.endpointSetStatus({
        id: ep.id,
        tenantId: t.id,
        status: 'enabled',
        reason: null,
        now: at + 2 * MINUTE,
      });
      expect(await notificationsOf(t.id)).toHaveLength(1);
      await disable(ep, at + 3 * MINUTE);
      expect(await kinds(t.id)).toEqual(['disabled', 'disabled']);

      // Another tenant's endpoint, or one that is absent: nothing is written.
      const stranger = await newTenant(NOW + 1);
      expect(
        await h.store.endpointSetStatus({
          id: other.id,
          tenantId: stranger.id,
          status: 'disabled',
          reason: 'disabled_by_tenant',
          now: at,
        }),
      ).toBeNull();
      expect(await disable({ ...ep, id: id('endpoint') }, at)).toBeNull();
      expect(await notificationsOf(null)).toHaveLength(2);
    });

    test('without a channel the disabled notice is listed only; concurrent disables write one', async () => {
      const t = await newTenant(NOW);
      const ep = await newEndpoint(t.id);
      await Promise.all(
        [1, 2, 3, 4].map((i) =>
          h.store.endpointSetStatus({
            id: ep.id,
            tenantId: t.id,
            status: 'disabled',
            reason: 'disabled_by_tenant',
            now: NOW + i,
          }),
        ),
      );
      const listed = await notificationsOf(t.id);
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({
        kind: 'disabled',
        emailTo: null,
        status: 'logged',
        nextAttemptAt: null,
      });
    });
  });
}
