/**
 * Endpoint health (PRODUCT.md §5, ADR-09, ADR-13, ADR-14): one of `healthy | degraded | failing | disabled`,
 * computed from what the endpoint actually answered. Shown in the console and at GET /v1/endpoints/:id/health,
 * and updated *before* any notice about the endpoint is sent (ADR-09: a customer watching their dashboard sees
 * it first).
 *
 * Rules, first match wins:
 * - disabled: the endpoint is disabled (by its owner or by auto-disable). Nothing else matters.
 * - failing — deliveries are not getting through:
 *   - the circuit is open or half_open, or
 *   - at least FAILING_CONSECUTIVE_FAILURES (10) attempts in a row failed, or
 *   - the last hour had at least MIN_ATTEMPTS_FOR_RATE (10) attempts and not one succeeded.
 * - degraded — deliveries get through, but not reliably:
 *   - the success rate is below DEGRADED_SUCCESS_PERCENT (95 %) over the last hour, or — when the last hour has
 *     fewer than 10 attempts — over the last 24 h; a window with fewer than 10 attempts is too small to judge, or
 *   - at least DEGRADED_CONSECUTIVE_FAILURES (3) attempts in a row failed (catches quiet endpoints that no rate
 *     window can judge), or
 *   - at least one delivery was dead-lettered in the last 24 h (something was lost and may need a replay).
 * - healthy otherwise, including an endpoint with no attempts at all (no evidence of a problem).
 *
 * Counted attempts are the endpoint's answers: `circuit_open` attempts (never sent) and `platform_error` ones
 * (Hookrail failed) are not, and must be left out of every count here (outcome.ts NOT_THE_ENDPOINTS, as in
 * circuit-breaker.ts). Permanent failures count as failures. The windows are rolling and computed by the caller
 * from the attempt log; they are not cross-checked against each other, because two counts read a moment apart may
 * legitimately disagree by an attempt.
 *
 * The last success and last failure times are deliberately not inputs: `consecutiveFailures` (reset by any
 * success) already says "no success since", and the windows say how recent; what the times add is the streak's
 * duration, which is what auto-disable needs (autoDisableDue) and what the health API displays beside the state.
 * Recovery shows as `degraded` for up to an hour (the failed probes stay in the last-hour window) and for 24 h
 * after a dead letter, which is the reminder that the outage's dead letters wait for a replay.
 */
import type { CircuitStateName } from './circuit-breaker.ts';

export const FAILING_CONSECUTIVE_FAILURES = 10;
export const DEGRADED_CONSECUTIVE_FAILURES = 3;
export const MIN_ATTEMPTS_FOR_RATE = 10;
export const DEGRADED_SUCCESS_PERCENT = 95;
export const AUTO_DISABLE_AFTER_MS = 72 * 60 * 60 * 1000;
/** Assumed answer time when an endpoint has no measured latency (see estimateDrainSeconds). */
export const DEFAULT_DRAIN_LATENCY_MS = 1000;

export type HealthState = 'healthy' | 'degraded' | 'failing' | 'disabled';
export type HealthReason =
  | 'disabled'
  | 'circuit_open'
  | 'consecutive_failures'
  | 'no_success_last_hour'
  | 'low_success_rate'
  | 'recent_dead_letter';

export interface WindowStats {
  /** Attempts in the window that judge the endpoint (circuit_open and platform_error excluded: judgesEndpoint). */
  attempts: number;
  successes: number;
}

export interface HealthInput {
  disabled: boolean;
  /** The circuit as it stands now: effectiveCircuitState(state, now). */
  circuit: CircuitStateName;
  consecutiveFailures: number;
  lastHour: WindowStats;
  last24h: WindowStats & { deadLetters: number };
}

export interface HealthAssessment {
  state: HealthState;
  /** Every rule that matched, most severe first, for the health API and console (ADR-13: self-diagnosable). */
  reasons: HealthReason[];
}

export function assessHealth(input: HealthInput): HealthAssessment {
  const { disabled, circuit, consecutiveFailures, lastHour, last24h } = input;
  assertCount(consecutiveFailures, 'consecutiveFailures');
  assertWindow(lastHour, 'lastHour');
  assertWindow(last24h, 'last24h');
  assertCount(last24h.deadLetters, 'last24h.deadLetters');

  const failing: HealthReason[] = [];
  if (circuit !== 'closed') failing.push('circuit_open');
  if (consecutiveFailures >= FAILING_CONSECUTIVE_FAILURES) failing.push('consecutive_failures');
  if (lastHour.attempts >= MIN_ATTEMPTS_FOR_RATE && lastHour.successes === 0) {
    failing.push('no_success_last_hour');
  }

  const degraded: HealthReason[] = [];
  const rateWindow = lastHour.attempts >= MIN_ATTEMPTS_FOR_RATE ? lastHour : last24h;
  // Integer comparison: successes / attempts < 95 % without floating point at the boundary.
  if (
    rateWindow.attempts >= MIN_ATTEMPTS_FOR_RATE &&
    rateWindow.successes * 100 < DEGRADED_SUCCESS_PERCENT * rateWindow.attempts
  ) {
    degraded.push('low_success_rate');
  }
  if (
    consecutiveFailures >= DEGRADED_CONSECUTIVE_FAILURES &&
    consecutiveFailures < FAILING_CONSECUTIVE_FAILURES
  ) {
    degraded.push('consecutive_failures');
  }
  if (last24h.deadLetters > 0) degraded.push('recent_dead_letter');

  const reasons: HealthReason[] = [...(disabled ? ['disabled' as const] : []), ...failing, ...degraded];
  const state: HealthState = disabled
    ? 'disabled'
    : failing.length > 0
      ? 'failing'
      : degraded.length > 0
        ? 'degraded'
        : 'healthy';
  return { state, reasons };
}

const SEVERITY: Record<HealthState, number> = { healthy: 0, degraded: 1, failing: 2, disabled: 3 };

export interface HealthTransition {
  changed: boolean;
  direction: 'worse' | 'better' | 'none';
  /**
   * The notice this change calls for, if any:
   * - `disabled`: the endpoint became disabled — always noticed (ADR-14: the disable writes a notification).
   * - `recovered`: it left `failing` for `degraded` or `healthy` (the circuit closed, answers are coming back).
   *   Sent only if a dead-letter or permanent-failure notice went out during the streak that ended and since the
   *   last recovery notice (recoveredNoticeDue in dead-letter-notice.ts), so a flapping endpoint cannot turn this
   *   into a stream of e-mails.
   * Becoming `failing` or `degraded` is NOT a notice by itself: the alert is the first dead letter (ADR-09: "alert
   * on the first occurrence of a thing that can be fixed"), and the circuit opening at 02:00:05 is not yet that.
   * Every change is still recorded (health history, metrics) — `changed` says so.
   */
  notice: 'disabled' | 'recovered' | null;
}

export function healthTransition(previous: HealthState, next: HealthState): HealthTransition {
  const delta = SEVERITY[next] - SEVERITY[previous];
  const direction = delta > 0 ? 'worse' : delta < 0 ? 'better' : 'none';
  const notice =
    next === 'disabled' && previous !== 'disabled'
      ? 'disabled'
      : previous === 'failing' && (next === 'degraded' || next === 'healthy')
        ? 'recovered'
        : null;
  return { changed: previous !== next, direction, notice };
}

/**
 * The notice a status change made through the API calls for: `disabled` when it disables an endpoint that was
 * enabled (the same rule as healthTransition's); nothing for disabling one already disabled, which changes nothing
 * the owner needs to hear, nor for enabling. Auto-disable writes its own `auto_disabled` notice instead.
 */
export function statusChangeNotice(
  previous: 'enabled' | 'disabled',
  next: 'enabled' | 'disabled',
): 'disabled' | null {
  return next === 'disabled' && previous !== 'disabled' ? 'disabled' : null;
}

export interface AutoDisableInput {
  /** First failed attempt since the last success (sent attempts only); null when the last attempt succeeded. */
  firstFailureOfStreakAt: number | null;
  lastSuccessAt: number | null;
  now: number;
}

/**
 * ADR-14: auto-disable after AUTO_DISABLE_AFTER_MS (72 h) of continuous failure with zero successes, i.e. when
 * the current failure streak started at least 72 h ago and no success came after its start. Exactly at 72 h is
 * due. The streak is measured in wall time, not attempt density: a quiet stretch with no attempts does not
 * interrupt it (no success came either), so a dead endpoint with little traffic is still disabled on time.
 * The first notice went out at the first dead letter, typically within hours of the streak's start, so the owner
 * has been told up to 72 h before this fires.
 */
export function autoDisableDue(input: AutoDisableInput): boolean {
  const at = autoDisableAt(input.firstFailureOfStreakAt, input.lastSuccessAt);
  return at !== null && input.now >= at;
}

/** When the current streak will be due for auto-disable (shown in the health API); null when there is none. */
export function autoDisableAt(
  firstFailureOfStreakAt: number | null,
  lastSuccessAt: number | null,
): number | null {
  if (firstFailureOfStreakAt === null) return null;
  // A success at or after the streak's recorded start means the caller's streak is stale: it was broken.
  if (lastSuccessAt !== null && lastSuccessAt >= firstFailureOfStreakAt) return null;
  return firstFailureOfStreakAt + AUTO_DISABLE_AFTER_MS;
}

export interface DrainInput {
  /** Deliveries waiting to be sent. */
  backlog: number;
  /** The concurrency cap the endpoint will run at (after a ramp: its max_concurrency). */
  effectiveCap: number;
  /** Median answer time of recent successful attempts; null when there is none (DEFAULT_DRAIN_LATENCY_MS). */
  p50LatencyMs: number | null;
  /** A rate cap that also applies, e.g. replay's per-endpoint rate (PRODUCT.md §6, default 10/s). */
  replayRatePerSecond?: number | undefined;
}

/**
 * Estimated seconds to drain `backlog` (GET /v1/endpoints/:id/backlog, re-enable, replay confirmation), rounded up:
 * backlog / throughput, where throughput = cap / p50 latency (Little's law with every slot busy), further capped
 * by `replayRatePerSecond`. An estimate, stated as such to the customer: it assumes every attempt succeeds at
 * the median latency and that nothing else competes for the endpoint's cap. It ignores retries, new events
 * arriving meanwhile, worker capacity, and a ramp (which costs at most 45 % of five minutes at full cap, about
 * 135 s). A latency below 1 ms is counted as 1 ms so that no estimate is zero for a non-empty backlog.
 */
export function estimateDrainSeconds(input: DrainInput): number {
  const { backlog, effectiveCap, p50LatencyMs, replayRatePerSecond } = input;
  assertCount(backlog, 'backlog');
  if (!Number.isSafeInteger(effectiveCap) || effectiveCap < 1) {
    throw new RangeError('effectiveCap must be an integer >= 1');
  }
  if (p50LatencyMs !== null && !(Number.isFinite(p50LatencyMs) && p50LatencyMs >= 0)) {
    throw new RangeError('p50LatencyMs must be a finite number >= 0 or null');
  }
  if (
    replayRatePerSecond !== undefined &&
    !(Number.isFinite(replayRatePerSecond) && replayRatePerSecond > 0)
  ) {
    throw new RangeError('replayRatePerSecond must be a finite number > 0');
  }
  if (backlog === 0) return 0;
  const latencyMs = Math.max(1, p50LatencyMs ?? DEFAULT_DRAIN_LATENCY_MS);
  // Each bound as one division of the inputs, so a whole number of seconds is not nudged up by rounding.
  const byCap = (backlog * latencyMs) / (effectiveCap * 1000);
  const byRate = replayRatePerSecond === undefined ? 0 : backlog / replayRatePerSecond;
  return Math.ceil(Math.max(byCap, byRate));
}

function assertCount(n: number, name: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name} must be an integer >= 0`);
}

function assertWindow(w: WindowStats, name: string): void {
  assertCount(w.attempts, `${name}.attempts`);
  assertCount(w.successes, `${name}.successes`);
  if (w.successes > w.attempts) throw new RangeError(`${name}.successes must not exceed attempts`);
}
