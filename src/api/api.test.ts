import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import {
  createTestApp,
  operatorStepUp,
  STORE_KINDS,
  type TestApp,
} from '../../test/support/test-hookrail.ts';
import { base32Decode, totpCode } from '../domain/totp.ts';

describe.each(STORE_KINDS)('API on %s', (kind) => {
  let t: TestApp;
  const clock = new FakeClock();
  let tenant: { id: string; tenant_key: string };
  let producerKey: string;

  beforeAll(async () => {
    t = await createTestApp(kind, { clock });
    const created = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } });
    expect(created.status).toBe(201);
    tenant = created.body;
    const pk = await t.request({ method: 'POST', url: '/v1/producer-keys', body: { name: 'backend' } });
    expect(pk.status).toBe(201);
    producerKey = pk.body.key;
  });
  afterAll(() => t?.close());

  it('creates tenants with a tenant key and a TOTP seed shown once', async () => {
    expect(tenant.id).toMatch(/^ten_[0-9A-Z]{26}$/);
    expect(tenant.tenant_key).toMatch(/^hkt_/);
    const list = await t.request({ method: 'GET', url: '/v1/tenants' });
    expect(list.status).toBe(200);
    expect(list.body.data.map((x: { id: string }) => x.id)).toContain(tenant.id);
    expect(JSON.stringify(list.body)).not.toContain(tenant.tenant_key);
  });

  it('lists producer keys without the key itself', async () => {
    const list = await t.request({ method: 'GET', url: '/v1/producer-keys' });
    expect(list.status).toBe(200);
    expect(list.body.data.length).toBeGreaterThan(0);
    expect(JSON.stringify(list.body)).not.toContain(producerKey);
    expect(list.body.data[0].prefix).toBe(producerKey.slice(0, list.body.data[0].prefix.length));
  });

  it('accepts an event from a producer key with 202 and reads it back', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/v1/events',
      token: producerKey,
      body: {
        tenant_id: tenant.id,
        type: 'order.created',
        data: { order: 42, note: 'Zoë €' },
        resource_id: 'ord_42',
      },
    });
    expect(res.status).toBe(202);
    expect(res.body.id).toMatch(/^evt_/);
    expect(res.body.created_at).toBe(new Date(clock.now()).toISOString());

    const asTenant = await t.request({
      method: 'GET',
      url: `/v1/events/${res.body.id}`,
      token: tenant.tenant_key,
    });
    expect(asTenant.status).toBe(200);
    expect(asTenant.body).toEqual({
      id: res.body.id,
      tenant_id: tenant.id,
      type: 'order.created',
      resource_id: 'ord_42',
      data: { order: 42, note: 'Zoë €' },
      created_at: res.body.created_at,
    });
    const asOperator = await t.request({ method: 'GET', url: `/v1/events/${res.body.id}` });
    expect(asOperator.status).toBe(200);
  });

  it('returns the original event for a repeated Idempotency-Key, and 409 for a different request', async () => {
    const send = (data: object) =>
      t.request({
        method: 'POST',
        url: '/v1/events',
        token: producerKey,
        headers: { 'idempotency-key': 'retry-1' },
        body: { tenant_id: tenant.id, type: 'invoice.paid', data },
      });
    const [a, b, c] = await Promise.all([send({ n: 1 }), send({ n: 1 }), send({ n: 1 })]);
    const ids = new Set([a, b, c].map((r) => r.body.id));
    expect(ids.size).toBe(1);
    // The same answer each time (202), the two repeats marked as such.
    expect([a, b, c].map((r) => r.status)).toEqual([202, 202, 202]);
    expect([a, b, c].filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(2);
    const conflict = await send({ n: 2 });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('idempotency_key_reused');
    // After 24 h the key is free again.
    clock.advance(24 * 3600 * 1000 + 1);
    const later = await send({ n: 2 });
    expect(later.status).toBe(202);
    expect(later.body.id).not.toBe(a.body.id);
  });

  it('paginates events newest first with a cursor, scoped to the tenant', async () => {
    const other = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Other' } });
    for (let i = 0; i < 5; i++) {
      clock.advance(1);
      const r = await t.request({
        method: 'POST',
        url: '/v1/events',
        body: { tenant_id: tenant.id, type: 'page.test', data: { i } },
      });
      expect(r.status).toBe(202);
    }
    const first = await t.request({
      method: 'GET',
      url: '/v1/events?type=page.test&limit=2',
      token: tenant.tenant_key,
    });
    expect(first.status).toBe(200);
    expect(first.body.data.map((e: { data: { i: number } }) => e.data.i)).toEqual([4, 3]);
    const second = await t.request({
      method: 'GET',
      url: `/v1/events?type=page.test&limit=2&cursor=${first.body.next_cursor}`,
      token: tenant.tenant_key,
    });
    expect(second.body.data.map((e: { data: { i: number } }) => e.data.i)).toEqual([2, 1]);
    const otherView = await t.request({ method: 'GET', url: '/v1/events', token: other.body.tenant_key });
    expect(otherView.body.data).toEqual([]);
    const eventId = first.body.data[0].id;
    const cross = await t.request({
      method: 'GET',
      url: `/v1/events/${eventId}`,
      token: other.body.tenant_key,
    });
    expect(cross.status).toBe(404);
  });

  it('limits each credential to its door', async () => {
    const asProducer = await t.request({ method: 'GET', url: '/v1/tenants', token: producerKey });
    expect(asProducer.status).toBe(403);
    const readAsProducer = await t.request({ method: 'GET', url: '/v1/events', token: producerKey });
    expect(readAsProducer.status).toBe(403);
    const tenantSends = await t.request({
      method: 'POST',
      url: '/v1/events',
      token: tenant.tenant_key,
      body: { tenant_id: tenant.id, type: 'x', data: {} },
    });
    expect(tenantSends.status).toBe(403);
    const bad = await t.request({ method: 'GET', url: '/v1/events', token: 'hkp_nope' });
    expect(bad.status).toBe(401);
    expect(bad.body.error.code).toBe('unauthorized');
  });

  it('revokes producer keys and deletes tenants', async () => {
    const pk = await t.request({ method: 'POST', url: '/v1/producer-keys', body: {} });
    const del = await t.request({ method: 'DELETE', url: `/v1/producer-keys/${pk.body.id}` });
    expect(del.status).toBe(204);
    const again = await t.request({ method: 'DELETE', url: `/v1/producer-keys/${pk.body.id}` });
    expect(again.status).toBe(404);
    const use = await t.request({
      method: 'POST',
      url: '/v1/events',
      token: pk.body.key,
      body: { tenant_id: tenant.id, type: 'x', data: {} },
    });
    expect(use.status).toBe(401);

    const doomed = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Doomed' } });
    // Deleting a tenant is elevated (PRODUCT.md §3): the operator's token alone is refused, and changes nothing.
    const deleteDoomed = (stepUp?: string) =>
      t.request({
        method: 'DELETE',
        url: `/v1/tenants/${doomed.body.id}`,
        ...(stepUp ? { headers: { 'x-step-up-token': stepUp } } : {}),
      });
    const bare = await deleteDoomed();
    expect(bare.status).toBe(403);
    expect(bare.body.error).toMatchObject({
      code: 'step_up_required',
      details: { step_up_url: '/v1/auth/step-up', reason: 'missing' },
    });
    // A tenant's step-up token is not the operator's.
    clock.advance(30_000);
    const tenantSeed = base32Decode(doomed.body.step_up.totp_seed);
    const tenantStepUp = await t.request({
      method: 'POST',
      url: '/v1/auth/step-up',
      token: doomed.body.tenant_key,
      body: { totp: totpCode(tenantSeed, clock.now()) },
    });
    expect(tenantStepUp.status).toBe(200);
    expect((await deleteDoomed(tenantStepUp.body.token)).body.error).toMatchObject({
      code: 'step_up_required',
      details: { reason: 'invalid' },
    });
    // The operator's seed gives the operator's token; a wrong code gives none.
    const wrong = await t.request({
      method: 'POST',
      url: '/v1/auth/step-up',
      body: { totp: totpCode(tenantSeed, clock.now()) },
    });
    expect(wrong.status).toBe(403);
    expect(wrong.body.error.code).toBe('invalid_totp');
    expect(
      (await t.request({ method: 'GET', url: '/v1/events', token: doomed.body.tenant_key })).status,
    ).toBe(200);
    const operator = await operatorStepUp(t, clock.now());
    expect(operator).toMatch(/^su1\.operator\./);
    expect((await deleteDoomed(operator)).status).toBe(204);
    expect((await deleteDoomed(operator)).status).toBe(404);
    // Recorded in the deleted tenant's trail, as the operator's, and readable by the operator.
    const trail = await t.request({ method: 'GET', url: '/v1/audit-events?limit=500' });
    const deletions = trail.body.data.filter((e: { action: string }) => e.action === 'tenant.deleted');
    expect(deletions).toEqual([
      expect.objectContaining({
        tenant_id: doomed.body.id,
        actor: 'operator',
        target_type: 'tenant',
        target_id: doomed.body.id,
      }),
    ]);
    const afterDelete = await t.request({ method: 'GET', url: '/v1/events', token: doomed.body.tenant_key });
    expect(afterDelete.status).toBe(401);
    const send = await t.request({
      method: 'POST',
      url: '/v1/events',
      body: { tenant_id: doomed.body.id, type: 'x', data: {} },
    });
    expect(send.status).toBe(404);
    expect(send.body.error.code).toBe('tenant_not_found');
  });

  it('serves health, readiness and the OpenAPI document', async () => {
    expect((await t.request({ method: 'GET', url: '/healthz', token: null })).status).toBe(200);
    const ready = await t.request({ method: 'GET', url: '/readyz', token: null });
    expect(ready.status).toBe(200);
    expect(ready.body.store).toBe(kind);
    const doc = await t.request({ method: 'GET', url: '/openapi.json', token: null });
    expect(doc.body.openapi).toBe('3.1.0');
    expect(Object.keys(doc.body.paths)).toContain('/v1/events');
  });
});

describe('metrics', () => {
  it('exposes Prometheus counters for accepted events and attempts', async () => {
    const t = await createTestApp('sqlite');
    try {
      const tenant = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'M' } })).body;
      await t.request({
        method: 'POST',
        url: '/v1/events',
        body: { tenant_id: tenant.id, type: 'm.x', data: {} },
      });
      const res = await t.hookrail.app!.inject({ method: 'GET', url: '/metrics' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toContain('text/plain');
      expect(res.body).toMatch(/^hookrail_events_accepted_total 1$/m);
      expect(res.body).toMatch(/^hookrail_backlog_deliveries 0$/m);
      expect(res.body).toMatch(/^hookrail_circuits_open 0$/m);
    } finally {
      await t.close();
    }
  });
});
