import { describe, expect, it } from 'vitest';
import {
  type BatchEvent,
  deliveryKey,
  type EndpointNow,
  type LoggedAttempt,
  planReconstruction,
  type ReconstructionInput,
  stateFromLog,
  walkFrom,
} from './delivery-reconstruct.ts';
import { idFloor, newId } from './ids.ts';
import { MAX_AGE_MS, MAX_ATTEMPTS } from './retry-schedule.ts';

const T = Date.UTC(2026, 11, 3, 12, 0);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const zeros = new Uint8Array(10);
const ones = new Uint8Array(10).fill(1);

/** Attempts of one delivery, one a minute from `start`, with the given outcomes. */
function log(outcomes: LoggedAttempt['outcome'][], o: Partial<LoggedAttempt> & { start?: number } = {}) {
  const { start = T, ...rest } = o;
  return outcomes.map(
    (outcome, i): LoggedAttempt => ({
      deliveryId: 'dlv_1',
      endpointId: 'ep_1',
      eventId: 'evt_1',
      startedAt: start + i * MINUTE,
      finishedAt: start + i * MINUTE + 120,
      outcome,
      webhookId: 'msg_1',
      ...rest,
    }),
  );
}

const subscribed = { standing: 'subscribed' as const, replayed: false };

describe('stateFromLog', () => {
  it('a delivered attempt makes the delivery delivered, settled when that attempt finished', () => {
    expect(
      stateFromLog(log(['retryable', 'retryable', 'delivered']), { now: T + HOUR, ...subscribed }),
    ).toEqual({
      status: 'delivered',
      statusReason: null,
      attempts: 3,
      firstAttemptAt: T,
      lastAttemptAt: T + 2 * MINUTE,
      nextAttemptAt: null,
      webhookId: 'msg_1',
      updatedAt: T + 2 * MINUTE + 120,
    });
    // Whatever the endpoint's standing now, and although later attempts failed (a lease that expired mid-attempt).
    expect(
      stateFromLog(log(['delivered', 'retryable']), {
        now: T + HOUR,
        standing: 'endpoint_deleted',
        replayed: true,
      }).status,
    ).toBe('delivered');
  });

  it('a last permanent failure makes it dead', () => {
    expect(stateFromLog(log(['retryable', 'permanent']), { now: T + HOUR, ...subscribed })).toMatchObject({
      status: 'dead',
      statusReason: 'permanent_failure',
      attempts: 2,
      nextAttemptAt: null,
      updatedAt: T + MINUTE + 120,
    });
  });

  it('a spent attempt budget or 72 h window makes it dead, by the retry schedule', () => {
    const budget = log(Array.from({ length: MAX_ATTEMPTS }, () => 'retryable' as const));
    expect(stateFromLog(budget, { now: T + HOUR, ...subscribed })).toMatchObject({
      status: 'dead',
      statusReason: 'max_attempts',
      attempts: MAX_ATTEMPTS,
    });
    expect(stateFromLog(budget.slice(1), { now: T + HOUR, ...subscribed }).status).toBe('pending');
    // Due now: exactly at the end of the window it would still be attempted, a millisecond later not.
    const one = log(['retryable']);
    expect(stateFromLog(one, { now: T + MAX_AGE_MS, ...subscribed }).status).toBe('pending');
    expect(stateFromLog(one, { now: T + MAX_AGE_MS + 1, ...subscribed })).toMatchObject({
      status: 'dead',
      statusReason: 'max_age',
      updatedAt: T + 120,
    });
  });

  it('otherwise it is pending and due now, with its attempt count and the webhook-id it was sent with', () => {
    expect(stateFromLog(log(['retryable', 'retryable']), { now: T + HOUR, ...subscribed })).toEqual({
      status: 'pending',
      statusReason: null,
      attempts: 2,
      firstAttemptAt: T,
      lastAttemptAt: T + MINUTE,
      nextAttemptAt: T + HOUR,
      webhookId: 'msg_1',
      updatedAt: T + HOUR,
    });
  });

  it('takes the webhook-id from the first attempt that sent one; none when nothing was sent', () => {
    const skipped = log(['retryable'], { webhookId: null });
    const sent = log(['retryable'], { start: T + MINUTE, webhookId: 'msg_2' });
    expect(stateFromLog([...skipped, ...sent], { now: T + HOUR, ...subscribed }).webhookId).toBe('msg_2');
    expect(stateFromLog(skipped, { now: T + HOUR, ...subscribed }).webhookId).toBeNull();
  });

  it('what would be pending is skipped when a replay names it, and cancelled when its endpoint no longer stands', () => {
    const failed = log(['retryable']);
    expect(stateFromLog(failed, { now: T + HOUR, standing: 'subscribed', replayed: true })).toMatchObject({
      status: 'skipped',
      statusReason: 'skipped_on_enable',
      nextAttemptAt: null,
      updatedAt: T + HOUR,
    });
    for (const standing of ['unsubscribed', 'endpoint_deleted', 'tenant_deleted'] as const) {
      expect(stateFromLog(failed, { now: T + HOUR, standing, replayed: false })).toMatchObject({
        status: 'cancelled',
        statusReason: standing,
        attempts: 1,
        nextAttemptAt: null,
      });
    }
  });

  it('refuses an empty history', () => {
    expect(() => stateFromLog([], { now: T, ...subscribed })).toThrow(RangeError);
  });
});

describe('planReconstruction', () => {
  const event = (o: Partial<BatchEvent> = {}): BatchEvent => ({
    seq: 1,
    id: 'evt_1',
    tenantId: 'ten_1',
    type: 'order.created',
    resourceId: null,
    createdAt: T,
    fannedOut: true,
    testEvent: false,
    ...o,
  });
  const endpoint = (id: string, o: Partial<EndpointNow> = {}): EndpointNow => ({
    id,
    tenantId: 'ten_1',
    eventTypes: ['order.*'],
    createdAt: T - HOUR,
    deleted: false,
    ...o,
  });
  const input = (o: Partial<ReconstructionInput>): ReconstructionInput => ({
    events: [event()],
    existing: new Set(),
    lost: [],
    replayed: new Set(),
    endpoints: [],
    deletedTenants: new Set(),
    now: T + HOUR,
    ...o,
  });
  const summary = (planned: ReturnType<typeof planReconstruction>) =>
    planned.map((p) => [p.event.id, p.endpointId, p.source, p.state.status]);

  it('brings back at most one live delivery per event and endpoint when an original and its replays are lost', () => {
    // The original failed twice (then was skipped on a re-enable: no trace), its replay was delivered: both lost.
    const original = newId('delivery', T + 5, zeros);
    const replay = newId('delivery', T + 2 * HOUR, ones);
    const lost = [
      ...log(['retryable', 'retryable'], { deliveryId: original, endpointId: 'ep_a', start: T + MINUTE }),
      ...log(['delivered'], { deliveryId: replay, endpointId: 'ep_a', start: T + 2 * HOUR + MINUTE }),
    ];
    const planned = planReconstruction(input({ endpoints: [endpoint('ep_a')], lost, now: T + 5 * HOUR }));
    expect(planned.map((p) => [p.deliveryId, p.state.status, p.state.statusReason])).toEqual([
      [original, 'skipped', 'superseded'],
      [replay, 'delivered', null],
    ]);
    // Neither delivered: only the newest stays pending (both carry the same webhook-id).
    const failing = [
      ...log(['retryable'], { deliveryId: original, endpointId: 'ep_a', start: T + MINUTE }),
      ...log(['retryable'], { deliveryId: replay, endpointId: 'ep_a', start: T + 2 * HOUR + MINUTE }),
    ];
    const again = planReconstruction(
      input({ endpoints: [endpoint('ep_a')], lost: failing, now: T + 3 * HOUR }),
    );
    expect(again.map((p) => [p.deliveryId, p.state.status])).toEqual([
      [original, 'skipped'],
      [replay, 'pending'],
    ]);
  });

  it('recreates lost deliveries from the log under their own ids, created when their id was minted', () => {
    const deliveryId = newId('delivery', T + 5, zeros);
    const planned = planReconstruction(
      input({
        endpoints: [endpoint('ep_a')],
        lost: [
          ...log(['retryable'], { deliveryId, endpointId: 'ep_a', start: T + MINUTE }),
          ...log(['delivered'], { deliveryId, endpointId: 'ep_a', start: T + 2 * MINUTE }),
        ].reverse(),
      }),
    );
    expect(planned).toHaveLength(1);
    expect(planned[0]).toMatchObject({
      source: 'log',
      deliveryId,
      endpointId: 'ep_a',
      createdAt: T + 5,
      state: { status: 'delivered', attempts: 2, firstAttemptAt: T + MINUTE, lastAttemptAt: T + 2 * MINUTE },
    });
  });

  it('gives a new pending delivery to each live subscribed endpoint older than the event with no row and no attempt', () => {
    const planned = planReconstruction(
      input({
        existing: new Set([deliveryKey('evt_1', 'ep_has_row')]),
        lost: log(['retryable'], { deliveryId: 'dlv_x', endpointId: 'ep_attempted' }),
        endpoints: [
          endpoint('ep_has_row'),
          endpoint('ep_attempted'),
          endpoint('ep_new_b'),
          endpoint('ep_new_a', { eventTypes: ['*'] }),
          endpoint('ep_disabled_is_fine', { eventTypes: ['order.created'] }),
          endpoint('ep_later', { createdAt: T + 1 }),
          endpoint('ep_same_ms', { createdAt: T }),
          endpoint('ep_other_types', { eventTypes: ['invoice.*'] }),
          endpoint('ep_deleted', { deleted: true }),
          endpoint('ep_other_tenant', { tenantId: 'ten_2' }),
        ],
      }),
    );
    expect(summary(planned)).toEqual([
      ['evt_1', 'ep_attempted', 'log', 'pending'],
      ['evt_1', 'ep_disabled_is_fine', 'new', 'pending'],
      ['evt_1', 'ep_new_a', 'new', 'pending'],
      ['evt_1', 'ep_new_b', 'new', 'pending'],
    ]);
    expect(planned[1]).toMatchObject({
      deliveryId: null,
      createdAt: T + HOUR,
      state: { attempts: 0, nextAttemptAt: T + HOUR, webhookId: null, firstAttemptAt: null },
    });
  });

  it('judges a lost pending delivery by where its endpoint stands now', () => {
    const lost = (endpointId: string, deliveryId: string) => log(['retryable'], { endpointId, deliveryId });
    const planned = planReconstruction(
      input({
        lost: [
          ...lost('ep_sub', 'dlv_1'),
          ...lost('ep_unsub', 'dlv_2'),
          ...lost('ep_gone', 'dlv_3'),
          ...lost('ep_unknown', 'dlv_4'),
          ...lost('ep_sub', 'dlv_5'),
        ],
        replayed: new Set(['dlv_5']),
        endpoints: [
          endpoint('ep_sub'),
          endpoint('ep_unsub', { eventTypes: ['invoice.*'] }),
          endpoint('ep_gone', { deleted: true }),
        ],
      }),
    );
    expect(planned.map((p) => [p.deliveryId, p.state.status, p.state.statusReason])).toEqual([
      ['dlv_3', 'cancelled', 'endpoint_deleted'],
      ['dlv_1', 'pending', null],
      ['dlv_5', 'skipped', 'skipped_on_enable'],
      ['dlv_4', 'cancelled', 'endpoint_deleted'],
      ['dlv_2', 'cancelled', 'unsubscribed'],
    ]);
  });

  it("a deleted tenant's events get nothing new, and their lost pending deliveries come back cancelled", () => {
    const planned = planReconstruction(
      input({
        deletedTenants: new Set(['ten_1']),
        lost: log(['retryable'], { endpointId: 'ep_a' }),
        endpoints: [endpoint('ep_a'), endpoint('ep_b')],
      }),
    );
    expect(planned.map((p) => [p.endpointId, p.state.status, p.state.statusReason])).toEqual([
      ['ep_a', 'cancelled', 'tenant_deleted'],
    ]);
  });

  it('passes over events fan-out has not taken and test events, and keeps event order', () => {
    const planned = planReconstruction(
      input({
        events: [
          event({ id: 'evt_1' }),
          event({ id: 'evt_2', seq: 2, fannedOut: false }),
          event({ id: 'evt_3', seq: 3, testEvent: true }),
          event({ id: 'evt_4', seq: 4 }),
        ],
        lost: log(['delivered'], { eventId: 'evt_3', deliveryId: newId('delivery', T, ones) }),
        endpoints: [endpoint('ep_a')],
      }),
    );
    expect(summary(planned)).toEqual([
      ['evt_1', 'ep_a', 'new', 'pending'],
      ['evt_4', 'ep_a', 'new', 'pending'],
    ]);
  });
});

describe('walkFrom', () => {
  it('starts at the first id minted at `since`, or after the last event looked at once the walk is past it', () => {
    const floor = idFloor('event', T);
    expect(walkFrom({ after: null, since: T })).toEqual({ op: '>=', id: floor });
    const later = newId('event', T + 1, zeros);
    expect(walkFrom({ after: later, since: T })).toEqual({ op: '>', id: later });
    expect(walkFrom({ after: newId('event', T - 1, ones), since: T })).toEqual({ op: '>=', id: floor });
    // An event accepted at `since` itself is in the walk.
    expect(newId('event', T, ones) >= floor).toBe(true);
  });
});
