-- 0016: deliveries by their event, for the retention pass (domain/retention.ts): an event is deleted with its
-- deliveries, and only when none of them is pending or a dead letter inside its retention. Keys grow with fan-out
-- order, so each insert appends at the index's right edge.
CREATE INDEX deliveries_event ON deliveries (event_seq);
