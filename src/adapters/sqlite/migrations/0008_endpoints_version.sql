-- 0008: a version of each tenant's endpoints, so fan-out can cache the tenant's subscriptions and still read them
-- strongly consistently (src/adapters/subscriptions.ts): it reads the version in its transaction, and the endpoints
-- only when the version moved. Triggers bump it in the transaction of every change that matters to matching, so no
-- code path that writes endpoints can forget to.
ALTER TABLE tenants ADD COLUMN endpoints_version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER endpoints_version_insert AFTER INSERT ON endpoints BEGIN
  UPDATE tenants SET endpoints_version = endpoints_version + 1 WHERE id = NEW.tenant_id;
END;

CREATE TRIGGER endpoints_version_update AFTER UPDATE OF tenant_id, event_types, status, deleted_at ON endpoints BEGIN
  UPDATE tenants SET endpoints_version = endpoints_version + 1 WHERE id IN (OLD.tenant_id, NEW.tenant_id);
END;

CREATE TRIGGER endpoints_version_delete AFTER DELETE ON endpoints BEGIN
  UPDATE tenants SET endpoints_version = endpoints_version + 1 WHERE id = OLD.tenant_id;
END;
