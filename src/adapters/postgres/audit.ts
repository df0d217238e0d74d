/**
 * The audit trail in PostgreSQL: records are written by the change they describe, inside its transaction
 * (ports/delivery-store.ts AuditOf), so a change and its record commit or roll back together (ADR-16).
 */
import type { AuditOf, AuditRecord } from '../../ports/delivery-store.ts';
import type { Db } from './query-helpers.ts';

export interface AuditRow {
  id: string;
  tenant_id: string;
  actor: string;
  action: string;
  target_type: string;
  target_id: string;
  details: string;
  created_at: number;
}

export const AUDIT_COLUMNS = 'id, tenant_id, actor, action, target_type, target_id, details, created_at';

export const toAudit = (r: AuditRow): AuditRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  actor: r.actor,
  action: r.action,
  targetType: r.target_type,
  targetId: r.target_id,
  details: JSON.parse(r.details),
  createdAt: r.created_at,
});

/** The parameters of insertAuditSql, one array per column. */
export const auditValues = (as: AuditRecord[]): unknown[] => [
  as.map((a) => a.id),
  as.map((a) => a.tenantId),
  as.map((a) => a.actor),
  as.map((a) => a.action),
  as.map((a) => a.targetType),
  as.map((a) => a.targetId),
  as.map((a) => JSON.stringify(a.details)),
  as.map((a) => a.createdAt),
];

/** Inserts any number of records; its parameters start at `$first` (auditValues). */
export const insertAuditSql = (first: number) =>
  `INSERT INTO audit_events (${AUDIT_COLUMNS})
   SELECT * FROM unnest(${[0, 1, 2, 3, 4, 5, 6].map((i) => `$${first + i}::text[]`).join(', ')},
                        $${first + 7}::bigint[])`;

/** Writes the record `audit` builds from a change's result (if any); call it inside the change's transaction. */
export async function writeAudit<R>(db: Db, audit: AuditOf<R> | undefined, result: R): Promise<R> {
  const record = audit?.(result);
  if (record) await db.query(insertAuditSql(1), auditValues([record]));
  return result;
}
