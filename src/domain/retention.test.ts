import { describe, expect, it } from 'vitest';
import { DEFAULT_RETENTION, pruneMayHaveMore, retentionCutoffs } from './retention.ts';

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
