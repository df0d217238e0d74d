/**
 * Tenant-facing operations on an endpoint's failure handling (ADR-09/10/13/14): health, backlog, re-enable with an
 * explicit backlog choice, replay, the notification channel, and the audit trail that records every change.
 */

import { effectiveCircuitState, nextProbeAt } from '../domain/circuit-breaker.ts';
import { assessHealth, estimateDrainSeconds } from '../domain/endpoint-health.ts';
import { foldSeries, type SeriesWindow, seriesRange, successPercent } from '../domain/endpoint-series.ts';
import { ApiError } from '../domain/errors.ts';
import { checkDataDepth } from '../domain/event-rules.ts';
import { newId } from '../domain/ids.ts';
import { laneKind } from '../domain/lanes.ts';
import { effectiveCap, rampEndsAt } from '../domain/ramp.ts';
import {
  REPLAY_MAX_PER_REQUEST,
  REPLAY_RATE_PER_SECOND,
  type ReplayableStatus,
  replayConfirmLimit,
  replayNeedsConfirmation,
} from '../domain/replay.ts';
import type { Clock, Random } from '../ports/clock.ts';
import type { BacklogChoice, DeliveryIdFactory, DeliveryRecord } from '../ports/delivery-store.ts';
import type { BulkReplayResult, EnableResult } from '../ports/operations-store.ts';
import type { Store } from '../ports/store.ts';
import { type AuditActor, auditOf } from './audit.ts';
import type { Principal } from './auth.ts';
import type { EndpointStatsCache } from './endpoint-stats-cache.ts';
import { requireStepUp, type StepUpDeps } from './step-up.ts';

const HOUR = 3_600_000;

export interface OperationsDeps {
  store: Store;
  clock: Clock;
  random: Random;
  /** The settled buckets of endpoint time series, kept per process (one per API). */
  statsCache: EndpointStatsCache;
}

export function deliveryIds(deps: OperationsDeps, now: number): DeliveryIdFactory {
  return {
    delivery: () => newId('delivery', now, deps.random.bytes(10)),
    webhookId: () => newId('message', now, deps.random.bytes(10)),
  };
}

const percentile = (sorted: number[], q: number): number | null =>
  sorted.length === 0 ? null : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number);

const rate = (s: { attempts: number; successes: number }) => successPercent(s.successes, s.attempts);

async function endpointOr404(deps: OperationsDeps, tenantId: string | null, id: string) {
  const endpoint = await deps.store.endpointGet({ id, tenantId });
  if (!endpoint) throw new ApiError('not_found', 'No such endpoint.');
  return endpoint;
}

export async function endpointHealth(deps: OperationsDeps, tenantId: string | null, id: string) {
  const endpoint = await endpointOr404(deps, tenantId, id);
  const now = deps.clock.now();
  const [view, hour, day, backlog, lane] = await Promise.all([
    deps.store.endpointRuntime({ endpointId: id }),
    deps.store.attemptStats({ endpointId: id, since: now - HOUR }),
    deps.store.attemptStats({ endpointId: id, since: now - 24 * HOUR }),
    deps.store.backlogStats({ endpointId: id }),
    deps.store.endpointLane({ endpointId: id }),
  ]);
  if (!view) throw new ApiError('not_found', 'No such endpoint.');
  const { runtime } = view;
  const circuit = effectiveCircuitState(runtime.circuit, now);
  const health = assessHealth({
    disabled: endpoint.status === 'disabled',
    circuit,
    consecutiveFailures: runtime.circuit.consecutiveFailures,
    lastHour: hour,
    last24h: { attempts: day.attempts, successes: day.successes, deadLetters: day.deadLetters },
  });
  // Pending deliveries only: dead letters are counted apart (`dead_letters`), and their age is not the queue's.
  const oldest = backlog.oldestPendingAt;
  return {
    endpoint_id: id,
    state: health.state,
    reasons: health.reasons,
    disabled_reason: endpoint.disabledReason,
    circuit: {
      state: circuit,
      consecutive_failures: runtime.circuit.consecutiveFailures,
      opened_at: iso(runtime.circuit.openedAt),
      next_probe_at: circuit === 'closed' ? null : iso(nextProbeAt(runtime.circuit)),
    },
    concurrency: {
      max: endpoint.maxConcurrency,
      effective: effectiveCap(endpoint.maxConcurrency, runtime.circuit.closedAt, now),
      in_flight: view.inflight,
      ramp_ends_at: iso(ramp(runtime.circuit.closedAt, now)),
    },
    success_rate_percent: { last_hour: rate(hour), last_24h: rate(day) },
    attempts: { last_hour: hour.attempts, last_24h: day.attempts, dead_letters_24h: day.deadLetters },
    latency_ms: {
      queue: { p50: percentile(hour.queueMs, 0.5), p99: percentile(hour.queueMs, 0.99) },
      platform: { p50: percentile(hour.platformMs, 0.5), p99: percentile(hour.platformMs, 0.99) },
      consumer: { p50: percentile(hour.consumerMs, 0.5), p99: percentile(hour.consumerMs, 0.99) },
    },
    backlog: {
      depth: backlog.pending,
      dead_letters: backlog.deadLetters,
      oldest_pending_age_seconds: oldest === null ? null : Math.max(0, Math.round((now - oldest) / 1000)),
    },
    last_success_at: iso(runtime.lastSuccessAt),
    last_failure_at: iso(runtime.lastFailureAt),
    failing_since: iso(runtime.failingSince),
    // Null only between an upgrade to lanes and the first rebalance pass (the endpoint has no lane yet).
    lane:
      lane?.lane == null
        ? null
        : {
            id: lane.lane,
            kind: laneKind(lane.lane),
            since: iso(lane.since),
            previous: lane.previous,
            draining: lane.draining,
          },
  };
}

/**
 * GET /v1/endpoints/:id/stats: the endpoint's time series over `window`, oldest bucket first, aligned on the epoch,
 * the last one holding now (domain/endpoint-series.ts: the buckets, and how the backlog history is derived). The
 * buckets that can no longer change are read once and kept in this process; a request reads only the buckets
 * settled since, the open ones and the pending count (endpoint-stats-cache.ts).
 */
export async function endpointStats(
  deps: OperationsDeps,
  tenantId: string | null,
  id: string,
  window: SeriesWindow,
) {
  await endpointOr404(deps, tenantId, id);
  const range = seriesRange(window, deps.clock.now());
  const sums = await deps.statsCache.sums(deps.store, id, range);
  return {
    endpoint_id: id,
    window,
    bucket_seconds: range.bucketMs / 1000,
    from: new Date(range.from).toISOString(),
    to: new Date(range.now).toISOString(),
    buckets: foldSeries(range, sums).map((b) => ({
      start: new Date(b.start).toISOString(),
      attempts: b.attempts,
      delivered: b.delivered,
      success_rate_percent: b.successRatePercent,
      latency_ms: b.latencyMs,
      dead_lettered: b.deadLettered,
      backlog: b.backlog,
    })),
  };
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const ramp = (closedAt: number | null, now: number) => {
  const end = rampEndsAt(closedAt);
  return end !== null && end > now ? end : null;
};

export async function endpointBacklog(deps: OperationsDeps, tenantId: string | null, id: string) {
  const endpoint = await endpointOr404(deps, tenantId, id);
  const now = deps.clock.now();
  const [backlog, hour] = await Promise.all([
    deps.store.backlogStats({ endpointId: id }),
    deps.store.attemptStats({ endpointId: id, since: now - 24 * HOUR }),
  ]);
  const total = backlog.pending + backlog.deadLetters;
  const p50LatencyMs = percentile(hour.consumerMs, 0.5);
  return {
    endpoint_id: id,
    status: endpoint.status,
    count: total,
    pending: backlog.pending,
    dead_letters: backlog.deadLetters,
    oldest_created_at: iso(backlog.oldestCreatedAt),
    // Re-enabling with `deliver` re-queues the dead letters as replays, which the lease paces at the replay rate.
    estimated_drain_seconds: Math.max(
      estimateDrainSeconds({ backlog: total, effectiveCap: endpoint.maxConcurrency, p50LatencyMs }),
      estimateDrainSeconds({
        backlog: backlog.deadLetters,
        effectiveCap: endpoint.maxConcurrency,
        p50LatencyMs,
        replayRatePerSecond: REPLAY_RATE_PER_SECOND,
      }),
    ),
  };
}

export async function enableEndpoint(
  deps: OperationsDeps,
  principal: Principal,
  tenantId: string,
  id: string,
  choice: BacklogChoice,
) {
  const now = deps.clock.now();
  const audit = auditOf<EnableResult>(
    deps,
    { tenantId, principal },
    { action: 'endpoint.enabled', targetType: 'endpoint', targetId: id },
    (r) => ({
      backlog: choice.kind,
      ...(choice.kind === 'resume_from' ? { resume_from: iso(choice.at) } : {}),
      requeued: r.requeued,
      skipped: r.skipped,
    }),
  );
  const result = await deps.store.endpointEnable({
    id,
    tenantId,
    choice,
    now,
    ids: deliveryIds(deps, now),
    audit,
  });
  if (!result) {
    const endpoint = await endpointOr404(deps, tenantId, id);
    throw new ApiError('conflict', `The endpoint is ${endpoint.status}, not disabled.`, {
      status: endpoint.status,
    });
  }
  return result;
}

export async function replayDelivery(
  deps: OperationsDeps,
  principal: Principal,
  tenantId: string,
  id: string,
) {
  const now = deps.clock.now();
  const result = await deps.store.deliveryReplay({
    id,
    tenantId,
    now,
    ratePerSecond: REPLAY_RATE_PER_SECOND,
    ids: deliveryIds(deps, now),
    audit: auditOf<DeliveryRecord>(
      deps,
      { tenantId, principal },
      { action: 'delivery.replayed', targetType: 'delivery', targetId: id },
      (replay) => ({ replay_id: replay.id }),
    ),
  });
  if (result === 'not_found') throw new ApiError('not_found', 'No such delivery.');
  if (result === 'endpoint_gone')
    throw new ApiError('conflict', 'The endpoint of this delivery was deleted.');
  if (result === 'cancelled' || result === 'unsubscribed') {
    throw new ApiError(
      'not_replayable',
      result === 'cancelled'
        ? 'This delivery was cancelled by an unsubscribe; it is not sent again.'
        : 'The endpoint no longer subscribes to this event type; subscribe again to replay it.',
      { reason: result },
    );
  }
  return result;
}

export interface BulkReplayInput {
  statuses: ReplayableStatus[];
  since: number | null;
  /** Null: now. */
  until: number | null;
  confirm: boolean;
  /** The count the caller was shown and confirms (null: not given). */
  expectedCount: number | null;
}

/**
 * POST /v1/endpoints/:id/replay: replays the endpoint's finished deliveries that match (domain/replay.ts and
 * OperationsStore.deliveryReplayBulk say which), rate-capped. Above REPLAY_CONFIRM_ABOVE matches without
 * `confirm`, or above the `expected_count` confirmed, it changes nothing and answers 409 `confirmation_required`
 * with the count and the estimated time.
 */
export async function replayEndpoint(
  deps: OperationsDeps,
  principal: Principal,
  tenantId: string,
  id: string,
  input: BulkReplayInput,
) {
  const now = deps.clock.now();
  const until = input.until ?? now;
  if (input.since !== null && input.since >= until) {
    throw new ApiError('validation_failed', '`since` must be earlier than `until`.', {
      since: iso(input.since),
      until: iso(until),
    });
  }
  const endpoint = await endpointOr404(deps, tenantId, id);
  const replayId = newId('replay', now, deps.random.bytes(10));
  const limit = replayConfirmLimit(input.confirm, input.expectedCount);
  const result = await deps.store.deliveryReplayBulk({
    endpointId: id,
    tenantId,
    statuses: input.statuses,
    since: input.since,
    until,
    now,
    ratePerSecond: REPLAY_RATE_PER_SECOND,
    confirmAbove: limit,
    max: REPLAY_MAX_PER_REQUEST,
    ids: deliveryIds(deps, now),
    audit: auditOf<BulkReplayResult>(
      deps,
      { tenantId, principal },
      { action: 'endpoint.replayed', targetType: 'endpoint', targetId: id },
      (r) => ({
        replay_id: replayId,
        status: input.statuses,
        since: iso(input.since),
        until: iso(until),
        count: r.created,
        more: r.more,
      }),
    ),
  });
  if (result === 'not_found') throw new ApiError('not_found', 'No such endpoint.');
  const day = await deps.store.attemptStats({ endpointId: id, since: now - 24 * HOUR });
  const estimate = (n: number) =>
    estimateDrainSeconds({
      backlog: n,
      effectiveCap: endpoint.maxConcurrency,
      p50LatencyMs: percentile(day.consumerMs, 0.5),
      replayRatePerSecond: REPLAY_RATE_PER_SECOND,
    });
  if (result.created === 0 && replayNeedsConfirmation(result.found, limit)) {
    const count = result.found;
    const grown = input.confirm && input.expectedCount !== null;
    const what = `This replays ${count} deliveries${result.more ? ' (and more match: ask again after)' : ''}`;
    throw new ApiError(
      'confirmation_required',
      grown
        ? `${what}, more than the ${input.expectedCount} confirmed (more have finished since); confirm the new count.`
        : `${what}; send "confirm": true, with "expected_count": ${count} to replay no more than that, to go ahead.`,
      { count, more: result.more, estimated_seconds: estimate(count) },
    );
  }
  return {
    id: replayId,
    endpoint_id: id,
    status: input.statuses,
    since: iso(input.since),
    until: iso(until),
    count: result.created,
    more: result.more,
    first_due_at: iso(result.firstDueAt),
    last_due_at: iso(result.lastDueAt),
    rate_per_second: REPLAY_RATE_PER_SECOND,
    estimated_seconds: estimate(result.created),
    created_at: iso(now),
  };
}

/** PUT /v1/notification-channel: the tenant's e-mail address for notifications (null: e-mail off). */
export async function setNotificationChannel(deps: OperationsDeps, by: AuditActor, email: string | null) {
  await deps.store.tenantSetNotificationEmail({
    tenantId: by.tenantId,
    email,
    now: deps.clock.now(),
    audit: auditOf(
      deps,
      by,
      { action: 'notification_channel.updated', targetType: 'tenant', targetId: by.tenantId },
      () => ({ email }),
    ),
  });
}

/** The type of a test event when the request names none. */
export const TEST_EVENT_TYPE = 'hookrail.test';

/**
 * POST /v1/endpoints/:id/test: an event recorded for this endpoint alone and delivered to it through the normal
 * delivery path (signed, retried, in the attempt log), whatever its subscriptions; no other endpoint receives it.
 *
 * A type of the caller's choosing is an elevated action (a fresh step-up token): the request is signed with the
 * secrets the receiver trusts, so with a tenant key alone (a stolen one, say) anyone could have the receiver accept a
 * signed `invoice.paid` of their own making. The default type, whatever its data, announces itself as a test.
 */
export async function sendTestEvent(
  deps: OperationsDeps & Pick<StepUpDeps, 'keys'>,
  principal: Principal,
  tenantId: string,
  id: string,
  input: {
    type?: string | undefined;
    data?: Record<string, unknown> | undefined;
    /** The `data` member's text exactly as sent (what is stored and delivered), when `data` was given. */
    dataText?: string | null | undefined;
    stepUpToken?: string | string[] | undefined;
  },
) {
  if (input.type !== undefined && input.type !== TEST_EVENT_TYPE) {
    requireStepUp(deps, tenantId, input.stepUpToken);
  }
  const data = input.data ?? { message: 'A test event from Hookrail.', endpoint_id: id };
  const dataText = (input.data !== undefined ? input.dataText : null) ?? JSON.stringify(data);
  checkDataDepth(dataText);
  const now = deps.clock.now();
  const event = {
    id: newId('event', now, deps.random.bytes(10)),
    tenantId,
    type: input.type ?? TEST_EVENT_TYPE,
    resourceId: null,
    data: dataText,
    idempotencyKey: null,
    requestHash: null,
    createdAt: now,
  };
  const delivery = await deps.store.endpointTestEvent({
    endpointId: id,
    tenantId,
    event,
    now,
    ids: deliveryIds(deps, now),
    audit: auditOf<DeliveryRecord>(
      deps,
      { tenantId, principal },
      { action: 'endpoint.test_sent', targetType: 'endpoint', targetId: id },
      (d) => ({ event_id: event.id, delivery_id: d.id }),
    ),
  });
  if (delivery === 'not_found') throw new ApiError('not_found', 'No such endpoint.');
  if (delivery === 'disabled') {
    throw new ApiError('conflict', 'The endpoint is disabled: enable it, then send a test event.');
  }
  return { event, delivery };
}
