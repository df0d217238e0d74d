-- 0010: fan-out's place in the event log instead of a row per event.
--
-- fanout_pending held one row per committed event until fan-out took it: intake inserted it beside the event, and
-- fan-out joined it to `events` and deleted it. On SQLite one transaction commits at a time and `events.seq` is
-- AUTOINCREMENT (never reused), so events become visible in seq order and "every event up to seq N is fanned out"
-- is exact: one row, moved once per fan-out pass in the pass's transaction. Intake writes one row per event instead
-- of two, and fan-out reads the events it takes by a range of the rowid. (PostgreSQL keeps its fanout_pending: its
-- sequence values commit out of order and several fan-out processes claim rows there.)
--
-- The pending rows were always the events after some seq (fan-out deletes everything up to the last event it took),
-- so the cursor starts just before the first of them, or at the last event when none is pending.
CREATE TABLE fanout_cursor (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL
);
INSERT INTO fanout_cursor (id, seq)
VALUES (1, coalesce((SELECT min(event_seq) - 1 FROM fanout_pending), (SELECT max(seq) FROM events), 0));
DROP TABLE fanout_pending;
