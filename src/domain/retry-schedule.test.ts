import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { classifyOutcome, ERROR_CLASSES, type ErrorClass } from './outcome.ts';
import {
  BASE_DELAY_MS,
  MAX_AGE_MS,
  MAX_ATTEMPTS,
  MAX_DELAY_MS,
  maxRetryDelayMs,
  nextAttemptDecision,
  publishedRetrySchedule,
  RETRY_AFTER_CAP_MS,
  retryDelayMs,
} from './retry-schedule.ts';

const S = 1000;
const H = 3600 * S;
const T0 = Date.UTC(2026, 0, 1);

describe('constants (PRODUCT.md §5)', () => {
  it('match the specification', () => {
    expect(MAX_ATTEMPTS).toBe(12);
    expect(MAX_AGE_MS).toBe(72 * H);
    expect(BASE_DELAY_MS).toBe(5 * S);
    expect(MAX_DELAY_MS).toBe(6 * H);
    expect(RETRY_AFTER_CAP_MS).toBe(1 * H);
  });
});

describe('retryDelayMs', () => {
  it.each([
    [1, 5 * S],
    [2, 10 * S],
    [3, 20 * S],
    [11, 5120 * S],
    [13, 20480 * S],
    [14, 6 * H],
    [100, 6 * H],
    [5000, 6 * H],
  ])('after %i failures the wait is at most %i ms', (n, max) => {
    expect(maxRetryDelayMs(n)).toBe(max);
    expect(retryDelayMs(n, 0)).toBe(0);
    expect(retryDelayMs(n, 0.5)).toBe(Math.floor(max / 2));
    expect(retryDelayMs(n, 0.999_999_999)).toBeLessThanOrEqual(max);
    expect(retryDelayMs(n, 0.999_999_999)).toBeGreaterThan(max - 10);
  });

  it('is full jitter: seeded samples cover the whole range and stay inside it', () => {
    const rnd = seededRandom(42);
    const samples = Array.from({ length: 2000 }, () => retryDelayMs(4, rnd.float()));
    const max = 40 * S;
    expect(Math.min(...samples)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...samples)).toBeLessThanOrEqual(max);
    expect(samples.filter((s) => s < max * 0.1).length).toBeGreaterThan(100);
    expect(samples.filter((s) => s > max * 0.9).length).toBeGreaterThan(100);
    const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
    expect(Math.abs(mean - max / 2)).toBeLessThan(max * 0.05);
  });

  it.each([0, -1, 1.5, Number.NaN])('rejects failedAttempts %s', (n) => {
    expect(() => retryDelayMs(n, 0.5)).toThrow(RangeError);
  });

  it.each([1, -0.1, Number.NaN, 2])('rejects random %s', (r) => {
    expect(() => retryDelayMs(1, r)).toThrow(RangeError);
  });
});

describe('nextAttemptDecision', () => {
  const base = { firstAttemptAt: T0, now: T0, random: 0.5 };

  it('retries with the jittered delay after the first failure', () => {
    expect(nextAttemptDecision({ ...base, attemptsMade: 1 })).toEqual({ kind: 'retry', at: T0 + 2500 });
  });

  it('retries after 11 failures and dead-letters after the 12th', () => {
    expect(nextAttemptDecision({ ...base, attemptsMade: 11 })).toEqual({ kind: 'retry', at: T0 + 2560 * S });
    expect(nextAttemptDecision({ ...base, attemptsMade: 12 })).toEqual({
      kind: 'dead_letter',
      reason: 'max_attempts',
    });
    expect(nextAttemptDecision({ ...base, attemptsMade: 40 })).toMatchObject({ reason: 'max_attempts' });
  });

  it('max_attempts wins over max_age when both hold', () => {
    const late = { ...base, now: T0 + 100 * H };
    expect(nextAttemptDecision({ ...late, attemptsMade: 12 })).toMatchObject({ reason: 'max_attempts' });
  });

  it('dead-letters when the planned next start is after first attempt + 72 h', () => {
    const now = T0 + MAX_AGE_MS - 2 * S;
    // random 0.5 after 1 failure → 2.5 s → past the deadline by 0.5 s.
    expect(nextAttemptDecision({ ...base, now, attemptsMade: 1 })).toEqual({
      kind: 'dead_letter',
      reason: 'max_age',
    });
    // random 0.4 → 2 s → exactly at the deadline: still a retry.
    expect(nextAttemptDecision({ ...base, now, random: 0.4, attemptsMade: 1 })).toEqual({
      kind: 'retry',
      at: T0 + MAX_AGE_MS,
    });
  });

  it('dead-letters a failure that happens after the window has already closed', () => {
    expect(
      nextAttemptDecision({ ...base, now: T0 + MAX_AGE_MS + 1, random: 0, attemptsMade: 3 }),
    ).toMatchObject({ kind: 'dead_letter', reason: 'max_age' });
  });

  it('Retry-After replaces the computed delay', () => {
    expect(nextAttemptDecision({ ...base, attemptsMade: 1, retryAfterMs: 120 * S })).toEqual({
      kind: 'retry',
      at: T0 + 120 * S,
    });
    // Also when it is shorter than the computed delay would have been.
    expect(nextAttemptDecision({ ...base, attemptsMade: 10, retryAfterMs: 0 })).toEqual({
      kind: 'retry',
      at: T0,
    });
  });

  it('caps Retry-After at 1 h and ignores non-finite or negative values', () => {
    expect(nextAttemptDecision({ ...base, attemptsMade: 2, retryAfterMs: 5 * H })).toEqual({
      kind: 'retry',
      at: T0 + H,
    });
    expect(nextAttemptDecision({ ...base, attemptsMade: 2, retryAfterMs: -5 })).toEqual({
      kind: 'retry',
      at: T0,
    });
    expect(nextAttemptDecision({ ...base, attemptsMade: 2, retryAfterMs: Number.NaN })).toEqual({
      kind: 'retry',
      at: T0 + 5 * S,
    });
  });

  it('Retry-After cannot push a delivery past the max-age window', () => {
    const now = T0 + MAX_AGE_MS - 30 * 60 * S;
    expect(nextAttemptDecision({ ...base, now, attemptsMade: 5, retryAfterMs: H })).toMatchObject({
      reason: 'max_age',
    });
  });

  it('a full run of failures with seeded jitter ends in max_attempts within the worst case', () => {
    const rnd = seededRandom(9);
    let now = T0;
    let made = 0;
    for (;;) {
      made++;
      const d = nextAttemptDecision({ attemptsMade: made, firstAttemptAt: T0, now, random: rnd.float() });
      if (d.kind === 'dead_letter') {
        expect(d.reason).toBe('max_attempts');
        break;
      }
      expect(d.at).toBeGreaterThanOrEqual(now);
      now = d.at;
    }
    expect(made).toBe(12);
    expect(now - T0).toBeLessThanOrEqual(publishedRetrySchedule().worst_case_total_span_seconds * S);
  });

  it('rejects attemptsMade < 1', () => {
    expect(() => nextAttemptDecision({ ...base, attemptsMade: 0 })).toThrow(RangeError);
  });
});

describe('publishedRetrySchedule', () => {
  const published = publishedRetrySchedule();

  it('is JSON-serialisable without loss', () => {
    expect(JSON.parse(JSON.stringify(published))).toEqual(published);
  });

  it('publishes the constants and the per-attempt table', () => {
    expect(published).toMatchObject({
      max_attempts: 12,
      max_age_seconds: 259_200,
      jitter: 'full',
      base_delay_seconds: 5,
      max_delay_seconds: 21_600,
      retry_after_cap_seconds: 3600,
      retry_after_statuses: [429, 503],
    });
    expect(published.attempts).toHaveLength(12);
    expect(published.attempts[0]).toEqual({ attempt: 1, max_wait_seconds: 0, expected_wait_seconds: 0 });
    expect(published.attempts.map((a) => a.max_wait_seconds)).toEqual([
      0, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120,
    ]);
    for (const row of published.attempts.slice(1)) {
      expect(row.max_wait_seconds * 1000).toBe(maxRetryDelayMs(row.attempt - 1));
    }
  });

  it('spans match PRODUCT.md (about 1.4 h expected, at most about 2.8 h)', () => {
    expect(published.expected_total_span_seconds).toBe(5117.5);
    expect(published.worst_case_total_span_seconds).toBe(10_235);
    expect(published.expected_total_span_seconds / 3600).toBeCloseTo(1.4, 1);
    expect(published.worst_case_total_span_seconds / 3600).toBeCloseTo(2.8, 1);
    expect(published.worst_case_total_span_with_retry_after_seconds).toBe(10 * 3600 + 5120);
  });

  it('status and error classes agree with classifyOutcome', () => {
    expect(published.retryable.statuses).toEqual(['408', '429', '5xx']);
    for (const e of Object.keys(ERROR_CLASSES) as ErrorClass[]) {
      const listed = published.retryable.errors.includes(e) ? 'retryable' : 'permanent';
      expect(published.permanent.errors.includes(e)).toBe(listed === 'permanent');
      expect(classifyOutcome({ kind: 'error', errorClass: e }).result).toBe(listed);
    }
  });
});
