-- 0008: a version of each tenant's endpoints, so fan-out can cache the tenant's subscriptions and still read them
-- strongly consistently (src/adapters/subscriptions.ts): it reads the version after taking the tenants' gates, and
-- the endpoints only when the version moved. A trigger bumps it in the transaction of every change that matters to
-- matching, so no code path that writes endpoints can forget to.
ALTER TABLE tenants ADD COLUMN endpoints_version BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION bump_endpoints_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    UPDATE tenants SET endpoints_version = endpoints_version + 1 WHERE id = NEW.tenant_id;
  ELSE
    UPDATE tenants SET endpoints_version = endpoints_version + 1 WHERE id = OLD.tenant_id;
    IF TG_OP = 'UPDATE' AND NEW.tenant_id IS DISTINCT FROM OLD.tenant_id THEN
      UPDATE tenants SET endpoints_version = endpoints_version + 1 WHERE id = NEW.tenant_id;
    END IF;
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER endpoints_version AFTER INSERT OR DELETE OR UPDATE OF tenant_id, event_types, status, deleted_at
  ON endpoints FOR EACH ROW EXECUTE FUNCTION bump_endpoints_version();
