import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { asTenant, createTestStore, type TestStore } from '../../test/support/test-hookrail.ts';
import { createLocalKeyService } from '../adapters/crypto/envelope.ts';
import { createEndpoint } from './manage-endpoints.ts';
import { createTenant } from './manage-tenants.ts';
import { SecretCache } from './secret-cache.ts';

describe('SecretCache', () => {
  let ts: TestStore | undefined;
  afterEach(() => ts?.destroy());

  it('reads once per TTL, and attempts that miss together share one read', async () => {
    ts = await createTestStore('sqlite');
    const clock = new FakeClock();
    const keys = createLocalKeyService({ masterKey: Buffer.alloc(32, 7) });
    const base = { store: ts.store, clock, random: seededRandom(1), keys };
    const { tenant } = await createTenant(base, { name: 'a' });
    const { endpoint, secretValue } = await createEndpoint(base, asTenant(tenant.id), {
      url: 'https://ok.example.com/',
      eventTypes: ['*'],
    });
    // The real store, with its reads counted.
    let reads = 0;
    const store = ts.store;
    const counting = Object.create(store) as typeof store;
    counting.secretListActive = (p) => {
      reads++;
      return store.secretListActive(p);
    };
    const cache = new SecretCache({ store: counting, keys, clock, ttlMs: 1_000 });

    const ten = await Promise.all(Array.from({ length: 10 }, () => cache.get(tenant.id, endpoint.id)));
    expect(ten.every((s) => s.length === 1 && s[0] === secretValue)).toBe(true);
    expect(reads).toBe(1);
    await cache.get(tenant.id, endpoint.id);
    expect(reads).toBe(1); // cached
    clock.advance(1_000);
    await Promise.all([cache.get(tenant.id, endpoint.id), cache.get(tenant.id, endpoint.id)]);
    expect(reads).toBe(2); // expired: one read for both
  });
});
