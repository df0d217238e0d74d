/**
 * The recovery ramp (PRODUCT.md §5, ADR-08): when an endpoint's circuit closes after an outage, its concurrency
 * cap rises linearly from 10 % to 100 % of `max_concurrency` over five minutes, because "the system that just
 * came back is the one least able to take what you have been saving up for it". It is enforced by the per-endpoint
 * in-flight cap at lease time, not by the queue.
 *
 *   cap(t) = max(1, floor(max · (10 % + 90 % · t / 5 min)))   for 0 <= t < 5 min,   max from 5 min on
 *
 * Rounding down keeps the cap on or under the line (never more load than the ramp allows) and makes it an integer;
 * "at least 1" keeps small endpoints moving (10 % of 1..19 rounds to 0 or 1). It is therefore monotone
 * non-decreasing in t, and exactly `max` at and after five minutes. For max 10 the cap steps up by one every
 * 33.3 s; for max 3 it is 1 until 189 s, then 2, then 3 at 300 s; for max 1 there is nothing to ramp.
 *
 * `closedAt` comes from the circuit state (circuit-breaker.ts); it is null while the circuit is open and for an
 * endpoint whose circuit never opened, which means "no ramp". A `now` before `closedAt` (another process's clock
 * running ahead) is treated as the ramp's start, never as something above it.
 */

export const RAMP_DURATION_MS = 5 * 60 * 1000;
export const RAMP_START_PERCENT = 10;

export function effectiveCap(maxConcurrency: number, closedAt: number | null, now: number): number {
  if (!Number.isSafeInteger(maxConcurrency) || maxConcurrency < 1) {
    throw new RangeError('maxConcurrency must be an integer >= 1');
  }
  if (!Number.isFinite(now) || (closedAt !== null && !Number.isFinite(closedAt))) {
    throw new RangeError('times must be finite numbers of milliseconds');
  }
  if (closedAt === null) return maxConcurrency;
  const elapsed = Math.max(0, now - closedAt);
  if (elapsed >= RAMP_DURATION_MS) return maxConcurrency;
  // Integer arithmetic up to the one division: max · (10·T + 90·t) / (100·T), exact for any realistic max.
  const numerator =
    maxConcurrency * (RAMP_START_PERCENT * RAMP_DURATION_MS + (100 - RAMP_START_PERCENT) * elapsed);
  return Math.max(1, Math.floor(numerator / (100 * RAMP_DURATION_MS)));
}

/** When the ramp that started at `closedAt` reaches the full cap; null when there is no ramp. */
export function rampEndsAt(closedAt: number | null): number | null {
  return closedAt === null ? null : closedAt + RAMP_DURATION_MS;
}
