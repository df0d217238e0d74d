-- 0009: no index of leases by endpoint.
--
-- deliveries_leased_endpoint was changed by every lease (insert) and every completion (delete), each time in the
-- endpoint's own leaf, so with many endpoints nearly every lease and completion dirtied a page of it that its
-- commit then wrote to the WAL (bench:delivery, SQLite: WAL page writes per event −14 to −18 % without it). Its only
-- readers were the lane drain counts, which now walk deliveries_leased (the leased rows only, at most the delivery
-- concurrency); the resource-ordering check of the lease goes through deliveries_resource_head.
DROP INDEX deliveries_leased_endpoint;
