-- 0006: blocked endpoints and the rotation index.
--
-- `blocked_until` (domain/circuit-breaker.ts blockedUntil): while an endpoint's circuit is not closed, the time its
-- next probe may start; NULL while closed. Written with the runtime record it derives from. Leasing passes over a
-- blocked endpoint (no delivery of it is read or leased until its probe is due); the deliveries that come due
-- meanwhile are leased by a pass of their own and recorded as `circuit_open` attempts. Rows with an open circuit
-- at upgrade time get the value from their runtime record here.
ALTER TABLE endpoint_queue ADD COLUMN blocked_until INTEGER;
UPDATE endpoint_queue SET blocked_until =
    coalesce(json_extract(runtime, '$.circuit.lastProbeAt'), json_extract(runtime, '$.circuit.openedAt')) + 300000
  WHERE runtime IS NOT NULL AND json_extract(runtime, '$.circuit.state') IN ('open', 'half_open');
CREATE INDEX endpoint_queue_blocked ON endpoint_queue (blocked_until) WHERE blocked_until IS NOT NULL;

-- The rotation order of endpoints with work (PostgreSQL has had it since 0002): the lease walks it and stops after
-- `limit` rows instead of sorting every endpoint with due work on each call (O(due endpoints) per lease at 40,000
-- endpoints; docs/benchmarks.md, Scale). SQLite proves the partial index from the lease's `next_due_at <= ?`.
CREATE INDEX endpoint_queue_rotation ON endpoint_queue (last_served_at, endpoint_id) WHERE next_due_at IS NOT NULL;
