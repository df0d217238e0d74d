-- 0014: the step-up guard's state, per tenant, shared by every process (src/app/step-up.ts).
--
-- totp_last_step: the last TOTP step a step-up accepted (a code is accepted once, whichever process sees it);
-- totp_failures / totp_failures_since: wrong codes counted in the current window (5 in 5 minutes, then 429).
ALTER TABLE tenants ADD COLUMN totp_last_step INTEGER;
ALTER TABLE tenants ADD COLUMN totp_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN totp_failures_since INTEGER;
