-- 0007: the dead-letter index replaces deliveries_endpoint_status.
--
-- The only reads by (endpoint, status, updated_at) are of dead letters (health's dead-letter count, the backlog of
-- a failure streak, enabling a disabled endpoint); pending deliveries are found through deliveries_ready and
-- deliveries_head. The old index held every delivery and was rewritten by every lease and completion, because both
-- change `updated_at` (bench:delivery: part of each commit's page writes). The partial one holds dead letters only.
DROP INDEX deliveries_endpoint_status;
CREATE INDEX deliveries_dead ON deliveries (endpoint_id, updated_at) WHERE status = 'dead';
