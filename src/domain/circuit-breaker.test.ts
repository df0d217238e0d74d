import { describe, expect, it } from 'vitest';
import { MIN, S, T0 } from '../../test/support/journey-times.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import {
  blockedUntil,
  CIRCUIT_FAILURE_THRESHOLD,
  type CircuitOutcome,
  type CircuitState,
  circuitOutcome,
  decideAttempt,
  effectiveCircuitState,
  initialCircuit,
  isCircuitState,
  leaseLimit,
  nextProbeAt,
  onOutcome,
  PROBE_CLAIM_MARGIN_MS,
  PROBE_CLAIM_TTL_MS,
  PROBE_INTERVAL_MS,
} from './circuit-breaker.ts';
import { ERROR_CLASSES, type ErrorClass, type Outcome } from './outcome.ts';
import { ATTEMPT_TIMEOUT_MS } from './retry-schedule.ts';

function fail(state: CircuitState, times: number, at: number, wasProbe = false): CircuitState {
  let s = state;
  for (let i = 0; i < times; i++) s = onOutcome(s, 'failure', at, wasProbe);
  return s;
}

/** A circuit opened at `at` by 20 failures. */
function openedAt(at: number): CircuitState {
  return fail(initialCircuit(), CIRCUIT_FAILURE_THRESHOLD, at);
}

function probeClaim(state: CircuitState, at: number): CircuitState {
  const d = decideAttempt(state, at);
  if (d.kind !== 'send' || !d.probe) throw new Error(`expected a probe at ${at}, got ${JSON.stringify(d)}`);
  return d.claim;
}

describe('constants (PRODUCT.md §5)', () => {
  it('match the specification', () => {
    expect(CIRCUIT_FAILURE_THRESHOLD).toBe(20);
    expect(PROBE_INTERVAL_MS).toBe(5 * MIN);
  });

  it('a probe claim outlives the attempt deadline and expires well before the next probe is due', () => {
    expect(PROBE_CLAIM_TTL_MS).toBe(ATTEMPT_TIMEOUT_MS + PROBE_CLAIM_MARGIN_MS);
    expect(PROBE_CLAIM_TTL_MS).toBeGreaterThan(ATTEMPT_TIMEOUT_MS);
    expect(PROBE_CLAIM_TTL_MS).toBeLessThan(PROBE_INTERVAL_MS);
  });
});

describe('initialCircuit', () => {
  it('is closed with nothing recorded, valid, and a fresh object each time', () => {
    const s = initialCircuit();
    expect(s).toEqual({
      state: 'closed',
      consecutiveFailures: 0,
      openedAt: null,
      lastProbeAt: null,
      probeInFlightUntil: null,
      closedAt: null,
    });
    expect(isCircuitState(s)).toBe(true);
    expect(initialCircuit()).not.toBe(s);
  });
});

describe('circuitOutcome: what counts', () => {
  it('delivered is a success', () => {
    expect(circuitOutcome({ result: 'delivered' })).toBe('success');
  });

  it('a retryable or permanent status is a failure', () => {
    expect(circuitOutcome({ result: 'retryable', errorClass: 'http_status' })).toBe('failure');
    expect(circuitOutcome({ result: 'retryable', errorClass: 'http_status', retryAfterMs: 1000 })).toBe(
      'failure',
    );
    expect(circuitOutcome({ result: 'permanent', errorClass: 'http_status' })).toBe('failure');
  });

  it.each(Object.keys(ERROR_CLASSES) as ErrorClass[])('error class %s', (errorClass) => {
    const outcome = { result: ERROR_CLASSES[errorClass], errorClass } as Outcome;
    // circuit_open was never sent and platform_error failed on Hookrail's side: neither is the endpoint's answer.
    // Everything else was sent and failed.
    const notTheEndpoints = errorClass === 'circuit_open' || errorClass === 'platform_error';
    expect(circuitOutcome(outcome)).toBe(notTheEndpoints ? null : 'failure');
  });
});

describe('closed', () => {
  it('sends every attempt, never as a probe', () => {
    for (const s of [initialCircuit(), fail(initialCircuit(), 19, T0)]) {
      for (const now of [T0 - 1000 * MIN, T0, T0 + 10 * MIN]) {
        expect(decideAttempt(s, now)).toEqual({ kind: 'send', probe: false });
      }
    }
    expect(nextProbeAt(initialCircuit())).toBeNull();
    expect(effectiveCircuitState(initialCircuit(), T0)).toBe('closed');
  });

  it('counts failures 1..19 and stays closed', () => {
    let s = initialCircuit();
    for (let n = 1; n < CIRCUIT_FAILURE_THRESHOLD; n++) {
      s = onOutcome(s, 'failure', T0 + n, false);
      expect(s).toEqual({ ...initialCircuit(), consecutiveFailures: n });
    }
  });

  it('opens on the 20th consecutive failure, at that failure’s time', () => {
    const s = onOutcome(fail(initialCircuit(), 19, T0), 'failure', T0 + 7 * S, false);
    expect(s).toEqual({
      state: 'open',
      consecutiveFailures: 20,
      openedAt: T0 + 7 * S,
      lastProbeAt: null,
      probeInFlightUntil: null,
      closedAt: null,
    });
    expect(isCircuitState(s)).toBe(true);
  });

  it('a success resets the count, so 19 failures, a success and 19 more do not open it', () => {
    let s = fail(initialCircuit(), 19, T0);
    s = onOutcome(s, 'success', T0 + S, false);
    expect(s).toEqual(initialCircuit());
    s = fail(s, 19, T0 + 2 * S);
    expect(s.state).toBe('closed');
    expect(onOutcome(s, 'failure', T0 + 3 * S, false).state).toBe('open');
  });

  it('a success keeps closedAt, so a running ramp is not restarted', () => {
    const recovered: CircuitState = { ...initialCircuit(), closedAt: T0, consecutiveFailures: 2 };
    expect(onOutcome(recovered, 'success', T0 + MIN, false)).toEqual({ ...initialCircuit(), closedAt: T0 });
  });

  it('a failure keeps closedAt until the circuit opens again', () => {
    const recovered: CircuitState = { ...initialCircuit(), closedAt: T0 };
    expect(onOutcome(recovered, 'failure', T0 + S, false).closedAt).toBe(T0);
    expect(fail(recovered, 20, T0 + S).closedAt).toBeNull();
  });

  it('a stale probe outcome in closed is an ordinary outcome', () => {
    const s = fail(initialCircuit(), 3, T0);
    expect(onOutcome(s, 'failure', T0, true)).toEqual(onOutcome(s, 'failure', T0, false));
    expect(onOutcome(s, 'success', T0, true)).toEqual(onOutcome(s, 'success', T0, false));
  });
});

describe('open', () => {
  const opened = openedAt(T0);

  it('skips every attempt until 5 minutes after opening', () => {
    for (const dt of [0, 1, S, 4 * MIN, PROBE_INTERVAL_MS - 1]) {
      expect(decideAttempt(opened, T0 + dt)).toEqual({
        kind: 'skip',
        reason: 'circuit_open',
        nextProbeAt: T0 + PROBE_INTERVAL_MS,
      });
    }
    expect(nextProbeAt(opened)).toBe(T0 + PROBE_INTERVAL_MS);
    expect(effectiveCircuitState(opened, T0 + 10 * MIN)).toBe('open');
  });

  it('a clock behind openedAt (another process) skips too', () => {
    expect(decideAttempt(opened, T0 - MIN).kind).toBe('skip');
  });

  it.each([0, 1, MIN, 3 * 60 * MIN])('lets exactly one probe claim at openedAt + 5 min + %i ms', (late) => {
    const at = T0 + PROBE_INTERVAL_MS + late;
    const d = decideAttempt(opened, at);
    expect(d).toEqual({
      kind: 'send',
      probe: true,
      claim: {
        state: 'half_open',
        consecutiveFailures: 20,
        openedAt: T0,
        lastProbeAt: at,
        probeInFlightUntil: at + PROBE_CLAIM_TTL_MS,
        closedAt: null,
      },
    });
    if (d.kind === 'send' && d.probe) expect(isCircuitState(d.claim)).toBe(true);
  });

  it('a failure that arrives while open (started before it opened) is counted and changes nothing else', () => {
    expect(onOutcome(opened, 'failure', T0 + S, false)).toEqual({ ...opened, consecutiveFailures: 21 });
  });

  it('a late probe failure after its claim expired (open again) only counts', () => {
    const reopened: CircuitState = { ...opened, lastProbeAt: T0 + 5 * MIN };
    expect(onOutcome(reopened, 'failure', T0 + 6 * MIN, true)).toEqual({
      ...reopened,
      consecutiveFailures: 21,
    });
  });

  it.each([false, true])('any success closes it and starts the ramp (wasProbe %s)', (wasProbe) => {
    expect(onOutcome(opened, 'success', T0 + 2 * MIN, wasProbe)).toEqual({
      ...initialCircuit(),
      closedAt: T0 + 2 * MIN,
    });
  });
});

describe('half_open (probe claimed)', () => {
  const probeAt = T0 + PROBE_INTERVAL_MS;
  const claimed = probeClaim(openedAt(T0), probeAt);

  it('refuses a second claimant for as long as the claim lives', () => {
    for (const dt of [0, 1, S, ATTEMPT_TIMEOUT_MS, PROBE_CLAIM_TTL_MS - 1]) {
      expect(effectiveCircuitState(claimed, probeAt + dt)).toBe('half_open');
      expect(decideAttempt(claimed, probeAt + dt)).toEqual({
        kind: 'skip',
        reason: 'circuit_open',
        nextProbeAt: probeAt + PROBE_INTERVAL_MS,
      });
    }
  });

  it('after the claim expires (the prober died) it is open again, and the next probe keeps the spacing', () => {
    expect(effectiveCircuitState(claimed, probeAt + PROBE_CLAIM_TTL_MS)).toBe('open');
    for (const dt of [PROBE_CLAIM_TTL_MS, 2 * MIN, PROBE_INTERVAL_MS - 1]) {
      expect(decideAttempt(claimed, probeAt + dt).kind).toBe('skip');
    }
    const next = probeClaim(claimed, probeAt + PROBE_INTERVAL_MS);
    expect(next.lastProbeAt).toBe(probeAt + PROBE_INTERVAL_MS);
    expect(next.openedAt).toBe(T0);
  });

  it('probe success closes it: counter reset, closedAt recorded for the ramp', () => {
    const s = onOutcome(claimed, 'success', probeAt + 2 * S, true);
    expect(s).toEqual({ ...initialCircuit(), closedAt: probeAt + 2 * S });
    expect(decideAttempt(s, probeAt + 3 * S)).toEqual({ kind: 'send', probe: false });
  });

  it('probe failure reopens it; the next probe is 5 minutes after this probe started', () => {
    const s = onOutcome(claimed, 'failure', probeAt + 14 * S, true);
    expect(s).toEqual({
      state: 'open',
      consecutiveFailures: 21,
      openedAt: T0,
      lastProbeAt: probeAt,
      probeInFlightUntil: null,
      closedAt: null,
    });
    expect(isCircuitState(s)).toBe(true);
    expect(nextProbeAt(s)).toBe(probeAt + PROBE_INTERVAL_MS);
    expect(decideAttempt(s, probeAt + PROBE_INTERVAL_MS - 1).kind).toBe('skip');
    expect(probeClaim(s, probeAt + PROBE_INTERVAL_MS).lastProbeAt).toBe(probeAt + PROBE_INTERVAL_MS);
  });

  it('a late non-probe failure is counted and leaves the probe’s claim alone', () => {
    expect(onOutcome(claimed, 'failure', probeAt + S, false)).toEqual({
      ...claimed,
      consecutiveFailures: 21,
    });
  });

  it('a late non-probe success closes it like a probe success', () => {
    expect(onOutcome(claimed, 'success', probeAt + S, false)).toEqual({
      ...initialCircuit(),
      closedAt: probeAt + S,
    });
  });
});

describe('blockedUntil: what leasing may skip', () => {
  it('leaseLimit: any number while closed, one (the probe) otherwise', () => {
    expect(leaseLimit(initialCircuit())).toBe(Number.POSITIVE_INFINITY);
    expect(leaseLimit(openedAt(T0))).toBe(1);
    expect(leaseLimit(probeClaim(openedAt(T0), T0 + PROBE_INTERVAL_MS))).toBe(1);
  });

  it('is null while closed, also during a ramp', () => {
    expect(blockedUntil(initialCircuit())).toBeNull();
    const closed = onOutcome(openedAt(T0), 'success', T0 + 6 * MIN, true);
    expect(closed.state).toBe('closed');
    expect(blockedUntil(closed)).toBeNull();
  });

  it('is the next probe time while open and while a probe is claimed', () => {
    const open = openedAt(T0);
    expect(blockedUntil(open)).toBe(T0 + PROBE_INTERVAL_MS);
    const claimed = probeClaim(open, T0 + PROBE_INTERVAL_MS + 7);
    expect(blockedUntil(claimed)).toBe(T0 + 2 * PROBE_INTERVAL_MS + 7);
    const reopened = onOutcome(claimed, 'failure', T0 + PROBE_INTERVAL_MS + 9 * S, true);
    expect(blockedUntil(reopened)).toBe(T0 + 2 * PROBE_INTERVAL_MS + 7);
  });

  it('agrees with decideAttempt at every instant: before it only skips, at it a probe may start', () => {
    const rnd = seededRandom(7);
    let state = openedAt(T0);
    for (let i = 0; i < 200; i++) {
      const until = blockedUntil(state)!;
      const before = until - 1 - Math.floor(rnd.float() * PROBE_INTERVAL_MS);
      if (before >= (state.lastProbeAt ?? state.openedAt!))
        expect(decideAttempt(state, before).kind).toBe('skip');
      const at = until + Math.floor(rnd.float() * MIN);
      const d = decideAttempt(state, at);
      expect(d.kind === 'send' && d.probe).toBe(true);
      state = onOutcome(probeClaim(state, at), 'failure', at + Math.floor(rnd.float() * 20 * S), true);
    }
  });
});

describe('transition table: every state × event', () => {
  const closed = fail(initialCircuit(), 5, T0);
  const closedAt19 = fail(initialCircuit(), 19, T0);
  const open = openedAt(T0);
  const halfOpen = probeClaim(open, T0 + PROBE_INTERVAL_MS);
  const t = T0 + PROBE_INTERVAL_MS + S;
  const cases: [string, CircuitState, CircuitOutcome, boolean, CircuitState['state']][] = [
    ['closed', closed, 'success', false, 'closed'],
    ['closed', closed, 'failure', false, 'closed'],
    ['closed(19)', closedAt19, 'failure', false, 'open'],
    ['closed(19)', closedAt19, 'success', false, 'closed'],
    ['closed', closed, 'success', true, 'closed'],
    ['closed', closed, 'failure', true, 'closed'],
    ['open', open, 'success', false, 'closed'],
    ['open', open, 'failure', false, 'open'],
    ['open', open, 'success', true, 'closed'],
    ['open', open, 'failure', true, 'open'],
    ['half_open', halfOpen, 'success', true, 'closed'],
    ['half_open', halfOpen, 'failure', true, 'open'],
    ['half_open', halfOpen, 'success', false, 'closed'],
    ['half_open', halfOpen, 'failure', false, 'half_open'],
  ];
  it.each(cases)('%s + %s (probe %s) → %s', (_name, from, outcome, wasProbe, to) => {
    const frozen = Object.freeze({ ...from });
    const next = onOutcome(frozen, outcome, t, wasProbe);
    expect(next.state).toBe(to);
    expect(isCircuitState(next)).toBe(true);
    expect(next.consecutiveFailures).toBe(outcome === 'success' ? 0 : from.consecutiveFailures + 1);
    expect(next).not.toBe(frozen);
  });

  it('decideAttempt never changes its input', () => {
    const frozen = Object.freeze({ ...open });
    decideAttempt(frozen, T0 + PROBE_INTERVAL_MS);
    expect(frozen).toEqual(open);
  });
});

describe('input checks', () => {
  it.each([Number.NaN, Number.POSITIVE_INFINITY])('rejects now = %s', (now) => {
    expect(() => decideAttempt(initialCircuit(), now)).toThrow(RangeError);
    expect(() => onOutcome(initialCircuit(), 'failure', now, false)).toThrow(RangeError);
    expect(() => effectiveCircuitState(initialCircuit(), now)).toThrow(RangeError);
  });
});

describe('isCircuitState (reading stored state)', () => {
  const valid = [initialCircuit(), openedAt(T0), probeClaim(openedAt(T0), T0 + PROBE_INTERVAL_MS)];

  it('accepts every reachable shape and its JSON round trip', () => {
    for (const s of valid) {
      expect(isCircuitState(s)).toBe(true);
      expect(isCircuitState(JSON.parse(JSON.stringify(s)))).toBe(true);
    }
  });

  it.each<[string, unknown]>([
    ['null', null],
    ['a string', 'closed'],
    ['unknown state', { ...initialCircuit(), state: 'ajar' }],
    ['negative count', { ...initialCircuit(), consecutiveFailures: -1 }],
    ['fractional count', { ...initialCircuit(), consecutiveFailures: 1.5 }],
    ['missing count', { ...initialCircuit(), consecutiveFailures: undefined }],
    ['closed with openedAt', { ...initialCircuit(), openedAt: T0 }],
    ['closed with a probe claim', { ...initialCircuit(), lastProbeAt: T0, probeInFlightUntil: T0 + 1 }],
    ['open without openedAt', { ...openedAt(T0), openedAt: null }],
    ['open with a claim', { ...openedAt(T0), lastProbeAt: T0, probeInFlightUntil: T0 + 1 }],
    ['open with closedAt', { ...openedAt(T0), closedAt: T0 }],
    ['half_open without claim', { ...openedAt(T0), state: 'half_open', lastProbeAt: T0 }],
    ['half_open with claim ending before it started', { ...valid[2]!, probeInFlightUntil: T0 }],
    ['a time that is a string', { ...openedAt(T0), openedAt: String(T0) }],
    ['a time that is NaN', { ...initialCircuit(), closedAt: Number.NaN }],
  ])('rejects %s', (_name, value) => {
    expect(isCircuitState(value)).toBe(false);
  });
});
