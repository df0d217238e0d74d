-- 0001: tenants, credentials, the accepted-event log and its fan-out stream.
CREATE TABLE tenants (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  totp_seed_sealed TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  deleted_at INTEGER
);

CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('producer', 'tenant')),
  tenant_id TEXT REFERENCES tenants(id),
  name TEXT,
  hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX api_keys_kind_id ON api_keys (kind, id);

-- The system of record for what Hookrail was asked to send: rows are inserted, never updated.
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  tenant_id TEXT NOT NULL,
  type TEXT NOT NULL,
  resource_id TEXT,
  data TEXT NOT NULL,
  idempotency_key TEXT,
  request_hash TEXT,
  created_at INTEGER NOT NULL
);
CREATE INDEX events_tenant_id ON events (tenant_id, id);

CREATE TABLE idempotency_keys (
  tenant_id TEXT NOT NULL,
  key TEXT NOT NULL,
  event_id TEXT NOT NULL,
  request_hash TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- Committed events not yet fanned out; written in the same transaction as the event.
CREATE TABLE fanout_pending (
  event_seq INTEGER PRIMARY KEY,
  event_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
