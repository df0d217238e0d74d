/**
 * The `recovered` and `disabled` notices end to end, on both stores: a real receiver rejects ten deliveries in a
 * row (the first rejection is noticed at once, the endpoint becomes `failing`), then takes one — the recovery is
 * noticed — and the tenant disables the endpoint twice; the maintenance role mails the outbox through a real SMTP
 * server to the tenant's notification address. Only time is simulated.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../support/fake-clock.ts';
import { Receiver } from '../support/receiver.ts';
import { SmtpSink } from '../support/smtp-sink.ts';
import { createTestApp, STORE_KINDS, type TestApp } from '../support/test-hookrail.ts';
import { waitFor } from '../support/wait.ts';

const MIN = 60_000;

const open: Array<{ t: TestApp; smtp: SmtpSink; receiver: Receiver }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.t.close();
    await o.receiver.close().catch(() => {});
    await o.smtp.close();
  }
});

describe.each(STORE_KINDS)('recovery and disable notices on %s', { timeout: 60_000 }, (kind) => {
  it('mails "recovered" once after a noticed failing streak, and "disabled" once for two disables', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 29, 2, 0));
    const smtp = await SmtpSink.start();
    const receiver = await Receiver.start();
    const t = await createTestApp(kind, {
      clock,
      roles: ['intake', 'control', 'fanout', 'delivery', 'maintenance'],
      env: {
        HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8',
        HOOKRAIL_POLL_MS: '5',
        HOOKRAIL_SECRET_CACHE_MS: '0',
        HOOKRAIL_MAINTENANCE_MS: '3600000', // the test runs maintenance passes itself
        HOOKRAIL_SMTP_URL: smtp.url,
        HOOKRAIL_MAIL_FROM: 'alerts@hookrail.test',
      },
    });
    open.push({ t, smtp, receiver });
    const tenant = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } })).body;
    const key = tenant.tenant_key as string;
    const channel = await t.request({
      method: 'PUT',
      url: '/v1/notification-channel',
      token: key,
      body: { email: 'oncall@acme.test' },
    });
    expect(channel.status).toBe(200);
    const created = await t.request({
      method: 'POST',
      url: '/v1/endpoints',
      token: key,
      body: { url: receiver.url('/orders'), event_types: ['order.*'], max_concurrency: 10 },
    });
    expect(created.status).toBe(201);
    const endpointId = created.body.id as string;
    const send = async (n: number) => {
      const res = await t.request({
        method: 'POST',
        url: '/v1/events',
        body: { tenant_id: tenant.id, type: 'order.created', data: { n } },
      });
      expect(res.status).toBe(202);
    };
    const deliveries = async () =>
      (await t.request({ method: 'GET', url: `/v1/endpoints/${endpointId}/deliveries`, token: key })).body
        .data as Array<{ status: string }>;
    const notices = async () =>
      (await t.request({ method: 'GET', url: '/v1/notifications', token: key })).body.data as Array<{
        kind: string;
        endpoint_id: string;
      }>;
    const health = async () =>
      (await t.request({ method: 'GET', url: `/v1/endpoints/${endpointId}/health`, token: key })).body;
    // Headers unfolded: a long subject is continued on the next line.
    const mailed = () =>
      smtp.messages
        .filter((m) => m.to.includes('oncall@acme.test'))
        .map((m) => ({ ...m, raw: m.raw.replace(/\r?\n[ \t]+/g, ' ') }));

    // Ten rejections in a row: dead-lettered at once, the first one noticed, the endpoint failing.
    receiver.answer(() => ({ status: 410 }));
    for (let i = 0; i < 10; i++) await send(i);
    await waitFor(
      async () => (await deliveries()).filter((d) => d.status === 'dead').length === 10,
      15_000,
      'ten dead letters',
    );
    expect((await health()).state).toBe('failing');
    expect((await notices()).map((n) => n.kind)).toEqual(['permanent_failure']);

    // It takes a delivery again: the streak ends and the recovery is noticed, once.
    clock.advance(MIN);
    receiver.answer(() => ({ status: 204 }));
    await send(10);
    await send(11);
    await waitFor(
      async () => (await deliveries()).filter((d) => d.status === 'delivered').length === 2,
      15_000,
      'two deliveries',
    );
    expect((await health()).state).not.toBe('failing');
    expect((await notices()).map((n) => n.kind)).toEqual(['recovered', 'permanent_failure']);

    await t.hookrail.workers.maintenance!.runOnce();
    expect(mailed()).toHaveLength(2);
    const recovered = mailed().find((m) =>
      m.raw.includes(`Subject: Hookrail: deliveries to ${receiver.url('/orders')} are getting through again`),
    );
    expect(recovered, 'the recovered notice is mailed').toBeDefined();
    expect(recovered!.raw).toContain(endpointId);

    // Disabled by the tenant: one notice, however often it is asked.
    clock.advance(MIN);
    for (let i = 0; i < 2; i++) {
      const res = await t.request({ method: 'POST', url: `/v1/endpoints/${endpointId}/disable`, token: key });
      expect(res.status).toBe(200);
    }
    expect((await notices()).map((n) => n.kind)).toEqual(['disabled', 'recovered', 'permanent_failure']);
    await t.hookrail.workers.maintenance!.runOnce();
    expect(mailed()).toHaveLength(3);
    expect(
      mailed().filter((m) => m.raw.includes(`Subject: Hookrail: ${receiver.url('/orders')} was disabled`)),
    ).toHaveLength(1);
    await t.hookrail.workers.maintenance!.runOnce();
    expect(smtp.messages).toHaveLength(3);
  });
});
