/**
 * Replacing a tenant key through the API (`POST /v1/tenants/:id/key`), on both stores: the operator for any
 * tenant, the tenant for itself with step-up; the old key is refused at once by this process even though it had
 * cached it, and by another process once its cache entry expires; the audit trail records the replacement without
 * the key. The app caches keys (60 s, fake clock), as a deployment does, so "at once" is the process dropping
 * its own entries, not a cache that is off.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import {
  ADMIN_TOKEN,
  createTestApp,
  operatorStepUp,
  STORE_KINDS,
  type TestApp,
} from '../../test/support/test-hookrail.ts';
import { Authenticator } from '../app/auth.ts';
import { base32Decode, TOTP_STEP_SECONDS, totpCode } from '../domain/totp.ts';
import type { Store } from '../ports/store.ts';

const CACHE_MS = 60_000;

interface Tenant {
  id: string;
  key: string;
  seed: Buffer;
}

describe.each(STORE_KINDS)('tenant key replacement on %s', (kind) => {
  const clock = new FakeClock();
  let t: TestApp;
  let producerKey: string;

  beforeAll(async () => {
    t = await createTestApp(kind, { clock, env: { HOOKRAIL_AUTH_CACHE_MS: String(CACHE_MS) } });
    const pk = await t.request({ method: 'POST', url: '/v1/producer-keys', body: {} });
    producerKey = pk.body.key;
  });
  afterAll(() => t?.close());

  const newTenant = async (name: string): Promise<Tenant> => {
    const res = await t.request({ method: 'POST', url: '/v1/tenants', body: { name } });
    expect(res.status).toBe(201);
    return { id: res.body.id, key: res.body.tenant_key, seed: base32Decode(res.body.step_up.totp_seed) };
  };

  /** A fresh TOTP step each time: a code is accepted only once. */
  const stepUp = async (tenant: Tenant, key = tenant.key): Promise<string> => {
    clock.advance(TOTP_STEP_SECONDS * 1000);
    const res = await t.request({
      method: 'POST',
      url: '/v1/auth/step-up',
      token: key,
      body: { totp: totpCode(tenant.seed, clock.now()) },
    });
    expect(res.status).toBe(200);
    return res.body.token;
  };

  /** The status a key gets on a tenant read (and, when it works, caches the key in the app). */
  const statusWith = async (key: string) =>
    (await t.request({ method: 'GET', url: '/v1/endpoints', token: key })).status;

  const replace = (tenantId: string, o: { token?: string; stepUp?: string } = {}) =>
    t.request({
      method: 'POST',
      url: `/v1/tenants/${tenantId}/key`,
      token: o.token ?? ADMIN_TOKEN,
      ...(o.stepUp ? { headers: { 'x-step-up-token': o.stepUp } } : {}),
    });

  it('the operator replaces a tenant key: the old one is refused at once, the new one works', async () => {
    const acme = await newTenant('Acme');
    const other = await newTenant('Other');
    expect(await statusWith(acme.key)).toBe(200); // cached from here on
    expect(await statusWith(other.key)).toBe(200);

    const res = await replace(acme.id);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ tenant_id: acme.id, created_at: new Date(clock.now()).toISOString() });
    expect(res.body.tenant_key).toMatch(/^hkt_/);
    expect(res.body.tenant_key).not.toBe(acme.key);
    expect(res.body.key_id).toMatch(/^key_/);

    expect(await statusWith(acme.key)).toBe(401);
    expect(await statusWith(res.body.tenant_key)).toBe(200);
    expect(await statusWith(other.key)).toBe(200);
    expect(await statusWith(producerKey)).toBe(403); // a producer key still authenticates
  });

  it('accepts no body or an empty one, and refuses any field', async () => {
    const acme = await newTenant('Acme');
    const empty = await t.request({ method: 'POST', url: `/v1/tenants/${acme.id}/key`, body: {} });
    expect(empty.status).toBe(201);
    const extra = await t.request({ method: 'POST', url: `/v1/tenants/${acme.id}/key`, body: { key: 'x' } });
    expect(extra.status).toBe(400);
    expect(await statusWith(empty.body.tenant_key)).toBe(200);
  });

  it('a tenant replaces its own key with a fresh step-up token', async () => {
    const acme = await newTenant('Acme');
    const token = await stepUp(acme);
    const res = await replace(acme.id, { token: acme.key, stepUp: token });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(await statusWith(acme.key)).toBe(401);
    expect(await statusWith(res.body.tenant_key)).toBe(200);
  });

  it('a tenant without a step-up token is refused and nothing changes', async () => {
    const acme = await newTenant('Acme');
    const missing = await replace(acme.id, { token: acme.key });
    expect(missing.status).toBe(403);
    expect(missing.body.error).toMatchObject({
      code: 'step_up_required',
      details: { step_up_url: '/v1/auth/step-up', reason: 'missing' },
    });
    const forged = await replace(acme.id, { token: acme.key, stepUp: 'su1.forged' });
    expect(forged.body.error).toMatchObject({ code: 'step_up_required', details: { reason: 'invalid' } });
    // Expired: a token is good for 5 minutes.
    const old = await stepUp(acme);
    clock.advance(5 * 60_000);
    const expired = await replace(acme.id, { token: acme.key, stepUp: old });
    expect(expired.body.error).toMatchObject({ code: 'step_up_required', details: { reason: 'expired' } });

    expect(await statusWith(acme.key)).toBe(200);
    const keys = await t.store.apiKeyList({ kind: 'tenant', limit: 1000, cursor: null });
    expect(keys.data.filter((k) => k.tenantId === acme.id)).toHaveLength(1);
    const trail = await t.store.auditList({ tenantId: acme.id, limit: 10, cursor: null });
    expect(trail.data).toEqual([]);
  });

  it("a tenant key naming another tenant gets 404, step-up or not, and the other tenant's key keeps working", async () => {
    const acme = await newTenant('Acme');
    const other = await newTenant('Other');
    const token = await stepUp(acme);
    for (const o of [{ token: acme.key }, { token: acme.key, stepUp: token }]) {
      const res = await replace(other.id, o);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('tenant_not_found');
    }
    // A step-up token of one tenant does not open another tenant's replacement either.
    const otherToken = await stepUp(other);
    const crossed = await replace(other.id, { token: acme.key, stepUp: otherToken });
    expect(crossed.status).toBe(404);
    expect(await statusWith(other.key)).toBe(200);
    expect(await statusWith(acme.key)).toBe(200);
  });

  it('refuses producer keys (403 forbidden)', async () => {
    const acme = await newTenant('Acme');
    const res = await replace(acme.id, { token: producerKey });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('forbidden');
    expect(await statusWith(acme.key)).toBe(200);
  });

  it('a deleted or unknown tenant is 404 tenant_not_found', async () => {
    const acme = await newTenant('Acme');
    clock.advance(TOTP_STEP_SECONDS * 1000);
    const operator = await operatorStepUp(t, clock.now());
    const del = await t.request({
      method: 'DELETE',
      url: `/v1/tenants/${acme.id}`,
      headers: { 'x-step-up-token': operator },
    });
    expect(del.status).toBe(204);
    const deleted = await replace(acme.id);
    expect(deleted.status).toBe(404);
    expect(deleted.body.error.code).toBe('tenant_not_found');
    const keys = await t.store.apiKeyList({ kind: 'tenant', limit: 1000, cursor: null });
    expect(keys.data.filter((k) => k.tenantId === acme.id)).toEqual([]);

    const unknown = await replace('ten_01JAAAAAAAAAAAAAAAAAAAAAAA');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('tenant_not_found');
  });

  it('the audit trail records the replacement, by whom, without the key', async () => {
    const acme = await newTenant('Acme');
    const byOperator = await replace(acme.id);
    const key1 = byOperator.body.tenant_key as string;
    clock.advance(1);
    const token = await stepUp(acme, key1);
    const byTenant = await replace(acme.id, { token: key1, stepUp: token });
    expect(byTenant.status).toBe(201);
    const key2 = byTenant.body.tenant_key as string;

    const res = await t.request({ method: 'GET', url: '/v1/audit-events?limit=100', token: key2 });
    expect(res.status).toBe(200);
    const records = (res.body.data as Array<Record<string, unknown>>).slice().reverse();
    const keyId1 = byOperator.body.key_id as string;
    expect(records.map((r) => [r.action, r.target_type, r.target_id, r.actor, r.details])).toEqual([
      ['tenant.key_replaced', 'tenant', acme.id, 'operator', { key_id: keyId1, prefix: key1.slice(0, 12) }],
      [
        'tenant.key_replaced',
        'tenant',
        acme.id,
        `tenant_key:${keyId1}`,
        { key_id: byTenant.body.key_id, prefix: key2.slice(0, 12) },
      ],
    ]);
    const text = JSON.stringify(res.body);
    for (const key of [acme.key, key1, key2]) expect(text).not.toContain(key);
  });

  it('another process accepts the old key it cached until its cache entry expires', async () => {
    const acme = await newTenant('Acme');
    // Another API process on the same database, with the default cache time.
    const elsewhere = new Authenticator({
      store: t.store,
      now: () => clock.now(),
      operatorToken: 'another-operator-token',
      cacheMs: 5_000,
    });
    const header = `Bearer ${acme.key}`;
    expect(await elsewhere.authenticate(header)).toMatchObject({ kind: 'tenant', tenantId: acme.id });

    expect((await replace(acme.id)).status).toBe(201);
    expect(await statusWith(acme.key)).toBe(401);
    clock.advance(4_999);
    expect(await elsewhere.authenticate(header)).toMatchObject({ kind: 'tenant', tenantId: acme.id });
    clock.advance(1);
    await expect(elsewhere.authenticate(header)).rejects.toMatchObject({ code: 'unauthorized' });
  });
});

describe('the authentication cache after a replacement', () => {
  it('does not keep what a lookup in flight read when the tenant was forgotten meanwhile', async () => {
    const tenantId = 'ten_01JAAAAAAAAAAAAAAAAAAAAAAA';
    let lookups = 0;
    let release = () => {};
    const store = {
      // The first lookup reads the key as live, then waits; the replacement commits and forgets meanwhile.
      async apiKeyFindByHash() {
        lookups++;
        if (lookups > 1) return null;
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        return { id: 'key_old', kind: 'tenant', tenantId };
      },
    } as unknown as Store;
    const auth = new Authenticator({ store, now: () => 0, operatorToken: 'operator', cacheMs: CACHE_MS });
    const header = `Bearer hkt_${'a'.repeat(43)}`;
    const inFlight = auth.authenticate(header);
    auth.forgetTenant(tenantId);
    release();
    expect(await inFlight).toMatchObject({ kind: 'tenant', tenantId });
    await expect(auth.authenticate(header)).rejects.toMatchObject({ code: 'unauthorized' });
    expect(lookups).toBe(2);
  });
});
