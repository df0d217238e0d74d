-- 0005: queue lanes (ADR-03; scheme in src/domain/lanes.ts). A lane is a column of the endpoint's queue row:
-- `shared:<n>` or `dedicated:<endpoint id>`, NULL until assigned (rows older than this migration are assigned by the
-- next rebalance pass of the maintenance role). `lane_scheme` is the scheme tag a shared lane was computed under
-- (`v1/<count>`): a changed shared-lane count re-hashes the rows whose tag differs. Moving an endpoint rewrites only
-- these columns; its deliveries stay where they are.
ALTER TABLE endpoint_queue ADD COLUMN lane TEXT;
ALTER TABLE endpoint_queue ADD COLUMN lane_since INTEGER;
ALTER TABLE endpoint_queue ADD COLUMN lane_previous TEXT;
ALTER TABLE endpoint_queue ADD COLUMN lane_scheme TEXT;
-- Fan-out volume in one-minute windows (the rate signal of promotion), kept by fan-out in the transaction that
-- creates the deliveries: `volume_count` in the window starting at `volume_window_start`, `volume_previous` before.
ALTER TABLE endpoint_queue ADD COLUMN volume_window_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoint_queue ADD COLUMN volume_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoint_queue ADD COLUMN volume_previous INTEGER NOT NULL DEFAULT 0;
CREATE INDEX endpoint_queue_lane ON endpoint_queue (lane);

-- The lane a delivery was leased under (set by the lease, meaningful while lease_owner is set): leases under a
-- lane other than the endpoint's current one are the drain window of a move.
ALTER TABLE deliveries ADD COLUMN lease_lane TEXT;
CREATE INDEX deliveries_leased_endpoint ON deliveries (endpoint_id) WHERE lease_owner IS NOT NULL;
