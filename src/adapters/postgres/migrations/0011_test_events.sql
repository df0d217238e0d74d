-- 0011: events addressed to one endpoint.
--
-- A test event (POST /v1/endpoints/:id/test) is recorded like any event and gets its one delivery in the same
-- transaction; `endpoint_id` names that endpoint. It has no fan-out stream row, so fan-out never takes it and no
-- other endpoint receives it. NULL for every event that came through intake.
ALTER TABLE events ADD COLUMN endpoint_id TEXT COLLATE "C";
