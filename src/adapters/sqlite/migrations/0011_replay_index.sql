-- 0011: replays by the delivery they replay.
--
-- A bulk replay (POST /v1/endpoints/:id/replay) skips deliveries that were replayed before: one probe per candidate
-- by `replayed_from`. Partial: only replays have an entry, so fan-out's inserts write nothing to it.
CREATE INDEX deliveries_replayed ON deliveries (replayed_from) WHERE replayed_from IS NOT NULL;
