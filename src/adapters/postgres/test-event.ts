/**
 * Test events on PostgreSQL (OperationsStore.endpointTestEvent): the event, addressed to its endpoint (migration
 * 0011), and its one delivery in one statement. The event gets no fan-out stream row, so fan-out never takes it and
 * no other endpoint receives it. Locks as a single replay does: the tenant gate shared and the endpoint row FOR
 * SHARE (so it cannot be disabled or deleted until this commits), the queue row last.
 */
import type { OperationsStore } from '../../ports/operations-store.ts';
import { writeAudit } from './audit.ts';
import {
  DELIVERY_COLUMNS,
  type DeliveryRow,
  lockTenantGatesShared,
  type PostgresDeliveryStoreDeps,
  toDelivery,
} from './delivery-store.ts';

export function createPostgresTestEvents({
  tx,
}: PostgresDeliveryStoreDeps): Pick<OperationsStore, 'endpointTestEvent'> {
  return {
    async endpointTestEvent(p) {
      return tx(async (c) => {
        await lockTenantGatesShared(c, [p.tenantId]);
        const ep = await c.query<{ status: string }>(
          'SELECT status FROM endpoints WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL FOR SHARE',
          [p.endpointId, p.tenantId],
        );
        if (!ep.rows[0]) return 'not_found' as const;
        if (ep.rows[0].status !== 'enabled') return 'disabled' as const;
        const e = p.event;
        const res = await c.query<DeliveryRow>(
          `WITH ev AS (
             INSERT INTO events (id, tenant_id, type, resource_id, data, idempotency_key, request_hash, created_at,
               endpoint_id)
             VALUES ($1, $2, $3, $4, $5, NULL, NULL, $6, $7) RETURNING seq),
           d AS (
             INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id,
               webhook_id, status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
             SELECT $8, $2, $7, $1, ev.seq, $3, $4, $9, 'pending', 0, $10, NULL, $10, $10 FROM ev
             RETURNING ${DELIVERY_COLUMNS}),
           q AS (UPDATE endpoint_queue SET next_due_at = LEAST(COALESCE(next_due_at, $10), $10) WHERE endpoint_id = $7)
           SELECT * FROM d`,
          [
            e.id,
            p.tenantId,
            e.type,
            e.resourceId,
            e.data,
            e.createdAt,
            p.endpointId,
            p.ids.delivery(),
            p.ids.webhookId(),
            p.now,
          ],
        );
        return writeAudit(c, p.audit, toDelivery(res.rows[0]!));
      });
    },
  };
}
