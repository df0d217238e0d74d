/**
 * The endpoints API tests' shared setup (src/api/endpoints.test.ts, src/api/endpoint-secrets.test.ts): one app per
 * store with a fake clock, two tenants and a producer key, and the helpers that act as a tenant.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { base32Decode, TOTP_STEP_SECONDS, totpCode } from '../../src/domain/totp.ts';
import { FakeClock } from './fake-clock.ts';
import { createTestApp, type StoreKind, type TestApp } from './test-hookrail.ts';

export interface TenantFixture {
  id: string;
  key: string;
  seed: Buffer;
}

export const endpointBody = (over: Record<string, unknown> = {}) => ({
  url: 'https://hooks.example.com/in',
  event_types: ['order.*'],
  ...over,
});

/** Registers the app's beforeAll/afterAll in the calling describe block; `state()` is set once beforeAll ran. */
export function endpointsApi(kind: StoreKind) {
  const clock = new FakeClock();
  const s = {} as { t: TestApp; acme: TenantFixture; other: TenantFixture; producerKey: string };

  const newTenant = async (name: string): Promise<TenantFixture> => {
    const res = await s.t.request({ method: 'POST', url: '/v1/tenants', body: { name } });
    expect(res.status).toBe(201);
    return { id: res.body.id, key: res.body.tenant_key, seed: base32Decode(res.body.step_up.totp_seed) };
  };

  const asTenant = (tenant: TenantFixture) => (opts: Parameters<TestApp['request']>[0]) =>
    s.t.request({ token: tenant.key, ...opts });

  /** A fresh TOTP step each time: a code is accepted only once. */
  const stepUp = async (tenant: TenantFixture) => {
    clock.advance(TOTP_STEP_SECONDS * 1000);
    const res = await asTenant(tenant)({
      method: 'POST',
      url: '/v1/auth/step-up',
      body: { totp: totpCode(tenant.seed, clock.now()) },
    });
    expect(res.status).toBe(200);
    return res.body as { token: string; expires_at: string };
  };

  const create = async (tenant: TenantFixture, over: Record<string, unknown> = {}) => {
    const res = await asTenant(tenant)({ method: 'POST', url: '/v1/endpoints', body: endpointBody(over) });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body;
  };

  beforeAll(async () => {
    s.t = await createTestApp(kind, { clock });
    s.acme = await newTenant('Acme');
    s.other = await newTenant('Other');
    const pk = await s.t.request({ method: 'POST', url: '/v1/producer-keys', body: {} });
    s.producerKey = pk.body.key;
  });
  afterAll(() => s.t?.close());

  return { clock, state: () => s, newTenant, asTenant, stepUp, create };
}
