/**
 * Delivery history and the request inspector through the HTTP API, on both stores. Deliveries are made by the
 * store's own fan-out; attempts are fabricated with lease + complete, the way a worker records them.
 */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { createTestApp, STORE_KINDS, type TestApp } from '../../test/support/test-hookrail.ts';
import { deliveryBody, deliveryHeaders } from '../domain/delivery-request.ts';
import { newId } from '../domain/ids.ts';

describe.each(STORE_KINDS)('delivery history API on %s', (kind) => {
  let t: TestApp;
  const clock = new FakeClock();
  let tenant: { id: string; key: string };
  let other: { id: string; key: string };
  let producerKey: string;
  let endpoint: { id: string; url: string; secret: { secret: string } };
  let eventId: string;
  let deliveryId: string;
  let attemptIds: string[];

  const ids = {
    delivery: () => newId('delivery', clock.now(), randomBytes(10)),
    webhookId: () => newId('message', clock.now(), randomBytes(10)),
  };

  beforeAll(async () => {
    t = await createTestApp(kind, { clock });
    const a = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } });
    const b = await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Other' } });
    tenant = { id: a.body.id, key: a.body.tenant_key };
    other = { id: b.body.id, key: b.body.tenant_key };
    producerKey = (await t.request({ method: 'POST', url: '/v1/producer-keys', body: {} })).body.key;
    const ep = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: tenant.key,
      body: {
        url: 'https://hooks.example.com/in',
        event_types: ['order.*'],
        headers: { 'x-team': 'billing' },
      },
    });
    expect(ep.status).toBe(201);
    endpoint = ep.body;

    const ev = await t.request({
      method: 'POST',
      url: '/v1/events',
      token: producerKey,
      body: {
        tenant_id: tenant.id,
        type: 'order.created',
        data: { n: 1, note: 'Zoë €' },
        resource_id: 'ord_1',
      },
    });
    expect(ev.status).toBe(202);
    eventId = ev.body.id;
    clock.advance(1);
    await t.request({
      method: 'POST',
      url: '/v1/events',
      token: producerKey,
      body: { tenant_id: tenant.id, type: 'order.paid', data: { n: 2 } },
    });
    expect(await t.store.fanoutRun({ now: clock.now(), limit: 100, ids })).toMatchObject({
      events: 2,
      deliveries: 2,
    });

    // Attempt 1: a 503 with a body; attempt 2: a 200 after a redirect.
    attemptIds = [];
    for (const [n, status] of [
      [1, 503],
      [2, 200],
    ] as const) {
      clock.advance(10_000);
      const leased = await t.store.deliveryLease({
        owner: 'w1',
        now: clock.now(),
        limit: 10,
        perEndpoint: 10,
        leaseMs: 60_000,
      });
      const mine = leased.find((l) => l.event.id === eventId);
      expect(mine, `lease ${n}`).toBeDefined();
      const { delivery, event } = mine!;
      deliveryId = delivery.id;
      const body = deliveryBody(event);
      const headers = deliveryHeaders({
        webhookId: delivery.webhookId,
        nowMs: clock.now(),
        body,
        secrets: [endpoint.secret.secret],
        userAgent: 'Hookrail/test',
        customHeaders: { 'x-team': 'billing' },
      });
      const hops =
        status === 200
          ? [
              { url: endpoint.url, headers, status: 307 },
              { url: 'https://hooks.example.com/v2/in', headers, status: 200 },
            ]
          : [{ url: endpoint.url, headers, status }];
      const attemptId = newId('attempt', clock.now(), randomBytes(10));
      attemptIds.push(attemptId);
      await t.store.deliveryComplete({
        now: clock.now() + 120,
        completions: [
          {
            leaseOwner: 'w1',
            next:
              status === 200
                ? { status: 'delivered' }
                : { status: 'pending', nextAttemptAt: clock.now() + 5000 },
            attempt: {
              id: attemptId,
              deliveryId: delivery.id,
              endpointId: endpoint.id,
              tenantId: tenant.id,
              eventId: delivery.eventId,
              attemptNo: n,
              url: endpoint.url,
              dueAt: clock.now() - 7,
              startedAt: clock.now(),
              finishedAt: clock.now() + 120,
              outcome: status === 200 ? 'delivered' : 'retryable',
              statusCode: status,
              errorClass: status === 200 ? null : 'http_status',
              errorMessage: null,
              request: { hops },
              responseHeaders: { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '5' },
              responseBody: Buffer.from(status === 200 ? 'ok' : 'über busy').toString('base64'),
              queueMs: 7,
              platformMs: 3,
              consumerMs: 117,
            },
          },
        ],
      });
    }
  });
  afterAll(() => t?.close());

  it("lists an endpoint's deliveries newest first, filtered by status", async () => {
    const all = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpoint.id}/deliveries`,
      token: tenant.key,
    });
    expect(all.status).toBe(200);
    expect(all.body.data).toHaveLength(2);
    // Both deliveries were made in the same fan-out millisecond, so their relative order is the ids' entropy.
    const mine = all.body.data.find((d: { id: string }) => d.id === deliveryId);
    expect(mine).toMatchObject({
      id: deliveryId,
      tenant_id: tenant.id,
      endpoint_id: endpoint.id,
      event_id: eventId,
      event_type: 'order.created',
      resource_id: 'ord_1',
      status: 'delivered',
      attempts: 2,
      replayed_from: null,
    });
    expect(mine.webhook_id).toMatch(/^msg_/);
    expect(all.body.data[0].id > all.body.data[1].id).toBe(true);
    const delivered = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpoint.id}/deliveries?status=delivered`,
      token: tenant.key,
    });
    expect(delivered.body.data.map((d: { id: string }) => d.id)).toEqual([deliveryId]);
    const pending = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpoint.id}/deliveries?status=pending&limit=1`,
      token: tenant.key,
    });
    expect(pending.body.data).toHaveLength(1);
    expect(pending.body.data[0].event_type).toBe('order.paid');
    const page = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpoint.id}/deliveries?limit=1`,
      token: tenant.key,
    });
    expect(page.body.next_cursor).toBe(page.body.data[0].id);
    const bad = await t.request({
      method: 'GET',
      url: `/v1/endpoints/${endpoint.id}/deliveries?status=lost`,
      token: tenant.key,
    });
    expect(bad.status).toBe(400);
  });

  it('reads one delivery and its attempts', async () => {
    const d = await t.request({ method: 'GET', url: `/v1/deliveries/${deliveryId}`, token: tenant.key });
    expect(d.status).toBe(200);
    expect(d.body).toMatchObject({ id: deliveryId, status: 'delivered', attempts: 2 });
    expect(d.body.first_attempt_at).not.toBeNull();
    const a = await t.request({
      method: 'GET',
      url: `/v1/deliveries/${deliveryId}/attempts`,
      token: tenant.key,
    });
    expect(a.status).toBe(200);
    expect(a.body.next_cursor).toBeNull();
    expect(a.body.data.map((x: { id: string }) => x.id)).toEqual(attemptIds);
    expect(a.body.data[0]).toMatchObject({
      attempt_no: 1,
      outcome: 'retryable',
      status_code: 503,
      error_class: 'http_status',
      timings: { queue_ms: 7, platform_ms: 3, consumer_ms: 117 },
    });
  });

  it('inspects an attempt: exact headers of every hop, the body bytes, the response', async () => {
    const res = await t.request({ method: 'GET', url: `/v1/attempts/${attemptIds[1]}`, token: tenant.key });
    expect(res.status).toBe(200);
    const x = res.body;
    expect(x).toMatchObject({
      id: attemptIds[1],
      delivery_id: deliveryId,
      endpoint_id: endpoint.id,
      tenant_id: tenant.id,
      attempt_no: 2,
      outcome: 'delivered',
      error_class: null,
      request: { method: 'POST', url: endpoint.url },
      response: { status: 200, body_text: 'ok', body_base64: Buffer.from('ok').toString('base64') },
      timings: { queue_ms: 7, platform_ms: 3, consumer_ms: 117 },
    });
    expect(x.request.hops.map((h: { status: number }) => h.status)).toEqual([307, 200]);
    const headers = x.request.hops[1].headers;
    expect(headers['x-team']).toBe('billing');
    expect(headers['webhook-signature']).toMatch(/^v1,/);
    // The body shown is byte-for-byte what was signed: a Standard Webhooks library computes the same signature.
    const signed = new Webhook(endpoint.secret.secret).sign(
      headers['webhook-id'],
      new Date(Number(headers['webhook-timestamp']) * 1000),
      x.request.body,
    );
    expect(headers['webhook-signature']).toBe(signed);
    expect(x.request.body_size).toBe(Buffer.byteLength(x.request.body));
    expect(JSON.parse(x.request.body)).toMatchObject({ type: 'order.created', data: { note: 'Zoë €' } });

    const first = await t.request({ method: 'GET', url: `/v1/attempts/${attemptIds[0]}`, token: tenant.key });
    expect(first.body.response).toMatchObject({ status: 503, body_text: 'über busy' });
    expect(first.body.response.headers['retry-after']).toBe('5');
    expect(first.body.request.body).toBe(x.request.body);
  });

  it('answers 404 for unknown and foreign ids, 403 for producers, and lets the operator read', async () => {
    const paths = [
      `/v1/endpoints/${endpoint.id}/deliveries`,
      `/v1/deliveries/${deliveryId}`,
      `/v1/deliveries/${deliveryId}/attempts`,
      `/v1/attempts/${attemptIds[0]}`,
    ];
    for (const url of paths) {
      const foreign = await t.request({ method: 'GET', url, token: other.key });
      expect(foreign.status, url).toBe(404);
      expect(foreign.body.error.code).toBe('not_found');
      const producer = await t.request({ method: 'GET', url, token: producerKey });
      expect(producer.status, url).toBe(403);
      const operator = await t.request({ method: 'GET', url });
      expect(operator.status, url).toBe(200);
    }
    for (const url of [
      '/v1/endpoints/ep_00000000000000000000000000/deliveries',
      '/v1/deliveries/dlv_00000000000000000000000000',
      '/v1/deliveries/dlv_00000000000000000000000000/attempts',
      '/v1/attempts/att_00000000000000000000000000',
      '/v1/attempts/not-an-id',
    ]) {
      const res = await t.request({ method: 'GET', url, token: tenant.key });
      expect(res.status, url).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
  });
});
