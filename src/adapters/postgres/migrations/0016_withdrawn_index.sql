-- 0016: deliveries withdrawn by their owner's decision, by endpoint and time.
--
-- An endpoint's time series (GET /v1/endpoints/:id/stats) derives its backlog history from when deliveries left
-- `pending` (domain/endpoint-series.ts), and those that were cancelled (unsubscribe, deletion) or skipped (re-enable)
-- inside the window may have been created long before it, behind a disabled endpoint. Partial: only such rows have
-- an entry. Fan-out inserts `pending` rows and leases and completions write `pending`, `delivered` and `dead` ones, so
-- the delivery plane never writes it (the one exception, an attempt that arrives for a delivery cancelled while it
-- was in flight, moves or removes that delivery's entry). Delivered ones are found through the attempt log,
-- dead ones through deliveries_dead.
CREATE INDEX deliveries_withdrawn ON deliveries (endpoint_id, updated_at) WHERE status IN ('cancelled', 'skipped');
