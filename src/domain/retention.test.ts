import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RETENTION,
  pruneMayHaveMore,
  RETENTION_FIRST_PAGE,
  retentionCutoffs,
  retentionWalk,
  type WalkedEvent,
} from './retention.ts';

/** Drives a walk over `events` (ids in order) as a store would; returns what it took, where it stops, the pages. */
function drive(events: WalkedEvent[], p: { after: string | null; limit: number; deliveryLimit: number }) {
  const pages: Array<{ after: string; n: number }> = [];
  const walk = retentionWalk<WalkedEvent>(p);
  let step = walk.next();
  while (!step.done) {
    const { after, n } = step.value;
    pages.push({ after, n });
    step = walk.next(events.filter((e) => e.id > after).slice(0, n));
  }
  return { taken: step.value.taken.map((e) => e.id), next: step.value.next, pages };
}
const ev = (i: number, deliveries: number): WalkedEvent => ({
  id: `e${String(i).padStart(4, '0')}`,
  deliveries,
});

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 11, 4);

describe('retention', () => {
  it('has the published defaults (PRODUCT.md §10)', () => {
    expect(DEFAULT_RETENTION).toEqual({
      eventsDays: 30,
      deadLettersDays: 30,
      attemptsDays: 90,
      auditDays: 400,
    });
  });

  it('turns days into cutoffs before now', () => {
    expect(
      retentionCutoffs(NOW, { eventsDays: 2, deadLettersDays: 3, attemptsDays: 90, auditDays: 400 }),
    ).toEqual({
      events: NOW - 2 * DAY,
      deadLetters: NOW - 3 * DAY,
      attempts: NOW - 90 * DAY,
      audit: NOW - 400 * DAY,
    });
  });

  it('asks for another batch while the walk has not reached the cutoff, or when a kind filled its batch', () => {
    const none = { events: 0, deliveries: 0, attempts: 0, audit: 0, after: null };
    expect(pruneMayHaveMore(none, 10)).toBe(false);
    // Deliveries go with events, and events are walked: only the walk's position says whether more are waiting.
    expect(pruneMayHaveMore({ ...none, events: 10, deliveries: 40 }, 10)).toBe(false);
    expect(pruneMayHaveMore({ ...none, after: 'evt_01' }, 10)).toBe(true);
    expect(pruneMayHaveMore({ ...none, attempts: 10 }, 10)).toBe(true);
    expect(pruneMayHaveMore({ ...none, audit: 10 }, 10)).toBe(true);
    expect(pruneMayHaveMore({ ...none, attempts: 9, audit: 9 }, 10)).toBe(false);
  });
});

describe('retentionWalk', () => {
  it('takes events while their deliveries fit the budget, the first whatever its count, and goes on after them', () => {
    const events = Array.from({ length: 10 }, (_, i) => ev(i, 2_500)); // a tenant with 2,500 endpoints
    const first = drive(events, { after: null, limit: 500, deliveryLimit: 5_000 });
    expect(first.taken).toEqual(['e0000', 'e0001']);
    expect(first.next).toBe('e0001');
    // It read one page of 16, not 500 events' deliveries, to take two.
    expect(first.pages).toEqual([{ after: '', n: RETENTION_FIRST_PAGE }]);
    const huge = drive([ev(0, 90_000), ev(1, 1)], { after: null, limit: 500, deliveryLimit: 5_000 });
    expect(huge.taken).toEqual(['e0000']);
    expect(huge.next).toBe('e0000');
  });

  it('pages double up to `limit`; kept events cost nothing of the budget; the cutoff ends the walk', () => {
    const events = Array.from({ length: 1_000 }, (_, i) => ev(i, i % 2)); // every other event kept
    const walk = drive(events, { after: null, limit: 500, deliveryLimit: 5_000 });
    expect(walk.taken).toHaveLength(500);
    expect(walk.next).toBe('e0499');
    expect(walk.pages.map((p) => p.n)).toEqual([16, 32, 64, 128, 256, 4]);
    const rest = drive(events, { after: walk.next, limit: 500, deliveryLimit: 5_000 });
    expect(rest.taken).toHaveLength(500);
    const end = drive(events, { after: rest.next, limit: 500, deliveryLimit: 5_000 });
    expect(end).toEqual({ taken: [], next: null, pages: [{ after: 'e0999', n: 16 }] });
    expect(drive(events.slice(0, 20), { after: null, limit: 500, deliveryLimit: 5_000 }).next).toBeNull();
  });
});
