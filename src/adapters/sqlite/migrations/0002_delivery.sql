-- 0002: the delivery plane — endpoints, signing secrets, the per-endpoint queue state, deliveries, attempts.
CREATE TABLE endpoints (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  url TEXT NOT NULL,
  description TEXT,
  event_types TEXT NOT NULL,
  ordering TEXT NOT NULL,
  max_concurrency INTEGER NOT NULL,
  headers TEXT NOT NULL,
  status TEXT NOT NULL,
  disabled_reason TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  deleted_at INTEGER
);
CREATE INDEX endpoints_tenant ON endpoints (tenant_id, id);

CREATE TABLE endpoint_secrets (
  id TEXT PRIMARY KEY,
  endpoint_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  sealed TEXT NOT NULL,
  active_from INTEGER NOT NULL,
  active_until INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX endpoint_secrets_endpoint ON endpoint_secrets (endpoint_id, id);

-- The per-endpoint governor row: in-flight count (the cap is global, not per process), the earliest time an
-- unleased pending delivery is due (NULL when none, or when the endpoint is disabled), and when it was last
-- served (fair rotation: least recently served first).
CREATE TABLE endpoint_queue (
  endpoint_id TEXT PRIMARY KEY,
  inflight INTEGER NOT NULL DEFAULT 0,
  next_due_at INTEGER,
  last_served_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX endpoint_queue_due ON endpoint_queue (next_due_at) WHERE next_due_at IS NOT NULL;

-- The queue: a projection of the attempt log (status, attempts and times are derivable from it).
CREATE TABLE deliveries (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  endpoint_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  event_seq INTEGER NOT NULL,
  event_type TEXT NOT NULL,
  resource_id TEXT,
  webhook_id TEXT NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  first_attempt_at INTEGER,
  last_attempt_at INTEGER,
  status_reason TEXT,
  replayed_from TEXT,
  lease_owner TEXT,
  lease_until INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX deliveries_ready ON deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending' AND lease_owner IS NULL;
CREATE INDEX deliveries_head ON deliveries (endpoint_id, event_seq) WHERE status = 'pending';
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE lease_owner IS NOT NULL;
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id);

-- The system of record for what Hookrail did: appended, never updated.
CREATE TABLE attempts (
  id TEXT PRIMARY KEY,
  delivery_id TEXT NOT NULL,
  endpoint_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  attempt_no INTEGER NOT NULL,
  url TEXT NOT NULL,
  due_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  outcome TEXT NOT NULL,
  status_code INTEGER,
  error_class TEXT,
  error_message TEXT,
  request TEXT NOT NULL,
  response_headers TEXT,
  response_body TEXT,
  queue_ms INTEGER NOT NULL,
  platform_ms INTEGER NOT NULL,
  consumer_ms INTEGER
);
CREATE INDEX attempts_delivery ON attempts (delivery_id, attempt_no);
CREATE INDEX attempts_endpoint ON attempts (endpoint_id, id);
