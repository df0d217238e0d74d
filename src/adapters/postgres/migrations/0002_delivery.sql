-- Hookrail PostgreSQL schema, version 2: the delivery plane — endpoints, signing secrets, the per-endpoint queue
-- state, deliveries and the attempt log. Same tables, columns and indexes as SQLite's 0002 (times BIGINT ms, ids
-- COLLATE "C"). JSON columns (event_types, headers, request, response_headers) are TEXT: stored and returned
-- byte for byte as the adapter wrote them; nothing queries inside them.
--
-- Lock order, followed by every transaction of the adapter (deadlock avoidance):
--   tenants -> endpoints -> endpoint_queue (several rows: by endpoint_id) -> deliveries.

CREATE TABLE endpoints (
  id              TEXT COLLATE "C" PRIMARY KEY,
  tenant_id       TEXT COLLATE "C" NOT NULL,
  url             TEXT NOT NULL,
  description     TEXT,
  event_types     TEXT NOT NULL,
  ordering        TEXT NOT NULL,
  max_concurrency INTEGER NOT NULL,
  headers         TEXT NOT NULL,
  status          TEXT NOT NULL,
  disabled_reason TEXT,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  deleted_at      BIGINT
);
CREATE INDEX endpoints_tenant ON endpoints (tenant_id, id);

CREATE TABLE endpoint_secrets (
  id           TEXT COLLATE "C" PRIMARY KEY,
  endpoint_id  TEXT COLLATE "C" NOT NULL,
  tenant_id    TEXT COLLATE "C" NOT NULL,
  sealed       TEXT NOT NULL,
  active_from  BIGINT NOT NULL,
  active_until BIGINT,
  created_at   BIGINT NOT NULL
);
CREATE INDEX endpoint_secrets_endpoint ON endpoint_secrets (endpoint_id, id);

-- The per-endpoint governor row: in-flight count (the cap is global, not per process), the earliest time an
-- unleased pending delivery is due (NULL when none, or when the endpoint is disabled or deleted), and when it was
-- last served (fair rotation: least recently served first). Leasing locks these rows FOR UPDATE SKIP LOCKED, so
-- one endpoint is leased for by one transaction at a time.
CREATE TABLE endpoint_queue (
  endpoint_id    TEXT COLLATE "C" PRIMARY KEY,
  inflight       INTEGER NOT NULL DEFAULT 0,
  next_due_at    BIGINT,
  last_served_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX endpoint_queue_due ON endpoint_queue (next_due_at) WHERE next_due_at IS NOT NULL;
-- PostgreSQL only: the rotation order itself, so picking the least recently served endpoints with due work walks
-- an index and stops after `limit` rows instead of sorting every endpoint that has work.
CREATE INDEX endpoint_queue_rotation ON endpoint_queue (last_served_at, endpoint_id) WHERE next_due_at IS NOT NULL;

-- The queue: a projection of the attempt log (status, attempts and times are derivable from it).
CREATE TABLE deliveries (
  id               TEXT COLLATE "C" PRIMARY KEY,
  tenant_id        TEXT COLLATE "C" NOT NULL,
  endpoint_id      TEXT COLLATE "C" NOT NULL,
  event_id         TEXT COLLATE "C" NOT NULL,
  event_seq        BIGINT NOT NULL,
  event_type       TEXT NOT NULL,
  resource_id      TEXT,
  webhook_id       TEXT NOT NULL,
  status           TEXT NOT NULL,
  attempts         INTEGER NOT NULL DEFAULT 0,
  next_attempt_at  BIGINT,
  first_attempt_at BIGINT,
  last_attempt_at  BIGINT,
  status_reason    TEXT,
  replayed_from    TEXT COLLATE "C",
  lease_owner      TEXT,
  lease_until      BIGINT,
  created_at       BIGINT NOT NULL,
  updated_at       BIGINT NOT NULL
);
CREATE INDEX deliveries_ready ON deliveries (endpoint_id, next_attempt_at)
  WHERE status = 'pending' AND lease_owner IS NULL;
CREATE INDEX deliveries_head ON deliveries (endpoint_id, event_seq) WHERE status = 'pending';
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE lease_owner IS NOT NULL;
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id);

-- The system of record for what Hookrail did: appended, never updated.
CREATE TABLE attempts (
  id               TEXT COLLATE "C" PRIMARY KEY,
  delivery_id      TEXT COLLATE "C" NOT NULL,
  endpoint_id      TEXT COLLATE "C" NOT NULL,
  tenant_id        TEXT COLLATE "C" NOT NULL,
  attempt_no       INTEGER NOT NULL,
  url              TEXT NOT NULL,
  due_at           BIGINT NOT NULL,
  started_at       BIGINT NOT NULL,
  finished_at      BIGINT NOT NULL,
  outcome          TEXT NOT NULL,
  status_code      INTEGER,
  error_class      TEXT,
  error_message    TEXT,
  request          TEXT NOT NULL,
  response_headers TEXT,
  response_body    TEXT,
  queue_ms         BIGINT NOT NULL,
  platform_ms      BIGINT NOT NULL,
  consumer_ms      BIGINT
);
CREATE INDEX attempts_delivery ON attempts (delivery_id, attempt_no);
CREATE INDEX attempts_endpoint ON attempts (endpoint_id, id);
