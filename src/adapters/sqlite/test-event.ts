/**
 * Test events on SQLite (OperationsStore.endpointTestEvent): the event, addressed to its endpoint (migration 0012),
 * and its one delivery in one IMMEDIATE transaction. Fan-out passes the event over (fanout.ts), so it reaches no
 * other endpoint.
 */
import type Database from 'better-sqlite3';
import type { DeliveryRecord } from '../../ports/delivery-store.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import { writeAudit } from './audit.ts';
import { deliveryFromRow } from './delivery-store.ts';
import type { RefreshDue } from './queue-due.ts';
import type { Row, St } from './rows.ts';

type TestEventInput = Parameters<OperationsStore['endpointTestEvent']>[0];

export function createSqliteTestEvents(
  db: Database.Database,
  st: St,
  refreshDue: RefreshDue,
): Pick<OperationsStore, 'endpointTestEvent'> {
  const run = db.transaction((p: TestEventInput): DeliveryRecord | 'not_found' | 'disabled' => {
    const ep = st('SELECT status FROM endpoints WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL').get(
      p.endpointId,
      p.tenantId,
    ) as Row | undefined;
    if (!ep) return 'not_found';
    if (ep.status !== 'enabled') return 'disabled';
    const e = p.event;
    const seq = st(
      `INSERT INTO events (id, tenant_id, type, resource_id, data, idempotency_key, request_hash, created_at,
         endpoint_id)
       VALUES (?, ?, ?, ?, ?, NULL, NULL, ?, ?)`,
    ).run(e.id, p.tenantId, e.type, e.resourceId, e.data, e.createdAt, p.endpointId).lastInsertRowid;
    const id = p.ids.delivery();
    st(
      `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id,
         status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, NULL, ?, ?)`,
    ).run(
      id,
      p.tenantId,
      p.endpointId,
      e.id,
      seq,
      e.type,
      e.resourceId,
      p.ids.webhookId(),
      p.now,
      p.now,
      p.now,
    );
    refreshDue(p.endpointId);
    return writeAudit(
      st,
      p.audit,
      deliveryFromRow(st('SELECT * FROM deliveries WHERE id = ?').get(id) as Row),
    );
  });
  return {
    async endpointTestEvent(p) {
      return run.immediate(p);
    },
  };
}
