import { describe, expect, it } from 'vitest';
import {
  classifyOutcome,
  ERROR_CLASSES,
  type ErrorClass,
  isErrorClass,
  judgesEndpoint,
  NOT_THE_ENDPOINTS,
  type Outcome,
  parseHttpDate,
  parseRetryAfter,
  RETRY_AFTER_CAP_MS,
} from './outcome.ts';

const NOW = Date.UTC(2026, 2, 1, 12, 0, 0);
const H = 3_600_000;

describe('classifyOutcome: statuses', () => {
  const permanent: Outcome = { result: 'permanent', errorClass: 'http_status' };
  const retryable: Outcome = { result: 'retryable', errorClass: 'http_status' };
  it.each<[number, Outcome]>([
    [200, { result: 'delivered' }],
    [201, { result: 'delivered' }],
    [202, { result: 'delivered' }],
    [204, { result: 'delivered' }],
    [299, { result: 'delivered' }],
    [100, permanent],
    [199, permanent],
    [301, permanent],
    [302, permanent],
    [304, permanent],
    [307, permanent],
    [308, permanent],
    [400, permanent],
    [401, permanent],
    [403, permanent],
    [404, permanent],
    [405, permanent],
    [409, permanent],
    [410, permanent],
    [413, permanent],
    [422, permanent],
    [499, permanent],
    [408, retryable],
    [429, retryable],
    [500, retryable],
    [502, retryable],
    [503, retryable],
    [504, retryable],
    [599, retryable],
    [600, permanent],
  ])('%i → %o', (status, expected) => {
    expect(classifyOutcome({ kind: 'response', status, nowMs: NOW })).toEqual(expected);
  });
});

describe('classifyOutcome: Retry-After', () => {
  it.each<[number, string | null | undefined, number | undefined]>([
    [429, '120', 120_000],
    [503, '0', 0],
    [503, ' 30 ', 30_000],
    [429, '7200', RETRY_AFTER_CAP_MS],
    [429, '99999999999999999999', RETRY_AFTER_CAP_MS],
    [429, 'Sun, 01 Mar 2026 12:05:00 GMT', 300_000],
    [503, 'Sun, 01 Mar 2026 11:00:00 GMT', 0],
    [503, 'Mon, 02 Mar 2026 12:00:00 GMT', RETRY_AFTER_CAP_MS],
    [429, null, undefined],
    [429, undefined, undefined],
    [429, '', undefined],
    [429, 'soon', undefined],
    [429, '-5', undefined],
    [429, '1.5', undefined],
    [429, '2026-03-01T12:05:00Z', undefined],
    // Only 429 and 503 are honoured: on other retryable statuses the computed backoff applies.
    [500, '120', undefined],
    [502, '120', undefined],
    [408, '120', undefined],
  ])('%i with %j → %s ms', (status, header, expected) => {
    const out = classifyOutcome({ kind: 'response', status, retryAfterHeader: header, nowMs: NOW });
    expect(out.result).toBe('retryable');
    expect(out).toEqual(
      expected === undefined
        ? { result: 'retryable', errorClass: 'http_status' }
        : { result: 'retryable', errorClass: 'http_status', retryAfterMs: expected },
    );
  });

  it('ignores Retry-After on delivered and permanent responses', () => {
    expect(classifyOutcome({ kind: 'response', status: 200, retryAfterHeader: '5', nowMs: NOW })).toEqual({
      result: 'delivered',
    });
    expect(classifyOutcome({ kind: 'response', status: 301, retryAfterHeader: '5', nowMs: NOW })).toEqual({
      result: 'permanent',
      errorClass: 'http_status',
    });
  });
});

describe('classifyOutcome: transport errors', () => {
  it.each<[ErrorClass, 'retryable' | 'permanent']>([
    ['connect_refused', 'retryable'],
    ['connect_timeout', 'retryable'],
    ['dns', 'retryable'],
    ['tls', 'retryable'],
    ['reset', 'retryable'],
    ['timeout', 'retryable'],
    ['network', 'retryable'],
    ['circuit_open', 'retryable'],
    ['platform_error', 'retryable'],
    ['destination_blocked', 'permanent'],
    ['redirect_rejected', 'permanent'],
  ])('%s → %s', (errorClass, result) => {
    expect(classifyOutcome({ kind: 'error', errorClass })).toEqual({ result, errorClass });
  });

  it('the table above covers every error class', () => {
    expect(Object.keys(ERROR_CLASSES).sort()).toEqual(
      [
        'circuit_open',
        'connect_refused',
        'connect_timeout',
        'destination_blocked',
        'dns',
        'network',
        'platform_error',
        'redirect_rejected',
        'reset',
        'timeout',
        'tls',
      ].sort(),
    );
  });

  it('judgesEndpoint: only circuit_open and platform_error say nothing about the endpoint', () => {
    expect(NOT_THE_ENDPOINTS).toEqual(['circuit_open', 'platform_error']);
    for (const errorClass of Object.keys(ERROR_CLASSES)) {
      expect(judgesEndpoint(errorClass)).toBe(!NOT_THE_ENDPOINTS.includes(errorClass as ErrorClass));
    }
    expect(judgesEndpoint(null)).toBe(true); // delivered
    expect(judgesEndpoint('http_status')).toBe(true);
    expect(judgesEndpoint('some_future_class')).toBe(true);
  });

  it('isErrorClass guards persisted strings', () => {
    expect(isErrorClass('dns')).toBe(true);
    expect(isErrorClass('body_too_large')).toBe(false);
    expect(isErrorClass('toString')).toBe(false);
  });
});

describe('parseHttpDate', () => {
  const expected = Date.UTC(1994, 10, 6, 8, 49, 37);
  it.each([
    ['IMF-fixdate', 'Sun, 06 Nov 1994 08:49:37 GMT', expected],
    ['RFC 850', 'Sunday, 06-Nov-94 08:49:37 GMT', expected],
    ['asctime (UTC, not local time)', 'Sun Nov  6 08:49:37 1994', expected],
    ['RFC 850 two-digit year in the 2000s', 'Sunday, 01-Mar-26 12:00:00 GMT', NOW],
    ['lower-case month', 'Sun, 01 mar 2026 12:00:00 GMT', NOW],
    ['leap second clamped', 'Sun, 01 Mar 2026 11:59:60 GMT', NOW - 1000],
    ['31 February', 'Sat, 31 Feb 2026 12:00:00 GMT', undefined],
    ['29 February in a leap year', 'Thu, 29 Feb 2024 00:00:00 GMT', Date.UTC(2024, 1, 29)],
    ['29 February in a common year', 'Sun, 29 Feb 2026 00:00:00 GMT', undefined],
    ['29 February 1900 (not a leap year)', 'Thu, 29 Feb 1900 00:00:00 GMT', undefined],
    ['31 April', 'Thu, 31 Apr 2026 00:00:00 GMT', undefined],
    ['unknown month', 'Sun, 01 Foo 2026 12:00:00 GMT', undefined],
    ['hour 24', 'Sun, 01 Mar 2026 24:00:00 GMT', undefined],
    ['not GMT', 'Sun, 01 Mar 2026 12:00:00 +0100', undefined],
    ['ISO 8601', '2026-03-01T12:00:00Z', undefined],
  ])('%s', (_name, value, ms) => {
    expect(parseHttpDate(value)).toBe(ms);
  });
});

describe('parseRetryAfter', () => {
  it('caps and floors', () => {
    expect(parseRetryAfter('3600', NOW)).toBe(H);
    expect(parseRetryAfter('3601', NOW)).toBe(H);
    expect(parseRetryAfter('Sun, 01 Mar 2026 11:59:59 GMT', NOW)).toBe(0);
  });

  it('reads delay-seconds with leading zeros as the number they spell', () => {
    expect(parseRetryAfter('0000000000005', NOW)).toBe(5_000);
    expect(parseRetryAfter('00', NOW)).toBe(0);
    expect(parseRetryAfter('000000000000000000000120', NOW)).toBe(120_000);
    // Many significant digits still saturate at the cap.
    expect(parseRetryAfter('99999999999', NOW)).toBe(H);
  });
});
