-- 0013: due replays by endpoint.
--
-- Endpoints with a due replay, for a process that runs the replay role alone (deliveryLease `replaysOnly`).
-- Partial: only replays still to be leased have an entry, so it stays small and costs other deliveries nothing.
CREATE INDEX deliveries_replays_ready ON deliveries (endpoint_id, next_attempt_at)
  WHERE status = 'pending' AND lease_owner IS NULL AND replayed_from IS NOT NULL;
