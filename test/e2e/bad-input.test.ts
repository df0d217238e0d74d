/**
 * A table of bad requests thrown at the API: each must answer its 4xx with a stable error code and change
 * nothing in the store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, STORE_KINDS, type TestApp } from '../support/test-hookrail.ts';

interface Case {
  name: string;
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  url: string;
  token?: 'operator' | 'producer' | 'tenant' | 'none' | 'bogus';
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  status: number;
  code: string;
}

function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

const T = '__TENANT__';
const ev = (over: Record<string, unknown>) => ({
  tenant_id: T,
  type: 'order.created',
  data: { a: 1 },
  ...over,
});

const CASES: Case[] = [
  {
    name: 'no credentials',
    method: 'POST',
    url: '/v1/events',
    token: 'none',
    body: ev({}),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'unknown key',
    method: 'POST',
    url: '/v1/events',
    token: 'bogus',
    body: ev({}),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'tenant key cannot send events',
    method: 'POST',
    url: '/v1/events',
    token: 'tenant',
    body: ev({}),
    status: 403,
    code: 'forbidden',
  },
  {
    name: 'malformed JSON',
    method: 'POST',
    url: '/v1/events',
    rawBody: '{"tenant_id": ',
    headers: { 'content-type': 'application/json' },
    status: 400,
    code: 'invalid_json',
  },
  {
    name: 'empty JSON body',
    method: 'POST',
    url: '/v1/events',
    rawBody: '',
    headers: { 'content-type': 'application/json' },
    status: 400,
    code: 'invalid_json',
  },
  {
    name: 'invalid UTF-8',
    method: 'POST',
    url: '/v1/events',
    rawBody: Buffer.concat([
      Buffer.from(`{"tenant_id":"${T}","type":"a","data":{"x":"`),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}}'),
    ]),
    headers: { 'content-type': 'application/json' },
    status: 400,
    code: 'invalid_json',
  },
  {
    name: 'text/plain',
    method: 'POST',
    url: '/v1/events',
    rawBody: JSON.stringify(ev({})),
    headers: { 'content-type': 'text/plain' },
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'form encoded',
    method: 'POST',
    url: '/v1/events',
    rawBody: 'a=1',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'over 256 KiB',
    method: 'POST',
    url: '/v1/events',
    body: ev({ data: { big: 'x'.repeat(256 * 1024) } }),
    status: 413,
    code: 'payload_too_large',
  },
  {
    name: 'data is an array',
    method: 'POST',
    url: '/v1/events',
    body: ev({ data: [1, 2] }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'data is a string',
    method: 'POST',
    url: '/v1/events',
    body: ev({ data: 'hello' }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'data is null',
    method: 'POST',
    url: '/v1/events',
    body: ev({ data: null }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'data missing',
    method: 'POST',
    url: '/v1/events',
    body: { tenant_id: T, type: 'a' },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'type missing',
    method: 'POST',
    url: '/v1/events',
    body: { tenant_id: T, data: {} },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'type with spaces',
    method: 'POST',
    url: '/v1/events',
    body: ev({ type: 'order created' }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'type with empty segment',
    method: 'POST',
    url: '/v1/events',
    body: ev({ type: 'order..created' }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'type is a number',
    method: 'POST',
    url: '/v1/events',
    body: ev({ type: 12 }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'huge type',
    method: 'POST',
    url: '/v1/events',
    body: ev({ type: 'a'.repeat(10_000) }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'tenant_id is a number',
    method: 'POST',
    url: '/v1/events',
    body: ev({ tenant_id: 5 }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'unknown tenant',
    method: 'POST',
    url: '/v1/events',
    body: ev({ tenant_id: 'ten_00000000000000000000000000' }),
    status: 404,
    code: 'tenant_not_found',
  },
  {
    name: 'unknown field',
    method: 'POST',
    url: '/v1/events',
    body: ev({ priority: 'high' }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'empty resource_id',
    method: 'POST',
    url: '/v1/events',
    body: ev({ resource_id: '' }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'resource_id with newline',
    method: 'POST',
    url: '/v1/events',
    body: ev({ resource_id: 'a\nb' }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'deeply nested data',
    method: 'POST',
    url: '/v1/events',
    body: ev({ data: nested(40) }),
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'idempotency key too long',
    method: 'POST',
    url: '/v1/events',
    body: ev({}),
    headers: { 'idempotency-key': 'k'.repeat(256) },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'idempotency key with a space',
    method: 'POST',
    url: '/v1/events',
    body: ev({}),
    headers: { 'idempotency-key': 'a b' },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'tenant without name',
    method: 'POST',
    url: '/v1/tenants',
    body: {},
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'tenant name wrong type',
    method: 'POST',
    url: '/v1/tenants',
    body: { name: ['x'] },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'tenant unknown field',
    method: 'POST',
    url: '/v1/tenants',
    body: { name: 'x', plan: 'gold' },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'tenant name too long',
    method: 'POST',
    url: '/v1/tenants',
    body: { name: 'x'.repeat(201) },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'producer creates tenant',
    method: 'POST',
    url: '/v1/tenants',
    token: 'producer',
    body: { name: 'x' },
    status: 403,
    code: 'forbidden',
  },
  {
    name: 'tenant creates tenant',
    method: 'POST',
    url: '/v1/tenants',
    token: 'tenant',
    body: { name: 'x' },
    status: 403,
    code: 'forbidden',
  },
  {
    name: 'tenant creates producer key',
    method: 'POST',
    url: '/v1/producer-keys',
    token: 'tenant',
    body: {},
    status: 403,
    code: 'forbidden',
  },
  {
    name: 'producer key unknown field',
    method: 'POST',
    url: '/v1/producer-keys',
    body: { scope: 'all' },
    status: 400,
    code: 'validation_failed',
  },
  { name: 'limit 0', method: 'GET', url: '/v1/events?limit=0', status: 400, code: 'validation_failed' },
  { name: 'limit 501', method: 'GET', url: '/v1/events?limit=501', status: 400, code: 'validation_failed' },
  {
    name: 'limit not a number',
    method: 'GET',
    url: '/v1/events?limit=ten',
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'garbage cursor',
    method: 'GET',
    url: '/v1/events?cursor=%27%20OR%201=1',
    status: 400,
    code: 'invalid_cursor',
  },
  {
    name: 'unknown query parameter',
    method: 'GET',
    url: '/v1/tenants?sort=name',
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'unknown event',
    method: 'GET',
    url: '/v1/events/evt_00000000000000000000000000',
    status: 404,
    code: 'not_found',
  },
  {
    name: 'delete a tenant without the operator step-up',
    method: 'DELETE',
    url: '/v1/tenants/ten_00000000000000000000000000',
    status: 403,
    code: 'step_up_required',
  },
  { name: 'unknown route', method: 'GET', url: '/v1/nothing-here', status: 404, code: 'route_not_found' },
  {
    name: 'endpoint with header injection',
    method: 'POST',
    url: '/v1/endpoints',
    token: 'tenant',
    body: { url: 'https://hooks.example.com/', event_types: ['*'], headers: { 'x-a': 'a\r\nb' } },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'endpoint with userinfo',
    method: 'POST',
    url: '/v1/endpoints',
    token: 'tenant',
    body: { url: 'https://u:p@hooks.example.com/', event_types: ['*'] },
    status: 400,
    code: 'invalid_url',
  },
  {
    name: 'endpoint as text/plain',
    method: 'POST',
    url: '/v1/endpoints',
    token: 'tenant',
    rawBody: '{"url":"https://hooks.example.com/","event_types":["*"]}',
    headers: { 'content-type': 'text/plain' },
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'producer creates endpoint',
    method: 'POST',
    url: '/v1/endpoints',
    token: 'producer',
    body: { url: 'https://hooks.example.com/', event_types: ['*'] },
    status: 403,
    code: 'forbidden',
  },
  {
    name: 'operator creates endpoint',
    method: 'POST',
    url: '/v1/endpoints',
    body: { url: 'https://hooks.example.com/', event_types: ['*'] },
    status: 403,
    code: 'forbidden',
  },
  {
    name: 'patch unknown endpoint',
    method: 'PATCH',
    url: '/v1/endpoints/ep_00000000000000000000000000',
    token: 'tenant',
    body: { description: 'x' },
    status: 404,
    code: 'not_found',
  },
  {
    name: 'step-up with a 5-digit code',
    method: 'POST',
    url: '/v1/auth/step-up',
    token: 'tenant',
    body: { totp: '12345' },
    status: 400,
    code: 'validation_failed',
  },
  {
    name: 'unknown attempt',
    method: 'GET',
    url: '/v1/attempts/att_00000000000000000000000000',
    status: 404,
    code: 'not_found',
  },
];

describe.each(STORE_KINDS)('bad input on %s', (kind) => {
  let t: TestApp;
  const tokens: Record<string, string | null> = { none: null, bogus: 'hkp_bogus' };
  let tenantId = '';

  beforeAll(async () => {
    t = await createTestApp(kind);
    const tenant = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } });
    const pk = await t.request({ method: 'POST', url: '/v1/producer-keys', body: {} });
    tenantId = tenant.body.id;
    tokens.tenant = tenant.body.tenant_key;
    tokens.producer = pk.body.key;
    await t.request({
      method: 'POST',
      url: '/v1/events',
      body: { tenant_id: tenantId, type: 'seed', data: {} },
    });
  });
  afterAll(() => t?.close());

  const snapshot = async () =>
    JSON.stringify([
      await t.store.tenantList({ limit: 500, cursor: null }),
      await t.store.apiKeyList({ kind: 'producer', limit: 500, cursor: null }),
      await t.store.apiKeyList({ kind: 'tenant', limit: 500, cursor: null }),
      await t.store.eventList({ tenantId: null, limit: 500, cursor: null }),
      await t.store.fanoutPendingCount(),
      await t.store.endpointList({ tenantId: null, limit: 500, cursor: null }),
    ]);

  it.each(CASES)('$name → $status $code', async (c) => {
    const before = await snapshot();
    const fill = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll(T, tenantId));
    const token = c.token === undefined || c.token === 'operator' ? undefined : tokens[c.token];
    const res = await t.request({
      method: c.method,
      url: c.url,
      ...(token !== undefined ? { token } : {}),
      ...(c.body !== undefined ? { body: fill(c.body) } : {}),
      ...(c.rawBody !== undefined
        ? { rawBody: typeof c.rawBody === 'string' ? c.rawBody.replaceAll(T, tenantId) : c.rawBody }
        : {}),
      ...(c.headers ? { headers: c.headers } : {}),
    });
    expect(res.status).toBe(c.status);
    expect(res.body.error.code).toBe(c.code);
    expect(typeof res.body.error.message).toBe('string');
    expect(await snapshot()).toBe(before);
  });
});
