import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import type { Random } from '../ports/clock.ts';
import { type CircuitState, initialCircuit } from './circuit-breaker.ts';
import { type LeaseCandidate, leaseRoom } from './lease-room.ts';
import { effectiveCap, RAMP_DURATION_MS } from './ramp.ts';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const S = 1000;

const closed = (closedAt: number | null = null): CircuitState => ({ ...initialCircuit(), closedAt });
const open: CircuitState = {
  state: 'open',
  consecutiveFailures: 20,
  openedAt: NOW - 10 * 60 * S,
  lastProbeAt: null,
  probeInFlightUntil: null,
  closedAt: null,
};
const cand = (over: Partial<LeaseCandidate> = {}): LeaseCandidate => ({
  maxConcurrency: 10,
  inflight: 0,
  ordering: 'none',
  circuit: closed(),
  ...over,
});

describe('leaseRoom: worked values', () => {
  it('the free room under the cap, at most perEndpoint', () => {
    expect(leaseRoom(cand(), NOW, 4)).toBe(4);
    expect(leaseRoom(cand({ inflight: 7 }), NOW, 4)).toBe(3);
    expect(leaseRoom(cand({ inflight: 9 }), NOW, 4)).toBe(1);
    expect(leaseRoom(cand({ maxConcurrency: 100 }), NOW, 64)).toBe(64);
  });

  it('null at the cap: passed over, no candidate place', () => {
    expect(leaseRoom(cand({ inflight: 10 }), NOW, 4)).toBeNull();
    // A lowered cap with more in flight than it allows (max_concurrency edited down meanwhile).
    expect(leaseRoom(cand({ maxConcurrency: 2, inflight: 5 }), NOW, 4)).toBeNull();
  });

  it('the ramp after an outage lowers the cap (10 % at once, all of it after five minutes)', () => {
    const justClosed = closed(NOW);
    expect(leaseRoom(cand({ maxConcurrency: 100, circuit: justClosed }), NOW, 64)).toBe(10);
    expect(leaseRoom(cand({ maxConcurrency: 100, inflight: 10, circuit: justClosed }), NOW, 64)).toBeNull();
    expect(
      leaseRoom(cand({ maxConcurrency: 100, inflight: 10, circuit: justClosed }), NOW + 150 * S, 64),
    ).toBe(45);
    expect(leaseRoom(cand({ maxConcurrency: 100, circuit: justClosed }), NOW + RAMP_DURATION_MS, 100)).toBe(
      100,
    );
  });

  it('one at a time while the circuit is not closed (the probe)', () => {
    expect(leaseRoom(cand({ circuit: open }), NOW, 4)).toBe(1);
    const halfOpen: CircuitState = {
      ...open,
      state: 'half_open',
      lastProbeAt: NOW,
      probeInFlightUntil: NOW + 30 * S,
    };
    expect(leaseRoom(cand({ circuit: halfOpen }), NOW, 4)).toBe(1);
  });

  it("'endpoint' ordering: the head alone, and nothing (but a visit) while it is in flight", () => {
    expect(leaseRoom(cand({ ordering: 'endpoint' }), NOW, 4)).toBe(1);
    expect(leaseRoom(cand({ ordering: 'endpoint', inflight: 1 }), NOW, 4)).toBe(0);
    expect(leaseRoom(cand({ ordering: 'endpoint', maxConcurrency: 1, inflight: 1 }), NOW, 4)).toBeNull();
    // 'resource' takes like 'none' here; one per resource is the due-row read's rule.
    expect(leaseRoom(cand({ ordering: 'resource', inflight: 3 }), NOW, 4)).toBe(4);
  });
});

describe('leaseRoom: properties (seeded)', () => {
  it('never more than perEndpoint, never past the (ramped) cap, one while not closed', () => {
    const r = seededRandom(7);
    const int = (n: number) => Math.floor(r.float() * n);
    for (let i = 0; i < 5000; i++) {
      const maxConcurrency = 1 + int(100);
      const circuit =
        r.float() < 0.2 ? open : closed(r.float() < 0.5 ? NOW - int(2 * RAMP_DURATION_MS) : null);
      const c = cand({
        maxConcurrency,
        inflight: int(maxConcurrency + 3),
        ordering: (['none', 'endpoint', 'resource'] as const)[int(3)]!,
        circuit,
      });
      const perEndpoint = 1 + int(64);
      const room = leaseRoom(c, NOW, perEndpoint);
      const cap = effectiveCap(maxConcurrency, circuit.closedAt, NOW);
      if (c.inflight >= cap) {
        expect(room).toBeNull();
        continue;
      }
      expect(room).not.toBeNull();
      expect(room!).toBeGreaterThanOrEqual(0);
      expect(room!).toBeLessThanOrEqual(perEndpoint);
      expect(c.inflight + room!).toBeLessThanOrEqual(cap);
      if (circuit.state !== 'closed' || c.ordering === 'endpoint') expect(room!).toBeLessThanOrEqual(1);
    }
  });
});

/**
 * A lease rotation over in-memory queues, as both stores run it (the rotation order is their lease statement's
 * ORDER BY; the amounts are leaseRoom's): read up to `limit` candidates with due work, least recently served first,
 * passing over those at their caps; take min(room, due, what the call has left) from each in turn; mark each
 * visited endpoint served at `now`.
 */
interface SimEndpoint {
  id: string;
  maxConcurrency: number;
  due: number;
  inflight: number;
  lastServedAt: number;
  leased: number;
}

function leaseCall(eps: SimEndpoint[], now: number, limit: number, perEndpoint: number): Map<string, number> {
  const rotation = eps
    .filter((e) => e.due > 0)
    .sort((a, b) => a.lastServedAt - b.lastServedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  // The candidates: the first `limit` in rotation order that have room (the stores read them with LIMIT).
  const candidates: Array<{ e: SimEndpoint; room: number }> = [];
  for (const e of rotation) {
    if (candidates.length >= limit) break;
    const room = leaseRoom(
      { maxConcurrency: e.maxConcurrency, inflight: e.inflight, ordering: 'none', circuit: closed() },
      now,
      perEndpoint,
    );
    if (room !== null) candidates.push({ e, room });
  }
  const taken = new Map<string, number>();
  let left = limit;
  for (const { e, room } of candidates) {
    if (left <= 0) break;
    const n = Math.min(room, e.due, left);
    e.due -= n;
    e.inflight += n;
    e.leased += n;
    e.lastServedAt = now;
    left -= n;
    taken.set(e.id, n);
  }
  return taken;
}

/** Completes each in-flight attempt with probability `p` (a fake clock tick of the receivers). */
function completeSome(eps: SimEndpoint[], r: Random, p: (e: SimEndpoint) => number) {
  for (const e of eps) {
    let done = 0;
    for (let i = 0; i < e.inflight; i++) if (r.float() < p(e)) done++;
    e.inflight -= done;
  }
}

const endpoints = (n: number, backlog: (i: number) => number, cap = 10): SimEndpoint[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `ep_${String(i).padStart(3, '0')}`,
    maxConcurrency: cap,
    due: backlog(i),
    inflight: 0,
    lastServedAt: 0,
    leased: 0,
  }));

describe('lease fairness (a seeded simulation over leaseRoom)', () => {
  it('a deep backlog cannot crowd out small ones: each endpoint is served within one turn of the rotation', () => {
    const r = seededRandom(11);
    // One endpoint with 100,000 due, 49 with 1-20 due each; a worker leasing 16 per call, 4 per endpoint.
    const eps = endpoints(50, (i) => (i === 0 ? 100_000 : 1 + Math.floor(r.float() * 20)));
    const firstServed = new Map<string, number>();
    let deepWhileOthersWaited = 0;
    for (let call = 0, t = NOW; call < 200; call++, t += 10) {
      const othersWaiting = eps.slice(1).some((e) => e.due > 0);
      const taken = leaseCall(eps, t, 16, 4);
      for (const [id, n] of taken) {
        expect(n).toBeLessThanOrEqual(4);
        if (!firstServed.has(id)) firstServed.set(id, call);
      }
      if (othersWaiting) deepWhileOthersWaited += taken.get('ep_000') ?? 0;
      completeSome(eps, r, () => 0.9);
    }
    // At least four endpoints per call (16 at 4 each): every endpoint is first served within 13 calls.
    expect(firstServed.size).toBe(50);
    expect(Math.max(...firstServed.values())).toBeLessThan(Math.ceil(50 / 4));
    // The small backlogs were all leased, and while they waited the deep one had one turn per rotation: 4 of
    // every ~50 + 4 leased.
    for (const e of eps.slice(1)) expect(e.due).toBe(0);
    const small = eps.slice(1).reduce((s, e) => s + e.leased, 0);
    expect(deepWhileOthersWaited).toBeLessThanOrEqual(4 * Math.ceil(small / 12) + 4);
  });

  it('endpoints with equal backlogs and caps get equal shares, whatever their backlog sizes', () => {
    const r = seededRandom(3);
    // Backlogs from 5,000 to 50,000: all stay backlogged for the whole run.
    const eps = endpoints(20, () => 5000 + Math.floor(r.float() * 45_000));
    for (let call = 0, t = NOW; call < 2000; call++, t += 5) {
      leaseCall(eps, t, 8, 2);
      completeSome(eps, r, () => 0.5);
    }
    const shares = eps.map((e) => e.leased);
    const mean = shares.reduce((a, b) => a + b, 0) / shares.length;
    for (const s of shares) expect(Math.abs(s - mean) / mean).toBeLessThan(0.05);
  });

  it('an endpoint at its cap (slow to answer) takes no place: a limit-1 worker keeps serving the others', () => {
    const r = seededRandom(5);
    const eps = endpoints(30, () => 1000, 2);
    // The first 20 in rotation order never answer within the run: they fill their caps and stay there.
    const slow = (e: SimEndpoint) => Number(e.id.slice(3)) < 20;
    let leasedToOthers = 0;
    for (let call = 0, t = NOW; call < 500; call++, t += 5) {
      const taken = leaseCall(eps, t, 1, 1);
      expect([...taken.values()].reduce((a, b) => a + b, 0)).toBe(1);
      for (const [id, n] of taken) if (!slow(eps.find((e) => e.id === id)!)) leasedToOthers += n;
      completeSome(eps, r, (e) => (slow(e) ? 0 : 1));
    }
    // Each slow endpoint took its two slots once; every other call went to the ten healthy ones.
    expect(leasedToOthers).toBe(500 - 20 * 2);
  });

  it('no endpoint ever has more in flight than its cap, under random completions', () => {
    const r = seededRandom(13);
    const eps = endpoints(40, () => Math.floor(r.float() * 500), 1);
    eps.forEach((e) => {
      e.maxConcurrency = 1 + Math.floor(r.float() * 12);
    });
    for (let call = 0, t = NOW; call < 3000; call++, t += 7) {
      leaseCall(eps, t, 1 + Math.floor(r.float() * 64), 1 + Math.floor(r.float() * 16));
      for (const e of eps) expect(e.inflight).toBeLessThanOrEqual(e.maxConcurrency);
      completeSome(eps, r, () => r.float());
    }
    // And nothing starved: every backlog was leased in full.
    expect(eps.every((e) => e.due === 0)).toBe(true);
  });
});
