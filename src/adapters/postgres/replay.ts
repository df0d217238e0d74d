/**
 * Bulk replay on PostgreSQL (OperationsStore.deliveryReplayBulk; the rules are domain/replay.ts). Locks as the
 * single replay does (the tenant gate shared, the endpoint row FOR SHARE, then the queue row), except that the queue
 * row is locked before the matches are read: two bulk replays of one endpoint then run one after the other, and the
 * second's read (a later statement, so a later snapshot) sees the first's replays (`deliveries_replayed`, migration
 * 0010) and skips their originals.
 */
import { collectReplayable, replayDueAt, replayStart } from '../../domain/replay.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import { writeAudit } from './audit.ts';
import { lockTenantGatesShared, type PostgresDeliveryStoreDeps } from './delivery-store.ts';

/** The due time of the endpoint's latest pending replay (null: none): where the next replay's spacing starts. */
/** The due time of the endpoint's last replay not yet attempted (sqlite/replay.ts says why attempted ones are not). */
export const LATEST_PENDING_REPLAY = `SELECT max(next_attempt_at) AS at FROM deliveries
  WHERE endpoint_id = $1 AND status = 'pending' AND replayed_from IS NOT NULL AND attempts = 0`;

/**
 * New pending deliveries copying `origIds` (same event, endpoint and webhook-id), due at `dues` (arrays, one entry
 * each), created at `now`, as data-modifying SQL (its arguments are parameter expressions).
 */
export const insertReplaysSql = (newIds: string, origIds: string, dues: string, now: string) =>
  `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id,
     status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
   SELECT u.new_id, o.tenant_id, o.endpoint_id, o.event_id, o.event_seq, o.event_type, o.resource_id, o.webhook_id,
          'pending', 0, u.due, o.id, ${now}, ${now}
     FROM unnest(${newIds}, ${origIds}, ${dues}) AS u(new_id, orig_id, due) JOIN deliveries o ON o.id = u.orig_id`;

const PAGE = 1_000;

export function createPostgresBulkReplay({
  tx,
}: PostgresDeliveryStoreDeps): Pick<OperationsStore, 'deliveryReplayBulk'> {
  return {
    async deliveryReplayBulk(p) {
      return tx(async (c) => {
        await lockTenantGatesShared(c, [p.tenantId]);
        const ep = await c.query<{ event_types: string; status: string }>(
          `SELECT event_types, status FROM endpoints WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL
           FOR SHARE`,
          [p.endpointId, p.tenantId],
        );
        const endpoint = ep.rows[0];
        if (!endpoint) return 'not_found' as const;
        await c.query('SELECT 1 FROM endpoint_queue WHERE endpoint_id = $1 FOR UPDATE', [p.endpointId]);
        const latest = await c.query<{ at: string | number | null }>(LATEST_PENDING_REPLAY, [p.endpointId]);
        const subscribed = JSON.parse(endpoint.event_types) as string[];
        // Oldest first in pages of PAGE (keyset on the id, which is creation order), until one more than `max`.
        const matches: string[] = [];
        let more = false;
        for (let after = ''; !more; ) {
          const page = await c.query<{ id: string; event_type: string }>(
            `SELECT d.id, d.event_type FROM deliveries d
              WHERE d.endpoint_id = $1 AND d.id > $2 AND d.status = ANY($3::text[]) AND d.created_at >= $4
                AND d.created_at < $5 AND NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.replayed_from = d.id)
              ORDER BY d.id LIMIT ${PAGE}`,
            [p.endpointId, after, p.statuses, p.since ?? Number.MIN_SAFE_INTEGER, p.until],
          );
          more = collectReplayable(page.rows, subscribed, matches, p.max);
          if (page.rows.length < PAGE) break;
          after = page.rows[page.rows.length - 1]!.id;
        }
        const none = { found: matches.length, more, created: 0, firstDueAt: null, lastDueAt: null };
        if (matches.length === 0 || (p.confirmAbove !== null && matches.length > p.confirmAbove)) return none;
        const start = replayStart(
          p.now,
          latest.rows[0]?.at == null ? null : Number(latest.rows[0].at),
          p.ratePerSecond,
        );
        const due = matches.map((_, k) => replayDueAt(start, k, p.ratePerSecond));
        await c.query(
          `WITH replayed AS (${insertReplaysSql('$1::text[]', '$2::text[]', '$3::bigint[]', '$4::bigint')})
           UPDATE endpoint_queue q SET next_due_at = LEAST(COALESCE(q.next_due_at, $6), $6)
            WHERE q.endpoint_id = $5 AND $7::boolean`,
          [
            matches.map(() => p.ids.delivery()),
            matches,
            due,
            p.now,
            p.endpointId,
            due[0],
            endpoint.status === 'enabled',
          ],
        );
        return writeAudit(c, p.audit, {
          found: matches.length,
          more,
          created: matches.length,
          firstDueAt: start,
          lastDueAt: due.at(-1)!,
        });
      });
    },
  };
}
