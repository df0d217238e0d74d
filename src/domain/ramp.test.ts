import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import { effectiveCap, RAMP_DURATION_MS, RAMP_START_PERCENT, rampEndsAt } from './ramp.ts';

const S = 1000;
const CLOSED = Date.UTC(2026, 0, 1, 4, 10, 0);

describe('constants (PRODUCT.md §5)', () => {
  it('10 % to 100 % over five minutes', () => {
    expect(RAMP_DURATION_MS).toBe(300 * S);
    expect(RAMP_START_PERCENT).toBe(10);
  });
});

describe('effectiveCap: worked values', () => {
  // [max, seconds after closing, cap]
  it.each<[number, number, number]>([
    [1, 0, 1],
    [1, 150, 1],
    [1, 300, 1],
    [3, 0, 1],
    [3, 188, 1],
    [3, 189, 2],
    [3, 299, 2],
    [3, 300, 3],
    [10, 0, 1],
    [10, 33, 1],
    [10, 34, 2],
    [10, 150, 5],
    [10, 266, 8],
    [10, 267, 9],
    [10, 299, 9],
    [10, 300, 10],
    [100, 0, 10],
    [100, 1, 10],
    [100, 4, 11],
    [100, 60, 28],
    [100, 150, 55],
    [100, 240, 82],
    [100, 299, 99],
    [100, 300, 100],
    [100, 3600, 100],
  ])('max %i, %i s after closing → %i', (max, seconds, cap) => {
    expect(effectiveCap(max, CLOSED, CLOSED + seconds * S)).toBe(cap);
  });

  it('no ramp (circuit never opened, or open) is the full cap', () => {
    for (const max of [1, 3, 10, 100]) expect(effectiveCap(max, null, CLOSED)).toBe(max);
  });

  it('a clock behind closedAt gives the starting cap, never more', () => {
    expect(effectiveCap(100, CLOSED, CLOSED - 10 * S)).toBe(10);
    expect(effectiveCap(10, CLOSED, CLOSED - 10 * S)).toBe(1);
  });

  it('exactly max at the end and forever after; one ms earlier less than max (when max > 1)', () => {
    for (const max of [2, 3, 10, 100]) {
      expect(effectiveCap(max, CLOSED, CLOSED + RAMP_DURATION_MS - 1)).toBe(max - 1);
      expect(effectiveCap(max, CLOSED, CLOSED + RAMP_DURATION_MS)).toBe(max);
      expect(effectiveCap(max, CLOSED, CLOSED + 30 * 24 * 3600 * S)).toBe(max);
    }
  });
});

describe('effectiveCap: properties over every second of the ramp, for caps 1..100', () => {
  for (const max of [1, 2, 3, 7, 10, 19, 20, 50, 99, 100]) {
    it(`max ${max}: integer, within [1, max], never above the line, monotone, max at the end`, () => {
      let previous = 0;
      for (let ms = -5 * S; ms <= RAMP_DURATION_MS + 5 * S; ms += 250) {
        const cap = effectiveCap(max, CLOSED, CLOSED + ms);
        expect(Number.isInteger(cap)).toBe(true);
        expect(cap).toBeGreaterThanOrEqual(1);
        expect(cap).toBeLessThanOrEqual(max);
        expect(cap).toBeGreaterThanOrEqual(previous);
        const t = Math.min(Math.max(ms, 0), RAMP_DURATION_MS) / RAMP_DURATION_MS;
        const line = max * (0.1 + 0.9 * t);
        // On or under the line (within float error), and within one of it unless held up by "at least 1".
        expect(cap).toBeLessThanOrEqual(Math.max(1, line + 1e-9));
        expect(cap).toBeGreaterThan(line - 1);
        if (ms >= RAMP_DURATION_MS) expect(cap).toBe(max);
        if (ms <= 0) expect(cap).toBe(Math.max(1, Math.floor(max / 10)));
        previous = cap;
      }
    });
  }

  it('random (seeded) pairs of times are ordered like their caps', () => {
    const rnd = seededRandom(7);
    for (let i = 0; i < 5000; i++) {
      const max = 1 + Math.floor(rnd.float() * 100);
      const a = Math.floor(rnd.float() * 1.2 * RAMP_DURATION_MS);
      const b = Math.floor(rnd.float() * 1.2 * RAMP_DURATION_MS);
      const [lo, hi] = a <= b ? [a, b] : [b, a];
      expect(effectiveCap(max, CLOSED, CLOSED + lo)).toBeLessThanOrEqual(
        effectiveCap(max, CLOSED, CLOSED + hi),
      );
    }
  });
});

describe('effectiveCap: input checks', () => {
  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('rejects maxConcurrency %s', (max) => {
    expect(() => effectiveCap(max, CLOSED, CLOSED)).toThrow(RangeError);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY])('rejects a time of %s', (t) => {
    expect(() => effectiveCap(10, CLOSED, t)).toThrow(RangeError);
    expect(() => effectiveCap(10, t, CLOSED)).toThrow(RangeError);
  });
});

describe('rampEndsAt', () => {
  it('is five minutes after closing, or null', () => {
    expect(rampEndsAt(CLOSED)).toBe(CLOSED + RAMP_DURATION_MS);
    expect(rampEndsAt(null)).toBeNull();
  });
});
