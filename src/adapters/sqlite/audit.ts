/**
 * The audit trail in SQLite: records are written by the change they describe, inside its transaction
 * (ports/delivery-store.ts AuditOf), so a change and its record commit or roll back together (ADR-16).
 */
import type { AuditOf, AuditRecord } from '../../ports/delivery-store.ts';
import type { Row, St } from './rows.ts';

export const auditFromRow = (r: Row): AuditRecord => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  actor: r.actor as string,
  action: r.action as string,
  targetType: r.target_type as string,
  targetId: r.target_id as string,
  details: JSON.parse(r.details as string),
  createdAt: r.created_at as number,
});

export function insertAudit(st: St, a: AuditRecord): void {
  st(
    `INSERT INTO audit_events (id, tenant_id, actor, action, target_type, target_id, details, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    a.id,
    a.tenantId,
    a.actor,
    a.action,
    a.targetType,
    a.targetId,
    JSON.stringify(a.details),
    a.createdAt,
  );
}

/** Writes the record `audit` builds from a change's result (if any); call it inside the change's transaction. */
export function writeAudit<R>(st: St, audit: AuditOf<R> | undefined, result: R): R {
  const record = audit?.(result);
  if (record) insertAudit(st, record);
  return result;
}
