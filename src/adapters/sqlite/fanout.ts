/** Fan-out of committed events into deliveries (SQLite). */
import { VOLUME_WINDOW_MS } from '../../domain/lanes.ts';
import { SubscriptionCache, subscriptionFromRow, type TenantSubscriptions } from '../subscriptions.ts';
import type { Row, St } from './rows.ts';

/**
 * How many committed events fan-out has not taken yet: those after its cursor (migration 0010). The store's
 * fanoutPendingCount, and the benchmarks and tests that read a stopped database directly, count with it.
 */
export const UNFANNED_COUNT_SQL =
  'SELECT count(*) AS n FROM events WHERE seq > (SELECT seq FROM fanout_cursor)';

// The due time, and the volume windows of domain/lanes.ts recordVolume (the promotion rate signal). Made once:
// the text keys the statement cache, and each fan-out pass runs it.
const RECORD_DUE_AND_VOLUME = `UPDATE endpoint_queue SET next_due_at = min(coalesce(next_due_at, @now), @now),
       volume_previous = CASE WHEN @now - volume_window_start < ${VOLUME_WINDOW_MS} THEN volume_previous
         WHEN @now - volume_window_start < ${2 * VOLUME_WINDOW_MS} THEN volume_count ELSE 0 END,
       volume_count = CASE WHEN @now - volume_window_start < ${VOLUME_WINDOW_MS} THEN volume_count + @n
         ELSE @n END,
       volume_window_start = CASE WHEN @now - volume_window_start < ${VOLUME_WINDOW_MS} THEN volume_window_start
         ELSE @now - ((@now - volume_window_start) % ${VOLUME_WINDOW_MS}) END
     WHERE endpoint_id = @id`;

/** Runs inside a transaction (the caller's: turn-commit.ts). */
export function createFanout(st: St) {
  const insertDelivery = (...args: unknown[]) =>
    st(
      `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id,
       status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, NULL, ?, ?)`,
    ).run(...args);

  const subscriptions = new SubscriptionCache();
  /** The tenant's subscriptions, from the cache unless its endpoints changed; null for a deleted tenant. */
  const subscriptionsOf = (tenantId: string): TenantSubscriptions | null => {
    const tenant = st('SELECT endpoints_version, deleted_at FROM tenants WHERE id = ?').get(tenantId) as
      | Row
      | undefined;
    if (!tenant || tenant.deleted_at !== null) return null;
    const version = tenant.endpoints_version as number;
    const cached = subscriptions.get(tenantId, version);
    if (cached) return cached;
    const rows = st(
      'SELECT id, event_types, status FROM endpoints WHERE tenant_id = ? AND deleted_at IS NULL ORDER BY id',
    ).all(tenantId) as Array<{ id: string; event_types: string; status: string }>;
    return subscriptions.set(tenantId, version, rows.map(subscriptionFromRow));
  };

  const fanout = (
    now: number,
    limit: number,
    deliveryLimit: number,
    ids: { delivery(): string; webhookId(): string },
  ) => {
    // The events after the cursor, in seq order (migration 0010: on SQLite that is commit order).
    const pending = st(
      `SELECT seq AS event_seq, id, tenant_id, type, resource_id, endpoint_id FROM events
        WHERE seq > (SELECT seq FROM fanout_cursor) ORDER BY seq LIMIT ? + 0`,
    ).all(limit) as Row[];
    if (pending.length === 0) return { events: 0, deliveries: 0 };
    const byTenant = new Map<string, TenantSubscriptions | null>(); // read once per pass; null: tenant deleted
    const touched = new Map<string, number>(); // endpoint → deliveries created (its fan-out volume)
    let deliveries = 0;
    let taken = 0;
    for (const ev of pending) {
      if (taken > 0 && deliveries >= deliveryLimit) break; // the rest are the next pass's
      taken++;
      // A test event (migration 0012) got its one delivery when it was recorded.
      if (ev.endpoint_id !== null) continue;
      const tenantId = ev.tenant_id as string;
      let subs = byTenant.get(tenantId);
      if (subs === undefined) {
        subs = subscriptionsOf(tenantId);
        byTenant.set(tenantId, subs);
      }
      if (!subs) continue;
      for (const ep of subs.matching(ev.type as string)) {
        insertDelivery(
          ids.delivery(),
          tenantId,
          ep.id,
          ev.id,
          ev.event_seq,
          ev.type,
          ev.resource_id,
          ids.webhookId(),
          now,
          now,
          now,
        );
        deliveries++;
        if (ep.enabled) touched.set(ep.id, (touched.get(ep.id) ?? 0) + 1);
      }
    }
    const due = st(RECORD_DUE_AND_VOLUME);
    for (const [id, n] of touched) due.run({ now, id, n });
    // One fan-out loop, in sequence order: everything up to the last event taken is done.
    st('UPDATE fanout_cursor SET seq = ?').run(pending[taken - 1]?.event_seq);
    return { events: taken, deliveries };
  };
  return fanout;
}
