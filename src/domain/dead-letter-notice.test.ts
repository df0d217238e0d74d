import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test/support/fake-clock.ts';
import { seededRandom } from '../../test/support/seeded-random.ts';
import {
  digestDueAt,
  isDigestDue,
  lastFailureNoticeAt,
  NOTICE_WINDOW_MS,
  type NoticeCause,
  noticeDecision,
  recoveredNoticeDue,
  recoveryNoticeDue,
} from './dead-letter-notice.ts';
import type { HealthState } from './endpoint-health.ts';
import { applyAttempt, type EndpointRuntime, initialRuntime } from './endpoint-runtime.ts';

const MIN = 60_000;
const H = 60 * MIN;
const T0 = Date.UTC(2026, 0, 1, 3, 24, 0); // the journey's first dead letter

describe('constants', () => {
  it('the window is a rolling 24 h', () => {
    expect(NOTICE_WINDOW_MS).toBe(24 * H);
  });
});

describe('noticeDecision', () => {
  it.each<NoticeCause>(['dead_letter', 'permanent_failure'])('the first %s ever is sent now', (cause) => {
    expect(noticeDecision({ cause, lastNoticeAt: null, pendingDigestCount: 0, now: T0 })).toEqual({
      kind: 'send_now',
      cause,
      digested: 0,
    });
  });

  it('later ones inside the window are aggregated into the digest due at the window’s end', () => {
    for (const dt of [0, 1, MIN, 12 * H, 24 * H - 1]) {
      expect(
        noticeDecision({ cause: 'dead_letter', lastNoticeAt: T0, pendingDigestCount: 5, now: T0 + dt }),
      ).toEqual({ kind: 'aggregate', cause: 'dead_letter', digestDueAt: T0 + 24 * H });
    }
  });

  it('exactly 24 h after the last notice a new window starts, carrying whatever digest is still pending', () => {
    expect(
      noticeDecision({ cause: 'dead_letter', lastNoticeAt: T0, pendingDigestCount: 0, now: T0 + 24 * H }),
    ).toEqual({ kind: 'send_now', cause: 'dead_letter', digested: 0 });
    expect(
      noticeDecision({
        cause: 'permanent_failure',
        lastNoticeAt: T0,
        pendingDigestCount: 7,
        now: T0 + 30 * H,
      }),
    ).toEqual({ kind: 'send_now', cause: 'permanent_failure', digested: 7 });
  });

  it('a clock behind the last notice aggregates', () => {
    expect(
      noticeDecision({ cause: 'dead_letter', lastNoticeAt: T0, pendingDigestCount: 0, now: T0 - H }).kind,
    ).toBe('aggregate');
  });

  it.each<[string, Parameters<typeof noticeDecision>[0]]>([
    ['NaN now', { cause: 'dead_letter', lastNoticeAt: null, pendingDigestCount: 0, now: Number.NaN }],
    [
      'infinite lastNoticeAt',
      { cause: 'dead_letter', lastNoticeAt: Infinity, pendingDigestCount: 0, now: T0 },
    ],
    ['negative pending', { cause: 'dead_letter', lastNoticeAt: null, pendingDigestCount: -1, now: T0 }],
    ['fractional pending', { cause: 'dead_letter', lastNoticeAt: null, pendingDigestCount: 0.5, now: T0 }],
  ])('rejects %s', (_name, input) => {
    expect(() => noticeDecision(input)).toThrow(RangeError);
  });
});

describe('digest timing', () => {
  it('nothing pending, no digest', () => {
    expect(digestDueAt({ lastNoticeAt: T0, pendingDigestCount: 0 })).toBeNull();
    expect(isDigestDue({ lastNoticeAt: T0, pendingDigestCount: 0, now: T0 + 100 * H })).toBe(false);
    expect(digestDueAt({ lastNoticeAt: null, pendingDigestCount: 0 })).toBeNull();
  });

  it('pending items are due at the end of the window, not a millisecond earlier', () => {
    expect(digestDueAt({ lastNoticeAt: T0, pendingDigestCount: 3 })).toBe(T0 + 24 * H);
    expect(isDigestDue({ lastNoticeAt: T0, pendingDigestCount: 3, now: T0 + 24 * H - 1 })).toBe(false);
    expect(isDigestDue({ lastNoticeAt: T0, pendingDigestCount: 3, now: T0 + 24 * H })).toBe(true);
    expect(isDigestDue({ lastNoticeAt: T0, pendingDigestCount: 3, now: T0 + 48 * H })).toBe(true);
  });

  it('pending items without any notice (inconsistent stored state) are overdue, not lost', () => {
    expect(digestDueAt({ lastNoticeAt: null, pendingDigestCount: 2 })).toBe(0);
    expect(isDigestDue({ lastNoticeAt: null, pendingDigestCount: 2, now: T0 })).toBe(true);
  });

  it('rejects bad input', () => {
    expect(() => isDigestDue({ lastNoticeAt: T0, pendingDigestCount: -1, now: T0 })).toThrow(RangeError);
    expect(() => isDigestDue({ lastNoticeAt: T0, pendingDigestCount: 1, now: Number.NaN })).toThrow(
      RangeError,
    );
  });
});

describe('recoveryNoticeDue', () => {
  it('only after a failure notice, once per notice', () => {
    expect(recoveryNoticeDue({ lastFailureNoticeAt: null, lastRecoveryNoticeAt: null })).toBe(false);
    expect(recoveryNoticeDue({ lastFailureNoticeAt: null, lastRecoveryNoticeAt: T0 })).toBe(false);
    expect(recoveryNoticeDue({ lastFailureNoticeAt: T0, lastRecoveryNoticeAt: null })).toBe(true);
    expect(recoveryNoticeDue({ lastFailureNoticeAt: T0, lastRecoveryNoticeAt: T0 - 1 })).toBe(true);
    expect(recoveryNoticeDue({ lastFailureNoticeAt: T0, lastRecoveryNoticeAt: T0 })).toBe(false);
    expect(recoveryNoticeDue({ lastFailureNoticeAt: T0, lastRecoveryNoticeAt: T0 + H })).toBe(false);
  });

  it('a failure notice from before the streak that ends does not count; null is no bound', () => {
    const due = (streakStartedAt: number | null) =>
      recoveryNoticeDue({ lastFailureNoticeAt: T0, lastRecoveryNoticeAt: null, streakStartedAt });
    expect(due(T0 - H)).toBe(true);
    expect(due(T0)).toBe(true);
    expect(due(T0 + 1)).toBe(false);
    expect(due(null)).toBe(true);
    // The bound narrows, never widens: a recovery already noticed stays noticed.
    expect(
      recoveryNoticeDue({ lastFailureNoticeAt: T0, lastRecoveryNoticeAt: T0, streakStartedAt: T0 - H }),
    ).toBe(false);
  });
});

describe('lastFailureNoticeAt', () => {
  it('the later of the two windows, null when neither sent anything', () => {
    const w = (d: number | null, p: number | null) => ({
      dead_letter: { lastNoticeAt: d },
      permanent_failure: { lastNoticeAt: p },
    });
    expect(lastFailureNoticeAt(w(null, null))).toBeNull();
    expect(lastFailureNoticeAt(w(T0, null))).toBe(T0);
    expect(lastFailureNoticeAt(w(null, T0))).toBe(T0);
    expect(lastFailureNoticeAt(w(T0, T0 + H))).toBe(T0 + H);
    expect(lastFailureNoticeAt(w(T0 + H, T0))).toBe(T0 + H);
  });
});

describe('recoveredNoticeDue', () => {
  const windows = { dead_letter: { lastNoticeAt: T0 }, permanent_failure: { lastNoticeAt: null } };
  const states: HealthState[] = ['healthy', 'degraded', 'failing', 'disabled'];
  for (const previousHealth of states) {
    for (const nextHealth of states) {
      const expected =
        previousHealth === 'failing' && (nextHealth === 'degraded' || nextHealth === 'healthy');
      it(`${previousHealth} → ${nextHealth} after a failure notice of the streak: ${expected}`, () => {
        expect(
          recoveredNoticeDue({
            previousHealth,
            nextHealth,
            streakStartedAt: T0 - H,
            windows,
            lastRecoveryNoticeAt: null,
          }),
        ).toBe(expected);
      });
    }
  }

  it('leaving failing needs a failure notice during the streak and after the last recovery notice', () => {
    const base = {
      previousHealth: 'failing' as const,
      nextHealth: 'degraded' as const,
      streakStartedAt: T0 - H,
      windows,
      lastRecoveryNoticeAt: null,
    };
    expect(recoveredNoticeDue(base)).toBe(true);
    expect(recoveredNoticeDue({ ...base, streakStartedAt: T0 + 1 })).toBe(false);
    expect(recoveredNoticeDue({ ...base, lastRecoveryNoticeAt: T0 })).toBe(false);
    expect(
      recoveredNoticeDue({
        ...base,
        windows: { dead_letter: { lastNoticeAt: null }, permanent_failure: { lastNoticeAt: null } },
      }),
    ).toBe(false);
  });
});

/**
 * The adapters' side of the contract, in memory: each attempt applied to the runtime (endpoint-runtime.ts), its
 * failure notices, then `recovered` from the runtime before and after; a digest pass as the maintenance role runs
 * it. Time comes from a fake clock.
 */
class EndpointNotices {
  rt: EndpointRuntime = initialRuntime();
  recoveredAt: number | null = null;
  readonly sent: { at: number; kind: NoticeCause | 'digest' | 'recovered' }[] = [];
  constructor(private readonly clock: FakeClock) {}

  attempt(outcome: 'delivered' | 'retryable' | 'permanent', deadLetter: NoticeCause | null = null): void {
    const at = this.clock.now();
    const before = this.rt;
    const applied = applyAttempt(
      before,
      { at, outcome, errorClass: outcome === 'delivered' ? null : 'http_status', probe: false, deadLetter },
      false,
    );
    this.rt = applied.runtime;
    for (const n of applied.notices) this.sent.push({ at, kind: n.cause });
    if (
      recoveredNoticeDue({
        previousHealth: before.health,
        nextHealth: this.rt.health,
        streakStartedAt: before.failingSince,
        windows: this.rt.notices,
        lastRecoveryNoticeAt: this.recoveredAt,
      })
    ) {
      this.sent.push({ at, kind: 'recovered' });
      this.recoveredAt = at;
    }
    this.clock.advance(MIN);
  }

  fail(n: number, deadLetterAtEnd: NoticeCause | null = null): void {
    for (let i = 0; i < n; i++) this.attempt('retryable', i === n - 1 ? deadLetterAtEnd : null);
  }

  digests(): void {
    const now = this.clock.now();
    for (const cause of ['dead_letter', 'permanent_failure'] as const) {
      const w = this.rt.notices[cause];
      if (!isDigestDue({ lastNoticeAt: w.lastNoticeAt, pendingDigestCount: w.pending, now })) continue;
      this.sent.push({ at: now, kind: 'digest' });
      this.rt = { ...this.rt, notices: { ...this.rt.notices, [cause]: { lastNoticeAt: now, pending: 0 } } };
    }
  }

  kinds(): string[] {
    return this.sent.map((x) => x.kind);
  }
}

describe('recovered, driven through the runtime with a fake clock', () => {
  it('an outage with a dead-letter notice: exactly one recovered, at the first success', () => {
    const clock = new FakeClock(T0);
    const e = new EndpointNotices(clock);
    e.fail(12, 'dead_letter');
    expect(e.rt.health).toBe('failing');
    expect(e.kinds()).toEqual(['dead_letter']);
    const successAt = clock.now();
    e.attempt('delivered');
    e.attempt('delivered');
    expect(e.sent).toEqual([
      { at: successAt - MIN, kind: 'dead_letter' },
      { at: successAt, kind: 'recovered' },
    ]);
  });

  it('leaving failing with no failure notice sends nothing', () => {
    const e = new EndpointNotices(new FakeClock(T0));
    e.fail(25);
    expect(e.rt.health).toBe('failing');
    e.attempt('delivered');
    expect(e.kinds()).toEqual([]);
  });

  it('a notice that never saw the endpoint failing: no recovered when it is fixed, nor at a later blip', () => {
    const clock = new FakeClock(T0);
    const e = new EndpointNotices(clock);
    e.attempt('permanent', 'permanent_failure');
    expect(e.rt.health).toBe('degraded');
    e.attempt('delivered');
    clock.advance(7 * 24 * H);
    e.fail(10);
    expect(e.rt.health).toBe('failing');
    e.attempt('delivered');
    expect(e.kinds()).toEqual(['permanent_failure']);
  });

  it('a second streak inside the notice window (its dead letters digested) gets no second recovered', () => {
    const clock = new FakeClock(T0);
    const e = new EndpointNotices(clock);
    e.fail(12, 'dead_letter');
    e.attempt('delivered');
    clock.advance(2 * H);
    e.fail(12, 'dead_letter');
    expect(e.rt.health).toBe('failing');
    e.attempt('delivered');
    expect(e.kinds()).toEqual(['dead_letter', 'recovered']);
    // The digest goes out while the endpoint works; the next outage without a notice of its own is not noticed.
    clock.set(T0 + NOTICE_WINDOW_MS + H);
    e.digests();
    clock.advance(H);
    e.fail(10);
    e.attempt('delivered');
    expect(e.kinds()).toEqual(['dead_letter', 'recovered', 'digest']);
  });

  it('a digest sent during a long streak makes its end noticed', () => {
    const clock = new FakeClock(T0);
    const e = new EndpointNotices(clock);
    e.fail(12, 'dead_letter');
    e.attempt('delivered');
    clock.advance(H);
    e.fail(12, 'dead_letter');
    clock.set(T0 + NOTICE_WINDOW_MS + H);
    e.digests();
    e.fail(3);
    e.attempt('delivered');
    expect(e.kinds()).toEqual(['dead_letter', 'recovered', 'digest', 'recovered']);
  });
});

/** The caller's side of the contract: one window per (endpoint, cause), a digest job running every minute. */
class Notifier {
  readonly sent: { at: number; cause: NoticeCause; kind: 'immediate' | 'digest'; count: number }[] = [];
  readonly windows: Record<NoticeCause, { lastNoticeAt: number | null; pendingDigestCount: number }> = {
    dead_letter: { lastNoticeAt: null, pendingDigestCount: 0 },
    permanent_failure: { lastNoticeAt: null, pendingDigestCount: 0 },
  };

  failure(cause: NoticeCause, now: number): void {
    const w = this.windows[cause];
    const d = noticeDecision({ cause, ...w, now });
    if (d.kind === 'send_now') {
      this.sent.push({ at: now, cause, kind: 'immediate', count: 1 + d.digested });
      this.windows[cause] = { lastNoticeAt: now, pendingDigestCount: 0 };
    } else {
      w.pendingDigestCount++;
    }
  }

  tick(now: number): void {
    for (const cause of ['dead_letter', 'permanent_failure'] as const) {
      const w = this.windows[cause];
      if (!isDigestDue({ ...w, now })) continue;
      this.sent.push({ at: now, cause, kind: 'digest', count: w.pendingDigestCount });
      this.windows[cause] = { lastNoticeAt: now, pendingDigestCount: 0 };
    }
  }
}

describe('the journey: a 72 h outage that dead-letters every 7 minutes', () => {
  it('one immediate notice, then one digest a day — four e-mails, every dead letter counted once', () => {
    const n = new Notifier();
    let dead = 0;
    for (let now = T0; now < T0 + 96 * H; now += MIN) {
      // Dead letters keep coming for 70 h (the endpoint is disabled at 72 h; nothing is attempted after that).
      if (now < T0 + 70 * H && (now - T0) % (7 * MIN) === 0) {
        n.failure('dead_letter', now);
        dead++;
      }
      n.tick(now);
    }
    expect(n.sent.map((s) => [s.kind, (s.at - T0) / H])).toEqual([
      ['immediate', 0],
      ['digest', 24],
      ['digest', 48],
      ['digest', 72],
    ]);
    expect(n.sent.reduce((a, s) => a + s.count, 0)).toBe(dead);
  });

  it('a permanent failure after the outage notice is told at once, not a day later in a digest', () => {
    const n = new Notifier();
    n.failure('dead_letter', T0);
    n.failure('dead_letter', T0 + MIN);
    n.failure('permanent_failure', T0 + 20 * MIN); // the rollback shipped a bad credential: 401
    n.failure('permanent_failure', T0 + 21 * MIN);
    expect(n.sent).toEqual([
      { at: T0, cause: 'dead_letter', kind: 'immediate', count: 1 },
      { at: T0 + 20 * MIN, cause: 'permanent_failure', kind: 'immediate', count: 1 },
    ]);
    expect(n.windows.dead_letter.pendingDigestCount).toBe(1);
    expect(n.windows.permanent_failure.pendingDigestCount).toBe(1);
  });
});

describe('property (seeded): bounded volume, nothing dropped', () => {
  it.each([1, 2, 3, 17, 2024])(
    'seed %i: per cause, e-mails ≥ 24 h apart; every failure counted exactly once',
    (seed) => {
      const rnd = seededRandom(seed);
      const n = new Notifier();
      const failures: Record<NoticeCause, number> = { dead_letter: 0, permanent_failure: 0 };
      let now = T0;
      const end = T0 + 10 * 24 * H;
      // Bursty failures: quiet spells, then storms.
      let storm = false;
      while (now < end) {
        now += MIN;
        if (rnd.float() < 0.002) storm = !storm;
        const p = storm ? 0.3 : 0.001;
        for (const cause of ['dead_letter', 'permanent_failure'] as const) {
          if (rnd.float() < p * (cause === 'dead_letter' ? 1 : 0.3)) {
            n.failure(cause, now);
            failures[cause]++;
          }
        }
        n.tick(now);
      }
      // Flush: whatever is still pending goes out when its window ends.
      n.tick(end + 24 * H);
      for (const cause of ['dead_letter', 'permanent_failure'] as const) {
        const mails = n.sent.filter((s) => s.cause === cause);
        for (let i = 1; i < mails.length; i++) {
          expect(mails[i]!.at - mails[i - 1]!.at).toBeGreaterThanOrEqual(NOTICE_WINDOW_MS);
        }
        expect(mails.reduce((a, s) => a + s.count, 0)).toBe(failures[cause]);
        expect(mails.every((m) => m.count >= 1)).toBe(true);
      }
      expect(failures.dead_letter).toBeGreaterThan(10);
      expect(n.sent.some((s) => s.kind === 'digest')).toBe(true);
    },
  );
});
