-- 0017: each attempt names its event, so that a lost delivery row can be tied back to what it delivered (ADR-15:
-- the queue is rebuilt from the accepted events and the attempt log; OperationsStore.deliveryReconstruct).
--
-- event_id: the event of the attempt's delivery, written with the attempt. NULL for the attempts recorded before
-- this migration: nothing ties them to their event (their webhook-id is random), so the reconstruction cannot use
-- them. A nullable column without a default is added without rewriting the table.
--
-- attempts_event: the reconstruction reads the attempts of a batch of events as one range of event ids. Without it
-- every batch would read the whole attempt log. It costs each attempt insert one more index tuple; event ids grow
-- with acceptance time, so first attempts append at the index's right edge (as attempts_delivery's keys do) and
-- retries land among recent keys. Partial: the rows written before it have no entry, so building it writes nothing
-- (it still reads the table once, holding off attempt inserts meanwhile, as every CREATE INDEX in a migration does).
ALTER TABLE attempts ADD COLUMN event_id TEXT COLLATE "C";
CREATE INDEX attempts_event ON attempts (event_id) WHERE event_id IS NOT NULL;
