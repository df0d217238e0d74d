/**
 * The circuit breaker over time: the endpoint-outage journey (../shared/seeds) step by step, and a seeded
 * simulation of several processes sharing one stored state. The per-state rules are in circuit-breaker.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { MIN, S, T0 } from '../../test/support/journey-times.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import {
  type AttemptDecision,
  CIRCUIT_FAILURE_THRESHOLD,
  type CircuitOutcome,
  decideAttempt,
  effectiveCircuitState,
  initialCircuit,
  isCircuitState,
  onOutcome,
  PROBE_INTERVAL_MS,
} from './circuit-breaker.ts';
import { ATTEMPT_TIMEOUT_MS } from './retry-schedule.ts';

describe('the journey (02:00 outage, recovery at 04:10)', () => {
  it('opens at the 20th failure, probes every 5 minutes, closes on the first good probe', () => {
    let s = initialCircuit();
    // A busy endpoint: 20 refused connections within the first seconds.
    for (let i = 0; i < 20; i++) s = onOutcome(s, 'failure', T0 + i * 100, false);
    expect(s.state).toBe('open');
    const recoveredAt = T0 + 130 * MIN;
    const probes: number[] = [];
    // Deliveries come due every 10 s across the whole outage.
    for (let now = T0 + 2 * S; now < T0 + 3 * 60 * MIN && s.state !== 'closed'; now += 10 * S) {
      const d = decideAttempt(s, now);
      if (d.kind === 'skip') continue;
      expect(d.probe).toBe(true);
      if (!d.probe) continue;
      probes.push(now);
      s = d.claim;
      s = onOutcome(s, now + 3 * S >= recoveredAt ? 'success' : 'failure', now + 3 * S, true);
    }
    expect(s.state).toBe('closed');
    // Opened at 02:00:01.9; the first delivery due after 02:05:01.9 is the one at 02:05:02.
    expect(probes[0]).toBe(T0 + 302 * S);
    for (let i = 1; i < probes.length; i++) expect(probes[i]! - probes[i - 1]!).toBe(PROBE_INTERVAL_MS);
    // 130 min of outage: the first probe ~5 min after opening, one every 5 min, the 26th succeeds.
    expect(probes).toHaveLength(26);
    expect(s.closedAt).toBe(probes.at(-1)! + 3 * S);
  });
});

describe('property: many processes sharing one stored state (seeded)', () => {
  interface InFlight {
    finishAt: number;
    probe: boolean;
    dies: boolean;
  }

  function simulate(seed: number) {
    const rnd = seededRandom(seed);
    let stored = initialCircuit();
    let now = T0;
    const end = T0 + 12 * 60 * MIN;
    const inFlight: InFlight[] = [];
    const probeStarts: number[] = [];
    let failuresSinceSuccess = 0;
    let opens = 0;
    let closesAfterOutage = 0;
    let lostRaces = 0;
    let expiredClaims = 0;
    let lateOutcomes = 0;
    // The endpoint alternates between up and down spells of random length.
    let up = true;
    let flipAt = now + rnd.float() * 60 * MIN;

    while (now < end) {
      now += Math.floor(rnd.float() * 20 * S);
      while (now >= flipAt) {
        up = !up;
        flipAt += (up ? 5 : 1) * MIN + rnd.float() * 90 * MIN;
      }
      // 1. Outcomes that have arrived (a dead worker's never does).
      for (const a of inFlight.filter((x) => x.finishAt <= now)) {
        inFlight.splice(inFlight.indexOf(a), 1);
        if (a.dies) continue;
        if (!a.probe && stored.state !== 'closed') lateOutcomes++;
        const outcome: CircuitOutcome = up && rnd.float() < 0.97 ? 'success' : 'failure';
        const before = stored;
        stored = onOutcome(stored, outcome, now, a.probe);
        failuresSinceSuccess = outcome === 'success' ? 0 : failuresSinceSuccess + 1;
        expect(stored.consecutiveFailures).toBe(failuresSinceSuccess);
        if (before.state === 'closed' && stored.state === 'open') {
          opens++;
          expect(before.consecutiveFailures).toBe(CIRCUIT_FAILURE_THRESHOLD - 1);
        }
        if (before.state !== 'closed' && stored.state === 'closed') {
          closesAfterOutage++;
          expect(stored.closedAt).toBe(now);
        }
      }
      // 2. One to three processes read the stored state at once and each starts whatever comes due.
      const snapshot = stored;
      const processes = 1 + Math.floor(rnd.float() * 3);
      for (let p = 0; p < processes; p++) {
        const d: AttemptDecision = decideAttempt(snapshot, now);
        if (d.kind === 'skip') {
          expect(effectiveCircuitState(snapshot, now)).not.toBe('closed');
          continue;
        }
        if (d.probe) {
          // Compare-and-set against what this process read: only the first claimant wins.
          if (stored !== snapshot) {
            lostRaces++;
            continue;
          }
          if (snapshot.state === 'half_open') expiredClaims++;
          stored = d.claim;
          probeStarts.push(now);
        } else {
          expect(snapshot.state).toBe('closed');
        }
        inFlight.push({
          finishAt: now + Math.floor(rnd.float() * ATTEMPT_TIMEOUT_MS),
          probe: d.probe,
          dies: rnd.float() < 0.05,
        });
      }
      expect(isCircuitState(stored)).toBe(true);
      expect(JSON.parse(JSON.stringify(stored))).toEqual(stored);
    }
    return { probeStarts, opens, closesAfterOutage, lostRaces, expiredClaims, lateOutcomes };
  }

  it.each([1, 2, 3, 42, 1234, 99_999])(
    'seed %i: probes ≥ 5 min apart, one at a time; open only at 20',
    (seed) => {
      const { probeStarts, opens, closesAfterOutage, lostRaces, expiredClaims, lateOutcomes } =
        simulate(seed);
      for (let i = 1; i < probeStarts.length; i++) {
        expect(probeStarts[i]! - probeStarts[i - 1]!).toBeGreaterThanOrEqual(PROBE_INTERVAL_MS);
      }
      // The scenario really exercises the machine: outages open it, recoveries close it, processes race for the
      // probe, probers die and their claims expire, outcomes of attempts started while closed arrive while open.
      expect(opens).toBeGreaterThan(0);
      expect(lostRaces).toBeGreaterThan(0);
      expect(expiredClaims).toBeGreaterThan(0);
      expect(lateOutcomes).toBeGreaterThan(0);
      expect(closesAfterOutage).toBeGreaterThan(0);
      expect(probeStarts.length).toBeGreaterThan(0);
    },
  );
});
