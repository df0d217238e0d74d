-- 0019: the producer's W3C traceparent, kept with the event (domain/trace-context.ts) so that each attempt's span
-- joins the producer's trace. Null for events sent without one; nothing indexes it.
ALTER TABLE events ADD COLUMN trace_parent TEXT;
