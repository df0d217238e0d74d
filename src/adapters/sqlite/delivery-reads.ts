/** Reads of deliveries and their attempt log (SQLite). */
import type { DeliveryStore } from '../../ports/delivery-store.ts';
import { attemptFromRow, deliveryFromRow, page, type Row, type St, tenantClause } from './rows.ts';

export function createDeliveryReads(
  st: St,
): Pick<DeliveryStore, 'deliveryGet' | 'deliveryList' | 'attemptList' | 'attemptGet'> {
  return {
    async deliveryGet({ id, tenantId }) {
      const t = tenantClause(tenantId);
      const r = st(`SELECT * FROM deliveries WHERE id = ?${t.sql}`).get(id, ...t.args) as Row | undefined;
      return r ? deliveryFromRow(r) : null;
    },
    async deliveryList({ endpointId, tenantId, status, limit, cursor }) {
      const t = tenantClause(tenantId);
      const s = status ? { sql: ' AND status = ?', args: [status] } : { sql: '', args: [] };
      const c = cursor ? { sql: ' AND id < ?', args: [cursor] } : { sql: '', args: [] };
      const rows = st(
        `SELECT * FROM deliveries WHERE endpoint_id = ?${t.sql}${s.sql}${c.sql} ORDER BY id DESC LIMIT ? + 0`,
      ).all(endpointId, ...t.args, ...s.args, ...c.args, limit + 1) as Row[];
      return page(rows.map(deliveryFromRow), limit);
    },
    async attemptList({ deliveryId, tenantId }) {
      const t = tenantClause(tenantId);
      return (
        st(`SELECT * FROM attempts WHERE delivery_id = ?${t.sql} ORDER BY attempt_no, id`).all(
          deliveryId,
          ...t.args,
        ) as Row[]
      ).map(attemptFromRow);
    },
    async attemptGet({ id, tenantId }) {
      const t = tenantClause(tenantId);
      const r = st(`SELECT * FROM attempts WHERE id = ?${t.sql}`).get(id, ...t.args) as Row | undefined;
      return r ? attemptFromRow(r) : null;
    },
  };
}
