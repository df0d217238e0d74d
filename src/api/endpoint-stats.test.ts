/**
 * GET /v1/endpoints/:id/stats through the HTTP API, on both stores: windows and their buckets, the answer's shape
 * (checked against the OpenAPI document by the test app), tenant scoping and validation. Deliveries are made with
 * the store's own fan-out, lease and completion; the sums themselves are the store conformance suite's
 * (operations/endpoint-series.ts) and the folding is domain/endpoint-series.test.ts's.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { ADMIN_TOKEN, createTestApp, STORE_KINDS, type TestApp } from '../../test/support/test-hookrail.ts';
import { newId } from '../domain/ids.ts';
import type { AttemptCompletion, LeasedDelivery } from '../ports/delivery-store.ts';

/** 10:02 on 2026-01-01 (UTC): the deliveries are made and attempted in the 5-minute bucket starting at 10:00. */
const MADE = Date.UTC(2026, 0, 1, 10, 2);

describe.each(STORE_KINDS)('endpoint stats API on %s', (kind) => {
  let t: TestApp;
  const clock = new FakeClock(MADE);
  let tenant: { id: string; key: string };
  let otherKey: string;
  let endpointId: string;

  const stats = (query = '', token: string | null = tenant.key, id = endpointId) =>
    t.request({ method: 'GET', url: `/v1/endpoints/${id}/stats${query}`, token });

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
    for (let i = 0; i < 3; i++) {
      const ev = await t.request({
        method: 'POST',
        url: '/v1/events',
        token: producerKey,
        body: { tenant_id: tenant.id, type: 'order.created', data: { i } },
      });
      expect(ev.status).toBe(202);
    }
    const ids = {
      delivery: () => newId('delivery', clock.now(), randomBytes(10)),
      webhookId: () => newId('message', clock.now(), randomBytes(10)),
    };
    await t.store.fanoutRun({ now: clock.now(), limit: 1_000, ids });
    clock.advance(1_000);
    const leased = await t.store.deliveryLease({
      owner: 'w1',
      now: clock.now(),
      limit: 10,
      perEndpoint: 10,
      leaseMs: 60_000,
    });
    expect(leased).toHaveLength(3);
    // One delivered, one dead letter (a permanent failure), one still in flight.
    const completion = (
      l: LeasedDelivery,
      next: AttemptCompletion['next'],
      t: { status: number; queueMs: number; platformMs: number; consumerMs: number },
    ): AttemptCompletion => ({
      leaseOwner: 'w1',
      next,
      attempt: {
        id: newId('attempt', clock.now(), randomBytes(10)),
        deliveryId: l.delivery.id,
        endpointId,
        tenantId: tenant.id,
        eventId: l.delivery.eventId,
        attemptNo: 1,
        url: l.endpoint.url,
        dueAt: clock.now() - t.queueMs,
        startedAt: clock.now(),
        finishedAt: clock.now() + t.platformMs + t.consumerMs,
        outcome: next.status === 'delivered' ? 'delivered' : 'permanent',
        statusCode: t.status,
        errorClass: next.status === 'delivered' ? null : 'http_status',
        errorMessage: null,
        request: { hops: [{ url: l.endpoint.url, headers: {}, status: t.status }] },
        responseHeaders: null,
        responseBody: null,
        queueMs: t.queueMs,
        platformMs: t.platformMs,
        consumerMs: t.consumerMs,
      },
    });
    await t.store.deliveryComplete({
      now: clock.now() + 100,
      completions: [
        completion(
          leased[0]!,
          { status: 'delivered' },
          { status: 204, queueMs: 10, platformMs: 2, consumerMs: 40 },
        ),
        completion(
          leased[1]!,
          { status: 'dead', reason: 'permanent_failure' },
          { status: 410, queueMs: 21, platformMs: 4, consumerMs: 30 },
        ),
      ],
    });
    clock.set(Date.UTC(2026, 0, 1, 10, 7, 30));
  });

  afterAll(async () => {
    await t?.close();
  });

  it('1h: twelve 5-minute buckets aligned on the epoch, the last holding now', async () => {
    const r = await stats('?window=1h');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      endpoint_id: endpointId,
      window: '1h',
      bucket_seconds: 300,
      from: '2026-01-01T09:10:00.000Z',
      to: '2026-01-01T10:07:30.000Z',
    });
    const buckets = r.body.buckets as Array<Record<string, unknown>>;
    expect(buckets).toHaveLength(12);
    expect(buckets.map((b) => b.start)).toEqual(
      Array.from({ length: 12 }, (_, k) => new Date(Date.UTC(2026, 0, 1, 9, 10 + 5 * k)).toISOString()),
    );
    expect(buckets[9]).toEqual({
      start: '2026-01-01T09:55:00.000Z',
      attempts: 0,
      delivered: 0,
      success_rate_percent: null,
      latency_ms: { queue: null, platform: null, consumer: null },
      dead_lettered: 0,
      backlog: 0,
    });
    expect(buckets[10]).toEqual({
      start: '2026-01-01T10:00:00.000Z',
      attempts: 2,
      delivered: 1,
      success_rate_percent: 50,
      latency_ms: { queue: 15.5, platform: 3, consumer: 35 },
      dead_lettered: 1,
      backlog: 1,
    });
    expect(buckets[11]).toMatchObject({ start: '2026-01-01T10:05:00.000Z', attempts: 0, backlog: 1 });
  });

  it('24h by default (24 hourly buckets) and 7d (28 of 6 hours); the operator reads every tenant', async () => {
    const day = await stats();
    expect(day.status).toBe(200);
    expect(day.body).toMatchObject({ window: '24h', bucket_seconds: 3600, from: '2025-12-31T11:00:00.000Z' });
    expect(day.body.buckets).toHaveLength(24);
    expect(day.body.buckets.at(-1)).toMatchObject({
      start: '2026-01-01T10:00:00.000Z',
      attempts: 2,
      delivered: 1,
      dead_lettered: 1,
      backlog: 1,
    });
    expect(day.body.buckets.at(-2)).toMatchObject({ attempts: 0, backlog: 0 });

    const week = await stats('?window=7d', ADMIN_TOKEN);
    expect(week.status).toBe(200);
    expect(week.body).toMatchObject({
      window: '7d',
      bucket_seconds: 21600,
      from: '2025-12-25T12:00:00.000Z',
    });
    expect(week.body.buckets).toHaveLength(28);
    expect(week.body.buckets.at(-1)).toMatchObject({
      start: '2026-01-01T06:00:00.000Z',
      attempts: 2,
      backlog: 1,
    });
  });

  it("refuses other tenants' and unknown endpoints, bad windows and unknown parameters", async () => {
    const other = await stats('?window=1h', otherKey);
    expect(other.status).toBe(404);
    expect(other.body.error.code).toBe('not_found');
    expect((await stats('', tenant.key, newId('endpoint', clock.now(), randomBytes(10)))).status).toBe(404);
    for (const query of ['?window=2d', '?window=1H', '?window=', '?window=24h&window=1h', '?since=1h']) {
      const r = await stats(query);
      expect(r.status, query).toBe(400);
      expect(r.body.error.code, query).toBe('validation_failed');
    }
    expect((await stats('', null)).status).toBe(401);
  });
});
