import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { createTestStore, type TestStore } from '../../test/support/test-hookrail.ts';
import { waitFor } from '../../test/support/wait.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
import { createEndpoint } from '../app/manage-endpoints.ts';
import { createTenant } from '../app/manage-tenants.ts';
import { newId } from '../domain/ids.ts';
import { Maintenance } from './maintenance.ts';

const DAY = 86_400_000;

describe('Maintenance: retention', () => {
  let ts: TestStore | undefined;
  afterEach(() => ts?.destroy());

  it('deletes what outlived the configured retention, in batches, within one pass', async () => {
    ts = await createTestStore('sqlite');
    const { store } = ts;
    const clock = new FakeClock();
    const random = seededRandom(11);
    const base = { store, clock, random, keys: createLocalKeyService({ masterKey: Buffer.alloc(32, 7) }) };
    const { tenant } = await createTenant(base, { name: 'a' });
    const start = clock.now();
    // An event fanned out to no endpoint, and 1,200 audit records: more than two batches.
    const event = {
      id: newId('event', start, random.bytes(10)),
      tenantId: tenant.id,
      type: 'a.b',
      resourceId: null,
      data: '{}',
      idempotencyKey: null,
      requestHash: null,
      createdAt: start,
    };
    await store.eventInsertBatch({ events: [event], now: start, idempotencyWindowMs: DAY });
    const ids = { delivery: () => newId('delivery', start, random.bytes(10)), webhookId: () => 'msg_x' };
    await store.fanoutRun({ now: start, limit: 10, ids });
    for (let i = 0; i < 1_200; i++) {
      await store.auditAppend({
        record: {
          id: newId('audit', start + i, random.bytes(10)),
          tenantId: tenant.id,
          actor: 'operator',
          action: 'endpoint.updated',
          targetType: 'endpoint',
          targetId: 'ep_x',
          details: {},
          createdAt: start + i,
        },
      });
    }
    const maintenance = new Maintenance({
      store,
      clock,
      random,
      intervalMs: 60_000,
      mailer: null,
      logger: null,
      retention: { eventsDays: 3, deadLettersDays: 3, attemptsDays: 3, auditDays: 5 },
    });

    clock.set(start + 3 * DAY - 1);
    expect(await maintenance.prune()).toEqual({ events: 0, deliveries: 0, attempts: 0, audit: 0 });
    clock.set(start + 3 * DAY + 1);
    await maintenance.runOnce();
    expect(await store.eventGet({ id: event.id, tenantId: null })).toBeNull();
    expect((await store.auditList({ tenantId: tenant.id, limit: 10, cursor: null })).data).toHaveLength(10);
    clock.set(start + 5 * DAY + 1_200);
    expect(await maintenance.prune()).toEqual({ events: 0, deliveries: 0, attempts: 0, audit: 1_200 });
    expect((await store.auditList({ tenantId: null, limit: 10, cursor: null })).data).toEqual([]);
  });

  it('stops batching after half the maintenance interval, and goes on where it stopped at the next pass', async () => {
    ts = await createTestStore('sqlite');
    const { store } = ts;
    const random = seededRandom(12);
    const start = Date.UTC(2026, 0, 1);
    for (let i = 0; i < 1_200; i++) {
      await store.auditAppend({
        record: {
          id: newId('audit', start + i, random.bytes(10)),
          tenantId: 'ten_x',
          actor: 'operator',
          action: 'endpoint.updated',
          targetType: 'endpoint',
          targetId: 'ep_x',
          details: {},
          createdAt: start + i,
        },
      });
    }
    // A clock that moves 20 s whenever it is read: with a 60 s interval, the budget (30 s) fits two batches.
    let now = start + 10 * DAY;
    const clock = { now: () => (now += 20_000) };
    const maintenance = new Maintenance({
      store,
      clock,
      random,
      intervalMs: 60_000,
      mailer: null,
      logger: null,
      retention: { eventsDays: 3, deadLettersDays: 3, attemptsDays: 3, auditDays: 5 },
    });
    expect((await maintenance.prune()).audit).toBe(1_000);
    expect((await maintenance.prune()).audit).toBe(200);
  });
});

describe('Maintenance: the outbox', () => {
  let ts: TestStore | undefined;
  let maintenance: Maintenance | undefined;
  afterEach(async () => {
    await maintenance?.stop();
    await ts?.destroy();
  });

  it('runs on a loop of its own: a slow mail server delays the mail, not the other passes', async () => {
    ts = await createTestStore('sqlite');
    const { store } = ts;
    const clock = { now: () => Date.now() };
    const random = seededRandom(12);
    const base = { store, clock, random, keys: createLocalKeyService({ masterKey: Buffer.alloc(32, 7) }) };
    const { tenant } = await createTenant(base, { name: 'a' });
    await store.tenantSetNotificationEmail({
      tenantId: tenant.id,
      email: 'ops@example.com',
      now: clock.now(),
    });
    // Three endpoints disabled: three `disabled` notices waiting in the outbox.
    const by = { tenantId: tenant.id, principal: { kind: 'operator' as const } };
    for (let i = 0; i < 3; i++) {
      const { endpoint } = await createEndpoint(base, by, {
        url: `https://h${i}.example.com/`,
        eventTypes: ['*'],
      });
      await store.endpointSetStatus({
        id: endpoint.id,
        tenantId: tenant.id,
        status: 'disabled',
        reason: 'test',
        now: clock.now(),
      });
    }
    let leasePasses = 0;
    const counted = new Proxy(store, {
      get(target, key, receiver) {
        if (key === 'deliveryExpireLeases') {
          return (p: Parameters<typeof store.deliveryExpireLeases>[0]) => {
            leasePasses++;
            return target.deliveryExpireLeases(p);
          };
        }
        const v = Reflect.get(target, key, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const mailed: string[] = [];
    const mailer = {
      // A mail server that takes a second per message.
      send: async (m: { to: string; subject: string }) => {
        await new Promise((r) => setTimeout(r, 1_000));
        mailed.push(m.subject);
      },
      close: async () => undefined,
    };
    maintenance = new Maintenance({ store: counted, clock, random, intervalMs: 50, mailer, logger: null });
    maintenance.start();
    await new Promise((r) => setTimeout(r, 1_500));
    // In 1.5 s: many passes returned expired leases while the first mails were still being sent, one at a time.
    expect(leasePasses).toBeGreaterThan(5);
    expect(mailed.length).toBeLessThan(3);
    await waitFor(async () => mailed.length === 3, 10_000, 'all three mailed');
    const sent = await store.notificationList({ tenantId: tenant.id, limit: 10, cursor: null });
    expect(sent.data.map((n) => n.status)).toEqual(['sent', 'sent', 'sent']);
  });
});
