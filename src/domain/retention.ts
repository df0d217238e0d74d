/**
 * How long Hookrail keeps what it records (PRODUCT.md §10), and what the maintenance role's retention pass may
 * delete at a given time. Pure: the pass reads the cutoffs from here and the stores apply them.
 *
 * - An event (its payload) is kept for `eventsDays` from its acceptance, with its deliveries. It is kept longer
 *   while any delivery of it is still pending (a disabled endpoint's backlog is never dropped by age) or leased (a
 *   delivery cancelled while its attempt is in flight: the attempt's completion needs the row) or is a dead
 *   letter younger than `deadLettersDays` (a dead letter stays replayable for its own retention, counted from when
 *   it died, ADR-10/14). Deleting the event deletes its deliveries, so nothing refers to a payload that is gone.
 * - Attempts are kept for `attemptsDays` from when they started, whether or not their delivery still exists, so
 *   the attempt log outlives the payloads (GET /v1/attempts/:id keeps working; the request's body is gone).
 * - Audit records are kept for `auditDays`.
 */

const DAY_MS = 86_400_000;

export interface RetentionDays {
  eventsDays: number;
  deadLettersDays: number;
  attemptsDays: number;
  auditDays: number;
}

export const DEFAULT_RETENTION: Readonly<RetentionDays> = {
  eventsDays: 30,
  deadLettersDays: 30,
  attemptsDays: 90,
  auditDays: 400,
};

/** Epoch-ms cutoffs: what was created (events, attempts, audit) or died (dead letters) before them may go. */
export interface RetentionCutoffs {
  events: number;
  deadLetters: number;
  attempts: number;
  audit: number;
}

export function retentionCutoffs(now: number, days: RetentionDays): RetentionCutoffs {
  return {
    events: now - days.eventsDays * DAY_MS,
    deadLetters: now - days.deadLettersDays * DAY_MS,
    attempts: now - days.attemptsDays * DAY_MS,
    audit: now - days.auditDays * DAY_MS,
  };
}

/** What one batch of the pass deleted. */
export interface PruneCounts {
  events: number;
  deliveries: number;
  attempts: number;
  audit: number;
}

/**
 * One batch's answer: what it deleted, and where its walk through the expired events stopped — the last event it
 * looked at, to continue after; null once it reached the cutoff (the next walk starts from the oldest again). The
 * walk is what keeps a batch short when many old events must be kept (a disabled endpoint's backlog): each batch
 * looks at a bounded number and moves on, instead of reading past all of them every time.
 */
export interface PruneBatch extends PruneCounts {
  after: string | null;
}

/** Another batch is worth running when the walk has not reached the cutoff or a kind filled its batch. */
export const pruneMayHaveMore = (b: PruneBatch, limit: number): boolean =>
  b.after !== null || b.attempts >= limit || b.audit >= limit;

/**
 * Of the events a batch's walk looked at (oldest first), those it deletes with their deliveries: while their
 * deliveries fit `budget`, and the first whatever its count. An event fans out to every subscribed endpoint, so a
 * batch bounded by events alone was not bounded: 500 events of a tenant with 2,500 endpoints were 1.25 million rows
 * in one transaction — past PostgreSQL's statement deadline on every pass (the walk never moved on, and nothing was
 * pruned again), seconds of SQLite's write lock. `deliveries` counts only what the batch would delete (0 for an
 * event that is kept). When it stops early, the walk continues after the last event taken.
 */
export function withinDeliveryBudget<T extends { deliveries: number }>(
  seen: readonly T[],
  budget: number,
): T[] {
  let total = 0;
  let k = 0;
  for (; k < seen.length; k++) {
    total += seen[k]!.deliveries;
    if (k > 0 && total > budget) break;
  }
  return seen.slice(0, k);
}
