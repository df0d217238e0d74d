/**
 * applyAttempt: which recorded attempts move the endpoint's circuit, failure streak and health. Failures that are not
 * the endpoint's doing (`circuit_open`, `platform_error`) move none of them; their dead letters still count.
 */
import { describe, expect, it } from 'vitest';
import { CIRCUIT_FAILURE_THRESHOLD, decideAttempt } from './circuit-breaker.ts';
import {
  applyAttempt,
  attemptNotices,
  type EndpointRuntime,
  initialRuntime,
  type RecordedAttempt,
} from './endpoint-runtime.ts';

const T0 = Date.UTC(2026, 0, 1);
const S = 1000;

const attempt = (at: number, over: Partial<RecordedAttempt> = {}): RecordedAttempt => ({
  at,
  outcome: 'retryable',
  errorClass: 'connect_refused',
  probe: false,
  deadLetter: null,
  ...over,
});

const apply = (rt: EndpointRuntime, a: RecordedAttempt) => applyAttempt(rt, a, false);

describe('applyAttempt: failures that are not the endpoint', () => {
  it.each(['platform_error', 'circuit_open'])('%s moves no circuit, streak or health', (errorClass) => {
    let rt = initialRuntime();
    for (let i = 0; i < CIRCUIT_FAILURE_THRESHOLD * 2; i++) {
      const { runtime, notices } = apply(rt, attempt(T0 + i * S, { errorClass }));
      expect(notices).toEqual([]);
      rt = runtime;
    }
    expect(rt).toEqual(initialRuntime());
  });

  it('platform_error neither extends nor breaks a streak of real failures', () => {
    let rt = initialRuntime();
    for (let i = 0; i < 3; i++) rt = apply(rt, attempt(T0 + i * S)).runtime;
    expect(rt).toMatchObject({ failingSince: T0, lastFailureAt: T0 + 2 * S, health: 'degraded' });
    const before = rt;
    for (let i = 3; i < 30; i++)
      rt = apply(rt, attempt(T0 + i * S, { errorClass: 'platform_error' })).runtime;
    expect(rt).toEqual(before);
    rt = apply(rt, attempt(T0 + 31 * S, { outcome: 'delivered', errorClass: null })).runtime;
    expect(rt).toMatchObject({ failingSince: null, lastSuccessAt: T0 + 31 * S, health: 'healthy' });
    expect(rt.circuit.consecutiveFailures).toBe(0);
  });

  it('a probe that ends in platform_error leaves the claim to expire', () => {
    let rt = initialRuntime();
    for (let i = 0; i < CIRCUIT_FAILURE_THRESHOLD; i++) rt = apply(rt, attempt(T0)).runtime;
    expect(rt.circuit.state).toBe('open');
    const probeAt = T0 + 5 * 60 * S;
    const decision = decideAttempt(rt.circuit, probeAt);
    if (decision.kind !== 'send' || !decision.probe) throw new Error('expected a probe');
    rt = { ...rt, circuit: decision.claim };
    const after = apply(rt, attempt(probeAt + S, { errorClass: 'platform_error', probe: true })).runtime;
    expect(after.circuit).toEqual(decision.claim);
    expect(after.circuit.consecutiveFailures).toBe(CIRCUIT_FAILURE_THRESHOLD);
  });

  it('a delivery dead-lettered by platform errors is still told, and shown as a recent dead letter only', () => {
    const { runtime, notices } = apply(
      initialRuntime(),
      attempt(T0, { errorClass: 'platform_error', deadLetter: 'dead_letter' }),
    );
    expect(notices).toEqual([{ cause: 'dead_letter', digested: 0 }]);
    expect(runtime).toMatchObject({
      lastDeadLetterAt: T0,
      lastFailureAt: null,
      failingSince: null,
      health: 'degraded',
      healthReasons: ['recent_dead_letter'],
    });
    expect(runtime.circuit).toEqual(initialRuntime().circuit);
  });
});

describe('attemptNotices', () => {
  it('a dead letter of a streak, then the success that ends it: the failure notice, then one recovered', () => {
    let rt = initialRuntime();
    const notices: string[] = [];
    const record = (a: RecordedAttempt, lastRecoveredAt: number | null) => {
      const applied = apply(rt, a);
      const out = attemptNotices(rt, applied, lastRecoveredAt);
      rt = applied.runtime;
      notices.push(...out.notices.map((n) => n.kind));
      return out.recovered;
    };
    // Enough failures to open the circuit (health `failing`), the last one a dead letter.
    for (let i = 0; i < CIRCUIT_FAILURE_THRESHOLD; i++) {
      const last = i === CIRCUIT_FAILURE_THRESHOLD - 1;
      record(attempt(T0 + i * S, last ? { deadLetter: 'dead_letter' } : {}), null);
    }
    expect(rt.health).toBe('failing');
    expect(notices).toEqual(['dead_letter']);
    // The probe's success closes the circuit: out of `failing`, told once.
    expect(record(attempt(T0 + 600 * S, { outcome: 'delivered', errorClass: null, probe: true }), null)).toBe(
      true,
    );
    expect(notices).toEqual(['dead_letter', 'recovered']);
    // Another success: nothing more.
    expect(record(attempt(T0 + 601 * S, { outcome: 'delivered', errorClass: null }), T0 + 600 * S)).toBe(
      false,
    );
    expect(notices).toEqual(['dead_letter', 'recovered']);
  });
});
