/**
 * Replay (ADR-10, PRODUCT.md §3 and §6): which finished deliveries a bulk replay may send again, when each replay
 * comes due, and when the caller must confirm. Pure: the store finds the matches, this decides the rest.
 *
 * A replay is a new delivery of the same event to the same endpoint with the original `webhook-id`. Replays are
 * rate-capped per endpoint by their due times rather than by a separate queue: the k-th replay of a request comes
 * due `k / rate` seconds after the start, and a request (a single replay too) starts after the last replay the
 * endpoint still has pending, so requests share one rate. The lease holds the same rate whatever the due times
 * (replay-pacing.ts), for replays held up past them. What keeps a large replay from starving first attempts is the
 * worker budget: replays hold only their own slots (worker/delivery-worker.ts, the `replay` role).
 */

import { matchesEventType } from './event-types.ts';

/** Replays per second per endpoint (PRODUCT.md §6). */
export const REPLAY_RATE_PER_SECOND = 10;
/** Above this many matches a bulk replay needs `"confirm": true` (409 `confirmation_required` otherwise). */
export const REPLAY_CONFIRM_ABOVE = 100;
/**
 * Replays created by one request at most, oldest first; the rest are the next request's (a delivery replayed once
 * no longer matches). Bounds one transaction: on SQLite it holds the write lock every other writer waits for.
 */
export const REPLAY_MAX_PER_REQUEST = 10_000;

/** What a bulk replay may pick: finished deliveries. Cancelled ones never (an acknowledged unsubscribe binds). */
export const REPLAYABLE_STATUSES = ['dead', 'delivered', 'skipped'] as const;
export type ReplayableStatus = (typeof REPLAYABLE_STATUSES)[number];

/**
 * When the first replay of a request comes due: now, or one interval after the latest due time among the
 * endpoint's pending replays if that is later (so concurrent and back-to-back requests keep the one rate).
 */
export function replayStart(
  now: number,
  latestPendingReplayDueAt: number | null,
  ratePerSecond: number,
): number {
  assertRate(ratePerSecond);
  if (latestPendingReplayDueAt === null) return now;
  return Math.max(now, latestPendingReplayDueAt + Math.ceil(1000 / ratePerSecond));
}

/** The due time of the k-th replay (0-based) of a request starting at `start`: k / rate seconds later, in ms. */
export function replayDueAt(start: number, k: number, ratePerSecond: number): number {
  assertRate(ratePerSecond);
  if (!Number.isSafeInteger(k) || k < 0) throw new RangeError('k must be an integer >= 0');
  return start + Math.floor((k * 1000) / ratePerSecond);
}

/**
 * One page of a bulk replay's candidates (oldest first): appends to `into` the ids of those whose event type the
 * endpoint still subscribes to, up to `max`. True once a match beyond `max` is seen (more remain, stop reading).
 */
export function collectReplayable(
  page: ReadonlyArray<{ id: string; event_type: string }>,
  subscribed: readonly string[],
  into: string[],
  max: number,
): boolean {
  for (const r of page) {
    if (!matchesEventType(subscribed, r.event_type)) continue;
    if (into.length === max) return true;
    into.push(r.id);
  }
  return false;
}

export type SingleReplayRefusal = 'cancelled' | 'unsubscribed';

/**
 * Why one delivery may not be replayed (POST /v1/deliveries/:id/replay), or null: the bulk replay's rule for one
 * delivery, so that neither path re-sends what an unsubscribe stopped. A cancelled delivery was cancelled by an
 * unsubscribe (or its endpoint's or tenant's deletion); an event type the endpoint no longer subscribes to is not
 * sent again, whatever the delivery's status — except a test event's, which was addressed to the endpoint whatever
 * it subscribes to (as an unsubscribe does not cancel it either). A pending delivery may be replayed (a second
 * copy, same webhook-id).
 */
export function singleReplayRefusal(
  status: string,
  eventType: string,
  subscribed: readonly string[],
  testEvent = false,
): SingleReplayRefusal | null {
  if (status === 'cancelled') return 'cancelled';
  if (!testEvent && !matchesEventType(subscribed, eventType)) return 'unsubscribed';
  return null;
}

/**
 * How many matches a bulk replay may go ahead with (null: any number). Each bound the caller gave is one: without
 * `confirm`, REPLAY_CONFIRM_ABOVE; with `expected_count`, the count the caller was shown and confirmed — more
 * matching now (deliveries that settled since) is not what was confirmed. The smallest bound holds.
 */
export function replayConfirmLimit(confirmed: boolean, expectedCount: number | null): number | null {
  const bounds = [
    ...(confirmed ? [] : [REPLAY_CONFIRM_ABOVE]),
    ...(expectedCount === null ? [] : [expectedCount]),
  ];
  return bounds.length === 0 ? null : Math.min(...bounds);
}

/** Whether a request matching `matched` deliveries must be confirmed (again) first. */
export const replayNeedsConfirmation = (matched: number, limit: number | null) =>
  limit !== null && matched > limit;

function assertRate(ratePerSecond: number) {
  if (!(Number.isFinite(ratePerSecond) && ratePerSecond > 0)) {
    throw new RangeError('ratePerSecond must be a finite number > 0');
  }
}
