-- 0015: the replay rate held at the lease (ADR-10; src/domain/replay-pacing.ts).
--
-- replay_tat: the endpoint's replays' theoretical arrival time (epoch ms; NULL before its first replay), written by
-- the lease with the queue row's in-flight count. Nullable, no default: adding it rewrites no row.
ALTER TABLE endpoint_queue ADD COLUMN replay_tat INTEGER;
