/**
 * The per-endpoint circuit breaker (PRODUCT.md §5, ADR-08): `closed → open → half_open → closed`.
 *
 * - closed: every attempt is sent. Each failed attempt adds to `consecutiveFailures`, a success resets it; the
 *   CIRCUIT_FAILURE_THRESHOLD-th consecutive failure opens the circuit.
 * - open: no attempt starts, except one probe — a real pending delivery, sent normally — every
 *   PROBE_INTERVAL_MS. The first probe may start PROBE_INTERVAL_MS after the circuit opened, each later one
 *   PROBE_INTERVAL_MS after the previous probe *started* (start-to-start spacing, so "one probe every five
 *   minutes" holds exactly however long a probe takes).
 * - half_open: a probe has been claimed and may be in flight. Nothing else starts. Its success closes the
 *   circuit and records `closedAt`, which starts the ramp (ramp.ts); its failure reopens it, and the next probe
 *   comes PROBE_INTERVAL_MS after this one started.
 *
 * What counts. The circuit is driven by the endpoint's answers, so every attempt that was actually sent counts:
 * retryable failures and permanent ones (a 4xx, a rejected redirect, a refused destination) alike — a permanent
 * failure is still the endpoint failing to take a delivery, and an endpoint that answers 404 to everything is
 * exactly as down for its owner as one that refuses connections. `circuit_open` attempts were never sent and
 * `platform_error` ones failed on Hookrail's side: neither counts (circuitOutcome maps them to null; the list is
 * outcome.ts NOT_THE_ENDPOINTS). This differs on purpose from the retry budget, where both use up one of a
 * delivery's attempts (retry-schedule.ts). A probe that ends in `platform_error` leaves its claim to expire: the
 * circuit is open again PROBE_CLAIM_TTL_MS later and the next probe is spaced from this one's start, as for a
 * prober that died.
 *
 * Any success closes. A success that arrives while the circuit is open or half_open — from an attempt that was
 * started while it was still closed, or from a probe whose claim had already expired — closes it just as a probe
 * success would: a 2xx disproves "the endpoint is down", and the ramp still protects the endpoint. Failures that
 * arrive while open are counted in `consecutiveFailures` (shown in health) but change nothing else.
 *
 * Shared state. The state is a plain JSON-serialisable object, stored per endpoint and shared by every delivery
 * process. All times are epoch milliseconds from the Clock port; nothing here reads a clock. The caller must
 * write a probe claim (`decideAttempt(...).claim`) with a compare-and-set against the state it read (or under the
 * endpoint's row lock): of two processes that both see a probe due, exactly one may win, and the loser treats
 * its attempt as skipped. A claim holds for PROBE_CLAIM_TTL_MS; if the probe's outcome never arrives (the
 * worker died), the claim simply expires and the circuit is open again. The next probe is still spaced from
 * the dead one's start, so a crashed prober never causes two probes inside one interval.
 */

import { judgesEndpoint, type Outcome } from './outcome.ts';
import { ATTEMPT_TIMEOUT_MS } from './retry-schedule.ts';

export const CIRCUIT_FAILURE_THRESHOLD = 20;
export const PROBE_INTERVAL_MS = 5 * 60 * 1000;
/**
 * Time beyond the 15 s attempt deadline (which already covers connect and every redirect hop) that a probe's
 * outcome may take to be recorded: signing, the address check, the store write, and clock differences between
 * processes. Far below PROBE_INTERVAL_MS, so an expired claim never delays the next probe.
 */
export const PROBE_CLAIM_MARGIN_MS = 15 * 1000;
export const PROBE_CLAIM_TTL_MS = ATTEMPT_TIMEOUT_MS + PROBE_CLAIM_MARGIN_MS;

export type CircuitStateName = 'closed' | 'open' | 'half_open';
export type CircuitOutcome = 'success' | 'failure';

/**
 * Invariants (checked by isCircuitState):
 * - closed: openedAt, lastProbeAt and probeInFlightUntil are null; closedAt is when the circuit last closed
 *   after an outage (the ramp's start), or null if it never opened.
 * - open: openedAt set; probeInFlightUntil and closedAt null; lastProbeAt is the start of the latest probe, or
 *   null before the first.
 * - half_open: openedAt and lastProbeAt set, probeInFlightUntil after lastProbeAt (written as lastProbeAt +
 *   PROBE_CLAIM_TTL_MS; not checked for equality, so a stored claim stays valid if the TTL is retuned), closedAt
 *   null.
 */
export interface CircuitState {
  state: CircuitStateName;
  /** Failed attempts since the last success (sent attempts only). */
  consecutiveFailures: number;
  openedAt: number | null;
  /** Start of the latest probe claim while open/half_open. */
  lastProbeAt: number | null;
  /** The current probe claim expires at this time; set only in half_open. */
  probeInFlightUntil: number | null;
  closedAt: number | null;
}

export type AttemptDecision =
  | { kind: 'send'; probe: false }
  /** Send this delivery as the probe, after writing `claim` with a compare-and-set (see the module comment). */
  | { kind: 'send'; probe: true; claim: CircuitState }
  /** Record a `circuit_open` attempt (no network) and reschedule; `nextProbeAt` is informational. */
  | { kind: 'skip'; reason: 'circuit_open'; nextProbeAt: number };

export function initialCircuit(): CircuitState {
  return {
    state: 'closed',
    consecutiveFailures: 0,
    openedAt: null,
    lastProbeAt: null,
    probeInFlightUntil: null,
    closedAt: null,
  };
}

/** What one attempt's outcome means for the circuit; null for a failure that is not the endpoint's (judgesEndpoint). */
export function circuitOutcome(outcome: Outcome): CircuitOutcome | null {
  if (outcome.result === 'delivered') return 'success';
  if (!judgesEndpoint(outcome.errorClass)) return null;
  return 'failure';
}

/**
 * The earliest time the next probe may start; null while closed. In half_open this is when the next probe may
 * start should the current one fail or its claim expire.
 */
export function nextProbeAt(state: CircuitState): number | null {
  if (state.state === 'closed') return null;
  return (state.lastProbeAt ?? (state.openedAt as number)) + PROBE_INTERVAL_MS;
}

/**
 * Until when the endpoint is blocked: no attempt of it may start before this time, and at this time only a probe
 * (decideAttempt). null while closed; otherwise the next probe time, in half_open too (its claim expires before
 * the next probe is due, PROBE_CLAIM_TTL_MS < PROBE_INTERVAL_MS). Stored beside the circuit on the queue row, so
 * leasing passes over a blocked endpoint without reading its deliveries, and the deliveries that come due while it
 * is blocked are recorded as `circuit_open` attempts by a pass of their own.
 */
export function blockedUntil(state: CircuitState): number | null {
  return state.state === 'closed' ? null : nextProbeAt(state);
}

/**
 * Deliveries an ordinary lease may take of the endpoint per call, as far as the circuit goes: any number while
 * closed; otherwise one at a time — the probe, when due (more would only be skipped as `circuit_open`).
 */
export function leaseLimit(state: CircuitState): number {
  return state.state === 'closed' ? Number.POSITIVE_INFINITY : 1;
}

/** The state as it stands at `now`: a half_open circuit whose probe claim has expired is open again. */
export function effectiveCircuitState(state: CircuitState, now: number): CircuitStateName {
  assertTime(now);
  if (state.state === 'half_open' && now >= (state.probeInFlightUntil as number)) return 'open';
  return state.state;
}

const SEND: AttemptDecision = Object.freeze({ kind: 'send', probe: false });

/**
 * Whether a delivery that has come due may start at `now`. Closed: send. Open (or half_open with an expired
 * claim) and a probe due: send it as the probe, claiming it. Otherwise skip as `circuit_open`.
 */
export function decideAttempt(state: CircuitState, now: number): AttemptDecision {
  assertTime(now);
  if (state.state === 'closed') return SEND;
  const probeAt = nextProbeAt(state) as number;
  if (effectiveCircuitState(state, now) === 'open' && now >= probeAt) {
    return {
      kind: 'send',
      probe: true,
      claim: {
        state: 'half_open',
        consecutiveFailures: state.consecutiveFailures,
        openedAt: state.openedAt,
        lastProbeAt: now,
        probeInFlightUntil: now + PROBE_CLAIM_TTL_MS,
        closedAt: null,
      },
    };
  }
  return { kind: 'skip', reason: 'circuit_open', nextProbeAt: probeAt };
}

/**
 * The state after an attempt's outcome is recorded. `wasProbe` says whether that attempt was sent as the probe
 * (decideAttempt returned `probe: true` and its claim was won). Returns a new object; the input is not changed.
 */
export function onOutcome(
  state: CircuitState,
  outcome: CircuitOutcome,
  now: number,
  wasProbe: boolean,
): CircuitState {
  assertTime(now);
  if (outcome === 'success') {
    // Closed stays closed and keeps its closedAt, so a running ramp is not restarted by each success.
    const closedAt = state.state === 'closed' ? state.closedAt : now;
    return { ...initialCircuit(), closedAt };
  }
  const consecutiveFailures = state.consecutiveFailures + 1;
  switch (state.state) {
    case 'closed':
      if (consecutiveFailures < CIRCUIT_FAILURE_THRESHOLD) return { ...state, consecutiveFailures };
      return {
        state: 'open',
        consecutiveFailures,
        openedAt: now,
        lastProbeAt: null,
        probeInFlightUntil: null,
        closedAt: null,
      };
    case 'half_open':
      // Only the probe's own failure ends the claim; a late failure of an older attempt leaves the probe alone.
      if (!wasProbe) return { ...state, consecutiveFailures };
      return { ...state, state: 'open', consecutiveFailures, probeInFlightUntil: null };
    case 'open':
      // A late failure, or a probe whose claim expired: the next probe is already spaced from lastProbeAt.
      return { ...state, consecutiveFailures };
  }
}

const time = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x);
const timeOrNull = (x: unknown): boolean => x === null || time(x);

/** Shape and invariant check for a state read back from storage. */
export function isCircuitState(value: unknown): value is CircuitState {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  if (!Number.isSafeInteger(v.consecutiveFailures) || (v.consecutiveFailures as number) < 0) return false;
  if (![v.openedAt, v.lastProbeAt, v.probeInFlightUntil, v.closedAt].every(timeOrNull)) return false;
  switch (v.state) {
    case 'closed':
      return v.openedAt === null && v.lastProbeAt === null && v.probeInFlightUntil === null;
    case 'open':
      return time(v.openedAt) && v.probeInFlightUntil === null && v.closedAt === null;
    case 'half_open':
      return (
        time(v.openedAt) &&
        time(v.lastProbeAt) &&
        time(v.probeInFlightUntil) &&
        (v.probeInFlightUntil as number) > (v.lastProbeAt as number) &&
        v.closedAt === null
      );
    default:
      return false;
  }
}

function assertTime(now: number): void {
  if (!Number.isFinite(now)) throw new RangeError('now must be a finite number of milliseconds');
}
