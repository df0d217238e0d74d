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

/** The first page of a batch's walk; each page after it is twice as large (retentionWalk). */
export const RETENTION_FIRST_PAGE = 16;

export interface WalkedEvent {
  id: string;
  /** The deliveries that go with it: 0 for an event that is kept. */
  deliveries: number;
}

/**
 * The walk of one retention batch, as a generator the store drives (synchronously on SQLite, inside its
 * transaction; with awaits on PostgreSQL): it asks for pages of events after a cursor (`{ after, n }`), oldest first,
 * each with the deliveries it would delete, and takes events while their deliveries fit `deliveryLimit` (the first
 * whatever its count) and fewer than `limit` were looked at. It answers what it took and where the next batch goes
 * on (null: it reached the cutoff).
 *
 * Why the budget: an event goes with one delivery per subscribed endpoint, so a batch bounded by events alone was
 * not bounded — 500 events of a tenant with 2,500 endpoints were 1.25 million rows in one transaction, past
 * PostgreSQL's statement deadline on every pass (the walk never moved on), seconds of SQLite's write lock. Why pages
 * that double: every event looked at costs a read of its deliveries (is one still needed? how many?), so a batch
 * that stops at its budget after two events should not have read 500; a batch of small events still gets to
 * `limit` in a few pages.
 */
export function* retentionWalk<T extends WalkedEvent>(p: {
  after: string | null;
  limit: number;
  deliveryLimit: number;
}): Generator<{ after: string; n: number }, { taken: T[]; next: string | null }, T[]> {
  const taken: T[] = [];
  let total = 0;
  let cursor = p.after ?? '';
  for (let page = RETENTION_FIRST_PAGE; taken.length < p.limit; page *= 2) {
    const n = Math.min(page, p.limit - taken.length);
    const rows = yield { after: cursor, n };
    for (const r of rows) {
      if (taken.length > 0 && total + r.deliveries > p.deliveryLimit)
        return { taken, next: taken.at(-1)!.id };
      total += r.deliveries;
      taken.push(r);
    }
    if (rows.length < n) return { taken, next: null };
    cursor = rows.at(-1)!.id;
  }
  return { taken, next: taken.at(-1)?.id ?? null };
}
