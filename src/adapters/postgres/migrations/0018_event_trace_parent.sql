-- 0018: the producer's W3C traceparent, kept with the event (domain/trace-context.ts) so that each attempt's span
-- joins the producer's trace. Null for events sent without one; nothing indexes it. A nullable column without a
-- default is added without rewriting the table.
ALTER TABLE events ADD COLUMN trace_parent text;
