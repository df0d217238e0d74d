/** Fan-out of committed events into deliveries, exactly once across processes (locking: see delivery-store.ts). */
import { VOLUME_WINDOW_MS } from '../../domain/lanes.ts';
import type { DeliveryIdFactory } from '../../ports/delivery-store.ts';
import {
  type Subscription,
  type SubscriptionCache,
  subscriptionFromRow,
  type TenantSubscriptions,
} from '../subscriptions.ts';
import type { TxRunner } from './migrate.ts';
import { cmp, LOCK_QUEUE_ROWS, lockTenantGatesShared } from './query-helpers.ts';

export async function fanoutRun(
  tx: TxRunner,
  subscriptions: SubscriptionCache,
  now: number,
  limit: number,
  deliveryLimit: number,
  ids: DeliveryIdFactory,
) {
  return tx(async (c) => {
    // Claim: rows another fan-out transaction holds are skipped, so each event is fanned out exactly once. Each
    // claimed event is then read by one primary-key probe (a fenced LATERAL): joined plainly, the planner merged
    // the claimed rows with `events` read from its first row (bench:scale: 120,000 events read per claim of 256,
    // ~100 ms), or hashed a sequential scan of it, both growing with the event log.
    const claimed = await c.query<{
      event_seq: number;
      id: string | null;
      tenant_id: string | null;
      type: string | null;
      resource_id: string | null;
    }>(
      `SELECT f.event_seq, e.id, e.tenant_id, e.type, e.resource_id
         FROM (SELECT event_seq FROM fanout_pending ORDER BY event_seq LIMIT $1 FOR UPDATE SKIP LOCKED) f
         LEFT JOIN LATERAL (SELECT id, tenant_id, type, resource_id FROM events WHERE seq = f.event_seq OFFSET 0) e
           ON true
        ORDER BY f.event_seq`,
      [limit],
    );
    if (claimed.rows.length === 0) return { events: 0, deliveries: 0 };
    const events = claimed.rows.filter((r) => r.id !== null);

    // The tenants' gates, shared: an endpoint PATCH/DELETE/status change or a tenant deletion takes its tenant's
    // gate exclusively, so it waits for this transaction to commit (and then sees and cancels what it created), or
    // this waits for it. Tenants and endpoints are read in later statements than the gate, so they include every
    // such change committed before it; no row locks on them (one per endpoint per pass, all WAL-logged).
    const tenantIds = [...new Set(events.map((e) => e.tenant_id!))].sort(cmp);
    if (tenantIds.length > 0) await lockTenantGatesShared(c, tenantIds);
    // The live tenants' endpoint versions, and the subscriptions of those whose version is not cached: only what
    // matching needs.
    const byTenant = new Map<string, TenantSubscriptions>(); // the live tenants'
    if (tenantIds.length > 0) {
      const versions = await c.query<{ id: string; endpoints_version: string }>(
        'SELECT id, endpoints_version FROM tenants WHERE id = ANY($1::text[]) AND deleted_at IS NULL',
        [tenantIds],
      );
      const stale = new Map<string, number>();
      for (const t of versions.rows) {
        const version = Number(t.endpoints_version);
        const cached = subscriptions.get(t.id, version);
        if (cached) byTenant.set(t.id, cached);
        else stale.set(t.id, version);
      }
      if (stale.size > 0) {
        const eps = await c.query<{ id: string; tenant_id: string; event_types: string; status: string }>(
          `SELECT id, tenant_id, event_types, status FROM endpoints
            WHERE tenant_id = ANY($1::text[]) AND deleted_at IS NULL ORDER BY tenant_id, id`,
          [[...stale.keys()]],
        );
        const read = new Map<string, Subscription[]>([...stale.keys()].map((t) => [t, []]));
        for (const row of eps.rows) read.get(row.tenant_id)!.push(subscriptionFromRow(row));
        for (const [tenantId, version] of stale)
          byTenant.set(tenantId, subscriptions.set(tenantId, version, read.get(tenantId)!));
      }
    }

    const cols = {
      id: [] as string[],
      tenant: [] as string[],
      endpoint: [] as string[],
      eventId: [] as string[],
      seq: [] as number[],
      type: [] as string[],
      resource: [] as Array<string | null>,
      webhook: [] as string[],
    };
    const touched = new Map<string, number>(); // endpoint → deliveries created (its fan-out volume)
    // Oldest first, up to the event that reaches deliveryLimit; the claimed rows after it stay in the stream (their
    // locks end with this transaction) for the next pass.
    let taken = 0;
    for (const ev of claimed.rows) {
      if (taken > 0 && cols.id.length >= deliveryLimit) break;
      taken++;
      if (ev.id === null) continue; // its event is gone: only the stream row is removed
      for (const ep of byTenant.get(ev.tenant_id!)?.matching(ev.type!) ?? []) {
        cols.id.push(ids.delivery());
        cols.tenant.push(ev.tenant_id!);
        cols.endpoint.push(ep.id);
        cols.eventId.push(ev.id!);
        cols.seq.push(ev.event_seq);
        cols.type.push(ev.type!);
        cols.resource.push(ev.resource_id);
        cols.webhook.push(ids.webhookId());
        if (ep.enabled) touched.set(ep.id, (touched.get(ep.id) ?? 0) + 1);
      }
    }
    // The writes in one statement (one round trip, not three; below saturation a pass carries one or two events and
    // its cost is its round trips): the deliveries, exactly the claimed fan-out rows (other fan-out processes may
    // hold lower or interleaved seqs), and the queue rows of the endpoints that got deliveries. The queue rows are
    // locked last in the pass, so they are held (leasing skips them, completion waits) only until COMMIT. Held they
    // must be: a lease recomputing next_due_at before this commits would not see these deliveries. LEAST on the
    // current row version, not on a value read earlier. The same update keeps the volume windows of domain/lanes.ts
    // recordVolume (the promotion rate signal), also on the current version.
    const sorted = [...touched.keys()].sort(cmp);
    const W = VOLUME_WINDOW_MS;
    await c.query(
      `WITH ins AS (
         INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id,
           webhook_id, status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
         SELECT u.id, u.tenant_id, u.endpoint_id, u.event_id, u.event_seq, u.event_type, u.resource_id,
                u.webhook_id, 'pending', 0, $2::bigint, NULL, $2::bigint, $2::bigint
           FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[],
                       $11::text[])
                AS u(id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id)
       ), del AS (
         DELETE FROM fanout_pending WHERE event_seq = ANY($12::bigint[])
       ), l AS (${LOCK_QUEUE_ROWS})
       UPDATE endpoint_queue q SET next_due_at = LEAST(COALESCE(q.next_due_at, $2), $2),
              volume_previous = CASE WHEN $2 - q.volume_window_start < ${W} THEN q.volume_previous
                WHEN $2 - q.volume_window_start < ${2 * W} THEN q.volume_count ELSE 0 END,
              volume_count = CASE WHEN $2 - q.volume_window_start < ${W} THEN q.volume_count + n.n ELSE n.n END,
              volume_window_start = CASE WHEN $2 - q.volume_window_start < ${W} THEN q.volume_window_start
                ELSE $2 - ($2 - q.volume_window_start) % ${W} END
         FROM l, unnest($1::text[], $3::int[]) AS n(endpoint_id, n)
        WHERE q.endpoint_id = l.endpoint_id AND n.endpoint_id = l.endpoint_id`,
      [
        sorted,
        now,
        sorted.map((id) => touched.get(id)!),
        cols.id,
        cols.tenant,
        cols.endpoint,
        cols.eventId,
        cols.seq,
        cols.type,
        cols.resource,
        cols.webhook,
        claimed.rows.slice(0, taken).map((r) => r.event_seq),
      ],
    );
    return { events: taken, deliveries: cols.id.length };
  });
}
