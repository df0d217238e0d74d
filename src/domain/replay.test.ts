import { describe, expect, it } from 'vitest';
import {
  collectReplayable,
  REPLAY_CONFIRM_ABOVE,
  REPLAY_RATE_PER_SECOND,
  replayConfirmLimit,
  replayDueAt,
  replayNeedsConfirmation,
  replayStart,
  singleReplayRefusal,
} from './replay.ts';

const T = Date.UTC(2026, 11, 3, 12, 0);

describe('replay schedule', () => {
  it('starts now, or one interval after the last pending replay when that is later', () => {
    expect(replayStart(T, null, 10)).toBe(T);
    expect(replayStart(T, T - 5_000, 10)).toBe(T);
    expect(replayStart(T, T - 100, 10)).toBe(T);
    expect(replayStart(T, T - 99, 10)).toBe(T + 1);
    expect(replayStart(T, T + 60_000, 10)).toBe(T + 60_100);
    // A rate that does not divide a second rounds the interval up, never below the rate.
    expect(replayStart(T, T, 3)).toBe(T + 334);
  });

  it('spaces replays at the rate: k / rate seconds after the start', () => {
    expect([0, 1, 2, 9, 10, 11].map((k) => replayDueAt(T, k, 10) - T)).toEqual([
      0, 100, 200, 900, 1000, 1100,
    ]);
    expect([0, 1, 2, 3].map((k) => replayDueAt(T, k, 3) - T)).toEqual([0, 333, 666, 1000]);
    // Never more than `rate` due in any one-second window.
    const due = Array.from({ length: 1_000 }, (_, k) => replayDueAt(T, k, REPLAY_RATE_PER_SECOND));
    for (let i = REPLAY_RATE_PER_SECOND; i < due.length; i++) {
      expect(due[i]! - due[i - REPLAY_RATE_PER_SECOND]!).toBeGreaterThanOrEqual(1000);
    }
    // Two requests back to back keep the one rate across the seam.
    const first = Array.from({ length: 25 }, (_, k) => replayDueAt(T, k, 10));
    const start = replayStart(T + 5, first.at(-1)!, 10);
    const second = Array.from({ length: 25 }, (_, k) => replayDueAt(start, k, 10));
    const all = [...first, ...second];
    for (let i = 10; i < all.length; i++) expect(all[i]! - all[i - 10]!).toBeGreaterThanOrEqual(1000);
  });

  it('refuses a rate that is not positive and a negative or fractional index', () => {
    expect(() => replayStart(T, null, 0)).toThrow(RangeError);
    expect(() => replayDueAt(T, 0, Number.NaN)).toThrow(RangeError);
    expect(() => replayDueAt(T, -1, 10)).toThrow(RangeError);
    expect(() => replayDueAt(T, 1.5, 10)).toThrow(RangeError);
  });

  it('collects the still-subscribed candidates of a page up to max, and says when one more was seen', () => {
    const page = ['order.a', 'invoice.b', 'order.c', 'order.d'].map((event_type, i) => ({
      id: `d${i}`,
      event_type,
    }));
    const into: string[] = [];
    expect(collectReplayable(page, ['order.*'], into, 5)).toBe(false);
    expect(into).toEqual(['d0', 'd2', 'd3']);
    const capped: string[] = [];
    expect(collectReplayable(page, ['order.*'], capped, 2)).toBe(true);
    expect(capped).toEqual(['d0', 'd2']);
    // Across pages: the list carries on; exactly `max` matches in all is not "more".
    const across: string[] = ['d9'];
    expect(collectReplayable(page.slice(0, 1), ['*'], across, 2)).toBe(false);
    expect(across).toEqual(['d9', 'd0']);
  });

  it('asks for confirmation above the threshold only, unless confirmed', () => {
    const unconfirmed = replayConfirmLimit(false, null);
    expect(unconfirmed).toBe(REPLAY_CONFIRM_ABOVE);
    expect(replayNeedsConfirmation(REPLAY_CONFIRM_ABOVE, unconfirmed)).toBe(false);
    expect(replayNeedsConfirmation(REPLAY_CONFIRM_ABOVE + 1, unconfirmed)).toBe(true);
    expect(replayNeedsConfirmation(0, unconfirmed)).toBe(false);
    expect(replayConfirmLimit(true, null)).toBeNull();
    expect(replayNeedsConfirmation(1_000_000, replayConfirmLimit(true, null))).toBe(false);
  });

  it('a confirmed count binds: more matching than the caller was shown asks again', () => {
    expect(replayConfirmLimit(true, 409)).toBe(409);
    expect(replayNeedsConfirmation(409, 409)).toBe(false);
    expect(replayNeedsConfirmation(408, 409)).toBe(false); // fewer (some replayed meanwhile) is within what was confirmed
    expect(replayNeedsConfirmation(410, 409)).toBe(true);
    // Unconfirmed, the smaller bound holds either way.
    expect(replayConfirmLimit(false, 40)).toBe(40);
    expect(replayConfirmLimit(false, 4_000)).toBe(REPLAY_CONFIRM_ABOVE);
  });
});

describe('singleReplayRefusal', () => {
  it('refuses a cancelled delivery whatever the subscription, and a type no longer subscribed to', () => {
    expect(singleReplayRefusal('cancelled', 'order.created', ['*'])).toBe('cancelled');
    expect(singleReplayRefusal('dead', 'order.created', ['invoice.*'])).toBe('unsubscribed');
    expect(singleReplayRefusal('delivered', 'order.created', [])).toBe('unsubscribed');
  });
  it("allows a test event's delivery whatever the endpoint subscribes to, unless it was cancelled", () => {
    expect(singleReplayRefusal('delivered', 'hookrail.test', ['order.*'], true)).toBeNull();
    expect(singleReplayRefusal('cancelled', 'hookrail.test', ['*'], true)).toBe('cancelled');
  });
  it('allows every other status of a subscribed type, pending included', () => {
    for (const status of ['dead', 'delivered', 'skipped', 'pending']) {
      expect(singleReplayRefusal(status, 'order.created', ['order.*'])).toBeNull();
      expect(singleReplayRefusal(status, 'order.created', ['order.created'])).toBeNull();
    }
  });
});
