import { describe, expect, it } from 'vitest';
import { T0 } from '../../test/support/journey-times.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import type { CircuitStateName } from './circuit-breaker.ts';
import {
  AUTO_DISABLE_AFTER_MS,
  assessHealth,
  autoDisableAt,
  autoDisableDue,
  DEFAULT_DRAIN_LATENCY_MS,
  DEGRADED_CONSECUTIVE_FAILURES,
  DEGRADED_SUCCESS_PERCENT,
  estimateDrainSeconds,
  FAILING_CONSECUTIVE_FAILURES,
  type HealthInput,
  type HealthState,
  healthTransition,
  MIN_ATTEMPTS_FOR_RATE,
  statusChangeNotice,
} from './endpoint-health.ts';

const H = 3_600_000;

const quiet: HealthInput = {
  disabled: false,
  circuit: 'closed',
  consecutiveFailures: 0,
  lastHour: { attempts: 0, successes: 0 },
  last24h: { attempts: 0, successes: 0, deadLetters: 0 },
};

function busy(attempts: number, successes: number): HealthInput {
  return {
    ...quiet,
    lastHour: { attempts, successes },
    last24h: { attempts: attempts * 10, successes: successes * 10, deadLetters: 0 },
  };
}

describe('constants', () => {
  it('are the documented thresholds', () => {
    expect(FAILING_CONSECUTIVE_FAILURES).toBe(10);
    expect(DEGRADED_CONSECUTIVE_FAILURES).toBe(3);
    expect(MIN_ATTEMPTS_FOR_RATE).toBe(10);
    expect(DEGRADED_SUCCESS_PERCENT).toBe(95);
    expect(AUTO_DISABLE_AFTER_MS).toBe(72 * H);
    expect(DEFAULT_DRAIN_LATENCY_MS).toBe(1000);
  });
});

describe('assessHealth: healthy', () => {
  it('no attempts at all is healthy (no evidence of a problem)', () => {
    expect(assessHealth(quiet)).toEqual({ state: 'healthy', reasons: [] });
  });

  it('all good, and exactly 95 % is still healthy', () => {
    expect(assessHealth(busy(1000, 1000))).toEqual({ state: 'healthy', reasons: [] });
    expect(assessHealth(busy(100, 95))).toEqual({ state: 'healthy', reasons: [] });
    expect(assessHealth(busy(20, 19))).toEqual({ state: 'healthy', reasons: [] });
  });

  it('two failures in a row is not yet anything', () => {
    expect(assessHealth({ ...busy(100, 98), consecutiveFailures: 2 }).state).toBe('healthy');
  });
});

describe('assessHealth: disabled', () => {
  it('wins over everything, and the other reasons are still listed', () => {
    expect(assessHealth({ ...quiet, disabled: true })).toEqual({ state: 'disabled', reasons: ['disabled'] });
    const worst: HealthInput = {
      disabled: true,
      circuit: 'open',
      consecutiveFailures: 500,
      lastHour: { attempts: 12, successes: 0 },
      last24h: { attempts: 300, successes: 0, deadLetters: 40 },
    };
    expect(assessHealth(worst)).toEqual({
      state: 'disabled',
      reasons: [
        'disabled',
        'circuit_open',
        'consecutive_failures',
        'no_success_last_hour',
        'low_success_rate',
        'recent_dead_letter',
      ],
    });
  });
});

describe('assessHealth: failing', () => {
  it.each<CircuitStateName>(['open', 'half_open'])('circuit %s', (circuit) => {
    expect(assessHealth({ ...busy(100, 100), circuit })).toEqual({
      state: 'failing',
      reasons: ['circuit_open'],
    });
  });

  it('10 consecutive failures (9 is only degraded)', () => {
    expect(assessHealth({ ...quiet, consecutiveFailures: 10 })).toEqual({
      state: 'failing',
      reasons: ['consecutive_failures'],
    });
    expect(assessHealth({ ...quiet, consecutiveFailures: 9 })).toEqual({
      state: 'degraded',
      reasons: ['consecutive_failures'],
    });
  });

  it('no success in the last hour with at least 10 attempts (9 is too few to judge)', () => {
    expect(assessHealth(busy(10, 0)).state).toBe('failing');
    expect(assessHealth(busy(10, 0)).reasons).toContain('no_success_last_hour');
    const nine: HealthInput = { ...quiet, lastHour: { attempts: 9, successes: 0 } };
    expect(assessHealth(nine)).toEqual({ state: 'healthy', reasons: [] });
  });
});

describe('assessHealth: degraded', () => {
  it('below 95 % over the last hour with at least 10 attempts', () => {
    expect(assessHealth(busy(100, 94))).toEqual({ state: 'degraded', reasons: ['low_success_rate'] });
    expect(assessHealth(busy(20, 18))).toEqual({ state: 'degraded', reasons: ['low_success_rate'] });
    expect(assessHealth(busy(10, 1))).toEqual({ state: 'degraded', reasons: ['low_success_rate'] });
  });

  it('the last hour decides when it has enough attempts, whatever the 24 h rate', () => {
    const recovered: HealthInput = {
      ...quiet,
      lastHour: { attempts: 50, successes: 50 },
      last24h: { attempts: 100, successes: 50, deadLetters: 0 },
    };
    expect(assessHealth(recovered).state).toBe('healthy');
  });

  it('falls back to the last 24 h when the last hour is too small', () => {
    const lowVolume: HealthInput = {
      ...quiet,
      lastHour: { attempts: 2, successes: 2 },
      last24h: { attempts: 20, successes: 18, deadLetters: 0 },
    };
    expect(assessHealth(lowVolume)).toEqual({ state: 'degraded', reasons: ['low_success_rate'] });
    expect(
      assessHealth({ ...lowVolume, last24h: { attempts: 20, successes: 19, deadLetters: 0 } }).state,
    ).toBe('healthy');
    expect(assessHealth({ ...lowVolume, last24h: { attempts: 9, successes: 0, deadLetters: 0 } }).state).toBe(
      'healthy',
    );
  });

  it('3 to 9 consecutive failures', () => {
    for (let n = 3; n <= 9; n++)
      expect(assessHealth({ ...quiet, consecutiveFailures: n }).state).toBe('degraded');
  });

  it('any dead letter in the last 24 h', () => {
    const dl: HealthInput = {
      ...busy(100, 100),
      last24h: { attempts: 1000, successes: 999, deadLetters: 1 },
    };
    expect(assessHealth(dl)).toEqual({ state: 'degraded', reasons: ['recent_dead_letter'] });
  });

  it('recovery right after the circuit closed: degraded, not failing (the probe succeeded)', () => {
    const justClosed: HealthInput = {
      disabled: false,
      circuit: 'closed',
      consecutiveFailures: 0,
      lastHour: { attempts: 13, successes: 1 },
      last24h: { attempts: 400, successes: 200, deadLetters: 35 },
    };
    expect(assessHealth(justClosed)).toEqual({
      state: 'degraded',
      reasons: ['low_success_rate', 'recent_dead_letter'],
    });
  });
});

describe('assessHealth: input checks', () => {
  it.each<[string, HealthInput]>([
    ['negative consecutive', { ...quiet, consecutiveFailures: -1 }],
    ['fractional consecutive', { ...quiet, consecutiveFailures: 0.5 }],
    ['successes > attempts', { ...quiet, lastHour: { attempts: 1, successes: 2 } }],
    ['NaN attempts', { ...quiet, lastHour: { attempts: Number.NaN, successes: 0 } }],
    ['negative dead letters', { ...quiet, last24h: { attempts: 0, successes: 0, deadLetters: -1 } }],
  ])('rejects %s', (_name, input) => {
    expect(() => assessHealth(input)).toThrow(RangeError);
  });
});

describe('assessHealth: properties (seeded)', () => {
  it('monotone: more failures never make the state better', () => {
    const rnd = seededRandom(11);
    const rank: Record<HealthState, number> = { healthy: 0, degraded: 1, failing: 2, disabled: 3 };
    const int = (n: number) => Math.floor(rnd.float() * n);
    for (let i = 0; i < 3000; i++) {
      const attempts = int(200);
      const successes = int(attempts + 1);
      const base: HealthInput = {
        disabled: rnd.float() < 0.1,
        circuit: (['closed', 'closed', 'closed', 'open', 'half_open'] as const)[int(5)]!,
        consecutiveFailures: int(30),
        lastHour: { attempts, successes },
        last24h: { attempts: attempts + int(500), successes: successes + int(100), deadLetters: int(3) },
      };
      base.last24h.successes = Math.min(base.last24h.successes, base.last24h.attempts);
      const a = assessHealth(base);
      // One more failed attempt in both windows and in the streak.
      const worse: HealthInput = {
        ...base,
        consecutiveFailures: base.consecutiveFailures + 1,
        lastHour: { attempts: attempts + 1, successes },
        last24h: { ...base.last24h, attempts: base.last24h.attempts + 1 },
      };
      expect(rank[assessHealth(worse).state]).toBeGreaterThanOrEqual(rank[a.state]);
      // Reasons are consistent with the state.
      expect(a.reasons.length === 0).toBe(a.state === 'healthy');
      expect(a.reasons.includes('disabled')).toBe(a.state === 'disabled');
    }
  });
});

describe('healthTransition: every pair', () => {
  const states: HealthState[] = ['healthy', 'degraded', 'failing', 'disabled'];
  const expected: Record<string, [direction: string, notice: string | null]> = {
    'healthy→healthy': ['none', null],
    'healthy→degraded': ['worse', null],
    'healthy→failing': ['worse', null],
    'healthy→disabled': ['worse', 'disabled'],
    'degraded→healthy': ['better', null],
    'degraded→degraded': ['none', null],
    'degraded→failing': ['worse', null],
    'degraded→disabled': ['worse', 'disabled'],
    'failing→healthy': ['better', 'recovered'],
    'failing→degraded': ['better', 'recovered'],
    'failing→failing': ['none', null],
    'failing→disabled': ['worse', 'disabled'],
    'disabled→healthy': ['better', null],
    'disabled→degraded': ['better', null],
    'disabled→failing': ['better', null],
    'disabled→disabled': ['none', null],
  };
  for (const from of states) {
    for (const to of states) {
      const [direction, notice] = expected[`${from}→${to}`]!;
      it(`${from} → ${to}: ${direction}, notice ${notice}`, () => {
        expect(healthTransition(from, to)).toEqual({ changed: from !== to, direction, notice });
      });
    }
  }
});

describe('statusChangeNotice', () => {
  it('disabling an enabled endpoint is noticed; re-disabling and enabling are not', () => {
    expect(statusChangeNotice('enabled', 'disabled')).toBe('disabled');
    expect(statusChangeNotice('disabled', 'disabled')).toBeNull();
    expect(statusChangeNotice('disabled', 'enabled')).toBeNull();
    expect(statusChangeNotice('enabled', 'enabled')).toBeNull();
  });
});

describe('autoDisableDue (72 h of continuous failure, zero successes)', () => {
  it('is due exactly at 72 h after the streak began, not a millisecond earlier', () => {
    const input = { firstFailureOfStreakAt: T0, lastSuccessAt: T0 - H };
    expect(autoDisableDue({ ...input, now: T0 + 72 * H - 1 })).toBe(false);
    expect(autoDisableDue({ ...input, now: T0 + 72 * H })).toBe(true);
    expect(autoDisableDue({ ...input, now: T0 + 200 * H })).toBe(true);
    expect(autoDisableAt(T0, T0 - H)).toBe(T0 + 72 * H);
  });

  it('an endpoint that never succeeded is measured from its first failure', () => {
    expect(autoDisableDue({ firstFailureOfStreakAt: T0, lastSuccessAt: null, now: T0 + 72 * H })).toBe(true);
  });

  it('no streak, never due', () => {
    expect(autoDisableDue({ firstFailureOfStreakAt: null, lastSuccessAt: T0, now: T0 + 1000 * H })).toBe(
      false,
    );
    expect(autoDisableDue({ firstFailureOfStreakAt: null, lastSuccessAt: null, now: T0 + 1000 * H })).toBe(
      false,
    );
    expect(autoDisableAt(null, null)).toBeNull();
  });

  it('a success at or after the recorded streak start means the streak is stale: not due', () => {
    expect(autoDisableDue({ firstFailureOfStreakAt: T0, lastSuccessAt: T0, now: T0 + 100 * H })).toBe(false);
    expect(autoDisableDue({ firstFailureOfStreakAt: T0, lastSuccessAt: T0 + H, now: T0 + 100 * H })).toBe(
      false,
    );
    expect(autoDisableAt(T0, T0 + H)).toBeNull();
  });
});

describe('estimateDrainSeconds', () => {
  it('is backlog / (cap / latency), rounded up', () => {
    // 400,000 events, 10 in flight, 200 ms each → 50/s → 8000 s.
    expect(estimateDrainSeconds({ backlog: 400_000, effectiveCap: 10, p50LatencyMs: 200 })).toBe(8000);
    expect(estimateDrainSeconds({ backlog: 1, effectiveCap: 10, p50LatencyMs: 200 })).toBe(1);
    expect(estimateDrainSeconds({ backlog: 101, effectiveCap: 100, p50LatencyMs: 1000 })).toBe(2);
    expect(estimateDrainSeconds({ backlog: 100, effectiveCap: 10, p50LatencyMs: 300 })).toBe(3);
  });

  it('an empty backlog drains in 0 s', () => {
    expect(estimateDrainSeconds({ backlog: 0, effectiveCap: 1, p50LatencyMs: 15_000 })).toBe(0);
  });

  it('a replay rate cap applies when it is the tighter limit', () => {
    // cap/latency = 100/s, replay 10/s → replay decides.
    expect(
      estimateDrainSeconds({ backlog: 1000, effectiveCap: 10, p50LatencyMs: 100, replayRatePerSecond: 10 }),
    ).toBe(100);
    // cap/latency = 2/s, replay 10/s → the endpoint decides.
    expect(
      estimateDrainSeconds({ backlog: 1000, effectiveCap: 2, p50LatencyMs: 1000, replayRatePerSecond: 10 }),
    ).toBe(500);
  });

  it('no measured latency assumes one second; a 0 ms latency counts as 1 ms', () => {
    expect(estimateDrainSeconds({ backlog: 100, effectiveCap: 10, p50LatencyMs: null })).toBe(10);
    expect(estimateDrainSeconds({ backlog: 100, effectiveCap: 10, p50LatencyMs: 0 })).toBe(1);
  });

  it('property (seeded): integer, ≥ 1 for a non-empty backlog, monotone in backlog and latency, antitone in cap', () => {
    const rnd = seededRandom(5);
    for (let i = 0; i < 3000; i++) {
      const backlog = 1 + Math.floor(rnd.float() * 1_000_000);
      const effectiveCap = 1 + Math.floor(rnd.float() * 100);
      const p50LatencyMs = Math.floor(rnd.float() * 15_000);
      const base = { backlog, effectiveCap, p50LatencyMs };
      const e = estimateDrainSeconds(base);
      expect(Number.isInteger(e)).toBe(true);
      expect(e).toBeGreaterThanOrEqual(1);
      expect(estimateDrainSeconds({ ...base, backlog: backlog + 1 })).toBeGreaterThanOrEqual(e);
      expect(estimateDrainSeconds({ ...base, p50LatencyMs: p50LatencyMs + 1 })).toBeGreaterThanOrEqual(e);
      expect(estimateDrainSeconds({ ...base, effectiveCap: effectiveCap + 1 })).toBeLessThanOrEqual(e);
      expect(estimateDrainSeconds({ ...base, replayRatePerSecond: 10 })).toBeGreaterThanOrEqual(e);
    }
  });

  it.each<[string, Parameters<typeof estimateDrainSeconds>[0]]>([
    ['negative backlog', { backlog: -1, effectiveCap: 1, p50LatencyMs: 1 }],
    ['fractional backlog', { backlog: 1.5, effectiveCap: 1, p50LatencyMs: 1 }],
    ['zero cap', { backlog: 1, effectiveCap: 0, p50LatencyMs: 1 }],
    ['negative latency', { backlog: 1, effectiveCap: 1, p50LatencyMs: -1 }],
    ['NaN latency', { backlog: 1, effectiveCap: 1, p50LatencyMs: Number.NaN }],
    ['zero replay rate', { backlog: 1, effectiveCap: 1, p50LatencyMs: 1, replayRatePerSecond: 0 }],
  ])('rejects %s', (_name, input) => {
    expect(() => estimateDrainSeconds(input)).toThrow(RangeError);
  });
});
