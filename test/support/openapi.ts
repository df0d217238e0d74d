import { createLocalKeyService } from '../../src/adapters/crypto/envelope.ts';
import { createSqliteStore } from '../../src/adapters/sqlite/sqlite-store.ts';
import { systemClock, systemRandom } from '../../src/adapters/system-clock.ts';
import { buildApi } from '../../src/api/build-api.ts';
import { Authenticator } from '../../src/app/auth.ts';
import { GroupCommitter } from '../../src/app/group-commit.ts';
import { TenantDirectory } from '../../src/app/tenant-directory.ts';
import { VERSION } from '../../src/bootstrap/version.ts';

/** The OpenAPI document of a process running every role (built in memory, never listening). */
export async function generateOpenApi(): Promise<unknown> {
  const store = createSqliteStore({ filename: ':memory:' });
  await store.migrate();
  const now = () => systemClock.now();
  const app = await buildApi({
    store,
    clock: systemClock,
    random: systemRandom,
    keys: createLocalKeyService({ masterKey: Buffer.alloc(32) }),
    operatorTotpSeed: Buffer.alloc(20),
    auth: new Authenticator({ store, now, operatorToken: 'unused', cacheMs: 0 }),
    tenants: new TenantDirectory({ store, now, cacheMs: 0 }),
    committer: new GroupCommitter({ store, now, idempotencyWindowMs: 1, maxBatch: 1, maxInFlight: 1 }),
    logger: false,
    metrics: null,
    version: VERSION,
    serves: { intake: true, control: true },
  });
  await app.ready();
  const doc = app.swagger();
  await app.close();
  await store.close();
  return doc;
}
