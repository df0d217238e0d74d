/**
 * Step-up state on PostgreSQL (Store.stepUpState / stepUpAccept / stepUpCharge): a tenant's on its row, the
 * operator's on the one row of `operator_step_up`. Each method is one statement, so the limits hold across every
 * API process: of two given one code, one accepts it; concurrent wrong codes are counted under the row lock.
 */
import type { StepUpState, Store } from '../../ports/store.ts';
import type { PostgresDeliveryStoreDeps } from './query-helpers.ts';

interface StepUpRow {
  totp_last_step: string | number | null;
  totp_failures: number;
  totp_failures_since: string | number | null;
}

/**
 * Whose step-up row: a live tenant's ($1 its id), or (no tenant) the operator's (migration 0020), where $1 is
 * null and only keeps the parameters' places.
 */
const stepUpRow = (tenantId: string | null) =>
  tenantId === null
    ? { table: 'operator_step_up', where: 'id = 1 AND $1::text IS NULL' }
    : { table: 'tenants', where: 'id = $1 AND deleted_at IS NULL' };

const stepUpStateFromRow = (r: StepUpRow): StepUpState => ({
  lastStep: r.totp_last_step === null ? null : Number(r.totp_last_step),
  failures: r.totp_failures,
  failuresSince: r.totp_failures_since === null ? null : Number(r.totp_failures_since),
});

export function createPostgresStepUpState({
  query,
}: Pick<PostgresDeliveryStoreDeps, 'query'>): Pick<Store, 'stepUpState' | 'stepUpAccept' | 'stepUpCharge'> {
  return {
    async stepUpState({ tenantId }) {
      const { table, where } = stepUpRow(tenantId);
      const res = await query<StepUpRow>(
        `SELECT totp_last_step, totp_failures, totp_failures_since FROM ${table} WHERE ${where}`,
        [tenantId],
      );
      return res.rows[0] ? stepUpStateFromRow(res.rows[0]) : null;
    },

    async stepUpAccept({ tenantId, step }) {
      const { table, where } = stepUpRow(tenantId);
      const res = await query(
        `UPDATE ${table} SET totp_last_step = $2, totp_failures = 0, totp_failures_since = NULL
          WHERE ${where} AND (totp_last_step IS NULL OR totp_last_step < $2)`,
        [tenantId, step],
      );
      return res.rowCount === 1;
    },

    async stepUpCharge({ tenantId, now, windowMs, max }) {
      // Every SET expression reads the row as it was, so both see the same window; the row lock serialises
      // concurrent tries, and each re-checks the budget against the count the one before it left.
      const { table, where } = stepUpRow(tenantId);
      const res = await query(
        `UPDATE ${table}
            SET totp_failures = CASE WHEN totp_failures_since IS NULL OR $2 - totp_failures_since >= $3
                                     THEN 1 ELSE totp_failures + 1 END,
                totp_failures_since = CASE WHEN totp_failures_since IS NULL OR $2 - totp_failures_since >= $3
                                           THEN $2 ELSE totp_failures_since END
          WHERE ${where}
            AND (totp_failures_since IS NULL OR $2 - totp_failures_since >= $3 OR totp_failures < $4)`,
        [tenantId, now, windowMs, max],
      );
      return res.rowCount === 1;
    },
  };
}
