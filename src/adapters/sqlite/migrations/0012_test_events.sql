-- 0012: events addressed to one endpoint.
--
-- A test event (POST /v1/endpoints/:id/test) is recorded like any event and gets its one delivery in the same
-- transaction; `endpoint_id` names that endpoint, and fan-out passes such an event over (it is already delivered
-- where it belongs, and no other endpoint may receive it). NULL for every event that came through intake.
ALTER TABLE events ADD COLUMN endpoint_id TEXT;
