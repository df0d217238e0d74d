/**
 * Endpoints through the HTTP API, on both stores: CRUD, who may do what, and the input rules (each refusal
 * changes nothing). Signing secrets and the URL change as an elevated action: endpoint-secrets.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointBody, endpointsApi, type TenantFixture } from '../../test/support/endpoints-api.ts';
import {
  ADMIN_TOKEN,
  createTestStore,
  STORE_KINDS,
  type TestApp,
  type TestStore,
} from '../../test/support/test-hookrail.ts';
import { type Hookrail, startHookrail } from '../bootstrap/start.ts';
import { loadConfig } from '../config/config.ts';
import { parseSecret } from '../domain/signature.ts';

describe.each(STORE_KINDS)('endpoints API on %s', (kind) => {
  const api = endpointsApi(kind);
  const { clock, asTenant, create } = api;
  let t: TestApp;
  let acme: TenantFixture;
  let other: TenantFixture;
  let producerKey: string;
  beforeAll(() => {
    ({ t, acme, other, producerKey } = api.state());
  });

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
        name: 'x-forwarded-for header',
        body: endpointBody({ headers: { 'X-Forwarded-For': '10.0.0.1' } }),
        code: 'header_not_allowed',
      },
      {
        name: 'metadata-flavor header',
        body: endpointBody({ headers: { 'Metadata-Flavor': 'Google' } }),
        code: 'header_not_allowed',
      },
      {
        name: 'x-amz- header',
        body: endpointBody({ headers: { 'x-amz-security-token': 'abc' } }),
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

    it('refuses a URL longer than 2048 characters once encoded with 400 invalid_url, on POST and PATCH', async () => {
      // 2,020 characters as typed; each `é` is `%C3%A9` in the canonical form that would be stored and sent.
      const url = `https://example.com/${'é'.repeat(2000)}`;
      expect(url.length).toBeLessThanOrEqual(2048);
      const ep = await create(acme);
      const before = await snapshot();
      const post = await asTenant(acme)({
        method: 'POST',
        url: '/v1/endpoints',
        body: endpointBody({ url }),
      });
      const patch = await asTenant(acme)({ method: 'PATCH', url: `/v1/endpoints/${ep.id}`, body: { url } });
      for (const res of [post, patch]) {
        expect(res.status, JSON.stringify(res.body)).toBe(400);
        expect(res.body.error).toMatchObject({
          code: 'invalid_url',
          message: 'URL refused: URL is longer than 2048 characters once encoded.',
          details: { reason: 'invalid_url' },
        });
      }
      expect(await snapshot()).toBe(before);
    });

    it('PATCH refuses the same bad fields and changes nothing', async () => {
      const ep = await create(acme);
      const before = await snapshot();
      const patches: Array<[Record<string, unknown>, string]> = [
        [{}, 'validation_failed'],
        [{ headers: { 'x-a': 'a\r\nb' } }, 'validation_failed'],
        [{ headers: { 'webhook-id': 'x' } }, 'header_not_allowed'],
        [{ headers: { 'x-aws-ec2-metadata-token': 'x' } }, 'header_not_allowed'],
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
});

/**
 * With HOOKRAIL_HTTPS_ONLY=true and the destination checker the composition root builds from the configuration
 * (no test resolver: every URL here is refused before a lookup, or is an IP literal).
 */
describe.each(STORE_KINDS)('endpoint URLs with HOOKRAIL_HTTPS_ONLY=true on %s', (kind) => {
  let ts: TestStore;
  let hookrail: Hookrail;
  let dataDir: string;
  let tenantKey: string;
  const call = async (method: 'POST' | 'PATCH', url: string, body: unknown, token = tenantKey) => {
    const res = await hookrail.app!.inject({
      method,
      url,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
    return { status: res.statusCode, body: JSON.parse(res.body) };
  };
  beforeAll(async () => {
    ts = await createTestStore(kind);
    dataDir = mkdtempSync(join(tmpdir(), 'hookrail-data-'));
    const config = loadConfig({
      HOOKRAIL_DATA_DIR: dataDir,
      HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
      HOOKRAIL_ROLES: 'intake,control',
      HOOKRAIL_AUTH_CACHE_MS: '0',
      HOOKRAIL_HTTPS_ONLY: 'true',
    });
    hookrail = await startHookrail({ config, store: ts.store, logger: false, listen: false });
    tenantKey = (await call('POST', '/v1/tenants', { name: 'Acme' }, ADMIN_TOKEN)).body.tenant_key;
  });
  afterAll(async () => {
    await hookrail?.close();
    await ts?.destroy();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers 400 invalid_url (scheme_not_allowed) for an http URL, 422 only for a refused address', async () => {
    const http = await call('POST', '/v1/endpoints', endpointBody({ url: 'http://hooks.example.com/in' }));
    expect(http.status, JSON.stringify(http.body)).toBe(400);
    expect(http.body.error).toMatchObject({
      code: 'invalid_url',
      message: 'URL refused: URL must use https.',
      details: { reason: 'scheme_not_allowed' },
    });
    const blocked = await call('POST', '/v1/endpoints', endpointBody({ url: 'https://127.0.0.2/in' }));
    expect(blocked.status, JSON.stringify(blocked.body)).toBe(422);
    expect(blocked.body.error).toMatchObject({
      code: 'destination_not_allowed',
      details: { reason: 'destination_not_allowed' },
    });
    const long = await call(
      'POST',
      '/v1/endpoints',
      endpointBody({ url: `https://example.com/${'é'.repeat(2000)}` }),
    );
    expect(long.status).toBe(400);
    expect(long.body.error).toMatchObject({ code: 'invalid_url', details: { reason: 'invalid_url' } });

    const ok = await call('POST', '/v1/endpoints', endpointBody({ url: 'https://93.184.215.14/in' }));
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    // A new http URL is refused the same way on PATCH, before any step-up is asked for.
    const patch = await call('PATCH', `/v1/endpoints/${ok.body.id}`, { url: 'http://93.184.215.14/in' });
    expect(patch.status, JSON.stringify(patch.body)).toBe(400);
    expect(patch.body.error).toMatchObject({
      code: 'invalid_url',
      details: { reason: 'scheme_not_allowed' },
    });
    const list = await ts.store.endpointList({ tenantId: null, limit: 10, cursor: null });
    expect(list.data.map((e) => e.url)).toEqual(['https://93.184.215.14/in']);
  });
});
