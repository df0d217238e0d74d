/**
 * Endpoints, signing secrets and step-up through the HTTP API, on both stores: CRUD, who may do what, the input
 * rules (each refusal changes nothing), the URL change as an elevated action, and rotation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { createTestApp, STORE_KINDS, type TestApp } from '../../test/support/test-hookrail.ts';
import { parseSecret } from '../domain/signature.ts';
import { base32Decode, TOTP_STEP_SECONDS, totpCode } from '../domain/totp.ts';

const DAY_MS = 24 * 3600 * 1000;

interface TenantFixture {
  id: string;
  key: string;
  seed: Buffer;
}

const endpointBody = (over: Record<string, unknown> = {}) => ({
  url: 'https://hooks.example.com/in',
  event_types: ['order.*'],
  ...over,
});

describe.each(STORE_KINDS)('endpoints API on %s', (kind) => {
  let t: TestApp;
  const clock = new FakeClock();
  let acme: TenantFixture;
  let other: TenantFixture;
  let producerKey: string;

  const newTenant = async (name: string): Promise<TenantFixture> => {
    const res = await t.request({ method: 'POST', url: '/v1/tenants', body: { name } });
    expect(res.status).toBe(201);
    return { id: res.body.id, key: res.body.tenant_key, seed: base32Decode(res.body.step_up.totp_seed) };
  };

  const asTenant = (tenant: TenantFixture) => (opts: Parameters<TestApp['request']>[0]) =>
    t.request({ token: tenant.key, ...opts });

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
    t = await createTestApp(kind, { clock });
    acme = await newTenant('Acme');
    other = await newTenant('Other');
    const pk = await t.request({ method: 'POST', url: '/v1/producer-keys', body: {} });
    producerKey = pk.body.key;
  });
  afterAll(() => t?.close());

  describe('CRUD', () => {
    it('creates an endpoint with defaults, an ordering note and a secret shown once', async () => {
      const ep = await create(acme, {
        url: 'HTTPS://Hooks.Example.com:443/in?x=1',
        description: 'orders',
        headers: { 'X-Team': 'billing', Authorization: 'Bearer abc' },
      });
      expect(ep.id).toMatch(/^ep_[0-9A-Z]{26}$/);
      expect(ep).toMatchObject({
        tenant_id: acme.id,
        url: 'https://hooks.example.com/in?x=1',
        description: 'orders',
        event_types: ['order.*'],
        ordering: 'none',
        max_concurrency: 10,
        headers: { 'x-team': 'billing', authorization: 'Bearer abc' },
        status: 'enabled',
        disabled_reason: null,
        created_at: new Date(clock.now()).toISOString(),
      });
      expect(ep.ordering_note).toMatch(/any order/);
      expect(ep.secret.id).toMatch(/^sec_[0-9A-Z]{26}$/);
      expect(ep.secret.secret).toMatch(/^whsec_/);
      expect(parseSecret(ep.secret.secret)).toHaveLength(32);
      expect(ep.secret.active_until).toBeNull();

      const got = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}` });
      expect(got.status).toBe(200);
      const { secret: _secret, ...withoutSecret } = ep;
      expect(got.body).toEqual(withoutSecret);
      expect(JSON.stringify(got.body)).not.toContain(ep.secret.secret);

      // Stored sealed: the plaintext is nowhere in the record the store holds.
      const stored = await t.store.secretListActive({ endpointId: ep.id, now: clock.now() });
      expect(stored).toHaveLength(1);
      expect(stored[0]!.sealed).not.toContain(ep.secret.secret.slice(6));
    });

    it('explains strict ordering in plain words', async () => {
      const ep = await create(acme, { ordering: 'endpoint', max_concurrency: 3 });
      expect(ep.ordering_note).toMatch(/one delivery in flight/);
      expect(ep.ordering_note).toMatch(/blocks every later one/);
      const res = await create(acme, { ordering: 'resource' });
      expect(res.ordering_note).toMatch(/resource_id/);
    });

    it('lists newest first with a cursor, each tenant its own; the operator sees all', async () => {
      const mine = await asTenant(other)({ method: 'GET', url: '/v1/endpoints' });
      expect(mine.body).toEqual({ data: [], next_cursor: null });
      const a = await create(other, { description: 'a' });
      clock.advance(1);
      const b = await create(other, { description: 'b' });
      clock.advance(1);
      const c = await create(other, { description: 'c' });
      const first = await asTenant(other)({ method: 'GET', url: '/v1/endpoints?limit=2' });
      expect(first.status).toBe(200);
      expect(first.body.data.map((e: { id: string }) => e.id)).toEqual([c.id, b.id]);
      const second = await asTenant(other)({
        method: 'GET',
        url: `/v1/endpoints?limit=2&cursor=${first.body.next_cursor}`,
      });
      expect(second.body).toMatchObject({ data: [{ id: a.id }], next_cursor: null });
      expect(JSON.stringify([first.body, second.body])).not.toContain('whsec_');

      const foreignFilter = await asTenant(other)({
        method: 'GET',
        url: `/v1/endpoints?tenant_id=${acme.id}`,
      });
      expect(foreignFilter.body.data).toEqual([]);
      const operatorAll = await t.request({ method: 'GET', url: '/v1/endpoints?limit=500' });
      const ids = operatorAll.body.data.map((e: { id: string }) => e.id);
      expect(ids).toContain(a.id);
      expect(operatorAll.body.data.some((e: { tenant_id: string }) => e.tenant_id === acme.id)).toBe(true);
      const operatorOne = await t.request({ method: 'GET', url: `/v1/endpoints?tenant_id=${other.id}` });
      expect(operatorOne.body.data.every((e: { tenant_id: string }) => e.tenant_id === other.id)).toBe(true);
    });

    it('patches fields without step-up when the URL does not change', async () => {
      const ep = await create(acme);
      clock.advance(1000);
      const res = await asTenant(acme)({
        method: 'PATCH',
        url: `/v1/endpoints/${ep.id}`,
        body: {
          description: null,
          event_types: ['order.created', 'invoice.*'],
          ordering: 'endpoint',
          max_concurrency: 1,
          headers: { 'x-a': 'b' },
          // Same URL in another spelling: not a change, so not elevated.
          url: 'https://HOOKS.example.com/in',
        },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({
        url: ep.url,
        description: null,
        event_types: ['order.created', 'invoice.*'],
        ordering: 'endpoint',
        max_concurrency: 1,
        headers: { 'x-a': 'b' },
        updated_at: new Date(clock.now()).toISOString(),
        created_at: ep.created_at,
      });
      const again = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}` });
      expect(again.body).toEqual(res.body);
    });

    it('disables and enables; delete answers 204 and then 404', async () => {
      const ep = await create(acme);
      const off = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/disable` });
      expect(off.status).toBe(200);
      expect(off.body).toMatchObject({ status: 'disabled', disabled_reason: 'disabled_by_tenant' });
      const on = await asTenant(acme)({
        method: 'POST',
        url: `/v1/endpoints/${ep.id}/enable`,
        body: { backlog: 'deliver' },
      });
      expect(on.status).toBe(200);
      expect(on.body.endpoint).toMatchObject({ status: 'enabled', disabled_reason: null });
      expect(on.body).toMatchObject({ requeued: 0, skipped: 0 });
      // Enabling an enabled endpoint is a conflict; the backlog choice is required.
      const onAgain = await asTenant(acme)({
        method: 'POST',
        url: `/v1/endpoints/${ep.id}/enable`,
        body: { backlog: 'skip' },
      });
      expect(onAgain.status).toBe(409);
      const noChoice = await asTenant(acme)({
        method: 'POST',
        url: `/v1/endpoints/${ep.id}/enable`,
        body: {},
      });
      expect(noChoice.status).toBe(400);
      expect(noChoice.body.error.code).toBe('validation_failed');

      const del = await asTenant(acme)({ method: 'DELETE', url: `/v1/endpoints/${ep.id}` });
      expect(del.status).toBe(204);
      expect((await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}` })).status).toBe(404);
      expect((await asTenant(acme)({ method: 'DELETE', url: `/v1/endpoints/${ep.id}` })).status).toBe(404);
      const list = await asTenant(acme)({ method: 'GET', url: '/v1/endpoints?limit=500' });
      expect(list.body.data.map((e: { id: string }) => e.id)).not.toContain(ep.id);
    });
  });

  describe('who may do what', () => {
    it("answers 404 for another tenant's endpoint, on every route", async () => {
      const ep = await create(acme);
      const sid = ep.secret.id;
      const foreign = asTenant(other);
      const calls: Array<Parameters<TestApp['request']>[0]> = [
        { method: 'GET', url: `/v1/endpoints/${ep.id}` },
        { method: 'PATCH', url: `/v1/endpoints/${ep.id}`, body: { description: 'x' } },
        { method: 'DELETE', url: `/v1/endpoints/${ep.id}` },
        { method: 'POST', url: `/v1/endpoints/${ep.id}/disable` },
        { method: 'POST', url: `/v1/endpoints/${ep.id}/enable`, body: { backlog: 'deliver' } },
        { method: 'POST', url: `/v1/endpoints/${ep.id}/secrets`, body: {} },
        { method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` },
        { method: 'DELETE', url: `/v1/endpoints/${ep.id}/secrets/${sid}` },
        { method: 'GET', url: `/v1/endpoints/${ep.id}/deliveries` },
      ];
      for (const call of calls) {
        const res = await foreign(call);
        expect(res.status, `${call.method} ${call.url}`).toBe(404);
        expect(res.body.error.code).toBe('not_found');
      }
      const still = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}` });
      expect(still.body).toMatchObject({ status: 'enabled', description: null });
      expect(await t.store.secretListActive({ endpointId: ep.id, now: clock.now() })).toHaveLength(1);
    });

    it('refuses producer keys (403) and lets the operator read but not write', async () => {
      const ep = await create(acme);
      for (const call of [
        { method: 'GET', url: '/v1/endpoints' },
        { method: 'GET', url: `/v1/endpoints/${ep.id}` },
        { method: 'POST', url: '/v1/endpoints', body: endpointBody() },
        { method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` },
        { method: 'GET', url: `/v1/endpoints/${ep.id}/deliveries` },
        { method: 'POST', url: '/v1/auth/step-up', body: { totp: '123456' } },
      ] as const) {
        const res = await t.request({ ...call, token: producerKey });
        expect(res.status, `${call.method} ${call.url}`).toBe(403);
        expect(res.body.error.code).toBe('forbidden');
      }
      const read = await t.request({ method: 'GET', url: `/v1/endpoints/${ep.id}` });
      expect(read.status).toBe(200);
      const secrets = await t.request({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(secrets.status).toBe(200);
      expect(secrets.body.data).toHaveLength(1);
      for (const call of [
        { method: 'POST', url: '/v1/endpoints', body: endpointBody() },
        { method: 'PATCH', url: `/v1/endpoints/${ep.id}`, body: { description: 'x' } },
        { method: 'DELETE', url: `/v1/endpoints/${ep.id}` },
        { method: 'POST', url: `/v1/endpoints/${ep.id}/secrets`, body: {} },
      ] as const) {
        const res = await t.request(call);
        expect(res.status, `${call.method} ${call.url}`).toBe(403);
      }
      const unauth = await t.request({ method: 'GET', url: '/v1/endpoints', token: null });
      expect(unauth.status).toBe(401);
    });
  });

  describe('input rules', () => {
    const hdrs = (n: number, size = 1) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-h${i}`, 'v'.repeat(size)]));
    const cases: Array<{ name: string; body: Record<string, unknown>; code: string; status?: number }> = [
      { name: 'missing url', body: { event_types: ['*'] }, code: 'validation_failed' },
      { name: 'empty url', body: endpointBody({ url: '' }), code: 'validation_failed' },
      { name: 'not a url', body: endpointBody({ url: 'hooks.example.com/in' }), code: 'invalid_url' },
      { name: 'ftp scheme', body: endpointBody({ url: 'ftp://hooks.example.com/in' }), code: 'invalid_url' },
      {
        name: 'javascript scheme',
        body: endpointBody({ url: 'javascript:alert(1)' }),
        code: 'invalid_url',
      },
      {
        name: 'userinfo',
        body: endpointBody({ url: 'https://user:pass@hooks.example.com/in' }),
        code: 'invalid_url',
      },
      {
        name: 'whitespace',
        body: endpointBody({ url: 'https://hooks.example.com/a b' }),
        code: 'invalid_url',
      },
      {
        name: 'newline in url',
        body: endpointBody({ url: 'https://hooks.example.com/\r\nX-Evil: 1' }),
        code: 'invalid_url',
      },
      {
        name: 'backslash',
        body: endpointBody({ url: 'https://hooks.example.com\\@evil.example/' }),
        code: 'invalid_url',
      },
      {
        name: 'url too long',
        body: endpointBody({ url: `https://hooks.example.com/${'a'.repeat(2048)}` }),
        code: 'validation_failed',
      },
      {
        name: 'localhost',
        body: endpointBody({ url: 'http://localhost:8080/' }),
        code: 'destination_not_allowed',
        status: 422,
      },
      { name: 'no event types', body: endpointBody({ event_types: [] }), code: 'validation_failed' },
      {
        name: '101 event types',
        body: endpointBody({ event_types: Array.from({ length: 101 }, (_, i) => `t${i}`) }),
        code: 'validation_failed',
      },
      { name: 'bad filter', body: endpointBody({ event_types: ['order*'] }), code: 'validation_failed' },
      { name: 'bare prefix star', body: endpointBody({ event_types: ['.*'] }), code: 'validation_failed' },
      { name: 'repeated filter', body: endpointBody({ event_types: ['a', 'a'] }), code: 'validation_failed' },
      { name: 'max_concurrency 0', body: endpointBody({ max_concurrency: 0 }), code: 'validation_failed' },
      {
        name: 'max_concurrency 101',
        body: endpointBody({ max_concurrency: 101 }),
        code: 'validation_failed',
      },
      {
        name: 'max_concurrency as string',
        body: endpointBody({ max_concurrency: '5' }),
        code: 'validation_failed',
      },
      { name: 'unknown ordering', body: endpointBody({ ordering: 'fifo' }), code: 'validation_failed' },
      { name: 'unknown field', body: endpointBody({ secret: 'whsec_x' }), code: 'validation_failed' },
      {
        name: 'header injection in value',
        body: endpointBody({ headers: { 'x-a': 'a\r\nb' } }),
        code: 'validation_failed',
      },
      {
        name: 'newline in value',
        body: endpointBody({ headers: { 'x-a': 'a\nb' } }),
        code: 'validation_failed',
      },
      {
        name: 'non-ASCII value',
        body: endpointBody({ headers: { 'x-a': 'zoë' } }),
        code: 'validation_failed',
      },
      { name: 'padded value', body: endpointBody({ headers: { 'x-a': ' a' } }), code: 'validation_failed' },
      { name: 'empty value', body: endpointBody({ headers: { 'x-a': '' } }), code: 'validation_failed' },
      { name: 'non-token name', body: endpointBody({ headers: { 'x a': 'b' } }), code: 'validation_failed' },
      { name: 'colon in name', body: endpointBody({ headers: { 'x:a': 'b' } }), code: 'validation_failed' },
      { name: 'number value', body: endpointBody({ headers: { 'x-a': 1 } }), code: 'validation_failed' },
      {
        name: 'hop-by-hop header',
        body: endpointBody({ headers: { Connection: 'close' } }),
        code: 'header_not_allowed',
      },
      {
        name: 'transfer-encoding',
        body: endpointBody({ headers: { 'transfer-encoding': 'chunked' } }),
        code: 'header_not_allowed',
      },
      { name: 'host header', body: endpointBody({ headers: { host: 'evil' } }), code: 'header_not_allowed' },
      {
        name: 'proxy header',
        body: endpointBody({ headers: { 'Proxy-Authorization': 'x' } }),
        code: 'header_not_allowed',
      },
      {
        name: 'webhook-id header',
        body: endpointBody({ headers: { 'webhook-id': 'msg_1' } }),
        code: 'header_not_allowed',
      },
      {
        name: 'webhook-signature header',
        body: endpointBody({ headers: { 'Webhook-Signature': 'v1,x' } }),
        code: 'header_not_allowed',
      },
      {
        name: 'content-type header',
        body: endpointBody({ headers: { 'content-type': 'text/plain' } }),
        code: 'header_not_allowed',
      },
      {
        name: 'user-agent header',
        body: endpointBody({ headers: { 'User-Agent': 'me' } }),
        code: 'header_not_allowed',
      },
      {
        name: 'duplicate header by case',
        body: endpointBody({ headers: { 'X-A': '1', 'x-a': '2' } }),
        code: 'validation_failed',
      },
      { name: '21 headers', body: endpointBody({ headers: hdrs(21) }), code: 'validation_failed' },
      {
        name: 'headers over 4 KiB',
        body: endpointBody({ headers: hdrs(4, 1100) }),
        code: 'validation_failed',
      },
      {
        name: 'description too long',
        body: endpointBody({ description: 'x'.repeat(1001) }),
        code: 'validation_failed',
      },
    ];

    const snapshot = async () =>
      JSON.stringify(await t.store.endpointList({ tenantId: null, limit: 500, cursor: null }));

    it.each(cases)('POST refuses $name with $code and changes nothing', async (c) => {
      const before = await snapshot();
      const res = await asTenant(acme)({ method: 'POST', url: '/v1/endpoints', body: c.body });
      expect(res.status, JSON.stringify(res.body)).toBe(c.status ?? 400);
      expect(res.body.error.code).toBe(c.code);
      expect(await snapshot()).toBe(before);
    });

    it('PATCH refuses the same bad fields and changes nothing', async () => {
      const ep = await create(acme);
      const before = await snapshot();
      const patches: Array<[Record<string, unknown>, string]> = [
        [{}, 'validation_failed'],
        [{ headers: { 'x-a': 'a\r\nb' } }, 'validation_failed'],
        [{ headers: { 'webhook-id': 'x' } }, 'header_not_allowed'],
        [{ event_types: [] }, 'validation_failed'],
        [{ max_concurrency: 101 }, 'validation_failed'],
        [{ url: 'ftp://hooks.example.com/' }, 'invalid_url'],
        [{ tenant_id: other.id }, 'validation_failed'],
        [{ status: 'disabled' }, 'validation_failed'],
      ];
      for (const [body, code] of patches) {
        const res = await asTenant(acme)({ method: 'PATCH', url: `/v1/endpoints/${ep.id}`, body });
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body.error.code).toBe(code);
      }
      expect(await snapshot()).toBe(before);
    });

    it('accepts the limits exactly', async () => {
      const ep = await create(acme, {
        event_types: Array.from({ length: 100 }, (_, i) => `t${i}.*`),
        max_concurrency: 100,
        headers: hdrs(20, 100),
        url: `https://hooks.example.com/${'a'.repeat(2000)}`,
      });
      expect(ep.event_types).toHaveLength(100);
      expect(Object.keys(ep.headers)).toHaveLength(20);
      const one = await create(acme, { max_concurrency: 1, event_types: ['*'] });
      expect(one.max_concurrency).toBe(1);
    });
  });

  describe('step-up', () => {
    it('guards a URL change: 403 step_up_required without a token, 200 with one', async () => {
      const ep = await create(acme);
      const change = (token?: string) =>
        asTenant(acme)({
          method: 'PATCH',
          url: `/v1/endpoints/${ep.id}`,
          body: { url: 'https://new.example.com/hook' },
          ...(token ? { headers: { 'x-step-up-token': token } } : {}),
        });
      const without = await change();
      expect(without.status).toBe(403);
      expect(without.body.error).toMatchObject({
        code: 'step_up_required',
        details: { step_up_url: '/v1/auth/step-up' },
      });
      const garbage = await change('su1.nope');
      expect(garbage.status).toBe(403);
      expect(garbage.body.error.code).toBe('step_up_required');
      expect((await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}` })).body.url).toBe(ep.url);

      const { token, expires_at } = await stepUp(acme);
      expect(token).toMatch(/^su1\.ten_[0-9A-Z]{26}\.\d+\.[A-Za-z0-9_-]{43}$/);
      expect(Date.parse(expires_at)).toBe(clock.now() + 5 * 60 * 1000);
      const withToken = await change(token);
      expect(withToken.status, JSON.stringify(withToken.body)).toBe(200);
      expect(withToken.body.url).toBe('https://new.example.com/hook');
      // The token is reusable until it expires (5 minutes), then refused.
      clock.advance(4 * 60 * 1000);
      const back = await asTenant(acme)({
        method: 'PATCH',
        url: `/v1/endpoints/${ep.id}`,
        body: { url: ep.url },
        headers: { 'x-step-up-token': token },
      });
      expect(back.status).toBe(200);
      clock.advance(60 * 1000);
      const expired = await change(token);
      expect(expired.status).toBe(403);
      expect(expired.body.error).toMatchObject({ code: 'step_up_required', details: { reason: 'expired' } });
    });

    it("refuses another tenant's token, a tampered token, and wrong or reused codes", async () => {
      const ep = await create(acme);
      const foreign = await stepUp(other);
      const res = await asTenant(acme)({
        method: 'PATCH',
        url: `/v1/endpoints/${ep.id}`,
        body: { url: 'https://new.example.com/' },
        headers: { 'x-step-up-token': foreign.token },
      });
      expect(res.status).toBe(403);
      expect(res.body.error.details.reason).toBe('invalid');
      const own = await stepUp(acme);
      const [v, ten, exp, mac] = own.token.split('.');
      const longer = `${v}.${ten}.${Number(exp) + 3_600_000}.${mac}`;
      const tampered = await asTenant(acme)({
        method: 'PATCH',
        url: `/v1/endpoints/${ep.id}`,
        body: { url: 'https://new.example.com/' },
        headers: { 'x-step-up-token': longer },
      });
      expect(tampered.status).toBe(403);

      clock.advance(TOTP_STEP_SECONDS * 1000);
      const code = totpCode(acme.seed, clock.now());
      const wrong = String((Number(code) + 1) % 1_000_000).padStart(6, '0');
      const bad = await asTenant(acme)({ method: 'POST', url: '/v1/auth/step-up', body: { totp: wrong } });
      expect(bad.status).toBe(403);
      expect(bad.body.error.code).toBe('invalid_totp');
      const good = await asTenant(acme)({ method: 'POST', url: '/v1/auth/step-up', body: { totp: code } });
      expect(good.status).toBe(200);
      const reused = await asTenant(acme)({ method: 'POST', url: '/v1/auth/step-up', body: { totp: code } });
      expect(reused.status).toBe(403);
      expect(reused.body.error.code).toBe('invalid_totp');
      // Another tenant's seed does not work for this one.
      const otherCode = totpCode(other.seed, clock.now());
      const cross = await asTenant(acme)({
        method: 'POST',
        url: '/v1/auth/step-up',
        body: { totp: otherCode },
      });
      expect(cross.status).toBe(403);
      const malformed = await asTenant(acme)({
        method: 'POST',
        url: '/v1/auth/step-up',
        body: { totp: '12345' },
      });
      expect(malformed.status).toBe(400);
      const operator = await t.request({ method: 'POST', url: '/v1/auth/step-up', body: { totp: code } });
      expect(operator.status).toBe(403);
      expect(operator.body.error.code).toBe('forbidden');
    });

    it('rate-limits wrong codes per tenant with Retry-After', async () => {
      const victim = await newTenant('Brute');
      clock.advance(TOTP_STEP_SECONDS * 1000);
      const code = totpCode(victim.seed, clock.now());
      const wrong = String((Number(code) + 500_000) % 1_000_000).padStart(6, '0');
      for (let i = 0; i < 5; i++) {
        const res = await asTenant(victim)({
          method: 'POST',
          url: '/v1/auth/step-up',
          body: { totp: wrong },
        });
        expect(res.status).toBe(403);
      }
      const limited = await asTenant(victim)({
        method: 'POST',
        url: '/v1/auth/step-up',
        body: { totp: code },
      });
      expect(limited.status).toBe(429);
      expect(limited.body.error.code).toBe('rate_limited');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      clock.advance(5 * 60 * 1000);
      await stepUp(victim);
    });
  });

  describe('secrets', () => {
    it('rotates with overlap, keeps at most two active, never shows them again', async () => {
      const ep = await create(acme);
      const first = ep.secret;
      clock.advance(1000);
      const r1 = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(r1.status, JSON.stringify(r1.body)).toBe(201);
      expect(r1.body.secret).toMatch(/^whsec_/);
      expect(r1.body.secret).not.toBe(first.secret);
      expect(r1.body.active_until).toBeNull();
      expect(r1.body.previous).toEqual({
        id: first.id,
        active_until: new Date(clock.now() + 7 * DAY_MS).toISOString(),
      });
      const list1 = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(list1.status).toBe(200);
      expect(list1.body.data.map((s: { id: string }) => s.id)).toEqual([r1.body.id, first.id]);
      expect(Object.keys(list1.body.data[0]).sort()).toEqual([
        'active_from',
        'active_until',
        'created_at',
        'id',
      ]);

      clock.advance(1000);
      const r2 = await asTenant(acme)({
        method: 'POST',
        url: `/v1/endpoints/${ep.id}/secrets`,
        body: { overlap_seconds: 3600 },
      });
      expect(r2.status).toBe(201);
      expect(r2.body.previous).toEqual({
        id: r1.body.id,
        active_until: new Date(clock.now() + 3600 * 1000).toISOString(),
      });
      const list2 = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      // The third rotation retired the first secret at once: two active.
      expect(list2.body.data.map((s: { id: string }) => s.id)).toEqual([r2.body.id, r1.body.id]);
      const text = JSON.stringify([
        list1.body,
        list2.body,
        await asTenant(acme)({ method: 'GET', url: '/v1/endpoints' }),
      ]);
      for (const s of [first.secret, r1.body.secret, r2.body.secret]) expect(text).not.toContain(s);

      // After the overlap only the newest signs.
      clock.advance(3600 * 1000);
      const list3 = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(list3.body.data.map((s: { id: string }) => s.id)).toEqual([r2.body.id]);
    });

    it('rotates with overlap 0, retires early, refuses to retire the last', async () => {
      const ep = await create(acme);
      const r = await asTenant(acme)({
        method: 'POST',
        url: `/v1/endpoints/${ep.id}/secrets`,
        body: { overlap_seconds: 0 },
      });
      expect(r.status).toBe(201);
      expect(r.body.previous).toBeNull();
      const last = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${r.body.id}`,
      });
      expect(last.status).toBe(409);
      expect(last.body.error.code).toBe('last_active_secret');

      const r2 = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/secrets`, body: {} });
      const retire = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${r.body.id}`,
      });
      expect(retire.status).toBe(204);
      const list = await asTenant(acme)({ method: 'GET', url: `/v1/endpoints/${ep.id}/secrets` });
      expect(list.body.data.map((s: { id: string }) => s.id)).toEqual([r2.body.id]);
      const again = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/${r.body.id}`,
      });
      expect(again.status).toBe(404);
      const unknown = await asTenant(acme)({
        method: 'DELETE',
        url: `/v1/endpoints/${ep.id}/secrets/sec_00000000000000000000000000`,
      });
      expect(unknown.status).toBe(404);
    });

    it('validates rotation bodies', async () => {
      const ep = await create(acme);
      for (const body of [
        { overlap_seconds: -1 },
        { overlap_seconds: 604_801 },
        { overlap_seconds: 1.5 },
        { x: 1 },
      ]) {
        const res = await asTenant(acme)({ method: 'POST', url: `/v1/endpoints/${ep.id}/secrets`, body });
        expect(res.status, JSON.stringify(body)).toBe(400);
      }
      expect(await t.store.secretListActive({ endpointId: ep.id, now: clock.now() })).toHaveLength(1);
    });
  });

  it('publishes the retry schedule without credentials and in the OpenAPI document', async () => {
    const res = await t.request({ method: 'GET', url: '/v1/retry-schedule', token: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ version: 1, max_attempts: 12, jitter: 'full' });
    expect(res.body.attempts).toHaveLength(12);
    // A bad credential is not even looked at on a public route.
    const bogus = await t.request({ method: 'GET', url: '/v1/retry-schedule', token: 'hkp_bogus' });
    expect(bogus.status).toBe(200);
    const doc = await t.request({ method: 'GET', url: '/openapi.json', token: null });
    expect(doc.body.paths['/v1/retry-schedule'].get.security).toEqual([]);
    for (const path of [
      '/v1/endpoints',
      '/v1/endpoints/{id}',
      '/v1/endpoints/{id}/secrets/{sid}',
      '/v1/auth/step-up',
      '/v1/attempts/{id}',
    ]) {
      expect(Object.keys(doc.body.paths)).toContain(path);
    }
  });
});
