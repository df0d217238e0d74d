/**
 * The per-endpoint runtime record that delivery processes share through the store: circuit, failure streak,
 * stored health, and the notice windows. Adapters load it under the endpoint's row lock, call these functions, and
 * write the result back in the same transaction — so the logic exists once, here, for both stores.
 *
 * Order of effects for one recorded attempt (ADR-09: the health state changes *before* any notice goes out): the
 * circuit and streak are updated, health is re-assessed from them, and only then are notices decided; notices are
 * written to a durable outbox in the same transaction and mailed afterwards.
 */
import {
  blockedUntil,
  type CircuitState,
  effectiveCircuitState,
  initialCircuit,
  isCircuitState,
  onOutcome,
} from './circuit-breaker.ts';
import {
  NOTICE_WINDOW_MS,
  type NoticeCause,
  noticeDecision,
  recoveredNoticeDue,
} from './dead-letter-notice.ts';
import { assessHealth, type HealthReason, type HealthState } from './endpoint-health.ts';
import { judgesEndpoint } from './outcome.ts';

const DAY_MS = 24 * 60 * 60 * 1000;

export interface NoticeWindow {
  lastNoticeAt: number | null;
  pending: number;
}

export interface EndpointRuntime {
  circuit: CircuitState;
  lastSuccessAt: number | null;
  lastFailureAt: number | null;
  /** First failed attempt of the current streak (no success since); null while succeeding. */
  failingSince: number | null;
  lastDeadLetterAt: number | null;
  health: HealthState;
  healthReasons: HealthReason[];
  notices: Record<NoticeCause, NoticeWindow>;
}

export function initialRuntime(): EndpointRuntime {
  return {
    circuit: initialCircuit(),
    lastSuccessAt: null,
    lastFailureAt: null,
    failingSince: null,
    lastDeadLetterAt: null,
    health: 'healthy',
    healthReasons: [],
    notices: {
      dead_letter: { lastNoticeAt: null, pending: 0 },
      permanent_failure: { lastNoticeAt: null, pending: 0 },
    },
  };
}

/** Reads a stored runtime (JSON), tolerating absent or partial records from older rows. */
export function parseRuntime(json: string | null): EndpointRuntime {
  const base = initialRuntime();
  if (!json) return base;
  const v = JSON.parse(json) as Partial<EndpointRuntime>;
  return {
    ...base,
    ...v,
    circuit: isCircuitState(v.circuit) ? v.circuit : base.circuit,
    notices: { ...base.notices, ...(v.notices ?? {}) },
  };
}

export interface RecordedAttempt {
  at: number;
  /** 'delivered' | 'retryable' | 'permanent' */
  outcome: 'delivered' | 'retryable' | 'permanent';
  /**
   * The attempt's error class (null when delivered). One that is not the endpoint's doing (`circuit_open`,
   * `platform_error`: outcome.ts judgesEndpoint) moves no circuit, streak or health; its dead letter still counts.
   */
  errorClass: string | null;
  probe: boolean;
  /** Set when this attempt dead-lettered its delivery. */
  deadLetter: NoticeCause | null;
}

export interface Notice {
  cause: NoticeCause;
  /** Failures from earlier that this notice also reports (a digest riding along). */
  digested: number;
}

export function applyAttempt(
  rt: EndpointRuntime,
  a: RecordedAttempt,
  disabled: boolean,
): { runtime: EndpointRuntime; notices: Notice[] } {
  let next: EndpointRuntime = { ...rt, notices: { ...rt.notices } };
  if (judgesEndpoint(a.errorClass)) {
    const success = a.outcome === 'delivered';
    next.circuit = onOutcome(rt.circuit, success ? 'success' : 'failure', a.at, a.probe);
    if (success) {
      next.lastSuccessAt = a.at;
      next.failingSince = null;
    } else {
      next.lastFailureAt = a.at;
      next.failingSince = rt.failingSince ?? a.at;
    }
  }
  // A dead letter counts whatever its last attempt's class: a delivery was lost and waits for a replay, which the
  // notice (never silent, ADR-09) and the health reason `recent_dead_letter` say — and health changes before the
  // notice goes out, so the two cannot be separated.
  if (a.deadLetter) next.lastDeadLetterAt = a.at;
  next = reassess(next, a.at, disabled);

  const notices: Notice[] = [];
  if (a.deadLetter) {
    const window = next.notices[a.deadLetter];
    const decision = noticeDecision({
      cause: a.deadLetter,
      lastNoticeAt: window.lastNoticeAt,
      pendingDigestCount: window.pending,
      now: a.at,
    });
    if (decision.kind === 'send_now') {
      next.notices[a.deadLetter] = { lastNoticeAt: a.at, pending: 0 };
      notices.push({ cause: a.deadLetter, digested: decision.digested });
    } else {
      next.notices[a.deadLetter] = { ...window, pending: window.pending + 1 };
    }
  }
  return { runtime: next, notices };
}

/**
 * Health from what the runtime record knows. The rate rules need windowed attempt counts, which the health API
 * computes from the attempt log; the stored state uses the streak and circuit rules, which is what decides the
 * moments that matter here (an outage, a dead letter, a recovery).
 */
export function reassess(rt: EndpointRuntime, now: number, disabled: boolean): EndpointRuntime {
  const assessment = assessHealth({
    disabled,
    circuit: effectiveCircuitState(rt.circuit, now),
    consecutiveFailures: rt.circuit.consecutiveFailures,
    lastHour: { attempts: 0, successes: 0 },
    last24h: {
      attempts: 0,
      successes: 0,
      deadLetters: rt.lastDeadLetterAt !== null && now - rt.lastDeadLetterAt < DAY_MS ? 1 : 0,
    },
  });
  return { ...rt, health: assessment.state, healthReasons: assessment.reasons };
}

/** A notice one recorded attempt sends: a failure notice (applyAttempt's) or `recovered`. */
export interface AttemptNotice {
  kind: NoticeCause | 'recovered';
  /** Failures from earlier that a failure notice also reports (a digest riding along); 0 for `recovered`. */
  count: number;
}

const NO_NOTICES: { notices: AttemptNotice[]; recovered: boolean } = Object.freeze({
  notices: Object.freeze([]) as unknown as AttemptNotice[],
  recovered: false,
});

/**
 * What one recorded attempt lists and mails: applyAttempt's failure notices, then `recovered` when the attempt took
 * the endpoint out of `failing` after a failure notice of that streak, and none since the last `recovered`
 * (dead-letter-notice.ts recoveredNoticeDue). `recovered` says the store must keep this attempt's time as the last
 * recovered notice's.
 */
export function attemptNotices(
  before: EndpointRuntime,
  applied: { runtime: EndpointRuntime; notices: Notice[] },
  lastRecoveryNoticeAt: number | null,
): { notices: AttemptNotice[]; recovered: boolean } {
  // The common case, once per recorded attempt: no failure notice, and not leaving `failing`.
  if (applied.notices.length === 0 && before.health !== 'failing') return NO_NOTICES;
  const notices: AttemptNotice[] = applied.notices.map((n) => ({ kind: n.cause, count: n.digested }));
  const recovered = recoveredNoticeDue({
    previousHealth: before.health,
    nextHealth: applied.runtime.health,
    streakStartedAt: before.failingSince,
    windows: applied.runtime.notices,
    lastRecoveryNoticeAt,
  });
  if (recovered) notices.push({ kind: 'recovered', count: 0 });
  return { notices, recovered };
}

/** The runtime fields stored in their own columns so maintenance can find endpoints by them. */
export function runtimeIndexColumns(rt: EndpointRuntime): {
  failingSince: number | null;
  digestDueAt: number | null;
  /** circuit-breaker.ts blockedUntil: leasing passes over the endpoint before this time. */
  blockedUntil: number | null;
} {
  const dues = (Object.values(rt.notices) as NoticeWindow[])
    .filter((w) => w.pending > 0)
    .map((w) => (w.lastNoticeAt ?? 0) + NOTICE_WINDOW_MS);
  return {
    failingSince: rt.failingSince,
    digestDueAt: dues.length > 0 ? Math.min(...dues) : null,
    blockedUntil: blockedUntil(rt.circuit),
  };
}

/** After a re-enable: a fresh streak, and a closed circuit whose `closedAt` starts the ramp (ADR-08). */
export function runtimeAfterEnable(rt: EndpointRuntime, now: number): EndpointRuntime {
  return reassess({ ...rt, circuit: { ...initialCircuit(), closedAt: now }, failingSince: null }, now, false);
}
