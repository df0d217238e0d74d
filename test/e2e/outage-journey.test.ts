/**
 * The endpoint-outage journey (seeds/001) as a test, on both stores, with a fake clock the test advances: the
 * network, the database, the delivery loops and the SMTP server are real; only time is simulated.
 *
 * 02:00 the receiver stops accepting connections → retries accrue with backoff → the circuit opens at 20
 * consecutive failures → probes every 5 minutes → the first dead letter sends exactly one e-mail, after the health
 * state changed → the receiver comes back → the first probe succeeds → concurrency ramps 10 % → 100 % over
 * 5 minutes → the dead letters are replayed → the receiver's ledger holds every event exactly once after dedupe
 * on webhook-id.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../support/fake-clock.ts';
import { type ReceivedRequest, Receiver } from '../support/receiver.ts';
import { SmtpSink } from '../support/smtp-sink.ts';
import { createTestApp, STORE_KINDS, type TestApp } from '../support/test-hookrail.ts';
import { waitFor } from '../support/wait.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;

interface Journey {
  t: TestApp;
  clock: FakeClock;
  smtp: SmtpSink;
  receiver: Receiver;
  ledger: ReceivedRequest[];
  tenantKey: string;
  tenantId: string;
}

async function setup(kind: 'sqlite' | 'postgres'): Promise<Journey> {
  const clock = new FakeClock(Date.UTC(2026, 10, 29, 1, 0));
  const smtp = await SmtpSink.start();
  const receiver = await Receiver.start();
  const t = await createTestApp(kind, {
    clock,
    roles: ['intake', 'control', 'fanout', 'delivery', 'replay', 'maintenance'],
    env: {
      HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8',
      HOOKRAIL_POLL_MS: '5',
      HOOKRAIL_SECRET_CACHE_MS: '0',
      HOOKRAIL_MAINTENANCE_MS: '3600000', // the test runs maintenance passes itself
      HOOKRAIL_SMTP_URL: smtp.url,
      HOOKRAIL_MAIL_FROM: 'alerts@hookrail.test',
    },
  });
  const tenant = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } })).body;
  const channel = await t.request({
    method: 'PUT',
    url: '/v1/notification-channel',
    token: tenant.tenant_key,
    body: { email: 'oncall@acme.test' },
  });
  expect(channel.status).toBe(200);
  return { t, clock, smtp, receiver, ledger: [], tenantKey: tenant.tenant_key, tenantId: tenant.id };
}

const journeys: Journey[] = [];
afterEach(async () => {
  for (const j of journeys.splice(0)) {
    await j.t.close();
    await j.receiver.close().catch(() => {});
    await j.smtp.close();
  }
});

// Each journey is hundreds of settle steps (11–20 s on an idle machine): more than the default 30 s when loaded.
describe.each(STORE_KINDS)('outage journey on %s', { timeout: 120_000 }, (kind) => {
  const api = (j: Journey) => ({
    endpoint: async (path: string) => {
      const res = await j.t.request({
        method: 'POST',
        url: '/v1/endpoints',
        token: j.tenantKey,
        body: { url: j.receiver.url(path), event_types: ['order.*'], max_concurrency: 10 },
      });
      expect(res.status).toBe(201);
      return res.body.id as string;
    },
    send: async (n: number) => {
      const res = await j.t.request({
        method: 'POST',
        url: '/v1/events',
        body: { tenant_id: j.tenantId, type: 'order.created', data: { n } },
      });
      expect(res.status).toBe(202);
      return res.body.id as string;
    },
    health: async (id: string) =>
      (await j.t.request({ method: 'GET', url: `/v1/endpoints/${id}/health`, token: j.tenantKey })).body,
    deliveries: async (id: string) =>
      (
        await j.t.request({
          method: 'GET',
          url: `/v1/endpoints/${id}/deliveries?limit=500`,
          token: j.tenantKey,
        })
      ).body.data as Array<{ id: string; status: string; attempts: number; event_id: string }>,
    attempts: async (deliveryId: string) =>
      (
        await j.t.request({ method: 'GET', url: `/v1/deliveries/${deliveryId}/attempts`, token: j.tenantKey })
      ).body.data.map(
        (x: { timings: { started_at: string }; error_class: string | null; outcome: string }) => ({
          started_at: x.timings.started_at,
          error_class: x.error_class,
          outcome: x.outcome,
        }),
      ) as Array<{ started_at: string; error_class: string | null; outcome: string }>,
  });

  /** Lets the background loops catch up with the fake clock: waits until nothing is due and nothing is in flight. */
  async function settle(j: Journey) {
    await waitFor(
      async () => {
        const w = j.t.hookrail.workers;
        if ((w.delivery?.inFlight ?? 0) > 0) return false;
        // The circuit-open pass (deliveries of a blocked endpoint recorded as circuit_open) has run at this time.
        if ((w.delivery?.circuitOpenPassStartedAt ?? j.clock.now()) < j.clock.now()) return false;
        if ((await j.t.store.fanoutPendingCount()) > 0) return false;
        const due = await j.t.store.deliveryLease({
          owner: 'probe-check',
          now: 0,
          limit: 1,
          perEndpoint: 1,
          leaseMs: 1,
        });
        return due.length === 0;
      },
      15_000,
      'loops to settle',
    );
    await new Promise((r) => setTimeout(r, 30));
  }

  /** Moves the clock in steps, letting the loops catch up after each; `tick` runs after every step. */
  async function advance(j: Journey, ms: number, step = MIN, tick?: (elapsed: number) => Promise<void>) {
    for (let done = step; done <= ms; done += step) {
      j.clock.advance(step);
      await settle(j);
      await tick?.(done);
    }
  }

  it('retries, opens the circuit, probes, notifies once, ramps, and catches up with nothing lost', async () => {
    const j = await setup(kind);
    journeys.push(j);
    const a = api(j);
    const endpointId = await a.endpoint('/orders');
    const port = j.receiver.port;

    // Steady stream, endpoint healthy.
    const events: string[] = [];
    for (let i = 0; i < 5; i++) events.push(await a.send(i));
    await waitFor(() => j.receiver.received('/orders').length === 5);
    await settle(j);
    const healthy = await a.health(endpointId);
    expect(healthy.state).toBe('healthy');
    // The health API splits an attempt's time three ways (ADR-13), from the attempts of the last hour.
    for (const part of ['queue', 'platform', 'consumer']) {
      expect(healthy.latency_ms[part].p50, part).toEqual(expect.any(Number));
      expect(healthy.latency_ms[part].p99).toBeGreaterThanOrEqual(healthy.latency_ms[part].p50);
    }

    // 02:00 — the receiver goes away: connections are refused.
    j.ledger.push(...j.receiver.requests);
    await j.receiver.close();
    j.clock.set(Date.UTC(2026, 10, 29, 2, 0));
    for (let i = 5; i < 25; i++) {
      events.push(await a.send(i));
      await settle(j);
    }
    // 20 first attempts refused → the circuit is open.
    const opened = await a.health(endpointId);
    expect(opened.circuit.state).toBe('open');
    expect(opened.circuit.consecutive_failures).toBeGreaterThanOrEqual(20);
    expect(opened.state).toBe('failing');

    // The stream goes on (an event every 10 minutes). Retries keep accruing with backoff while open — recorded as
    // circuit_open, not sent — and one probe goes out per 5 minutes.
    const stream = async (elapsed: number) => {
      if (elapsed % (10 * MIN) === 0) events.push(await a.send(events.length));
    };
    await advance(j, 3 * HOUR, MIN, stream);
    const all = await a.deliveries(endpointId);
    const attempts = (await Promise.all(all.map((d) => a.attempts(d.id)))).flat();
    const openedAt = Date.parse(opened.circuit.opened_at);
    const sentWhileOpen = attempts
      .filter((x) => Date.parse(x.started_at) > openedAt && x.error_class !== 'circuit_open')
      .map((x) => Date.parse(x.started_at))
      .sort((p, q) => p - q);
    expect(sentWhileOpen.length).toBeGreaterThan(10);
    for (let i = 1; i < sentWhileOpen.length; i++) {
      expect(sentWhileOpen[i]! - sentWhileOpen[i - 1]!).toBeGreaterThanOrEqual(5 * MIN);
    }
    expect(attempts.some((x) => x.error_class === 'circuit_open')).toBe(true);

    // Dead letters happened within hours; exactly one e-mail for them, and health had already changed.
    const dead = (await a.deliveries(endpointId)).filter((d) => d.status === 'dead');
    expect(dead.length).toBeGreaterThan(0);
    const healthAtNotice = await a.health(endpointId);
    expect(healthAtNotice.state).toBe('failing');
    await j.t.hookrail.workers.maintenance!.runOnce();
    const mails = j.smtp.messages.filter((m) => m.to.includes('oncall@acme.test'));
    expect(mails).toHaveLength(1);
    expect(mails[0]!.raw).toContain('are failing');
    const log = (await j.t.request({ method: 'GET', url: '/v1/notifications', token: j.tenantKey })).body
      .data;
    expect(log.filter((n: { kind: string }) => n.kind === 'dead_letter')).toHaveLength(1);
    await j.t.hookrail.workers.maintenance!.runOnce();
    expect(j.smtp.messages).toHaveLength(1);

    // Recovery: the receiver is back on its port; the next probe succeeds and the circuit closes.
    j.receiver = await Receiver.start(port);
    let recovered: any = null;
    for (let minute = 1; minute <= 6 && !recovered; minute++) {
      await advance(j, MIN, MIN, stream);
      const h = await a.health(endpointId);
      if (h.circuit.state === 'closed') recovered = h;
    }
    expect(recovered, 'the first probe after recovery closes the circuit').not.toBeNull();
    // Ramp: the cap starts at 10 % of max_concurrency (1 of 10) and reaches 100 % five minutes after the close.
    expect(recovered.concurrency.effective).toBeLessThanOrEqual(2);
    const rampEnd = Date.parse(recovered.concurrency.ramp_ends_at);
    j.clock.set(rampEnd - 150_000);
    const midway = (await a.health(endpointId)).concurrency.effective;
    expect(midway).toBeGreaterThan(recovered.concurrency.effective);
    expect(midway).toBeLessThan(10);
    j.clock.set(rampEnd);
    await settle(j);
    expect((await a.health(endpointId)).concurrency.effective).toBe(10);

    // Catch-up: replay every dead letter in one request (same webhook-ids, rate-capped), then let everything drain.
    const deadLetters = (await a.deliveries(endpointId)).filter((x) => x.status === 'dead');
    expect(deadLetters.length).toBeGreaterThan(0);
    const replay = (body: object) =>
      j.t.request({ method: 'POST', url: `/v1/endpoints/${endpointId}/replay`, token: j.tenantKey, body });
    let r = await replay({});
    if (deadLetters.length > 100) {
      expect(r.status).toBe(409);
      expect(r.body.error).toMatchObject({
        code: 'confirmation_required',
        details: { count: deadLetters.length },
      });
      r = await replay({ confirm: true });
    }
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({
      count: deadLetters.length,
      more: false,
      status: ['dead'],
    });
    // Asked again, there is nothing left to replay: each dead letter is replayed once.
    expect((await replay({})).body).toMatchObject({ count: 0, more: false });
    await advance(j, 3 * HOUR, 10 * MIN);
    j.ledger.push(...j.receiver.requests);

    const byWebhookId = new Map<string, string>();
    for (const r of j.ledger) byWebhookId.set(r.headers['webhook-id']!, JSON.parse(r.body.toString()).id);
    const delivered = [...byWebhookId.values()].sort();
    expect(delivered).toEqual([...events].sort());
  });
  it('auto-disables after 72 h down, keeps the backlog, and honours each re-enable choice', async () => {
    const j = await setup(kind);
    journeys.push(j);
    const a = api(j);
    const ids = {
      deliver: await a.endpoint('/deliver'),
      skip: await a.endpoint('/skip'),
      resume: await a.endpoint('/resume'),
    };
    const port = j.receiver.port;
    await j.receiver.close();
    j.clock.set(Date.UTC(2026, 10, 29, 2, 0));
    const start = j.clock.now();

    const events: Array<{ id: string; at: number }> = [];
    const hourly = async (elapsed: number) => {
      if (elapsed % HOUR === 0) events.push({ id: await a.send(events.length), at: j.clock.now() });
    };
    await hourly(0);
    await advance(j, 71 * HOUR, 15 * MIN, hourly);
    await j.t.hookrail.workers.maintenance!.runOnce();
    for (const id of Object.values(ids)) {
      const e = (await j.t.request({ method: 'GET', url: `/v1/endpoints/${id}`, token: j.tenantKey })).body;
      expect(e.status, 'not disabled before 72 h').toBe('enabled');
    }
    await advance(j, 2 * HOUR, 15 * MIN, hourly);
    await j.t.hookrail.workers.maintenance!.runOnce();

    for (const id of Object.values(ids)) {
      const e = (await j.t.request({ method: 'GET', url: `/v1/endpoints/${id}`, token: j.tenantKey })).body;
      expect(e.status).toBe('disabled');
      expect(e.disabled_reason).toBe('auto_disabled');
      expect((await a.health(id)).state).toBe('disabled');
      const backlog = (
        await j.t.request({ method: 'GET', url: `/v1/endpoints/${id}/backlog`, token: j.tenantKey })
      ).body;
      // Everything is still there: pending deliveries plus the dead letters of the outage — one per event.
      expect(backlog.count).toBe(events.length);
      expect(backlog.estimated_drain_seconds).toBeGreaterThan(0);
    }
    const notices = (
      await j.t.request({ method: 'GET', url: '/v1/notifications?limit=500', token: j.tenantKey })
    ).body.data as Array<{ kind: string; endpoint_id: string; created_at: string }>;
    for (const id of Object.values(ids)) {
      expect(notices.filter((n) => n.endpoint_id === id && n.kind === 'auto_disabled')).toHaveLength(1);
      // Loud but not noisy: failure notices for one endpoint at least 24 h apart — a handful over three days.
      const failures = notices
        .filter((n) => n.endpoint_id === id && (n.kind === 'dead_letter' || n.kind === 'digest'))
        .map((n) => Date.parse(n.created_at))
        .sort((x, y) => x - y);
      expect(failures.length).toBeGreaterThanOrEqual(1);
      expect(failures.length).toBeLessThanOrEqual(4);
      for (let i = 1; i < failures.length; i++)
        expect(failures[i]! - failures[i - 1]!).toBeGreaterThanOrEqual(24 * HOUR);
    }
    expect(j.smtp.messages.some((m) => m.raw.includes('was disabled after 72 hours'))).toBe(true);
    const auditLog = (await j.t.request({ method: 'GET', url: '/v1/audit-events', token: j.tenantKey })).body
      .data;
    expect(auditLog.filter((x: { action: string }) => x.action === 'endpoint.auto_disabled')).toHaveLength(3);

    // Nothing is attempted while disabled.
    const before = (await Promise.all(Object.values(ids).map((id) => a.deliveries(id)))).flat();
    await advance(j, HOUR, 15 * MIN);
    const after = (await Promise.all(Object.values(ids).map((id) => a.deliveries(id)))).flat();
    expect(after.reduce((n, d) => n + d.attempts, 0)).toBe(before.reduce((n, d) => n + d.attempts, 0));

    // The receiver is back; each endpoint is re-enabled with a different choice.
    j.receiver = await Receiver.start(port);
    const resumeFrom = start + 48 * HOUR;
    const enable = (id: string, body: object) =>
      j.t.request({ method: 'POST', url: `/v1/endpoints/${id}/enable`, token: j.tenantKey, body });
    expect((await enable(ids.deliver, {})).status).toBe(400);
    const delivered = await enable(ids.deliver, { backlog: 'deliver' });
    expect(delivered.status).toBe(200);
    expect(delivered.body.requeued).toBe(events.length);
    const skipped = await enable(ids.skip, { backlog: 'skip' });
    expect(skipped.body.requeued).toBe(0);
    const resumed = await enable(ids.resume, {
      backlog: 'resume_from',
      resume_from: new Date(resumeFrom).toISOString(),
    });
    expect(resumed.status).toBe(200);
    expect((await enable(ids.resume, { backlog: 'deliver' })).status).toBe(409);

    await advance(j, 2 * HOUR, 5 * MIN);
    const got = (path: string) =>
      new Set(j.receiver.received(path).map((r) => JSON.parse(r.body.toString()).id as string));
    expect(got('/deliver')).toEqual(new Set(events.map((e) => e.id)));
    expect(got('/skip').size).toBe(0);
    expect(got('/resume')).toEqual(new Set(events.filter((e) => e.at >= resumeFrom).map((e) => e.id)));
    const skippedRecords = (await a.deliveries(ids.skip)).filter((d) => d.status === 'skipped');
    expect(skippedRecords.length).toBeGreaterThan(0);
  });
});
