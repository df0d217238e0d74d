/**
 * Queue lanes (ADR-03): the declared, versioned scheme that maps endpoints onto lanes, the worker binding grammar
 * (`--lanes`), and the promotion/demotion rule. Pure: the store supplies each endpoint's signals, the caller `now`.
 *
 * Scheme v1 (`LANE_SCHEME = 1`), reproducible by anyone:
 *   - shared lane of an endpoint = `shared:<n>`, n = FNV-1a 32-bit (offset basis 2166136261, prime 16777619) over the
 *     UTF-8 bytes of the endpoint id, as an unsigned integer, modulo the shared-lane count (HOOKRAIL_SHARED_LANES);
 *   - a promoted endpoint's lane = `dedicated:<endpoint id>` (one lane per endpoint, never shared).
 * The store records, per endpoint, the scheme tag its shared lane was computed under (`v1/<count>`); when the count
 * (or a future scheme version) changes, the rebalance pass re-hashes every shared endpoint whose tag differs.
 *
 * In the database realisation a lane is a column of the endpoint's queue row: a move changes which worker pools
 * may lease for the endpoint, never where its deliveries are, so a move cannot lose or duplicate a delivery. What a
 * move leaves behind is leases taken under the old lane, still in flight: the drain window. No second move is made
 * while one drains, so an endpoint is served by at most two lanes' pools at once (its global in-flight cap and
 * ordering still hold across both: they live on the queue row).
 */

export const LANE_SCHEME = 1;
export const DEFAULT_SHARED_LANES = 8;
export const MAX_SHARED_LANES = 1024;
/** Fan-out volume is counted in one-minute windows (the rate thresholds are per minute). */
export const VOLUME_WINDOW_MS = 60_000;

export type LaneKind = 'shared' | 'dedicated';
export type LaneMoveKind = 'promoted' | 'demoted' | 'rehashed';

export interface LaneThresholds {
  /** Promote when the endpoint's pending backlog reaches this … */
  promoteBacklog: number;
  /** … or its fan-out volume over the last minute reaches this. */
  promoteRatePerMin: number;
  /** Demote only when the backlog is at most this (below promoteBacklog: the hysteresis band) … */
  demoteBacklog: number;
  /** … and the volume at most this (below promoteRatePerMin) … */
  demoteRatePerMin: number;
  /** … and the endpoint has been in its dedicated lane at least this long. */
  minDwellMs: number;
}

export const DEFAULT_LANE_THRESHOLDS: LaneThresholds = {
  promoteBacklog: 10_000,
  promoteRatePerMin: 30_000,
  demoteBacklog: 1_000,
  demoteRatePerMin: 10_000,
  minDwellMs: 600_000,
};

export class LaneError extends Error {}

/** FNV-1a, 32 bits, over the UTF-8 bytes of `s`; an unsigned integer. */
export function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(s)) {
    h ^= byte;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function assertSharedLanes(sharedLanes: number): void {
  if (!Number.isSafeInteger(sharedLanes) || sharedLanes < 1 || sharedLanes > MAX_SHARED_LANES) {
    throw new LaneError(`the shared-lane count must be an integer between 1 and ${MAX_SHARED_LANES}`);
  }
}

export function sharedLaneIndex(endpointId: string, sharedLanes: number): number {
  assertSharedLanes(sharedLanes);
  return fnv1a32(endpointId) % sharedLanes;
}

export const sharedLane = (endpointId: string, sharedLanes: number) =>
  `shared:${sharedLaneIndex(endpointId, sharedLanes)}`;
export const dedicatedLane = (endpointId: string) => `dedicated:${endpointId}`;
export const laneKind = (lane: string): LaneKind => (lane.startsWith('dedicated:') ? 'dedicated' : 'shared');
/** What the store records next to a shared lane, so a changed count or scheme is noticed row by row. */
export const laneSchemeTag = (sharedLanes: number) => `v${LANE_SCHEME}/${sharedLanes}`;

/**
 * The lanes a worker pool serves. Absent (`null`/`undefined` where a binding is optional) means every lane,
 * including endpoints not yet assigned one.
 */
export interface LaneBinding {
  /** Every shared lane, or these lane numbers. */
  shared: 'all' | number[];
  dedicated: boolean;
}

const GRAMMAR = '`*`, `shared`, `shared:<n>`, `shared:<a>-<b>` or `dedicated`, comma-separated';

/**
 * Parses a binding spec: `*` (every lane) → null; `shared`; `shared:0-3,shared:7`; `dedicated`; any comma-separated
 * combination. Lane numbers must exist under `sharedLanes`. `shared,dedicated` covers every lane and is `*`.
 */
export function parseLaneBinding(spec: string, sharedLanes: number): LaneBinding | null {
  assertSharedLanes(sharedLanes);
  const tokens = spec.split(',').map((t) => t.trim());
  if (tokens.length === 1 && tokens[0] === '*') return null;
  let allShared = false;
  let dedicated = false;
  const numbers = new Set<number>();
  for (const token of tokens) {
    if (token === '') throw new LaneError(`empty lane in "${spec}"; expected ${GRAMMAR}`);
    if (token === '*') throw new LaneError('`*` (every lane) cannot be combined with other lanes');
    if (token === 'shared') allShared = true;
    else if (token === 'dedicated') dedicated = true;
    else if (token.startsWith('dedicated:')) {
      throw new LaneError(
        `"${token}": a pool cannot be bound to one endpoint's dedicated lane; use \`dedicated\` (every dedicated lane)`,
      );
    } else {
      const m = /^shared:(\d{1,5})(?:-(\d{1,5}))?$/.exec(token);
      if (!m) throw new LaneError(`unknown lane "${token}"; expected ${GRAMMAR}`);
      const from = Number(m[1]);
      const to = m[2] === undefined ? from : Number(m[2]);
      if (to < from) throw new LaneError(`"${token}": the range is backwards`);
      if (to >= sharedLanes) {
        throw new LaneError(
          `"${token}": there are ${sharedLanes} shared lanes (shared:0 … shared:${sharedLanes - 1}); ` +
            'see HOOKRAIL_SHARED_LANES',
        );
      }
      for (let n = from; n <= to; n++) numbers.add(n);
    }
  }
  if (allShared && dedicated) return null;
  return { shared: allShared ? 'all' : [...numbers].sort((a, b) => a - b), dedicated };
}

/** The reference meaning of a binding (the stores implement it in SQL). An unassigned lane is served by `*` only. */
export function bindingServes(binding: LaneBinding | null | undefined, lane: string | null): boolean {
  if (!binding) return true;
  if (lane === null) return false;
  if (laneKind(lane) === 'dedicated') return binding.dedicated;
  if (binding.shared === 'all') return true;
  return binding.shared.includes(Number(lane.slice('shared:'.length)));
}

/** The spec form of a binding, for logs and the start line. */
export function describeLaneBinding(binding: LaneBinding | null | undefined): string {
  if (!binding) return '*';
  const parts: string[] = [];
  if (binding.shared === 'all') parts.push('shared');
  else parts.push(...binding.shared.map((n) => `shared:${n}`));
  if (binding.dedicated) parts.push('dedicated');
  return parts.join(',');
}

/** Demote thresholds must sit strictly below the promote ones, or an endpoint could flap on every pass. */
export function validateThresholds(t: LaneThresholds): void {
  for (const [name, v] of Object.entries(t)) {
    if (!Number.isSafeInteger(v) || v < 0) throw new LaneError(`${name} must be a non-negative integer`);
  }
  if (t.promoteBacklog < 1 || t.promoteRatePerMin < 1) {
    throw new LaneError('the promote thresholds must be at least 1');
  }
  if (t.demoteBacklog >= t.promoteBacklog) {
    throw new LaneError('the demote backlog must be below the promote backlog (hysteresis)');
  }
  if (t.demoteRatePerMin >= t.promoteRatePerMin) {
    throw new LaneError('the demote rate must be below the promote rate (hysteresis)');
  }
}

/**
 * The per-endpoint volume counter the stores keep on the queue row, updated by fan-out in the transaction that
 * creates the deliveries: `count` deliveries in the window starting at `windowStart`, `previous` in the one before.
 * Fan-out adds `n` at `now` like `recordVolume` (the stores do the same in SQL).
 */
export interface VolumeWindow {
  windowStart: number;
  count: number;
  previous: number;
}

export function recordVolume(w: VolumeWindow, now: number, n: number): VolumeWindow {
  const elapsed = now - w.windowStart;
  if (elapsed < VOLUME_WINDOW_MS) return { ...w, count: w.count + n };
  return {
    windowStart: now - (elapsed % VOLUME_WINDOW_MS),
    count: n,
    previous: elapsed < 2 * VOLUME_WINDOW_MS ? w.count : 0,
  };
}

/**
 * Deliveries fanned out over the last minute, estimated from the two windows (the sliding-window counter: the
 * previous window weighted by how much of it the last minute still covers). A tumbling window alone would read
 * near zero just after each reset and demote a hot endpoint whose dedicated lane keeps its backlog low.
 */
export function volumePerMinute(w: VolumeWindow, now: number): number {
  const elapsed = Math.max(0, now - w.windowStart);
  if (elapsed < VOLUME_WINDOW_MS) {
    return w.count + (w.previous * (VOLUME_WINDOW_MS - elapsed)) / VOLUME_WINDOW_MS;
  }
  if (elapsed < 2 * VOLUME_WINDOW_MS) return (w.count * (2 * VOLUME_WINDOW_MS - elapsed)) / VOLUME_WINDOW_MS;
  return 0;
}

/** What the rebalance pass knows about one endpoint. */
export interface LaneSignals {
  endpointId: string;
  /** null: not yet assigned (endpoints created before lanes existed). */
  lane: string | null;
  laneSince: number | null;
  /** The scheme tag the shared lane was computed under (laneSchemeTag); ignored for dedicated lanes. */
  laneScheme: string | null;
  /** A disabled endpoint leases nothing, so its retained backlog does not call for a lane of its own. */
  enabled: boolean;
  /** Pending deliveries (the store may stop counting at promoteBacklog). */
  backlog: number;
  volume: VolumeWindow;
  /** Deliveries still leased under a lane other than the current one (the previous move's drain window). */
  draining: number;
}

export type LaneDecision =
  | { action: 'stay'; reason: 'draining' | 'below_promote' | 'dwell' | 'above_demote' }
  | { action: 'move'; kind: LaneMoveKind; to: string }
  /** Same lane under the current scheme: only the recorded scheme tag changes. */
  | { action: 'retag' };

/**
 * Promote when backlog ≥ promoteBacklog or volume ≥ promoteRatePerMin. Demote only when both are at or below the
 * lower demote thresholds and the endpoint has been dedicated at least minDwellMs. Shared endpoints whose lane
 * is not the one the current scheme gives are re-hashed. Nothing moves while a previous move still drains.
 */
export function decideLane(
  s: LaneSignals,
  ctx: { now: number; sharedLanes: number; thresholds: LaneThresholds },
): LaneDecision {
  const t = ctx.thresholds;
  const home = sharedLane(s.endpointId, ctx.sharedLanes);
  if (s.lane !== null && s.draining > 0) return { action: 'stay', reason: 'draining' };
  const backlog = s.enabled ? s.backlog : 0;
  const rate = volumePerMinute(s.volume, ctx.now);
  const hot = backlog >= t.promoteBacklog || rate >= t.promoteRatePerMin;

  if (s.lane !== null && laneKind(s.lane) === 'dedicated') {
    if (backlog > t.demoteBacklog || rate > t.demoteRatePerMin) {
      return { action: 'stay', reason: 'above_demote' };
    }
    if (ctx.now - (s.laneSince ?? ctx.now) < t.minDwellMs) return { action: 'stay', reason: 'dwell' };
    return { action: 'move', kind: 'demoted', to: home };
  }
  if (hot) return { action: 'move', kind: 'promoted', to: dedicatedLane(s.endpointId) };
  if (s.lane !== home) return { action: 'move', kind: 'rehashed', to: home };
  if (s.laneScheme !== laneSchemeTag(ctx.sharedLanes)) return { action: 'retag' };
  return { action: 'stay', reason: 'below_promote' };
}
