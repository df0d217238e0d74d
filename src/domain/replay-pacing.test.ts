import { describe, expect, it } from 'vitest';
import { REPLAY_RATE_PER_SECOND } from './replay.ts';
import { REPLAY_PACE, replayAllowance, replayPaced, replayTatAllowingOne } from './replay-pacing.ts';

const T = Date.UTC(2026, 11, 3, 12, 0);

/**
 * Leases every `gaps[i % gaps.length]` ms from T for `spanMs`, each wanting `wanted` replays (an endpoint with far
 * more due than that). Returns the start time of every replay taken.
 */
function simulate(gaps: number[], spanMs: number, wanted = 1_000): number[] {
  const starts: number[] = [];
  let tat: number | null = null;
  for (let now = T, i = 0; now <= T + spanMs; now += gaps[i++ % gaps.length]!) {
    const r = replayPaced(tat, now, wanted);
    for (let k = 0; k < r.take; k++) starts.push(now);
    tat = r.tat;
  }
  return starts;
}

describe('replay pacing', () => {
  it('follows the replay rate: 100 ms apart, a burst of one second of it', () => {
    expect(REPLAY_PACE).toEqual({ intervalMs: 1000 / REPLAY_RATE_PER_SECOND, burstMs: 1000 });
  });

  it('lets an idle endpoint start a burst bounded by the tolerance, then one per interval', () => {
    expect(replayAllowance(null, T)).toBe(10);
    const burst = replayPaced(null, T, 30);
    expect(burst).toEqual({ take: 10, tat: T + 1000 });
    expect(replayAllowance(burst.tat, T)).toBe(0);
    expect(replayAllowance(burst.tat, T + 99)).toBe(0);
    expect(replayPaced(burst.tat, T + 100, 30)).toEqual({ take: 1, tat: T + 1100 });
    expect(replayPaced(burst.tat, T + 250, 30)).toEqual({ take: 2, tat: T + 1200 });
    // Idle again for a second or more: the whole burst again, no more.
    expect(replayAllowance(burst.tat, T + 2000)).toBe(10);
  });

  it('takes what is wanted within the allowance and leaves the rest of it', () => {
    const three = replayPaced(null, T, 3);
    expect(three).toEqual({ take: 3, tat: T + 300 });
    expect(replayAllowance(three.tat, T)).toBe(7);
    expect(replayPaced(three.tat, T, 100)).toEqual({ take: 7, tat: T + 1000 });
    // Nothing wanted, or nothing allowed: the schedule does not move.
    expect(replayPaced(three.tat, T, 0)).toEqual({ take: 0, tat: T + 300 });
    expect(replayPaced(null, T, 0)).toEqual({ take: 0, tat: null });
    expect(replayPaced(T + 1000, T, 5)).toEqual({ take: 0, tat: T + 1000 });
  });

  it('clamps a schedule far in the past to now: idle time earns one burst, no more', () => {
    expect(replayAllowance(T - 86_400_000, T)).toBe(10);
    expect(replayPaced(T - 86_400_000, T, 50)).toEqual({ take: 10, tat: T + 1000 });
    expect(replayPaced(0, T, 1)).toEqual({ take: 1, tat: T + 100 });
  });

  it.each([
    ['every 10 ms', [10]],
    ['every 100 ms', [100]],
    ['every 250 ms', [250]],
    ['every second', [1_000]],
    ['at irregular gaps', [7, 130, 45, 800, 3, 260, 99, 101, 1]],
  ])('polled %s, keeps ~10/s over a long run and never more than elapsed / 100 ms + the burst', (_, gaps) => {
    const span = 600_000;
    const starts = simulate(gaps, span);
    // Never ahead of the rate by more than the burst, in any window (from each start to each later one).
    for (let i = 0; i < starts.length; i += 97)
      for (let j = i; j < starts.length; j += 89) {
        const elapsed = starts[j]! - starts[i]!;
        expect(j - i + 1).toBeLessThanOrEqual(Math.floor(elapsed / 100) + 10);
      }
    expect(starts.length).toBeLessThanOrEqual(span / 100 + 10);
    // And it achieves the rate, 10/s (a lease arriving later than the burst's span after the schedule loses the
    // excess: idle time earns one burst, no more).
    expect(starts.length).toBeGreaterThanOrEqual(span / 100);
  });

  it('a lease wanting fewer than allowed never builds up more than the burst', () => {
    // One replay wanted every 10 ms for a minute: 10/s, not 100/s.
    expect(simulate([10], 60_000, 1)).toHaveLength(60_000 / 100 + 10);
  });

  it('names the latest schedule that still allows one replay', () => {
    const edge = replayTatAllowingOne(T);
    expect(edge).toBe(T + 900);
    expect(replayAllowance(edge, T)).toBe(1);
    expect(replayAllowance(edge + 1, T)).toBe(0);
  });

  it('refuses a pace that could never allow a replay', () => {
    expect(() => replayAllowance(null, T, { intervalMs: 0, burstMs: 1000 })).toThrow(RangeError);
    expect(() => replayAllowance(null, T, { intervalMs: 100, burstMs: 50 })).toThrow(RangeError);
    expect(() => replayTatAllowingOne(T, { intervalMs: 100.5, burstMs: 1000 })).toThrow(RangeError);
  });
});
