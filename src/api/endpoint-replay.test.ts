/**
 * Bulk replay through the HTTP API (POST /v1/endpoints/:id/replay), on both stores: the confirmation above 100
 * matches, validation, tenant scoping, the answer and its audit record. Dead letters are made with the store's own
 * fan-out, lease and completion, the way the delivery worker records them; which deliveries match and when the
 * replays come due is the store conformance suite's (operations/replay-statistics-audit.ts).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { ADMIN_TOKEN, createTestApp, STORE_KINDS, type TestApp } from '../../test/support/test-hookrail.ts';
import { newId } from '../domain/ids.ts';
import { REPLAY_CONFIRM_ABOVE } from '../domain/replay.ts';

const DEAD = REPLAY_CONFIRM_ABOVE + 5;
// One success in every lease of ten (the endpoint's cap) keeps the circuit from opening at 20 failures in a row.
const DELIVERED = 20;

describe.each(STORE_KINDS)('bulk replay API on %s', (kind) => {
  let t: TestApp;
  const clock = new FakeClock();
  let tenant: { id: string; key: string };
  let otherKey: string;
  let endpointId: string;
  let createdAt: number;

  const ids = {
    delivery: () => newId('delivery', clock.now(), randomBytes(10)),
    webhookId: () => newId('message', clock.now(), randomBytes(10)),
  };
  const replay = (body: unknown, token = tenant.key, id = endpointId) =>
    t.request({ method: 'POST', url: `/v1/endpoints/${id}/replay`, token, body: body as object });

  beforeAll(async () => {
    t = await createTestApp(kind, { clock });
    const a = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } });
    tenant = { id: a.body.id, key: a.body.tenant_key };
    otherKey = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Other' } })).body
      .tenant_key;
    const producerKey = (await t.request({ method: 'POST', url: '/v1/producer-keys', body: {} })).body.key;
    const ep = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: tenant.key,
      body: { url: 'https://hooks.example.com/in', event_types: ['*'] },
    });
    expect(ep.status).toBe(201);
    endpointId = ep.body.id;
    createdAt = clock.now();
    for (let i = 0; i < DEAD + DELIVERED; i++) {
      const ev = await t.request({
        method: 'POST',
        url: '/v1/events',
        token: producerKey,
        body: { tenant_id: tenant.id, type: 'order.created', data: { i } },
      });
      expect(ev.status).toBe(202);
    }
    await t.store.fanoutRun({ now: clock.now(), limit: 1_000, ids });
    clock.advance(1_000);
    // The endpoint's cap (max_concurrency) bounds each lease: a cap at a time, the first of each delivered.
    let dead = 0;
    for (;;) {
      const leased = await t.store.deliveryLease({
        owner: 'w1',
        now: clock.now(),
        limit: 1_000,
        perEndpoint: 1_000,
        leaseMs: 60_000,
      });
      if (leased.length === 0) break;
      await t.store.deliveryComplete({
        now: clock.now() + 50,
        completions: leased.map((l, i) => {
          const fail = i > 0 && dead < DEAD;
          if (fail) dead++;
          return {
            leaseOwner: 'w1',
            next: fail ? { status: 'dead', reason: 'permanent_failure' } : { status: 'delivered' },
            attempt: {
              id: newId('attempt', clock.now(), randomBytes(10)),
              deliveryId: l.delivery.id,
              endpointId,
              tenantId: tenant.id,
              eventId: l.delivery.eventId,
              attemptNo: 1,
              url: l.endpoint.url,
              dueAt: clock.now(),
              startedAt: clock.now(),
              finishedAt: clock.now() + 40,
              outcome: fail ? 'permanent' : 'delivered',
              statusCode: fail ? 410 : 204,
              errorClass: fail ? 'http_status' : null,
              errorMessage: null,
              request: { hops: [{ url: l.endpoint.url, headers: {}, status: fail ? 410 : 204 }] },
              responseHeaders: null,
              responseBody: null,
              queueMs: 0,
              platformMs: 1,
              consumerMs: 39,
            },
          };
        }),
      });
      clock.advance(1_000);
    }
    expect(dead).toBe(DEAD);
    clock.advance(60_000);
  });

  afterAll(async () => {
    await t?.close();
  });

  it('refuses bad filters, other tenants and the operator, and changes nothing', async () => {
    const bad = [
      { status: ['pending'] },
      { status: ['cancelled'] },
      { status: [] },
      { since: 'yesterday' },
      { since: new Date(createdAt + 10).toISOString(), until: new Date(createdAt).toISOString() },
      { confirm: 'yes' },
      { dead: true },
    ];
    for (const body of bad) {
      const r = await replay(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code, JSON.stringify(body)).toBe('validation_failed');
    }
    expect((await replay({}, otherKey)).status).toBe(404);
    expect((await replay({}, tenant.key, newId('endpoint', clock.now(), randomBytes(10)))).status).toBe(404);
    expect((await replay({}, ADMIN_TOKEN)).status).toBe(403);
    const pending = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpointId}/deliveries?status=pending`,
      token: tenant.key,
    });
    expect(pending.body.data).toEqual([]);
  });

  it('asks for confirmation above 100 matches, then replays every dead letter once, rate-capped', async () => {
    const asked = await replay({});
    expect(asked.status).toBe(409);
    expect(asked.body.error).toMatchObject({
      code: 'confirmation_required',
      details: { count: DEAD, more: false },
    });
    // 105 replays at 10 per second take at least 10.5 s.
    expect(asked.body.error.details.estimated_seconds).toBeGreaterThanOrEqual(11);
    // A range that holds none of them needs no confirmation and replays nothing.
    const none = await replay({ until: new Date(createdAt).toISOString() });
    expect(none.status).toBe(202);
    expect(none.body).toMatchObject({ count: 0, more: false, first_due_at: null, last_due_at: null });

    // A confirmation holds to the count it was given: more matching than that asks again, and changes nothing.
    const grown = await replay({ confirm: true, expected_count: DEAD - 1 });
    expect(grown.status).toBe(409);
    expect(grown.body.error).toMatchObject({ code: 'confirmation_required', details: { count: DEAD } });
    expect(grown.body.error.message).toContain(`more than the ${DEAD - 1} confirmed`);
    const still = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpointId}/deliveries?status=pending`,
      token: tenant.key,
    });
    expect(still.body.data).toEqual([]);
    expect((await replay({ confirm: true, expected_count: -1 })).status).toBe(400);

    const now = clock.now();
    const done = await replay({
      confirm: true,
      expected_count: DEAD,
      status: ['dead'],
      since: new Date(createdAt).toISOString(),
    });
    expect(done.status).toBe(202);
    expect(done.body).toEqual({
      id: expect.stringMatching(/^rpl_/),
      endpoint_id: endpointId,
      status: ['dead'],
      since: new Date(createdAt).toISOString(),
      until: new Date(now).toISOString(),
      count: DEAD,
      more: false,
      first_due_at: new Date(now).toISOString(),
      last_due_at: new Date(now + (DEAD - 1) * 100).toISOString(),
      rate_per_second: 10,
      estimated_seconds: asked.body.error.details.estimated_seconds,
      created_at: new Date(now).toISOString(),
    });
    const pending = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpointId}/deliveries?status=pending&limit=500`,
      token: tenant.key,
    });
    expect(pending.body.data).toHaveLength(DEAD);
    for (const d of pending.body.data) expect(d.replayed_from).toMatch(/^dlv_/);
    // Nothing left to replay.
    expect((await replay({ confirm: true })).body).toMatchObject({ count: 0, more: false });
    const audit = await t.request({ method: 'GET', url: '/v1/audit-events', token: tenant.key });
    // One record: the requests that replayed nothing changed nothing.
    const entries = audit.body.data.filter((e: { action: string }) => e.action === 'endpoint.replayed');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      target_type: 'endpoint',
      target_id: endpointId,
      details: { replay_id: done.body.id, count: DEAD, more: false, status: ['dead'] },
    });
  });

  it('a single replay of an event type the endpoint no longer subscribes to answers 409 not_replayable', async () => {
    const delivered = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpointId}/deliveries?status=delivered&limit=1`,
      token: tenant.key,
    });
    const id = delivered.body.data[0].id;
    const single = () => t.request({ method: 'POST', url: `/v1/deliveries/${id}/replay`, token: tenant.key });
    const subscribe = async (eventTypes: string[]) => {
      const r = await t.request({
        method: 'PATCH',
        url: `/v1/endpoints/${endpointId}`,
        token: tenant.key,
        body: { event_types: eventTypes },
      });
      expect(r.status).toBe(200);
    };
    await subscribe(['invoice.*']);
    const refused = await single();
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'not_replayable', details: { reason: 'unsubscribed' } });
    const replays = async () =>
      (await t.request({ method: 'GET', url: '/v1/audit-events', token: tenant.key })).body.data.filter(
        (e: { action: string }) => e.action === 'delivery.replayed',
      );
    expect(await replays()).toEqual([]);
    await subscribe(['order.*']);
    const sent = await single();
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({ replayed_from: id, status: 'pending' });
    expect(await replays()).toHaveLength(1);
  });
});
