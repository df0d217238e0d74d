-- 0009: no index of leases by endpoint.
--
-- deliveries_leased_endpoint gained an entry with every lease (a new row version whose lease_owner is set). Its only
-- readers were the lane drain counts, which now walk deliveries_leased (the leased rows only, at most the delivery
-- processes' concurrency); the resource-ordering check of the lease goes through deliveries_resource_head. The
-- SQLite migration of the same number says what it cost there.
DROP INDEX deliveries_leased_endpoint;
