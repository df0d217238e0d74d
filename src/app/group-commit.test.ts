import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { asTenant, createTestStore, type TestStore } from '../../test/support/test-hookrail.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
import { newId } from '../domain/ids.ts';
import { FanoutWorker } from '../worker/fanout-worker.ts';
import { GroupCommitter } from './group-commit.ts';
import { createEndpoint } from './manage-endpoints.ts';
import { createTenant } from './manage-tenants.ts';
import { Signal } from './signal.ts';

describe('GroupCommitter', () => {
  let ts: TestStore | undefined;
  afterEach(() => ts?.destroy());

  // Intake with fan-out beside it, as `hookrail start` wires them on SQLite; with `wakeOnSubmit` off, as before.
  async function accepted(wakeOnSubmit: boolean) {
    ts = await createTestStore('sqlite');
    const store = ts.store;
    expect(store.capabilities.sharedTurn).toBe(true);
    const clock = new FakeClock();
    const random = seededRandom(3);
    const base = { store, clock, random, keys: createLocalKeyService({ masterKey: Buffer.alloc(32, 7) }) };
    const { tenant } = await createTenant(base, { name: 'a' });
    const { endpoint } = await createEndpoint(base, asTenant(tenant.id), {
      url: 'https://ok.example.com/',
      eventTypes: ['*'],
    });
    const committed = new Signal();
    const fanout = new FanoutWorker({
      store,
      clock,
      random,
      batch: 100,
      deliveryBatch: 1_000,
      pollMs: 60_000,
      wake: committed,
      deliveriesCreated: new Signal(),
      logger: null,
    });
    // The fan-out loop between passes: waiting for a poke (its loop does this; here without a timing assumption).
    let pass: Promise<unknown> = Promise.resolve();
    void committed.wait(60_000).then(() => {
      pass = fanout.runOnce();
    });
    let submitted = 0;
    const committer = new GroupCommitter({
      store,
      now: () => clock.now(),
      idempotencyWindowMs: 60_000,
      maxBatch: 100,
      maxInFlight: 1,
      onCommit: () => committed.poke(),
      ...(wakeOnSubmit
        ? {
            onSubmit: () => {
              submitted++;
              committed.poke();
            },
          }
        : {}),
    });
    const now = clock.now();
    const outcomes = await Promise.all(
      ['a.created', 'b.created'].map((type) =>
        committer.submit({
          id: newId('event', now, random.bytes(10)),
          tenantId: tenant.id,
          type,
          resourceId: null,
          data: '{}',
          idempotencyKey: null,
          requestHash: null,
          createdAt: now,
        }),
      ),
    );
    // What is committed at the moment the events are acknowledged (the 202).
    const deliveries = await store.deliveryList({
      endpointId: endpoint.id,
      tenantId: tenant.id,
      status: null,
      limit: 10,
      cursor: null,
    });
    const pending = await store.fanoutPendingCount();
    await pass;
    return { outcomes, deliveries: deliveries.data.length, pending, submitted };
  }

  it('lets fan-out join the transaction of the batch it fans out, where the store shares a turn', async () => {
    const r = await accepted(true);
    expect(r.outcomes.map((o) => o.kind)).toEqual(['created', 'created']);
    expect(r.submitted).toBe(1); // one batch
    // The events and their deliveries were made durable by the same commit.
    expect(r.deliveries).toBe(2);
    expect(r.pending).toBe(0);
  });

  it('without the early wake, fan-out commits after the events are acknowledged', async () => {
    const r = await accepted(false);
    expect(r.outcomes.map((o) => o.kind)).toEqual(['created', 'created']);
    expect(r.deliveries).toBe(0);
    expect(r.pending).toBe(2);
  });
});
