-- The operator's step-up state (PRODUCT.md §3: deleting a tenant is an elevated action). Its TOTP seed is
-- configuration (HOOKRAIL_ADMIN_TOTP_SEED, else the data directory's admin-totp-seed), like the operator token; the
-- step accepted last and the wrong-code budget are kept here, as a tenant's are on its row, so that they hold across
-- every process of a deployment.
CREATE TABLE operator_step_up (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  totp_last_step BIGINT,
  totp_failures INTEGER NOT NULL DEFAULT 0,
  totp_failures_since BIGINT
);
INSERT INTO operator_step_up (id) VALUES (1);
