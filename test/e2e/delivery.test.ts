/**
 * The delivery plane end to end, in-process, against real local receivers, on SQLite and PostgreSQL: intake →
 * fan-out → delivery → attempt log, with signatures checked by the Standard Webhooks libraries. A fake clock
 * decides when retries are due; the network, the database and the loops are real.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { base32Decode, totpCode } from '../../src/domain/totp.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { Receiver } from '../support/receiver.ts';
import { createTestApp, STORE_KINDS, type TestApp } from '../support/test-hookrail.ts';
import { verifyWithLibraries } from '../support/verify.ts';
import { waitFor } from '../support/wait.ts';

const HOUR = 3_600_000;

describe.each(STORE_KINDS)('delivery on %s', (kind) => {
  let t: TestApp;
  let receiver: Receiver;
  const clock = new FakeClock(Date.now());
  let tenant: { id: string; tenant_key: string; step_up: { totp_seed: string } };

  beforeAll(async () => {
    receiver = await Receiver.start();
    t = await createTestApp(kind, {
      clock,
      roles: ['intake', 'control', 'fanout', 'delivery', 'replay', 'maintenance'],
      env: { HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8', HOOKRAIL_POLL_MS: '10', HOOKRAIL_SECRET_CACHE_MS: '0' },
    });
    tenant = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } })).body;
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });
  afterEach(() => receiver.answer(() => ({ status: 204 })));

  const endpoint = async (path: string, eventTypes: string[], extra: Record<string, unknown> = {}) => {
    const res = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: tenant.tenant_key,
      body: { url: receiver.url(path), event_types: eventTypes, ...extra },
    });
    expect(res.status).toBe(201);
    return { id: res.body.id as string, secret: res.body.secret.secret as string };
  };
  const send = async (type: string, data: object) => {
    const res = await t.request({
      method: 'POST',
      url: '/v1/events',
      body: { tenant_id: tenant.id, type, data },
    });
    expect(res.status).toBe(202);
    return res.body.id as string;
  };
  const deliveries = async (endpointId: string) =>
    (
      await t.request({
        method: 'GET',
        url: `/v1/endpoints/${endpointId}/deliveries?limit=500`,
        token: tenant.tenant_key,
      })
    ).body.data as Array<{ id: string; status: string; attempts: number; event_id: string }>;

  it('delivers every accepted event to every subscribed endpoint, signed and byte-exact', async () => {
    const orders = await endpoint('/orders', ['order.*']);
    const all = await endpoint('/all', ['*']);
    const invoices = await endpoint('/invoices', ['invoice.paid']);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await send('order.created', { n: i, note: 'Zoë € 🎉' }));

    await waitFor(() => receiver.received('/orders').length >= 20 && receiver.received('/all').length >= 20);
    expect(receiver.received('/invoices')).toHaveLength(0);
    for (const [path, ep] of [
      ['/orders', orders],
      ['/all', all],
    ] as const) {
      const got = receiver.received(path);
      expect(new Set(got.map((r) => JSON.parse(r.body.toString()).id))).toEqual(new Set(ids));
      expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(20);
      for (const r of got) {
        const payload = verifyWithLibraries(ep.secret, r) as {
          id: string;
          type: string;
          data: { note: string };
        };
        expect(payload.type).toBe('order.created');
        expect(payload.data.note).toBe('Zoë € 🎉');
        expect(r.headers['content-type']).toBe('application/json');
        expect(r.headers['user-agent']).toMatch(/^Hookrail\//);
        expect(r.headers['webhook-timestamp']).toMatch(/^\d+$/);
        const event = await t.request({
          method: 'GET',
          url: `/v1/events/${payload.id}`,
          token: tenant.tenant_key,
        });
        expect(r.body.toString()).toBe(
          JSON.stringify({
            id: event.body.id,
            type: event.body.type,
            timestamp: event.body.created_at,
            data: event.body.data,
          }),
        );
      }
    }
    await waitFor(async () => (await deliveries(orders.id)).every((d) => d.status === 'delivered'));
    expect(await deliveries(invoices.id)).toHaveLength(0);
  });

  it('delivers data as the producer sent it, byte for byte, and shows those bytes in the inspector', async () => {
    const ep = await endpoint('/exact', ['exact.test']);
    // What a parse/serialise round trip would change: digits beyond 2^53, `1.10`, `-0`, escapes, 1e400 (Infinity
    // to JSON.parse, null to JSON.stringify), key order, duplicate keys, whitespace.
    const data =
      '{"n":12345678901234567890,"f":1.10,"z":-0,"s":"\\u00e9\\"}","nested":[{"a":1e400}],"2":1,"d":1,"d":2 }';
    const res = await t.request({
      method: 'POST',
      url: '/v1/events',
      rawBody: `{"tenant_id":"${tenant.id}", "data": ${data}, "type":"exact.test"}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(202);
    const [r] = await waitFor(() => {
      const got = receiver.received('/exact');
      return got.length === 1 ? got : null;
    });
    verifyWithLibraries(ep.secret, r!);
    const body = r!.body.toString('utf8');
    expect(body).toBe(
      `{"id":"${res.body.id}","type":"exact.test","timestamp":"${res.body.created_at}","data":${data}}`,
    );
    const [d] = await waitFor(async () => {
      const ds = await deliveries(ep.id);
      return ds[0]?.status === 'delivered' ? ds : null;
    });
    const attempts = await t.request({
      method: 'GET',
      url: `/v1/deliveries/${d!.id}/attempts`,
      token: tenant.tenant_key,
    });
    const inspected = await t.request({
      method: 'GET',
      url: `/v1/attempts/${attempts.body.data[0].id}`,
      token: tenant.tenant_key,
    });
    expect(inspected.body.request.body).toBe(body);
    expect(inspected.body.request.body_size).toBe(r!.body.length);
  });

  it('retries with the same webhook-id and body, honours Retry-After, and records every attempt', async () => {
    const ep = await endpoint('/flaky', ['flaky.test']);
    receiver.answer((_req, nth) =>
      nth === 1
        ? { status: 503, headers: { 'retry-after': '120' }, body: 'busy' }
        : nth === 2
          ? { reset: true }
          : { status: 200, body: 'ok' },
    );
    const eventId = await send('flaky.test', { x: 1 });
    await waitFor(() => receiver.received('/flaky').length === 1);
    const [first] = await waitFor(async () => {
      const ds = await deliveries(ep.id);
      return ds[0]?.attempts === 1 ? ds : null;
    });
    const detail = await t.request({
      method: 'GET',
      url: `/v1/deliveries/${first?.id}`,
      token: tenant.tenant_key,
    });
    expect(detail.body.status).toBe('pending');
    // Retry-After: 120 replaces the computed backoff.
    expect(Date.parse(detail.body.next_attempt_at) - clock.now()).toBeGreaterThan(110_000);
    expect(Date.parse(detail.body.next_attempt_at) - clock.now()).toBeLessThanOrEqual(120_000);

    clock.advance(121_000);
    await waitFor(async () => (await deliveries(ep.id))[0]?.attempts === 2, 10_000, 'second attempt');
    clock.advance(HOUR);
    await waitFor(() => receiver.received('/flaky').length === 3, 10_000, 'third attempt');
    await waitFor(async () => (await deliveries(ep.id))[0]?.status === 'delivered');

    const got = receiver.received('/flaky');
    expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(new Set(got.map((r) => r.body.toString())).size).toBe(1);
    for (const r of got) verifyWithLibraries(ep.secret, r);

    const attempts = (
      await t.request({
        method: 'GET',
        url: `/v1/deliveries/${first?.id}/attempts`,
        token: tenant.tenant_key,
      })
    ).body.data;
    expect(attempts.map((a: { outcome: string }) => a.outcome)).toEqual([
      'retryable',
      'retryable',
      'delivered',
    ]);
    expect(attempts[0].status_code).toBe(503);
    expect(attempts[1].error_class).toBe('reset');
    expect(attempts[2].status_code).toBe(200);
    // Each attempt names its event in the log (ADR-15: what ties it back should the delivery row be lost).
    const logged = await t.store.attemptList({ deliveryId: first!.id, tenantId: null });
    expect(logged.map((a) => a.eventId)).toEqual([eventId, eventId, eventId]);
  });

  it('reads at most 64 KiB of an answer and keeps its first 4 KiB: a huge body and an endless slow one', async () => {
    const ep = await endpoint('/big', ['big.test']);
    // One answer of 1 MiB at once; one that drips 1 KiB every 5 ms and never ends (cut once 64 KiB are in).
    receiver.answer((_req, nth) =>
      nth === 1
        ? { status: 200, body: Buffer.alloc(1024 * 1024, 'h') }
        : { drip: { bytes: 1024, everyMs: 5 }, status: 200 },
    );
    await send('big.test', { n: 1 });
    await waitFor(() => receiver.received('/big').length === 1);
    await send('big.test', { n: 2 });
    const ds = await waitFor(async () => {
      const all = await deliveries(ep.id);
      return all.length === 2 && all.every((d) => d.status === 'delivered') ? all : null;
    });
    const inspected = [];
    for (const d of ds) {
      const list = await t.request({
        method: 'GET',
        url: `/v1/deliveries/${d.id}/attempts`,
        token: tenant.tenant_key,
      });
      expect(list.body.data).toHaveLength(1);
      const a = await t.request({
        method: 'GET',
        url: `/v1/attempts/${list.body.data[0].id}`,
        token: tenant.tenant_key,
      });
      inspected.push(a.body);
    }
    const bodies = inspected.map((a) => Buffer.from(a.response.body_base64, 'base64'));
    expect(bodies.map((b) => b.length)).toEqual([4096, 4096]);
    expect(bodies.map((b) => String.fromCharCode(b[0]!)).sort()).toEqual(['a', 'h']);
    for (const a of inspected) expect(a).toMatchObject({ outcome: 'delivered', response: { status: 200 } });
    // (The time the endless one took is in the consumer's part of the split: src/app/deliver-attempt.test.ts, on a
    // real clock; this app runs on a fake one.)
    expect(receiver.received('/big')).toHaveLength(2);
  });

  it('sends a test event to one endpoint alone, signed and recorded like any delivery', async () => {
    const ep = await endpoint('/tested', ['order.*']);
    const bystander = await endpoint('/bystander', ['*']);
    const res = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/test`,
      token: tenant.tenant_key,
    });
    expect(res.status).toBe(202);
    expect(res.body.event).toMatchObject({ id: expect.stringMatching(/^evt_/), type: 'hookrail.test' });
    expect(res.body.delivery).toMatchObject({
      endpoint_id: ep.id,
      event_id: res.body.event.id,
      status: 'pending',
    });
    const [got] = await waitFor(() => {
      const r = receiver.received('/tested');
      return r.length === 1 ? r : null;
    });
    verifyWithLibraries(ep.secret, got!);
    expect(JSON.parse(got!.body.toString())).toMatchObject({
      id: res.body.event.id,
      type: 'hookrail.test',
      data: { message: 'A test event from Hookrail.', endpoint_id: ep.id },
    });
    expect(got!.headers['webhook-id']).toBe(res.body.delivery.webhook_id);
    await waitFor(async () => (await deliveries(ep.id))[0]?.status === 'delivered');
    // A type and data of the caller's choosing; the endpoint need not subscribe to it, and nobody else gets it.
    // Signed with the secrets the receiver trusts, so the tenant key alone is not enough: a fresh step-up is.
    const customTest = (headers: Record<string, string> = {}) =>
      t.request({
        method: 'POST',
        url: `/v1/endpoints/${ep.id}/test`,
        token: tenant.tenant_key,
        headers,
        body: { type: 'invoice.paid', data: { amount: 42 } },
      });
    const unconfirmed = await customTest();
    expect(unconfirmed.status).toBe(403);
    expect(unconfirmed.body.error.code).toBe('step_up_required');
    const stepUp = await t.request({
      method: 'POST',
      url: '/v1/auth/step-up',
      token: tenant.tenant_key,
      body: { totp: totpCode(base32Decode(tenant.step_up.totp_seed), clock.now()) },
    });
    expect(stepUp.status).toBe(200);
    const custom = await customTest({ 'x-step-up-token': stepUp.body.token });
    expect(custom.status).toBe(202);
    await waitFor(() => receiver.received('/tested').length === 2);
    expect(JSON.parse(receiver.received('/tested')[1]!.body.toString())).toMatchObject({
      type: 'invoice.paid',
      data: { amount: 42 },
    });
    // Later events still fan out as usual; the bystander (subscribed to everything) got only those.
    await send('order.created', { n: 1 });
    await waitFor(
      () => receiver.received('/bystander').length === 1 && receiver.received('/tested').length === 3,
    );
    expect(receiver.received('/bystander').map((r) => JSON.parse(r.body.toString()).type)).toEqual([
      'order.created',
    ]);
    // Bad input, another tenant's endpoint, a disabled endpoint: refused, nothing sent.
    const bad = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/test`,
      token: tenant.tenant_key,
      body: { type: 'not a type' },
    });
    expect(bad.status).toBe(400);
    const other = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Other' } })).body;
    const foreign = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/test`,
      token: other.tenant_key,
    });
    expect(foreign.status).toBe(404);
    await t.request({
      method: 'POST',
      url: `/v1/endpoints/${bystander.id}/disable`,
      token: tenant.tenant_key,
    });
    const disabled = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${bystander.id}/test`,
      token: tenant.tenant_key,
    });
    expect(disabled.status).toBe(409);
    expect(receiver.received('/bystander')).toHaveLength(1);
  });

  it('dead-letters a permanent failure at once, never retrying it', async () => {
    const ep = await endpoint('/gone', ['gone.test']);
    receiver.answer(() => ({ status: 410, body: 'gone' }));
    await send('gone.test', {});
    const [d] = await waitFor(async () => {
      const ds = await deliveries(ep.id);
      return ds[0]?.status === 'dead' ? ds : null;
    });
    const detail = await t.request({
      method: 'GET',
      url: `/v1/deliveries/${d?.id}`,
      token: tenant.tenant_key,
    });
    expect(detail.body.attempts).toBe(1);
    clock.advance(10 * HOUR);
    await new Promise((r) => setTimeout(r, 100));
    expect(receiver.received('/gone')).toHaveLength(1);
  });

  it('dead-letters after 12 failed attempts', async () => {
    const ep = await endpoint('/down', ['down.test']);
    receiver.answer(() => ({ status: 500 }));
    await send('down.test', {});
    for (let i = 1; i <= 12; i++) {
      // Advance only once the attempt is recorded, so its retry is scheduled from the pre-advance time.
      await waitFor(async () => (await deliveries(ep.id))[0]?.attempts === i, 10_000, `attempt ${i}`);
      clock.advance(6 * HOUR + 1);
    }
    const [d] = await waitFor(async () => {
      const ds = await deliveries(ep.id);
      return ds[0]?.status === 'dead' ? ds : null;
    });
    expect(d?.attempts).toBe(12);
    const detail = await t.request({
      method: 'GET',
      url: `/v1/deliveries/${d?.id}`,
      token: tenant.tenant_key,
    });
    expect(detail.body.status_reason ?? detail.body.reason).toBeTruthy();
    expect(receiver.received('/down')).toHaveLength(12);
  });

  it('signs with both secrets during a rotation overlap', async () => {
    const ep = await endpoint('/rotating', ['rotate.test']);
    const rotated = await t.request({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/secrets`,
      token: tenant.tenant_key,
      body: {},
    });
    expect(rotated.status).toBe(201);
    const newSecret = rotated.body.secret as string;
    await send('rotate.test', {});
    await waitFor(() => receiver.received('/rotating').length === 1);
    const [r] = receiver.received('/rotating');
    expect(r?.headers['webhook-signature']?.split(' ')).toHaveLength(2);
    verifyWithLibraries(ep.secret, r!);
    verifyWithLibraries(newSecret, r!);
  });

  it('sends nothing to a deleted endpoint or for an unsubscribed type once acknowledged', async () => {
    const ep = await endpoint('/leaving', ['leave.a', 'leave.b']);
    receiver.answer(() => ({ status: 500 }));
    await send('leave.a', {});
    await send('leave.b', {});
    await waitFor(() => receiver.received('/leaving').length === 2);
    const patch = await t.request({
      method: 'PATCH',
      url: `/v1/endpoints/${ep.id}`,
      token: tenant.tenant_key,
      body: { event_types: ['leave.b'] },
    });
    expect(patch.status).toBe(200);
    const cancelled = (await deliveries(ep.id)).filter((d) => d.status === 'cancelled');
    expect(cancelled).toHaveLength(1);
    const del = await t.request({
      method: 'DELETE',
      url: `/v1/endpoints/${ep.id}`,
      token: tenant.tenant_key,
    });
    expect(del.status).toBe(204);
    const before = receiver.received('/leaving').length;
    clock.advance(7 * HOUR);
    await send('leave.b', {});
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.received('/leaving').length).toBe(before);
  });
});
