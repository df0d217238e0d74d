-- Hookrail PostgreSQL schema, version 3: failure handling and operations — the shared per-endpoint runtime
-- (circuit, streak, health, notice windows), the notification outbox, the tenant's notification channel, and the
-- append-only audit trail. Same tables, columns and indexes as SQLite's 0003 (times BIGINT ms, ids COLLATE "C").
-- `runtime` and `details` are JSON as TEXT, written and read whole by the adapter (domain/endpoint-runtime.ts).
--
-- The runtime lives on the endpoint's queue row, so it is read and written under the row lock that leasing and
-- completion already take: a probe claim written back in the leasing transaction is a compare-and-set.
ALTER TABLE endpoint_queue ADD COLUMN runtime TEXT;
-- Copies of runtime fields that maintenance queries by (kept in step with `runtime` in the same statement).
ALTER TABLE endpoint_queue ADD COLUMN failing_since BIGINT;
ALTER TABLE endpoint_queue ADD COLUMN digest_due_at BIGINT;
CREATE INDEX endpoint_queue_failing ON endpoint_queue (failing_since) WHERE failing_since IS NOT NULL;
CREATE INDEX endpoint_queue_digest ON endpoint_queue (digest_due_at) WHERE digest_due_at IS NOT NULL;

ALTER TABLE tenants ADD COLUMN notification_email TEXT;

CREATE TABLE notifications (
  id              TEXT COLLATE "C" PRIMARY KEY,
  tenant_id       TEXT COLLATE "C" NOT NULL,
  endpoint_id     TEXT COLLATE "C",
  kind            TEXT NOT NULL,
  subject         TEXT NOT NULL,
  body            TEXT NOT NULL,
  email_to        TEXT,
  status          TEXT NOT NULL,
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at BIGINT,
  last_error      TEXT,
  created_at      BIGINT NOT NULL,
  sent_at         BIGINT
);
CREATE INDEX notifications_outbox ON notifications (next_attempt_at) WHERE status = 'pending';
CREATE INDEX notifications_tenant ON notifications (tenant_id, id);

CREATE TABLE audit_events (
  id          TEXT COLLATE "C" PRIMARY KEY,
  tenant_id   TEXT COLLATE "C" NOT NULL,
  actor       TEXT NOT NULL,
  action      TEXT NOT NULL,
  target_type TEXT NOT NULL,
  target_id   TEXT NOT NULL,
  details     TEXT NOT NULL,
  created_at  BIGINT NOT NULL
);
CREATE INDEX audit_events_tenant ON audit_events (tenant_id, id);

CREATE INDEX deliveries_endpoint_status ON deliveries (endpoint_id, status, updated_at);
