/**
 * OpenTelemetry traces end to end: Hookrail in-process with an OTLP endpoint configured exports its spans, over
 * real HTTP, to a local collector (test/support/otlp-collector.ts); events go to a real receiver that answers 204
 * on one endpoint and 503 on the other; stopping Hookrail flushes the exporter. Then, without an endpoint, no
 * tracer exists. The SDK is real throughout: nothing of it is mocked.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GuardedDestinationChecker } from '../../src/adapters/http/destination-checker.ts';
import {
  SPAN_ATTEMPT,
  SPAN_FANOUT_PASS,
  SPAN_INTAKE_BATCH,
} from '../../src/adapters/tracing/otel-tracing.ts';
import { createTracing } from '../../src/bootstrap/create-tracing.ts';
import { startHookrail } from '../../src/bootstrap/start.ts';
import { VERSION } from '../../src/bootstrap/version.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { AttemptRecord } from '../../src/ports/delivery-store.ts';
import { FakeClock } from '../support/fake-clock.ts';
import { type CollectedSpan, OtlpCollector } from '../support/otlp-collector.ts';
import { Receiver } from '../support/receiver.ts';
import { ADMIN_TOKEN, createTestApp, STORE_KINDS, type TestApp } from '../support/test-hookrail.ts';
import { waitFor } from '../support/wait.ts';

const ALL_ROLES = ['intake', 'control', 'fanout', 'delivery', 'replay', 'maintenance'] as const;
const SPAN_KIND = { internal: 1, client: 3 };
const STATUS = { unset: 0, error: 2 };

describe.each(STORE_KINDS)('traces on %s', (kind) => {
  let collector: OtlpCollector;
  let receiver: Receiver;
  let t: TestApp;
  // The span times are the attempt log's, read from this clock: a fake one shows they are not the SDK's own.
  const clock = new FakeClock(Date.now() - 60_000);
  let spans: CollectedSpan[];
  let attempts: { ok: AttemptRecord; down: AttemptRecord };
  let ids: { tenant: string; ok: string; down: string; event: string; webhookIds: Record<string, string> };

  beforeAll(async () => {
    collector = await OtlpCollector.start();
    receiver = await Receiver.start();
    receiver.answer((req) => ({ status: req.path.startsWith('/down') ? 503 : 204 }));
    t = await createTestApp(kind, {
      clock,
      roles: [...ALL_ROLES],
      env: {
        HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8',
        HOOKRAIL_POLL_MS: '10',
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
        OTEL_SERVICE_NAME: 'hookrail-traces-test',
      },
    });
    expect(t.hookrail.tracing).not.toBeNull();
    const tenant = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } })).body;
    const endpoint = async (url: string) => {
      const res = await t.request({
        method: 'POST',
        url: '/v1/endpoints',
        token: tenant.tenant_key,
        body: { url, event_types: ['order.*'] },
      });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const ok = await endpoint(receiver.url('/ok?token=s3cret'));
    const down = await endpoint(receiver.url('/down'));
    const sent = await t.request({
      method: 'POST',
      url: '/v1/events',
      body: { tenant_id: tenant.id, type: 'order.created', data: { n: 1 } },
    });
    expect(sent.status).toBe(202);

    // Both attempts made and recorded (the 503 is retried only when the fake clock says so: never here).
    const recorded = async (endpointId: string) => {
      const list = await t.request({
        method: 'GET',
        url: `/v1/endpoints/${endpointId}/deliveries`,
        token: tenant.tenant_key,
      });
      const d = list.body.data[0];
      if (!d || d.attempts < 1) return null;
      return (await t.store.attemptList({ deliveryId: d.id, tenantId: null }))[0] ?? null;
    };
    attempts = {
      ok: await waitFor(() => recorded(ok), 10_000, 'the 204 attempt'),
      down: await waitFor(() => recorded(down), 10_000, 'the 503 attempt'),
    };
    const webhookIds: Record<string, string> = {};
    for (const r of receiver.received()) webhookIds[r.path] = r.headers['webhook-id'] as string;
    ids = { tenant: tenant.id, ok, down, event: sent.body.id, webhookIds };

    // Stopping flushes the batch processor: nothing is exported before (its delay is 5 s).
    await t.close();
    spans = collector.spans;
  });
  afterAll(async () => {
    await collector?.close();
    await receiver?.close();
  });

  const attemptSpan = (endpointId: string) => {
    const found = collector
      .named(SPAN_ATTEMPT)
      .filter((s) => s.attributes['hookrail.endpoint.id'] === endpointId);
    expect(found).toHaveLength(1);
    return found[0] as CollectedSpan;
  };

  it('exports OTLP/HTTP JSON to the configured endpoint, with the service resource', () => {
    expect(collector.requests.length).toBeGreaterThan(0);
    for (const r of collector.requests) {
      expect(r.path).toBe('/v1/traces');
      expect(r.contentType).toMatch(/^application\/json/);
    }
    expect(new Set(spans.map((s) => s.name))).toEqual(
      new Set([SPAN_ATTEMPT, SPAN_INTAKE_BATCH, SPAN_FANOUT_PASS]),
    );
    for (const s of spans) {
      expect(s.resource['service.name']).toBe('hookrail-traces-test');
      expect(s.resource['service.version']).toBe(VERSION);
      expect(s.scope).toBe('hookrail');
    }
  });

  it('a delivered attempt is a client span with the attempt log’s identity, times and split', () => {
    const s = attemptSpan(ids.ok);
    const a = attempts.ok;
    expect(s.kind).toBe(SPAN_KIND.client);
    expect(s.status.code).toBe(STATUS.unset);
    expect(s.attributes).toEqual({
      'hookrail.tenant.id': ids.tenant,
      'hookrail.endpoint.id': ids.ok,
      'hookrail.delivery.id': a.deliveryId,
      'hookrail.event.id': ids.event,
      'hookrail.event.type': 'order.created',
      'hookrail.webhook.id': ids.webhookIds['/ok?token=s3cret'],
      'hookrail.attempt.id': a.id,
      'hookrail.attempt.number': 1,
      'hookrail.attempt.outcome': 'delivered',
      'hookrail.attempt.queue_ms': a.queueMs,
      'hookrail.attempt.platform_ms': a.platformMs,
      'hookrail.attempt.consumer_ms': a.consumerMs,
      'hookrail.delivery.next_status': 'delivered',
      'hookrail.delivery.replay': false,
      'http.request.method': 'POST',
      // The query string can hold a customer's token: it never leaves in a trace.
      'url.full': receiver.url('/ok?REDACTED'),
      'server.address': '127.0.0.1',
      'server.port': receiver.port,
      'http.response.status_code': 204,
    });
    expect(ids.webhookIds['/ok?token=s3cret']).toMatch(/^msg_/);
    // The span is the attempt as recorded, not the SDK's own clock.
    expect(s.startMs).toBe(a.startedAt);
    expect(s.endMs).toBe(a.finishedAt);
  });

  it('a 503 attempt is an ERROR span with its status code, error class and next state', () => {
    const s = attemptSpan(ids.down);
    const a = attempts.down;
    expect(s.kind).toBe(SPAN_KIND.client);
    expect(s.status).toMatchObject({ code: STATUS.error, message: 'HTTP 503' });
    expect(s.attributes).toMatchObject({
      'hookrail.endpoint.id': ids.down,
      'hookrail.delivery.id': a.deliveryId,
      'hookrail.webhook.id': ids.webhookIds['/down'],
      'hookrail.attempt.number': 1,
      'hookrail.attempt.outcome': 'retryable',
      'hookrail.attempt.error_class': 'http_status',
      'hookrail.delivery.next_status': 'pending',
      'http.response.status_code': 503,
      'error.type': '503',
      'url.full': receiver.url('/down'),
    });
    expect([s.startMs, s.endMs]).toEqual([a.startedAt, a.finishedAt]);
    expect(s.traceId).not.toBe(attemptSpan(ids.ok).traceId);
  });

  it('intake batches and fan-out passes are spans with their counts; every span is a root, in order', () => {
    const batches = collector.named(SPAN_INTAKE_BATCH);
    const passes = collector.named(SPAN_FANOUT_PASS);
    const sum = (list: CollectedSpan[], key: string) =>
      list.reduce((n, s) => n + Number(s.attributes[key] ?? 0), 0);
    expect(sum(batches, 'hookrail.intake.events')).toBe(1);
    expect(sum(batches, 'hookrail.intake.created')).toBe(1);
    expect(sum(passes, 'hookrail.fanout.events')).toBe(1);
    expect(sum(passes, 'hookrail.fanout.deliveries')).toBe(2);
    for (const s of [...batches, ...passes]) {
      expect(s.kind).toBe(SPAN_KIND.internal);
      expect(s.status.code).toBe(STATUS.unset);
      expect(s.endMs).toBeGreaterThanOrEqual(s.startMs);
    }
    // Idle fan-out polls (every 10 ms here) make no spans: only the pass that took the event.
    expect(passes).toHaveLength(1);
    for (const s of spans) expect(s.parentSpanId).toBeUndefined();
    const batch = batches[0] as CollectedSpan;
    const pass = passes[0] as CollectedSpan;
    expect(batch.startMs).toBeLessThanOrEqual(pass.startMs);
    expect(pass.startMs).toBeLessThanOrEqual(attemptSpan(ids.ok).startMs);
  });
});

describe.each(STORE_KINDS)('the producer’s traceparent on %s', (kind) => {
  const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const PRODUCER_SPAN = '00f067aa0ba902b7';

  it('makes every attempt of its event a child of the producer’s span; an unsampled one is followed, an invalid one ignored', {
    timeout: 30_000,
  }, async () => {
    const collector = await OtlpCollector.start();
    const receiver = await Receiver.start();
    // The first attempt of the sampled event fails, so the event has two attempts: both join the trace.
    let failed = false;
    receiver.answer((req) => {
      if (failed || !req.body.toString().includes('"retry"')) return { status: 204 };
      failed = true;
      return { status: 503 };
    });
    const t = await createTestApp(kind, {
      roles: [...ALL_ROLES],
      env: {
        HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8',
        HOOKRAIL_POLL_MS: '10',
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
      },
    });
    let [sampled, unsampled, invalid, none] = ['', '', '', ''];
    try {
      const tenant = (await t.request({ method: 'POST', url: '/v1/tenants', body: { name: 'Acme' } })).body;
      const ep = await t.request({
        method: 'POST',
        url: '/v1/endpoints',
        token: tenant.tenant_key,
        body: { url: receiver.url(), event_types: ['*'] },
      });
      const send = async (data: Record<string, unknown>, traceparent?: string) => {
        const res = await t.request({
          method: 'POST',
          url: '/v1/events',
          body: { tenant_id: tenant.id, type: 'order.created', data },
          headers: traceparent ? { traceparent } : {},
        });
        expect(res.status).toBe(202);
        return res.body.id as string;
      };
      sampled = await send({ retry: true }, `00-${TRACE}-${PRODUCER_SPAN}-01`);
      unsampled = await send({ n: 2 }, `00-${'1'.repeat(32)}-${'2'.repeat(16)}-00`);
      invalid = await send({ n: 3 }, `00-${TRACE}-${'0'.repeat(16)}-01`);
      none = await send({ n: 4 });
      // The sampled event's retry is due within seconds (full jitter on 5 s at most).
      await waitFor(() => receiver.received().length >= 5, 20_000, 'five requests');
      await waitFor(
        async () =>
          (
            await t.request({
              method: 'GET',
              url: `/v1/endpoints/${ep.body.id}/deliveries?status=delivered`,
              token: tenant.tenant_key,
            })
          ).body.data.length === 4,
        10_000,
        'four delivered',
      );
    } finally {
      await t.close();
    }
    const spans = collector.named(SPAN_ATTEMPT);
    const of = (eventId: string) => spans.filter((s) => s.attributes['hookrail.event.id'] === eventId);
    expect(of(sampled)).toHaveLength(2);
    for (const s of of(sampled)) {
      expect(s.traceId).toBe(TRACE);
      expect(s.parentSpanId).toBe(PRODUCER_SPAN);
    }
    // Not sampled by the producer: the default parent-based sampler records nothing for it.
    expect(of(unsampled)).toHaveLength(0);
    for (const e of [invalid, none]) {
      expect(of(e)).toHaveLength(1);
      expect(of(e)[0]!.parentSpanId).toBeUndefined();
      expect(of(e)[0]!.traceId).not.toBe(TRACE);
    }
    await collector.close();
    await receiver.close();
  });
});

describe('traces off', () => {
  it('without an OTLP endpoint no tracer is created', async () => {
    expect(loadConfig({}).otlpTracesEndpoint).toBeNull();
    expect(await createTracing(loadConfig({}))).toBeNull();
    const t = await createTestApp('sqlite', { roles: [...ALL_ROLES] });
    try {
      expect(t.hookrail.tracing).toBeNull();
    } finally {
      await t.close();
    }
  });
});

describe('traces from the pipeline thread', () => {
  it('the thread exports its attempts with an exporter of its own, flushed when Hookrail stops', {
    timeout: 30_000,
  }, async () => {
    const collector = await OtlpCollector.start();
    const receiver = await Receiver.start();
    const dataDir = mkdtempSync(join(tmpdir(), 'hookrail-traces-'));
    try {
      const config = loadConfig({
        HOOKRAIL_DATA_DIR: dataDir,
        HOOKRAIL_ADMIN_TOKEN: ADMIN_TOKEN,
        HOOKRAIL_ALLOW_NETWORKS: '127.0.0.0/8',
        HOOKRAIL_POLL_MS: '10',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.endpoint}/v1/traces`,
      });
      const hookrail = await startHookrail({
        config,
        logger: false,
        listen: false,
        destinations: new GuardedDestinationChecker({
          allowNetworks: config.allowNetworks,
          resolver: { resolve: async () => ['93.184.215.14'] },
        }),
      });
      expect(hookrail.pipelineThread).toBe(true);
      const app = hookrail.app as NonNullable<typeof hookrail.app>;
      const call = async (url: string, body: object, token = ADMIN_TOKEN) => {
        const res = await app.inject({
          method: 'POST',
          url,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        });
        expect(res.statusCode, res.body).toBeLessThan(300);
        return res.json();
      };
      const tenant = await call('/v1/tenants', { name: 'Acme' });
      const endpoint = await call(
        '/v1/endpoints',
        { url: receiver.url('/hook'), event_types: ['*'] },
        tenant.tenant_key,
      );
      await call('/v1/events', { tenant_id: tenant.id, type: 'order.created', data: {} });
      await waitFor(() => receiver.received().length === 1, 10_000, 'the delivery');
      // The attempt is recorded (and its span made) in the thread after the answer: wait for the record.
      await waitFor(async () => {
        const page = await hookrail.store.deliveryList({
          tenantId: tenant.id,
          endpointId: endpoint.id,
          status: null,
          limit: 1,
          cursor: null,
        });
        return page.data[0]?.status === 'delivered';
      });
      await hookrail.close();

      const [attempt] = collector.named(SPAN_ATTEMPT);
      expect(attempt?.attributes).toMatchObject({
        'hookrail.endpoint.id': endpoint.id,
        'hookrail.attempt.outcome': 'delivered',
        'http.response.status_code': 204,
      });
      expect(attempt?.resource['service.name']).toBe('hookrail');
      // The API thread's own exporter sent intake's and fan-out's spans.
      expect(collector.named(SPAN_INTAKE_BATCH).length).toBeGreaterThan(0);
      expect(collector.named(SPAN_FANOUT_PASS).length).toBeGreaterThan(0);
    } finally {
      await collector.close();
      await receiver.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
