/**
 * How much of a worker's lease one endpoint may take (ADR-02, ADR-08; PRODUCT.md §5): the fairness rule of a
 * lease call, applied by both stores to each endpoint they read in rotation order.
 *
 * A lease call visits the endpoints with due work least recently served first (ties by endpoint id), takes from
 * each at most `leaseRoom` of its due deliveries, stops once the call's `limit` is taken, and marks every visited
 * endpoint served at `now`, which sends it to the back of the rotation. So an endpoint with a deep backlog takes
 * at most `perEndpoint` per call and then waits for every other endpoint with due work to have its turn: no
 * endpoint can monopolise a worker, and no endpoint ever exceeds its in-flight cap. The rotation order itself is
 * each store's lease statement (ORDER BY last_served_at, endpoint_id, read through an index); everything that
 * decides amounts is here.
 */
import { type CircuitState, leaseLimit } from './circuit-breaker.ts';
import { effectiveCap } from './ramp.ts';

export interface LeaseCandidate {
  maxConcurrency: number;
  /** Attempts of the endpoint in flight now (leased, not yet completed), across every worker. */
  inflight: number;
  ordering: 'none' | 'endpoint' | 'resource';
  circuit: CircuitState;
}

/**
 * The deliveries `c` may be leased in this call at `now`, before the call's own limit:
 * - null when it is at its cap (ramped after an outage, ramp.ts): it is passed over, takes no place among the
 *   call's candidates and is not marked served (with a small limit, endpoints at their caps would otherwise hold up
 *   every other endpoint until their attempts end);
 * - 0 for an `endpoint`-ordered endpoint whose head is in flight: it is visited (and marked served) but gets nothing;
 * - otherwise the free room under the cap, at most `perEndpoint`, and 1 while the circuit is not closed (the probe).
 * `endpoint` ordering takes at most one (the head); `resource` ordering may take more, one per resource, which the
 * stores' due-row reads enforce.
 */
export function leaseRoom(c: LeaseCandidate, now: number, perEndpoint: number): number | null {
  const free = effectiveCap(c.maxConcurrency, c.circuit.closedAt, now) - c.inflight;
  if (free <= 0) return null;
  if (c.ordering === 'endpoint') return c.inflight > 0 ? 0 : Math.min(1, perEndpoint);
  return Math.max(0, Math.min(free, perEndpoint, leaseLimit(c.circuit)));
}
