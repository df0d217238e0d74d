-- 0006: blocked endpoints (same column and meaning as SQLite's 0006; SQLite's rotation index, also in its 0006,
-- PostgreSQL has had since 0002).
--
-- `blocked_until` (domain/circuit-breaker.ts blockedUntil): while an endpoint's circuit is not closed, the time its
-- next probe may start; NULL while closed. Written with the runtime record it derives from, under the queue row
-- lock. Leasing passes over a blocked endpoint (no delivery of it is read or leased until its probe is due); the
-- deliveries that come due meanwhile are leased by a pass of their own and recorded as `circuit_open` attempts, in
-- transactions that hold no other endpoint's queue row. Rows with an open circuit at upgrade time get the value
-- from their runtime record here.
ALTER TABLE endpoint_queue ADD COLUMN blocked_until BIGINT;
UPDATE endpoint_queue SET blocked_until =
    coalesce((runtime::jsonb #>> '{circuit,lastProbeAt}')::bigint, (runtime::jsonb #>> '{circuit,openedAt}')::bigint)
    + 300000
  WHERE runtime IS NOT NULL AND runtime::jsonb #>> '{circuit,state}' IN ('open', 'half_open');
CREATE INDEX endpoint_queue_blocked ON endpoint_queue (blocked_until) WHERE blocked_until IS NOT NULL;
