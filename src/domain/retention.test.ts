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

  it('asks for another batch only when one kind filled its batch', () => {
    const none = { events: 0, deliveries: 0, attempts: 0, audit: 0 };
    expect(pruneMayHaveMore(none, 10)).toBe(false);
    // Deliveries go with events: many deliveries for few events is not a full batch.
    expect(pruneMayHaveMore({ ...none, events: 3, deliveries: 40 }, 10)).toBe(false);
    expect(pruneMayHaveMore({ ...none, events: 10 }, 10)).toBe(true);
    expect(pruneMayHaveMore({ ...none, attempts: 10 }, 10)).toBe(true);
    expect(pruneMayHaveMore({ ...none, audit: 10 }, 10)).toBe(true);
  });
});
