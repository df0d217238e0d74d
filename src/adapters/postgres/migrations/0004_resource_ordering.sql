-- 0004: `resource` ordering — finding the oldest pending delivery of one resource on one endpoint is an index probe.
CREATE INDEX deliveries_resource_head ON deliveries (endpoint_id, resource_id, event_seq)
  WHERE status = 'pending' AND resource_id IS NOT NULL;
