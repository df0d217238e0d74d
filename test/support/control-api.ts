/**
 * The dependencies of an API that serves the control plane only (no intake), over a given store, for tests that
 * build it with buildApi directly: the system clock and random source, a fixed master key, no caches, no metrics.
 * The operator token is OPERATOR_TOKEN.
 */
import { createLocalKeyService } from '../../src/adapters/crypto/envelope.ts';
import { systemClock, systemRandom } from '../../src/adapters/system-clock.ts';
import type { ApiDeps } from '../../src/api/build-api.ts';
import { Authenticator } from '../../src/app/auth.ts';
import { TenantDirectory } from '../../src/app/tenant-directory.ts';
import type { Store } from '../../src/ports/store.ts';

export const OPERATOR_TOKEN = 'operator-token';
/** The operator's step-up TOTP seed (20 bytes of 7). */
export const OPERATOR_TOTP_SEED = Buffer.alloc(20, 7);

export function controlApiDeps(store: Store, overrides: Partial<ApiDeps> = {}): ApiDeps {
  const now = () => systemClock.now();
  return {
    store,
    clock: systemClock,
    random: systemRandom,
    keys: createLocalKeyService({ masterKey: Buffer.alloc(32) }),
    operatorTotpSeed: OPERATOR_TOTP_SEED,
    auth: new Authenticator({ store, now, operatorToken: OPERATOR_TOKEN, cacheMs: 0 }),
    tenants: new TenantDirectory({ store, now, cacheMs: 0 }),
    committer: null,
    logger: false,
    metrics: null,
    version: 'test',
    serves: { intake: false, control: true },
    ...overrides,
  };
}
