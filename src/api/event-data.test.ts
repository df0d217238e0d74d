/**
 * An event's `data` is kept as the bytes the producer sent: stored, answered by the events API and compared for
 * idempotency as that text, never as a parsed and re-serialised value.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { createTestApp, STORE_KINDS, type TestApp } from '../../test/support/test-hookrail.ts';

/** Everything a parse/serialise round trip changes: digits beyond 2^53, `1.10`, `-0`, escapes, 1e400, duplicates. */
const EXACT_DATA =
  '{"n":12345678901234567890,"f":1.10,"z":-0,"s":"\\u00e9\\"}","nested":[{"a":1e400}],' +
  '"2":"key order","dup":1,"dup":2, "spaced" : [ 1 , {"x" : "y"} ]}';

describe.each(STORE_KINDS)('event data as sent, on %s', (kind) => {
  let t: TestApp;
  const clock = new FakeClock();
  let tenant: { id: string; tenant_key: string };

  beforeAll(async () => {
    t = await createTestApp(kind, { clock });
    tenant = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } })).body;
  });
  afterAll(() => t?.close());

  const post = (rawBody: string, headers: Record<string, string> = {}) =>
    t.request({
      method: 'POST',
      url: '/v1/events',
      rawBody,
      headers: { 'content-type': 'application/json', ...headers },
    });
  /** The answer's text as it left the server (the test helper hands back only the parsed body). */
  const rawGet = async (url: string) => {
    const res = await t.hookrail.app!.inject({
      method: 'GET',
      url,
      headers: { authorization: `Bearer ${tenant.tenant_key}` },
    });
    expect(res.statusCode).toBe(200);
    return res.body;
  };

  it('stores the data text and answers it from GET /v1/events/:id and the list byte for byte', async () => {
    // Whitespace around the member, another `data` before it (the last one counts, as in JSON.parse), data not
    // the first member.
    const res = await post(
      `{"data":{"first":true},"tenant_id":"${tenant.id}","type":"order.created",\n  "data" :\t${EXACT_DATA} ,` +
        `"resource_id":"ord_1"}`,
    );
    expect(res.status).toBe(202);
    const id = res.body.id as string;

    const stored = await t.store.eventGet({ id, tenantId: tenant.id });
    expect(stored?.data).toBe(EXACT_DATA);

    const one = await rawGet(`/v1/events/${id}`);
    expect(one).toContain(`"data":${EXACT_DATA},`);
    expect(JSON.parse(one).resource_id).toBe('ord_1');
    const list = await rawGet('/v1/events?type=order.created');
    expect(list).toContain(`"id":"${id}"`);
    expect(list).toContain(`"data":${EXACT_DATA},`);
  });

  it('keeps data whose value parses to Infinity as sent (valid JSON), and still refuses what fails validation', async () => {
    const big = await post(`{"tenant_id":"${tenant.id}","type":"big.number","data":{"a":1e400,"b":-1E+999}}`);
    expect(big.status).toBe(202);
    expect((await t.store.eventGet({ id: big.body.id, tenantId: tenant.id }))?.data).toBe(
      '{"a":1e400,"b":-1E+999}',
    );
    // Validation still holds: data must be an object, and no deeper than the limit — measured on the text kept,
    // so a deep value under a key that a later duplicate hides from JSON.parse is refused too.
    const notObject = await post(`{"tenant_id":"${tenant.id}","type":"x","data":[1]}`);
    expect(notObject.status).toBe(400);
    const deep = `${'{"a":'.repeat(40)}1${'}'.repeat(40)}`;
    for (const data of [deep, `{"x":${deep},"x":1}`]) {
      const tooDeep = await post(`{"tenant_id":"${tenant.id}","type":"x","data":${data}}`);
      expect(tooDeep.status).toBe(400);
      expect(tooDeep.body.error.details).toEqual({ field: 'data' });
    }
  });

  it('replays the same bytes under one Idempotency-Key, and refuses different bytes that parse alike', async () => {
    const body = (n: string, space = '') =>
      `{"tenant_id":"${tenant.id}","type":"invoice.paid","data":{"id":${space}${n}}}`;
    const key = { 'idempotency-key': `exact-${kind}` };
    const first = await post(body('9007199254740993'), key);
    expect(first.status).toBe(202);
    const again = await post(body('9007199254740993'), key);
    expect(again.status).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.id).toBe(first.body.id);
    // 9007199254740993 and 9007199254740992 are the same JavaScript number; they are different requests.
    expect(JSON.parse(body('9007199254740993'))).toEqual(JSON.parse(body('9007199254740992')));
    for (const other of [body('9007199254740992'), body('9007199254740993', ' ')]) {
      const conflict = await post(other, key);
      expect(conflict.status).toBe(409);
      expect(conflict.body.error.code).toBe('idempotency_key_reused');
      expect(conflict.body.error.details).toEqual({ event_id: first.body.id });
    }
    expect((await t.store.eventGet({ id: first.body.id, tenantId: tenant.id }))?.data).toBe(
      '{"id":9007199254740993}',
    );
  });

  it("keeps a test event's data as sent too (POST /v1/endpoints/:id/test)", async () => {
    const ep = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: tenant.tenant_key,
      body: { url: 'https://hooks.example.com/in', event_types: ['*'] },
    });
    expect(ep.status).toBe(201);
    const sent = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${ep.body.id}/test`,
      token: tenant.tenant_key,
      // Data of the caller's choosing under the default type needs no step-up (a type of its choosing does).
      rawBody: `{"data" : ${EXACT_DATA}}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(sent.status).toBe(202);
    const stored = await t.store.eventGet({ id: sent.body.event.id, tenantId: tenant.id });
    expect(stored?.data).toBe(EXACT_DATA);
    // Without data, the default test data.
    const plain = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${ep.body.id}/test`,
      token: tenant.tenant_key,
    });
    expect(plain.status).toBe(202);
    const stock = await t.store.eventGet({ id: plain.body.event.id, tenantId: tenant.id });
    expect(JSON.parse(stock!.data)).toEqual({
      message: 'A test event from Hookrail.',
      endpoint_id: ep.body.id,
    });
  });
});
