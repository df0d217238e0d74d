/**
 * Replay pacing (ADR-10, PRODUCT.md §6): the replay rate held where attempts start, at the lease. The replays'
 * spaced due times (replay.ts) already keep a draining request at the rate; this keeps it when replays were held
 * up past their due times (no process with the `replay` role, the endpoint disabled, its circuit open) and would
 * otherwise all start at once, and for replays due at once (re-enable with `deliver`).
 *
 * GCRA (the generic cell rate algorithm, as a virtual schedule): each endpoint keeps one number, its replays'
 * theoretical arrival time `tat` (epoch ms; null before its first replay), the time its replays would have reached
 * had each started one interval after the previous one. A replay may start at `now` while that schedule is less
 * than `burstMs` ahead of `now`, and each one started moves the schedule one interval on. So from `now` on, at most
 * `burstMs / intervalMs` replays start at once (10 after an idle spell), then one per interval: over any span of
 * `elapsed` ms, at most `elapsed / intervalMs + burstMs / intervalMs` start, whatever their due times and however
 * often leases call. A `tat` in the past is taken as `now`: idle time earns no more than the one burst.
 *
 * The stores keep `tat` on the endpoint's queue row and write it with the lease's own write of that row, under the
 * same lock (PostgreSQL) or write transaction (SQLite) that keeps the in-flight cap across processes. A writer's
 * `tat` is at most its `now + burstMs`, so a process whose clock runs ahead delays the others by that skew at most.
 */
import { REPLAY_RATE_PER_SECOND } from './replay.ts';

export interface ReplayPace {
  /** The steady gap between replay starts, in ms. */
  intervalMs: number;
  /** How far the schedule may run ahead of `now`, in ms: the burst, `burstMs / intervalMs` replays. */
  burstMs: number;
}

/** The replay rate's interval (100 ms at 10/s) and a burst of one second of it (10 replays at once at most). */
export const REPLAY_PACE: ReplayPace = {
  intervalMs: Math.ceil(1000 / REPLAY_RATE_PER_SECOND),
  burstMs: 1000,
};

/** How many replays of an endpoint may start at `now`, given its `tat`. */
export function replayAllowance(tat: number | null, now: number, pace: ReplayPace = REPLAY_PACE): number {
  assertPace(pace);
  const from = tat === null ? now : Math.max(tat, now);
  return Math.max(0, Math.floor((now + pace.burstMs - from) / pace.intervalMs));
}

/**
 * Of `wanted` replays, how many may start at `now` (`take`), and the endpoint's `tat` once they have: unchanged
 * when none starts, else `take` intervals after `max(tat, now)`.
 */
export function replayPaced(
  tat: number | null,
  now: number,
  wanted: number,
  pace: ReplayPace = REPLAY_PACE,
): { take: number; tat: number | null } {
  const take = Math.max(0, Math.min(wanted, replayAllowance(tat, now, pace)));
  if (take === 0) return { take, tat };
  return { take, tat: (tat === null ? now : Math.max(tat, now)) + take * pace.intervalMs };
}

/**
 * The latest `tat` that still lets one replay start at `now` (allowance >= 1 exactly when `tat` is null or at most
 * this): the stores' condition for visiting an endpoint for replays alone.
 */
export function replayTatAllowingOne(now: number, pace: ReplayPace = REPLAY_PACE): number {
  assertPace(pace);
  return now + pace.burstMs - pace.intervalMs;
}

function assertPace(pace: ReplayPace) {
  if (!(Number.isSafeInteger(pace.intervalMs) && pace.intervalMs > 0)) {
    throw new RangeError('intervalMs must be an integer > 0');
  }
  if (!(Number.isSafeInteger(pace.burstMs) && pace.burstMs >= pace.intervalMs)) {
    throw new RangeError('burstMs must be an integer >= intervalMs');
  }
}
