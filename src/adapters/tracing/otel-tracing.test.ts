/**
 * The OpenTelemetry adapter's failure and no-request spans, through the callers that report them, exported by the
 * real SDK to a local OTLP/HTTP collector (the successful paths run end to end in test/e2e/traces.test.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../../test/support/fake-clock.ts';
import { OtlpCollector } from '../../../test/support/otlp-collector.ts';
import { seededRandom } from '../../../test/support/seeded-random.ts';
import { platformFailedAttempt, skippedAttempt } from '../../app/deliver-attempt.ts';
import { GroupCommitter } from '../../app/group-commit.ts';
import { Signal } from '../../app/signal.ts';
import type { DeliveryRecord, LeasedDelivery } from '../../ports/delivery-store.ts';
import { type Store, StoreUnavailableError } from '../../ports/store.ts';
import type { Tracing } from '../../ports/tracing.ts';
import { FanoutWorker } from '../../worker/fanout-worker.ts';
import { createOtelTracing, SPAN_ATTEMPT, SPAN_FANOUT_PASS, SPAN_INTAKE_BATCH } from './otel-tracing.ts';

const unavailable = () => new StoreUnavailableError(new Error('connect ECONNREFUSED 127.0.0.1:5432'));

describe('OpenTelemetry tracing', () => {
  let collector: OtlpCollector;
  let tracing: Tracing;
  const clock = new FakeClock(Date.UTC(2026, 0, 1, 12));

  beforeEach(async () => {
    collector = await OtlpCollector.start();
    tracing = createOtelTracing({
      url: `${collector.endpoint}/v1/traces`,
      serviceName: 'hr',
      serviceVersion: '1',
    });
  });
  afterEach(async () => {
    await tracing.shutdown();
    await collector.close();
  });

  it('a failed intake commit and a failed fan-out pass are ERROR spans with the error class', async () => {
    const store = {
      eventInsertBatch: () => Promise.reject(unavailable()),
      fanoutRun: () => Promise.reject(unavailable()),
    } as unknown as Store;
    const committer = new GroupCommitter({
      store,
      now: () => clock.now(),
      idempotencyWindowMs: 1,
      maxBatch: 10,
      maxInFlight: 1,
      tracing,
    });
    const event = { tenantId: 't', type: 'x', data: '{}', idempotencyKey: null } as never;
    await expect(Promise.all([committer.submit(event), committer.submit(event)])).rejects.toThrow(
      StoreUnavailableError,
    );
    const fanout = new FanoutWorker({
      store,
      clock,
      random: seededRandom(1),
      batch: 10,
      deliveryBatch: 10,
      pollMs: 10,
      wake: new Signal(),
      deliveriesCreated: new Signal(),
      logger: null,
      tracing,
    });
    await expect(fanout.runOnce()).rejects.toThrow(StoreUnavailableError);
    await tracing.shutdown();

    const [batch] = collector.named(SPAN_INTAKE_BATCH);
    expect(batch?.attributes).toEqual({
      'hookrail.intake.events': 2,
      'hookrail.intake.created': 0,
      'error.type': 'StoreUnavailableError',
    });
    expect(batch?.status).toEqual({
      code: 2,
      message: 'store unavailable: connect ECONNREFUSED 127.0.0.1:5432',
    });
    expect(batch?.startMs).toBe(clock.now());
    const [pass] = collector.named(SPAN_FANOUT_PASS);
    expect(pass?.attributes).toMatchObject({
      'hookrail.fanout.events': 0,
      'error.type': 'StoreUnavailableError',
    });
    expect(pass?.status.code).toBe(2);
  });

  it('an attempt recorded as circuit_open sent nothing: an internal ERROR span without HTTP attributes', async () => {
    const delivery = {
      id: 'dlv_1',
      tenantId: 'ten_1',
      endpointId: 'ep_1',
      eventId: 'evt_1',
      webhookId: 'msg_1',
      attempts: 2,
      nextAttemptAt: clock.now() - 250,
      firstAttemptAt: clock.now() - 60_000,
      replayedFrom: null,
    } as DeliveryRecord;
    const endpoint = { id: 'ep_1', tenantId: 'ten_1', url: 'https://hooks.example.com/in', headers: {} };
    const leased: LeasedDelivery = {
      delivery,
      endpoint,
      event: { id: 'evt_1', type: 'order.created', createdAt: 0, data: '{}' },
      leaseUntil: clock.now() + 60_000,
      mode: 'circuit_open',
    };
    const completion = { ...skippedAttempt(seededRandom(2), leased, clock.now()), leaseOwner: 'w' };
    tracing.attemptFinished(leased, completion);
    await tracing.shutdown();

    const [span] = collector.named(SPAN_ATTEMPT);
    expect(span?.kind).toBe(1);
    expect(span?.status).toEqual({ code: 2, message: 'circuit open: not sent' });
    expect(span?.attributes).toMatchObject({
      'hookrail.webhook.id': 'msg_1',
      'hookrail.attempt.number': 3,
      'hookrail.attempt.error_class': 'circuit_open',
      'hookrail.attempt.queue_ms': 250,
    });
    expect(Object.keys(span?.attributes ?? {}).filter((k) => !k.startsWith('hookrail.'))).toEqual([]);
  });

  it('an attempt recorded as platform_error sent nothing either: an internal span without HTTP attributes', async () => {
    const delivery = {
      id: 'dlv_2',
      tenantId: 'ten_1',
      endpointId: 'ep_1',
      eventId: 'evt_2',
      webhookId: 'msg_2',
      attempts: 0,
      nextAttemptAt: clock.now(),
      firstAttemptAt: null,
      replayedFrom: null,
    } as DeliveryRecord;
    const endpoint = { id: 'ep_1', tenantId: 'ten_1', url: 'https://hooks.example.com/in', headers: {} };
    const leased: LeasedDelivery = {
      delivery,
      endpoint,
      event: { id: 'evt_2', type: 'order.created', createdAt: 0, data: '{}' },
      leaseUntil: clock.now() + 60_000,
      mode: 'send',
    };
    const completion = platformFailedAttempt({ clock, random: seededRandom(3) }, leased, 'w', clock.now());
    tracing.attemptFinished(leased, completion);
    await tracing.shutdown();

    const [span] = collector.named(SPAN_ATTEMPT);
    expect(span?.kind).toBe(1);
    expect(span?.attributes).toMatchObject({ 'hookrail.attempt.error_class': 'platform_error' });
    expect(Object.keys(span?.attributes ?? {}).filter((k) => !k.startsWith('hookrail.'))).toEqual([]);
  });

  it('a stop with the collector down drops the queued spans and still resolves', async () => {
    const before = process.env.OTEL_EXPORTER_OTLP_TIMEOUT;
    process.env.OTEL_EXPORTER_OTLP_TIMEOUT = '500';
    try {
      const down = await OtlpCollector.start();
      const url = `${down.endpoint}/v1/traces`;
      await down.close();
      const t = createOtelTracing({ url, serviceName: 'hr', serviceVersion: '1' });
      t.intakeBatch({ events: 1, created: 1, startedAt: clock.now(), finishedAt: clock.now(), error: null });
      await expect(t.shutdown()).resolves.toBeUndefined();
    } finally {
      if (before === undefined) delete process.env.OTEL_EXPORTER_OTLP_TIMEOUT;
      else process.env.OTEL_EXPORTER_OTLP_TIMEOUT = before;
    }
  });
});
