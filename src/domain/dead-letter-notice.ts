/**
 * "Give up loudly" (PRODUCT.md §5, ADR-09): when an endpoint's deliveries start failing for good, its owner is
 * told at once, by e-mail and in the notifications log — never through the failing endpoint — and later failures
 * are gathered into a digest so that the channel stays credible.
 *
 * Causes. A notice has one of two causes:
 * - `dead_letter`: a delivery used up its retries (12 attempts, or 72 h) — the endpoint is down or unhealthy;
 * - `permanent_failure`: the endpoint rejected a delivery outright (a 4xx other than 408/429, a bare 3xx, a
 *   rejected redirect, a refused destination), which is dead-lettered at once — the endpoint is misconfigured.
 *
 * Windows. The notice window is kept per endpoint AND per cause. The first failure of a cause in a rolling 24 h
 * window is sent now; later ones of that cause in the window are aggregated. Why per cause rather than one window
 * per endpoint (the default PRODUCT.md §5 reading): the two causes have different fixes — bring the service back
 * vs. fix a path or a credential — and ADR-09 singles out permanent failures as the kind that "accumulate
 * quietly". With one shared window, the 401s of a rollback that shipped a bad credential would sit unseen in a
 * digest for up to a day behind the outage notice that preceded them. Per-cause windows cost at most one extra
 * e-mail per endpoint per day. Every individual failure is still listed in the notifications log and the
 * delivery history.
 *
 * Digest. Aggregated failures are sent as one digest when the window ends, i.e. NOTICE_WINDOW_MS after the last
 * notice of that cause, and the digest itself opens the next window. An outage that keeps producing dead letters
 * therefore yields one immediate notice, then one digest a day — a 72 h outage is about four e-mails before the
 * auto-disable notice — rather than one per hour or one per delivery. If a new failure arrives once the window
 * has ended but before the digest job ran, that failure's immediate notice carries the pending digest, so the
 * customer gets one e-mail, not two. Together: consecutive e-mails of one cause for one endpoint are always at
 * least 24 h apart, and every failure is counted in exactly one e-mail (its own, or a digest).
 *
 * State per (endpoint, cause): `lastNoticeAt` (last immediate notice or digest; null: never) and
 * `pendingDigestCount` (failures aggregated since). After `send_now` or a digest: lastNoticeAt = now, pending = 0.
 * After `aggregate`: pending + 1. Health is updated before any notice is sent (endpoint-health.ts).
 */

import { type HealthState, healthTransition } from './endpoint-health.ts';

export const NOTICE_WINDOW_MS = 24 * 60 * 60 * 1000;

export type NoticeCause = 'dead_letter' | 'permanent_failure';

export interface NoticeInput {
  cause: NoticeCause;
  /** This endpoint's last notice (immediate or digest) for this cause; null if none was ever sent. */
  lastNoticeAt: number | null;
  /** Failures of this cause aggregated since lastNoticeAt and not yet sent. */
  pendingDigestCount: number;
  now: number;
}

export type NoticeDecision =
  /** Send a notice now; it also reports `digested` earlier aggregated failures (0 usually). */
  | { kind: 'send_now'; cause: NoticeCause; digested: number }
  /** Add this failure to the digest, which is due at `digestDueAt`. */
  | { kind: 'aggregate'; cause: NoticeCause; digestDueAt: number };

export function noticeDecision(input: NoticeInput): NoticeDecision {
  const { cause, lastNoticeAt, pendingDigestCount, now } = input;
  assertInput(lastNoticeAt, pendingDigestCount, now);
  if (lastNoticeAt === null || now - lastNoticeAt >= NOTICE_WINDOW_MS) {
    return { kind: 'send_now', cause, digested: pendingDigestCount };
  }
  return { kind: 'aggregate', cause, digestDueAt: lastNoticeAt + NOTICE_WINDOW_MS };
}

/** When the pending digest is due: the end of the window; null when nothing is pending. */
export function digestDueAt(input: {
  lastNoticeAt: number | null;
  pendingDigestCount: number;
}): number | null {
  const { lastNoticeAt, pendingDigestCount } = input;
  assertInput(lastNoticeAt, pendingDigestCount, 0);
  if (pendingDigestCount === 0) return null;
  // Pending items without any notice cannot arise through noticeDecision; should stored state say so anyway,
  // the digest is overdue (0 = the epoch) rather than never sent.
  return lastNoticeAt === null ? 0 : lastNoticeAt + NOTICE_WINDOW_MS;
}

export function isDigestDue(input: {
  lastNoticeAt: number | null;
  pendingDigestCount: number;
  now: number;
}): boolean {
  assertInput(input.lastNoticeAt, input.pendingDigestCount, input.now);
  const at = digestDueAt(input);
  return at !== null && input.now >= at;
}

/**
 * Whether a `recovered` health change (healthTransition in endpoint-health.ts) should be e-mailed: only when a
 * failure notice (either cause, immediate or digest) went out after the last recovery notice. The customer who
 * was told something broke is told it works again — once per incident, however often the endpoint flaps.
 *
 * `streakStartedAt`, when given, is the first failure of the streak that is ending (the runtime's `failingSince`
 * before the success): a failure notice older than that belongs to an earlier incident — a rejected credential
 * fixed weeks ago, a digest that went out after the last recovery, an outage ended by a re-enable — and does not
 * make this recovery noticed. Null or absent: no such bound.
 */
export function recoveryNoticeDue(input: {
  lastFailureNoticeAt: number | null;
  lastRecoveryNoticeAt: number | null;
  streakStartedAt?: number | null;
}): boolean {
  const { lastFailureNoticeAt, lastRecoveryNoticeAt, streakStartedAt = null } = input;
  if (lastFailureNoticeAt === null) return false;
  if (streakStartedAt !== null && lastFailureNoticeAt < streakStartedAt) return false;
  return lastRecoveryNoticeAt === null || lastRecoveryNoticeAt < lastFailureNoticeAt;
}

/** The latest failure notice of an endpoint, immediate or digest, of either cause: from its notice windows. */
export function lastFailureNoticeAt(
  windows: Record<NoticeCause, { lastNoticeAt: number | null }>,
): number | null {
  const times = [windows.dead_letter.lastNoticeAt, windows.permanent_failure.lastNoticeAt].filter(
    (t): t is number => t !== null,
  );
  return times.length > 0 ? Math.max(...times) : null;
}

export interface RecoveredNoticeInput {
  /** The endpoint's stored health before and after the attempt was applied (endpoint-runtime.ts reassess). */
  previousHealth: HealthState;
  nextHealth: HealthState;
  /** The stored runtime's `failingSince` before the attempt: the first failure of the streak it may end. */
  streakStartedAt: number | null;
  /** The notice windows after the attempt was applied. */
  windows: Record<NoticeCause, { lastNoticeAt: number | null }>;
  /** When the last `recovered` notice was written for the endpoint; null: never. */
  lastRecoveryNoticeAt: number | null;
}

/**
 * The `recovered` notice, decided in the transaction that records an attempt. Due when the attempt moves the
 * stored health out of `failing` to `degraded` or `healthy` and a failure notice went out during the streak
 * that ended and after the last recovery notice. The stored health leaves `failing` only when an answer the
 * endpoint gave was a success: the circuit is closed by it and the run of consecutive failures reset (the stored
 * health uses the circuit and streak rules, not the rate windows the health API adds). Leaving `failing` for
 * `disabled`, or by a re-enable (which resets the circuit outside any attempt), is not a recovery.
 */
export function recoveredNoticeDue(input: RecoveredNoticeInput): boolean {
  if (healthTransition(input.previousHealth, input.nextHealth).notice !== 'recovered') return false;
  return recoveryNoticeDue({
    lastFailureNoticeAt: lastFailureNoticeAt(input.windows),
    lastRecoveryNoticeAt: input.lastRecoveryNoticeAt,
    streakStartedAt: input.streakStartedAt,
  });
}

function assertInput(lastNoticeAt: number | null, pendingDigestCount: number, now: number): void {
  if (!Number.isFinite(now) || (lastNoticeAt !== null && !Number.isFinite(lastNoticeAt))) {
    throw new RangeError('times must be finite numbers of milliseconds');
  }
  if (!Number.isSafeInteger(pendingDigestCount) || pendingDigestCount < 0) {
    throw new RangeError('pendingDigestCount must be an integer >= 0');
  }
}
