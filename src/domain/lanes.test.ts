import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../test/support/seeded-random.ts';
import {
  bindingServes,
  DEFAULT_LANE_THRESHOLDS,
  decideLane,
  dedicatedLane,
  describeLaneBinding,
  fnv1a32,
  LANE_SCHEME,
  LaneError,
  type LaneSignals,
  type LaneThresholds,
  laneKind,
  laneSchemeTag,
  parseLaneBinding,
  recordVolume,
  sharedLane,
  sharedLaneIndex,
  VOLUME_WINDOW_MS,
  validateThresholds,
  volumePerMinute,
} from './lanes.ts';

const MIN = 60_000;
const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const EP = 'ep_01JQ8Z3M5X7Y9A1B2C3D4E5F6G';

describe('scheme v1: FNV-1a 32 of the endpoint id modulo the shared-lane count', () => {
  it('is version 1 and tags rows with version and count', () => {
    expect(LANE_SCHEME).toBe(1);
    expect(laneSchemeTag(8)).toBe('v1/8');
  });

  it('FNV-1a 32 matches the published test vectors', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('frozen vectors: changing these answers is a new scheme version, not a fix', () => {
    expect(fnv1a32('ep_01JD0000000000000000000000')).toBe(0x46066a44);
    expect(sharedLane('ep_01JD0000000000000000000000', 8)).toBe('shared:4');
    expect(fnv1a32(EP)).toBe(0xc14d8136);
    expect(sharedLane(EP, 8)).toBe('shared:6');
    expect(sharedLane(EP, 3)).toBe('shared:0');
    expect(sharedLane(EP, 1)).toBe('shared:0');
  });

  it('spreads ids evenly: 8,000 random ids over 8 lanes, each within 15 % of 1,000', () => {
    const rnd = seededRandom(3);
    const counts = new Array(8).fill(0);
    for (let i = 0; i < 8000; i++) counts[sharedLaneIndex(`ep_${rnd.bytes(16).toString('hex')}`, 8)]++;
    for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(150);
  });

  it('names lanes and kinds', () => {
    expect(dedicatedLane(EP)).toBe(`dedicated:${EP}`);
    expect(laneKind(dedicatedLane(EP))).toBe('dedicated');
    expect(laneKind('shared:3')).toBe('shared');
  });

  it.each([0, -1, 1.5, 1025, Number.NaN])('refuses a shared-lane count of %s', (n) => {
    expect(() => sharedLane(EP, n)).toThrow(LaneError);
  });
});

describe('parseLaneBinding', () => {
  it.each<[string, ReturnType<typeof parseLaneBinding>]>([
    ['*', null],
    [' * ', null],
    ['shared', { shared: 'all', dedicated: false }],
    ['dedicated', { shared: [], dedicated: true }],
    ['shared,dedicated', null],
    ['shared:3', { shared: [3], dedicated: false }],
    ['shared:0-3,shared:7', { shared: [0, 1, 2, 3, 7], dedicated: false }],
    ['shared:7, shared:2-3 ,shared:3', { shared: [2, 3, 7], dedicated: false }],
    ['shared:0,dedicated', { shared: [0], dedicated: true }],
    ['shared,shared:2', { shared: 'all', dedicated: false }],
  ])('%s', (spec, binding) => {
    expect(parseLaneBinding(spec, 8)).toEqual(binding);
  });

  it.each<[string, RegExp]>([
    ['', /empty lane/],
    ['shared,', /empty lane/],
    ['*,shared', /cannot be combined/],
    ['shared:8', /8 shared lanes \(shared:0 … shared:7\)/],
    ['shared:2-9', /8 shared lanes/],
    ['shared:3-1', /backwards/],
    ['shared:-1', /unknown lane/],
    ['shared:x', /unknown lane/],
    ['fast', /unknown lane "fast"/],
    ['dedicated:ep_1', /one endpoint's dedicated lane/],
  ])('refuses %j with a clear message', (spec, message) => {
    expect(() => parseLaneBinding(spec, 8)).toThrow(LaneError);
    expect(() => parseLaneBinding(spec, 8)).toThrow(message);
  });

  it('round-trips through describeLaneBinding', () => {
    for (const spec of ['*', 'shared', 'dedicated', 'shared:1,shared:5', 'shared:0,dedicated']) {
      expect(describeLaneBinding(parseLaneBinding(spec, 8))).toBe(spec);
    }
  });
});

describe('bindingServes', () => {
  const d = dedicatedLane(EP);
  it.each<[string, string | null, boolean]>([
    ['*', 'shared:1', true],
    ['*', d, true],
    ['*', null, true],
    ['shared', 'shared:1', true],
    ['shared', d, false],
    ['shared', null, false],
    ['dedicated', d, true],
    ['dedicated', 'shared:0', false],
    ['shared:0-1', 'shared:1', true],
    ['shared:0-1', 'shared:2', false],
    ['shared:0,dedicated', d, true],
  ])('%s serves %s: %s', (spec, lane, serves) => {
    expect(bindingServes(parseLaneBinding(spec, 8), lane)).toBe(serves);
  });
});

describe('validateThresholds', () => {
  it('accepts the defaults', () => {
    expect(() => validateThresholds(DEFAULT_LANE_THRESHOLDS)).not.toThrow();
    expect(DEFAULT_LANE_THRESHOLDS).toEqual({
      promoteBacklog: 10_000,
      promoteRatePerMin: 30_000,
      demoteBacklog: 1_000,
      demoteRatePerMin: 10_000,
      minDwellMs: 600_000,
    });
  });

  it.each<[Partial<LaneThresholds>, RegExp]>([
    [{ demoteBacklog: 10_000 }, /demote backlog must be below/],
    [{ demoteRatePerMin: 40_000 }, /demote rate must be below/],
    [{ promoteBacklog: 0, demoteBacklog: 0 }, /at least 1/],
    [{ minDwellMs: -1 }, /non-negative integer/],
    [{ promoteRatePerMin: 1.5 }, /non-negative integer/],
  ])('refuses %j', (patch, message) => {
    expect(() => validateThresholds({ ...DEFAULT_LANE_THRESHOLDS, ...patch })).toThrow(message);
  });
});

describe('fan-out volume: two one-minute windows', () => {
  const empty = { windowStart: 0, count: 0, previous: 0 };

  it('the first record opens a window aligned to the minute', () => {
    const w = recordVolume(empty, NOW + 25_000, 7);
    expect(w).toEqual({ windowStart: NOW, count: 7, previous: 0 });
    expect(volumePerMinute(w, NOW + 25_000)).toBe(7);
  });

  it('adds within the window, rolls into the previous window after it, forgets after two', () => {
    let w = recordVolume(empty, NOW, 100);
    w = recordVolume(w, NOW + 59_999, 20);
    expect(w).toEqual({ windowStart: NOW, count: 120, previous: 0 });
    w = recordVolume(w, NOW + MIN + 15_000, 5);
    expect(w).toEqual({ windowStart: NOW + MIN, count: 5, previous: 120 });
    // A quarter into the new window: all of it plus three quarters of the previous one.
    expect(volumePerMinute(w, NOW + MIN + 15_000)).toBe(5 + 90);
    // Silence for over a window: the last count still fades out over the next minute, then 0.
    expect(volumePerMinute(w, NOW + 2 * MIN + 30_000)).toBe(2.5);
    expect(volumePerMinute(w, NOW + 3 * MIN)).toBe(0);
    expect(recordVolume(w, NOW + 3 * MIN + 1, 1)).toEqual({
      windowStart: NOW + 3 * MIN,
      count: 1,
      previous: 0,
    });
  });

  it('a steady rate reads as that rate at every moment (no dip after a window reset)', () => {
    let w = empty;
    for (let t = 0; t < 5 * MIN; t += 1000) {
      w = recordVolume(w, NOW + t, 500); // 30,000 per minute
      if (t >= 2 * MIN) {
        const r = volumePerMinute(w, NOW + t);
        expect(r).toBeGreaterThanOrEqual(29_000);
        expect(r).toBeLessThanOrEqual(30_500);
      }
    }
    expect(VOLUME_WINDOW_MS).toBe(MIN);
  });

  it('a clock behind the window start reads the whole window', () => {
    const w = { windowStart: NOW, count: 10, previous: 4 };
    expect(volumePerMinute(w, NOW - 5_000)).toBe(14);
  });
});

describe('decideLane', () => {
  const thresholds: LaneThresholds = {
    promoteBacklog: 100,
    promoteRatePerMin: 1_000,
    demoteBacklog: 10,
    demoteRatePerMin: 200,
    minDwellMs: 10 * MIN,
  };
  const ctx = { now: NOW, sharedLanes: 8, thresholds };
  const home = sharedLane(EP, 8);
  const quiet = { windowStart: NOW, count: 0, previous: 0 };
  const signals = (o: Partial<LaneSignals> = {}): LaneSignals => ({
    endpointId: EP,
    lane: home,
    laneSince: NOW - HOUR,
    laneScheme: laneSchemeTag(8),
    enabled: true,
    backlog: 0,
    volume: quiet,
    draining: 0,
    ...o,
  });
  const HOUR = 60 * MIN;
  const dedicated = (o: Partial<LaneSignals> = {}) =>
    signals({ lane: dedicatedLane(EP), laneSince: NOW - HOUR, ...o });

  it('promotes on backlog or on volume, at the threshold', () => {
    expect(decideLane(signals({ backlog: 99 }), ctx)).toEqual({ action: 'stay', reason: 'below_promote' });
    expect(decideLane(signals({ backlog: 100 }), ctx)).toEqual({
      action: 'move',
      kind: 'promoted',
      to: dedicatedLane(EP),
    });
    expect(decideLane(signals({ volume: { ...quiet, count: 999 } }), ctx).action).toBe('stay');
    expect(decideLane(signals({ volume: { ...quiet, count: 1000 } }), ctx)).toMatchObject({
      kind: 'promoted',
    });
  });

  it('a disabled endpoint is not promoted for the backlog it keeps', () => {
    expect(decideLane(signals({ enabled: false, backlog: 5_000 }), ctx).action).toBe('stay');
    // … and a dedicated one is demoted (after dwell) although its backlog is retained.
    expect(decideLane(dedicated({ enabled: false, backlog: 5_000 }), ctx)).toMatchObject({
      kind: 'demoted',
      to: home,
    });
  });

  it('demotes only below both demote thresholds and after the dwell time', () => {
    expect(decideLane(dedicated(), ctx)).toEqual({ action: 'move', kind: 'demoted', to: home });
    expect(decideLane(dedicated({ backlog: 10 }), ctx).action).toBe('move');
    expect(decideLane(dedicated({ backlog: 11 }), ctx)).toEqual({ action: 'stay', reason: 'above_demote' });
    expect(decideLane(dedicated({ volume: { ...quiet, count: 201 } }), ctx)).toEqual({
      action: 'stay',
      reason: 'above_demote',
    });
    expect(decideLane(dedicated({ laneSince: NOW - 10 * MIN + 1 }), ctx)).toEqual({
      action: 'stay',
      reason: 'dwell',
    });
    expect(decideLane(dedicated({ laneSince: NOW - 10 * MIN }), ctx).action).toBe('move');
  });

  it('hysteresis: between the thresholds nothing moves, whichever lane the endpoint is in', () => {
    const rnd = seededRandom(11);
    for (let i = 0; i < 2000; i++) {
      const backlog = 11 + Math.floor(rnd.float() * 89); // 11..99
      const count = Math.floor(rnd.float() * 999); // under the promote rate
      const s = { backlog, volume: { ...quiet, count } };
      expect(decideLane(signals(s), ctx).action).toBe('stay');
      expect(decideLane(dedicated(s), ctx).action).toBe('stay');
    }
  });

  it('nothing moves while the previous move drains', () => {
    expect(decideLane(signals({ backlog: 500, draining: 1 }), ctx)).toEqual({
      action: 'stay',
      reason: 'draining',
    });
    expect(decideLane(dedicated({ draining: 3 }), ctx)).toEqual({ action: 'stay', reason: 'draining' });
  });

  it('re-hashes a shared endpoint when the shared-lane count changes; only re-tags when the lane stays', () => {
    const at3 = { ...ctx, sharedLanes: 3 };
    expect(sharedLane(EP, 3)).not.toBe(home);
    expect(decideLane(signals(), at3)).toEqual({ action: 'move', kind: 'rehashed', to: sharedLane(EP, 3) });
    // Promotion wins over a re-hash.
    expect(decideLane(signals({ backlog: 100 }), at3)).toMatchObject({ kind: 'promoted' });
    // A dedicated endpoint keeps its lane; its demotion goes to the new home.
    expect(decideLane(dedicated({ backlog: 50 }), at3).action).toBe('stay');
    expect(decideLane(dedicated(), at3)).toMatchObject({ kind: 'demoted', to: sharedLane(EP, 3) });
    // Same lane under a new count (or an older scheme): only the tag changes.
    expect(sharedLane(EP, 1)).toBe(sharedLane(EP, 3));
    expect(decideLane(signals({ lane: sharedLane(EP, 3) }), { ...ctx, sharedLanes: 1 })).toEqual({
      action: 'retag',
    });
    expect(decideLane(signals({ laneScheme: 'v0/8' }), ctx)).toEqual({ action: 'retag' });
  });

  it('assigns an endpoint that has no lane yet (created before lanes), even while leases are out', () => {
    expect(decideLane(signals({ lane: null, laneScheme: null, draining: 2 }), ctx)).toEqual({
      action: 'move',
      kind: 'rehashed',
      to: home,
    });
    expect(decideLane(signals({ lane: null, backlog: 100 }), ctx)).toMatchObject({ kind: 'promoted' });
  });

  it('a busy endpoint goes shared → dedicated → shared once as its load rises and falls', () => {
    let s = signals();
    const moves: string[] = [];
    // Backlog over two hours: rises to 150 and falls back to 0, with noise.
    const rnd = seededRandom(5);
    for (let m = 0; m <= 120; m++) {
      const now = NOW + m * MIN;
      const base = m < 60 ? m * 2.5 : Math.max(0, 150 - (m - 60) * 5);
      const backlog = Math.max(0, Math.round(base + (rnd.float() - 0.5) * 20));
      const d = decideLane({ ...s, backlog }, { ...ctx, now });
      if (d.action === 'move') {
        moves.push(d.kind);
        s = { ...s, lane: d.to, laneSince: now, laneScheme: laneSchemeTag(8) };
      }
    }
    expect(moves).toEqual(['promoted', 'demoted']);
  });
});
