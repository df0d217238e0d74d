-- 0020: when the endpoint's last `recovered` notice was written (ms), beside the runtime record that holds its
-- failure notice windows: a recovery is noticed only after a failure notice newer than this one
-- (domain/dead-letter-notice.ts recoveredNoticeDue). Null: never.
ALTER TABLE endpoint_queue ADD COLUMN recovered_notice_at INTEGER;
