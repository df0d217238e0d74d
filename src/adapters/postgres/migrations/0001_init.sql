-- Hookrail PostgreSQL schema, version 1: tenants, API keys, the immutable event log, idempotency keys and the
-- fan-out stream. Times are BIGINT milliseconds since the Unix epoch (the store takes `now` from its caller).
-- Id columns use COLLATE "C" so `ORDER BY id` is byte order: ids are time-sortable ULIDs, and SQLite compares
-- them the same way (BINARY), so both stores page identically whatever the database locale.

CREATE TABLE tenants (
  id               TEXT COLLATE "C" PRIMARY KEY,
  name             TEXT NOT NULL,
  totp_seed_sealed TEXT NOT NULL,
  created_at       BIGINT NOT NULL,
  deleted_at       BIGINT
);

CREATE TABLE api_keys (
  id         TEXT COLLATE "C" PRIMARY KEY,
  kind       TEXT NOT NULL CHECK (kind IN ('producer', 'tenant')),
  tenant_id  TEXT COLLATE "C" REFERENCES tenants (id),
  name       TEXT,
  hash       TEXT NOT NULL UNIQUE,
  prefix     TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT,
  CHECK ((kind = 'tenant') = (tenant_id IS NOT NULL))
);
CREATE INDEX api_keys_kind_id ON api_keys (kind, id);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id) WHERE tenant_id IS NOT NULL;

-- The accepted-event log (ADR-15: a system of record, never updated in place). No foreign key to tenants:
-- the log outlives tenant deletion until retention removes it, and an FK check per row would slow group commit.
CREATE TABLE events (
  seq             BIGSERIAL PRIMARY KEY,
  id              TEXT COLLATE "C" NOT NULL UNIQUE,
  tenant_id       TEXT COLLATE "C" NOT NULL,
  type            TEXT NOT NULL,
  resource_id     TEXT,
  data            TEXT NOT NULL,
  idempotency_key TEXT,
  request_hash    TEXT,
  created_at      BIGINT NOT NULL
);
CREATE INDEX events_tenant_id ON events (tenant_id, id);
CREATE INDEX events_tenant_type_id ON events (tenant_id, type, id);

-- One row per (tenant, key) within the window; the primary key is what makes a key single-use across
-- concurrent transactions and processes (INSERT ... ON CONFLICT waits for the other inserter to finish).
CREATE TABLE idempotency_keys (
  tenant_id    TEXT COLLATE "C" NOT NULL,
  key          TEXT NOT NULL,
  event_id     TEXT COLLATE "C" NOT NULL,
  request_hash TEXT,
  created_at   BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- Committed events not yet fanned out, written in the same transaction as the event (a transactional outbox),
-- so fan-out can never miss a committed event. Oldest first by seq.
CREATE TABLE fanout_pending (
  event_seq  BIGINT PRIMARY KEY,
  event_id   TEXT COLLATE "C" NOT NULL,
  tenant_id  TEXT COLLATE "C" NOT NULL,
  created_at BIGINT NOT NULL
);
