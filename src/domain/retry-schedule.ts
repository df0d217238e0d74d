/**
 * The retry schedule (PRODUCT.md §5, ADR-09). Attempt 1 runs at once; before attempt n+1 the delivery waits
 * uniform-random in [0, min(6 h, 5 s · 2^(n-1))] ("full jitter", so a recovering endpoint is not hit by a
 * synchronised wave). A `Retry-After` on 429/503 replaces the computed delay, capped at 1 h. A delivery is
 * dead-lettered after 12 failed attempts or when its next attempt would start more than 72 h after its first.
 *
 * With these numbers the 12-attempt budget runs out long before 72 h (about 1.4 h expected, 2.8 h worst
 * case, 11.4 h if every answer is a maximal Retry-After), so max_age only bites when attempts start late:
 * backlog, a blocked ordering head, or a disabled endpoint that is re-enabled with `deliver`.
 * `publishedRetrySchedule()` is served verbatim at GET /v1/retry-schedule, so it is derived from the same
 * constants and cannot drift from the code that schedules.
 */
import {
  ERROR_CLASSES,
  type ErrorClass,
  RETRY_AFTER_CAP_MS,
  RETRY_AFTER_STATUSES,
  RETRYABLE_STATUSES_4XX,
} from './outcome.ts';

export { RETRY_AFTER_CAP_MS };
export const MAX_ATTEMPTS = 12;
export const MAX_AGE_MS = 72 * 60 * 60 * 1000;
export const BASE_DELAY_MS = 5 * 1000;
export const MAX_DELAY_MS = 6 * 60 * 60 * 1000;
export const CONNECT_TIMEOUT_MS = 5 * 1000;
export const ATTEMPT_TIMEOUT_MS = 15 * 1000;
/** At most this much of a response body is read; then the connection is dropped (PRODUCT.md §5). */
export const RESPONSE_READ_LIMIT_BYTES = 64 * 1024;
/** The prefix of the response body kept in the attempt log. */
export const RESPONSE_STORED_BYTES = 4 * 1024;

export type RetryDecision =
  | { kind: 'retry'; at: number }
  | { kind: 'dead_letter'; reason: 'max_attempts' | 'max_age' };

export interface RetryInput {
  /** Failed attempts so far, including the one just made (circuit_open and platform_error attempts count). */
  attemptsMade: number;
  firstAttemptAt: number;
  now: number;
  /** Uniform in [0, 1), from the Random port. */
  random: number;
  /** Already parsed and capped by classifyOutcome; capped again here so no caller can exceed the cap. */
  retryAfterMs?: number | undefined;
}

/** Upper bound of the wait before attempt `failedAttempts + 1`. */
export function maxRetryDelayMs(failedAttempts: number): number {
  if (!Number.isSafeInteger(failedAttempts) || failedAttempts < 1) {
    throw new RangeError('failedAttempts must be an integer >= 1');
  }
  // 2^(n-1) overflows to Infinity for very large n; min() still yields the cap, so no special case.
  return Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** (failedAttempts - 1));
}

export function retryDelayMs(failedAttempts: number, random: number): number {
  if (!(random >= 0 && random < 1)) throw new RangeError('random must be in [0, 1)');
  return Math.floor(random * maxRetryDelayMs(failedAttempts));
}

/**
 * Max-age rule chosen: dead-letter when the *planned* next start would be later than firstAttemptAt + 72 h
 * (exactly at the deadline still retries). Deciding on the planned start, rather than on "72 h have already
 * passed", means no attempt is ever scheduled beyond the window, and a dead letter is raised as soon as it is
 * certain instead of one more backoff later. A retry that was scheduled inside the window but starts late
 * (backlog) still runs; the next failure then dead-letters it.
 */
export function nextAttemptDecision(input: RetryInput): RetryDecision {
  const { attemptsMade, firstAttemptAt, now, random, retryAfterMs } = input;
  if (!Number.isSafeInteger(attemptsMade) || attemptsMade < 1) {
    throw new RangeError('attemptsMade must be an integer >= 1');
  }
  if (attemptsMade >= MAX_ATTEMPTS) return { kind: 'dead_letter', reason: 'max_attempts' };
  const delay =
    retryAfterMs !== undefined && Number.isFinite(retryAfterMs)
      ? Math.min(Math.max(0, Math.floor(retryAfterMs)), RETRY_AFTER_CAP_MS)
      : retryDelayMs(attemptsMade, random);
  const at = now + delay;
  if (at > firstAttemptAt + MAX_AGE_MS) return { kind: 'dead_letter', reason: 'max_age' };
  return { kind: 'retry', at };
}

export interface PublishedRetrySchedule {
  version: 1;
  max_attempts: number;
  max_age_seconds: number;
  jitter: 'full';
  base_delay_seconds: number;
  max_delay_seconds: number;
  retry_after_cap_seconds: number;
  retry_after_statuses: number[];
  connect_timeout_seconds: number;
  attempt_timeout_seconds: number;
  attempts: { attempt: number; max_wait_seconds: number; expected_wait_seconds: number }[];
  expected_total_span_seconds: number;
  worst_case_total_span_seconds: number;
  worst_case_total_span_with_retry_after_seconds: number;
  delivered: { statuses: string[] };
  retryable: { statuses: string[]; errors: ErrorClass[] };
  permanent: { statuses: string; errors: ErrorClass[] };
}

/**
 * Spans are from the start of attempt 1 to the start of the last attempt and exclude attempt durations
 * (up to attempt_timeout_seconds each) and queue wait.
 */
export function publishedRetrySchedule(): PublishedRetrySchedule {
  const attempts = [{ attempt: 1, max_wait_seconds: 0, expected_wait_seconds: 0 }];
  let worst = 0;
  let worstWithRetryAfter = 0;
  for (let n = 1; n < MAX_ATTEMPTS; n++) {
    const max = maxRetryDelayMs(n);
    attempts.push({ attempt: n + 1, max_wait_seconds: max / 1000, expected_wait_seconds: max / 2000 });
    worst += max;
    worstWithRetryAfter += Math.max(max, RETRY_AFTER_CAP_MS);
  }
  const errors = Object.keys(ERROR_CLASSES) as ErrorClass[];
  return {
    version: 1,
    max_attempts: MAX_ATTEMPTS,
    max_age_seconds: MAX_AGE_MS / 1000,
    jitter: 'full',
    base_delay_seconds: BASE_DELAY_MS / 1000,
    max_delay_seconds: MAX_DELAY_MS / 1000,
    retry_after_cap_seconds: RETRY_AFTER_CAP_MS / 1000,
    retry_after_statuses: [...RETRY_AFTER_STATUSES],
    connect_timeout_seconds: CONNECT_TIMEOUT_MS / 1000,
    attempt_timeout_seconds: ATTEMPT_TIMEOUT_MS / 1000,
    attempts,
    expected_total_span_seconds: worst / 2000,
    worst_case_total_span_seconds: worst / 1000,
    worst_case_total_span_with_retry_after_seconds: Math.min(worstWithRetryAfter, MAX_AGE_MS) / 1000,
    delivered: { statuses: ['2xx'] },
    retryable: {
      statuses: [...RETRYABLE_STATUSES_4XX.map(String), '5xx'],
      errors: errors.filter((e) => ERROR_CLASSES[e] === 'retryable'),
    },
    permanent: {
      statuses: 'every other non-2xx status, including 3xx left after redirect handling and 410',
      errors: errors.filter((e) => ERROR_CLASSES[e] === 'permanent'),
    },
  };
}
