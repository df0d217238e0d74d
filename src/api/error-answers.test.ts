/**
 * Error answers of the delivery-plane routes and the published document (docs/openapi.json): every status a route
 * can answer is listed for it (TestApp.request checks each answer against the document, test/support/
 * openapi-check.ts), optional bodies are optional, and bad input gets a stable code and changes nothing.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../../test/support/test-hookrail.ts';

const DOC = JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<
    string,
    Record<string, { responses: Record<string, unknown>; requestBody?: { required?: boolean } }>
  >;
};

describe('error answers and the document', () => {
  let t: TestApp;
  let key: string;
  let endpointId: string;

  beforeAll(async () => {
    t = await createTestApp('sqlite');
    key = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } })).body.tenant_key;
    const ep = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: key,
      body: { url: 'https://hooks.example.com/in', event_types: ['*'] },
    });
    endpointId = ep.body.id;
  });
  afterAll(() => t.close());

  it('every operation lists 500 and 503 (an unavailable store, a process shutting down)', () => {
    for (const [path, ops] of Object.entries(DOC.paths))
      for (const [method, op] of Object.entries(ops)) {
        expect(op.responses, `${method} ${path}`).toHaveProperty('500');
        expect(op.responses, `${method} ${path}`).toHaveProperty('503');
      }
  });

  it('an id of the wrong length is a 400 the document lists', async () => {
    const long = `ep_${'x'.repeat(70)}`;
    for (const url of [
      `/v1/endpoints/${long}`,
      `/v1/endpoints/${long}/health`,
      `/v1/endpoints/${long}/backlog`,
      `/v1/deliveries/dlv_${'x'.repeat(70)}`,
      `/v1/deliveries/dlv_${'x'.repeat(70)}/attempts`,
      `/v1/attempts/att_${'x'.repeat(70)}`,
    ]) {
      const res = await t.request({ method: 'GET', url, token: key });
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
  });

  it('a malformed cursor is invalid_cursor', async () => {
    const ulid = '01JABCDEFGHJKMNPQRSTVWXYZ0';
    for (const url of [
      '/v1/endpoints?cursor=abc',
      `/v1/endpoints/${endpointId}/deliveries?cursor=abc`,
      // Well formed, but the id of another kind: it would compare as a string and answer a wrong page.
      `/v1/endpoints?cursor=zz_${ulid}`,
      `/v1/endpoints?cursor=dlv_${ulid}`,
      `/v1/endpoints/${endpointId}/deliveries?cursor=evt_${ulid}`,
      `/v1/events?cursor=ep_${ulid}`,
      `/v1/notifications?cursor=aud_${ulid}`,
      `/v1/audit-events?cursor=ntf_${ulid}`,
    ]) {
      const res = await t.request({ method: 'GET', url, token: key });
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('invalid_cursor');
    }
    for (const [url, token] of [
      [`/v1/endpoints?cursor=ep_${ulid}`, key],
      [`/v1/endpoints/${endpointId}/deliveries?cursor=dlv_${ulid}`, key],
      [`/v1/events?cursor=evt_${ulid}`, key],
      [`/v1/notifications?cursor=ntf_${ulid}`, key],
      [`/v1/tenants?cursor=ten_${ulid}`, undefined],
      [`/v1/producer-keys?cursor=key_${ulid}`, undefined],
    ] as const) {
      expect((await t.request({ method: 'GET', url, token })).status, url).toBe(200);
    }
  });

  it('unknown query parameters are refused on the attempts list too', async () => {
    const res = await t.request({ method: 'GET', url: '/v1/deliveries/dlv_x/attempts?bogus=1', token: key });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
  });

  it('a single replay refuses bodies it does not take', async () => {
    const url = '/v1/deliveries/dlv_01JD0000000000000000000000/replay';
    const plain = await t.request({
      method: 'POST',
      url,
      token: key,
      rawBody: 'x',
      headers: { 'content-type': 'text/plain' },
    });
    expect([plain.status, plain.body.error.code]).toEqual([415, 'unsupported_media_type']);
    const broken = await t.request({
      method: 'POST',
      url,
      token: key,
      rawBody: '{',
      headers: { 'content-type': 'application/json' },
    });
    expect([broken.status, broken.body.error.code]).toEqual([400, 'invalid_json']);
    const unknown = await t.request({ method: 'POST', url, token: key, body: { foo: 1 } });
    expect([unknown.status, unknown.body.error.code]).toEqual([400, 'validation_failed']);
    // No body, or an empty one: the replay is looked up (and not found).
    expect((await t.request({ method: 'POST', url, token: key })).status).toBe(404);
  });

  it('optional bodies are optional: in the document, and sent empty with a JSON content type', async () => {
    for (const [path, method] of [
      ['/v1/endpoints/{id}/disable', 'post'],
      ['/v1/endpoints/{id}/secrets', 'post'],
      ['/v1/endpoints/{id}/replay', 'post'],
      ['/v1/endpoints/{id}/test', 'post'],
      ['/v1/deliveries/{id}/replay', 'post'],
    ] as const)
      expect(DOC.paths[path]?.[method]?.requestBody?.required, `${method} ${path}`).toBe(false);
    const res = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${endpointId}/disable`,
      token: key,
      rawBody: '',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('disabled');
  });

  it('an optional body sent as JSON null is refused, not read as no body', async () => {
    for (const path of ['replay', 'test', 'secrets']) {
      const res = await t.request({
        method: 'POST',
        url: `/v1/endpoints/${endpointId}/${path}`,
        token: key,
        rawBody: 'null',
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status, path).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
  });

  it('an empty body with a JSON content type on a route that takes no body is no body', async () => {
    const ep = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: key,
      body: { url: 'https://hooks.example.com/gone', event_types: ['*'] },
    });
    const res = await t.request({
      method: 'DELETE',
      url: `/v1/endpoints/${ep.body.id}`,
      token: key,
      rawBody: '',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(204);
  });

  it('a test event larger than the body limit is a 413 the document lists', async () => {
    const res = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${endpointId}/test`,
      token: key,
      body: { data: { blob: 'x'.repeat(300_000) } },
    });
    expect([res.status, res.body.error.code]).toEqual([413, 'payload_too_large']);
  });

  it('times must be RFC 3339', async () => {
    for (const body of [
      { since: 'Jan 1 2020' },
      { until: '12/31/2099' },
      { since: '2026-01-01' },
      // Impossible dates and times, which Date.parse would roll over into the next month or day.
      { since: '2026-02-30T00:00:00Z' },
      { since: '2025-02-29T00:00:00Z' },
      { until: '2026-01-01T24:00:00Z' },
      { until: '2026-01-01T23:60:00Z' },
      { since: '2026-01-01T00:00:00+24:00' },
    ]) {
      const res = await t.request({
        method: 'POST',
        url: `/v1/endpoints/${endpointId}/replay`,
        token: key,
        body,
      });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
    const ok = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${endpointId}/replay`,
      token: key,
      body: { since: '2024-02-29T00:00:00Z', until: '2099-12-31T23:59:59.999+01:00' },
    });
    expect(ok.status).toBe(202);
  });

  it('authenticates by the route a request reaches, however its path is spelled', async () => {
    // The router decodes percent-encoding: these reach GET /v1/tenants and POST /v1/events.
    for (const [method, url] of [
      ['GET', '/%761/tenants'],
      ['GET', '/%76%31/tenants'],
      ['GET', `/%761/endpoints/${endpointId}`],
      ['POST', '/%761/events'],
    ] as const) {
      const res = await t.request({ method, url, token: null, body: method === 'POST' ? {} : undefined });
      expect(res.status, url).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
    const ok = await t.request({ method: 'GET', url: `/%761/endpoints/${endpointId}`, token: key });
    expect(ok.status).toBe(200);
  });

  it('a path the router cannot read is a 400 in the usual envelope', async () => {
    for (const url of ['/v1/endpoints/%ZZ', '/v1/endpoints/%E0%A4%A', `/v1/endpoints/${'x'.repeat(101)}`]) {
      const res = await t.request({ method: 'GET', url, token: key });
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
  });
});
