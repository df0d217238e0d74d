import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { createTestStore, type TestStore } from '../../test/support/test-hookrail.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
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
