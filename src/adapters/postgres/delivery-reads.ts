/** Reads of deliveries and their attempt log (PostgreSQL). */
import type { DeliveryStore } from '../../ports/delivery-store.ts';
import { type PostgresDeliveryStoreDeps, where } from './query-helpers.ts';
import {
  ATTEMPT_COLUMNS,
  type AttemptRow,
  DELIVERY_COLUMNS,
  type DeliveryRow,
  toAttempt,
  toDelivery,
  toPage,
} from './rows.ts';

export function createDeliveryReads({
  query,
}: Pick<PostgresDeliveryStoreDeps, 'query'>): Pick<
  DeliveryStore,
  'deliveryGet' | 'deliveryList' | 'attemptList' | 'attemptGet'
> {
  return {
    async deliveryGet({ id, tenantId }) {
      const w = where([
        ['id = ?', id],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
      ]);
      const res = await query<DeliveryRow>(
        `SELECT ${DELIVERY_COLUMNS} FROM deliveries WHERE ${w.sql}`,
        w.values,
      );
      return res.rows[0] ? toDelivery(res.rows[0]) : null;
    },

    async deliveryList({ endpointId, tenantId, status, limit, cursor }) {
      const w = where([
        ['endpoint_id = ?', endpointId],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
        ...(status === null ? [] : [['status = ?', status] as [string, unknown]]),
        ...(cursor === null ? [] : [['id < ?', cursor] as [string, unknown]]),
      ]);
      const res = await query<DeliveryRow>(
        `SELECT ${DELIVERY_COLUMNS} FROM deliveries WHERE ${w.sql} ORDER BY id DESC LIMIT ${w.next()}`,
        [...w.values, limit + 1],
      );
      return toPage(res.rows, limit, toDelivery);
    },

    async attemptList({ deliveryId, tenantId }) {
      const w = where([
        ['delivery_id = ?', deliveryId],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
      ]);
      const res = await query<AttemptRow>(
        `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE ${w.sql} ORDER BY attempt_no, id`,
        w.values,
      );
      return res.rows.map(toAttempt);
    },

    async attemptGet({ id, tenantId }) {
      const w = where([
        ['id = ?', id],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
      ]);
      const res = await query<AttemptRow>(`SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE ${w.sql}`, w.values);
      return res.rows[0] ? toAttempt(res.rows[0]) : null;
    },
  };
}
