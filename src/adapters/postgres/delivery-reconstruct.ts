/**
 * Lost delivery rows rebuilt from the events and the attempt log on PostgreSQL (OperationsStore.deliveryReconstruct;
 * the decisions are domain/delivery-reconstruct.ts). Safe while any number of Hookrail processes run, by the
 * delivery plane's own rules (delivery-store.ts header). One short transaction per batch:
 *
 * - A transaction-scoped advisory lock of its own first, so two reconstructions never run a batch at once (each
 *   would see the other's missing rows as missing and create them twice).
 * - The gates of the batch's tenants shared, as fan-out holds them: an endpoint PATCH/DELETE/status change, a tenant
 *   deletion or a retention batch waits for this transaction and then sees (and cancels, or keeps the event for)
 *   what it created, or this waits for it and reads endpoints and tenants after it (later statements).
 * - Whether fan-out has taken an event (its fan-out stream row is gone; the event still there, not deleted by a
 *   retention batch meanwhile) and the event's deliveries are read in later statements than the gates: a fan-out
 *   pass commits its deliveries with the removal of the stream row, so an event seen taken is seen with its
 *   deliveries; one still being fanned out is seen not taken and left to it.
 * - The queue rows of the endpoints that get pending deliveries are locked (sorted, before any delivery is written:
 *   the one lock order) and their due time recomputed in a later statement, which sees the new rows.
 *
 * It runs with PROBES_ONLY (query-helpers.ts): every read is an index range or probe whatever the statistics —
 * the attempts above all, one range of attempts_event per batch (plan-shapes.test.ts checks the plan).
 */
import {
  type BatchEvent,
  deliveryKey,
  type EndpointNow,
  type LoggedAttempt,
  planReconstruction,
  walkFrom,
} from '../../domain/delivery-reconstruct.ts';
import type { OperationsStore, ReconstructedDelivery } from '../../ports/operations-store.ts';
import { eventTypes } from '../subscriptions.ts';
import {
  cmp,
  LOCK_QUEUE_ROWS,
  lockTenantGatesShared,
  type PostgresDeliveryStoreDeps,
  RECOMPUTE_DUE,
} from './query-helpers.ts';

const LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('hookrail.delivery_reconstruct:' || current_schema(), 0))`;

/** The walk: events accepted at or after `since` (walkFrom), after the last one looked at. */
const EVENTS = (op: '>' | '>=') => `SELECT seq, id, tenant_id, type, resource_id, created_at,
    endpoint_id IS NOT NULL AS test_event
  FROM events WHERE id ${op} $1 ORDER BY id LIMIT $2`;
/** Read after the gates: a retention batch may have deleted an event since the walk read it. */
const TAKEN = `SELECT e.seq FROM events e
  WHERE e.seq = ANY($1::bigint[]) AND NOT EXISTS (SELECT 1 FROM fanout_pending f WHERE f.event_seq = e.seq)`;
const EXISTING = 'SELECT event_id, endpoint_id FROM deliveries WHERE event_seq = ANY($1::bigint[])';

/**
 * The attempts of the batch's id range whose delivery row is missing: one range of attempts_event (the batch is a
 * run of consecutive event ids, so the range holds its events' attempts and no others), each checked by one probe
 * of the deliveries' primary key. The webhook-id is the first hop's header (a `circuit_open` attempt has none).
 */
export const LOST = `SELECT a.delivery_id, a.endpoint_id, a.event_id, a.started_at, a.finished_at, a.outcome,
    a.request::json #>> '{hops,0,headers,webhook-id}' AS webhook_id
  FROM attempts a
  WHERE a.event_id >= $1 AND a.event_id <= $2
    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id)
  ORDER BY a.event_id, a.started_at, a.id`;

const REPLAYED = 'SELECT DISTINCT replayed_from FROM deliveries WHERE replayed_from = ANY($1::text[])';
const LIVE_TENANTS = 'SELECT id FROM tenants WHERE id = ANY($1::text[]) AND deleted_at IS NULL';
const ENDPOINT_COLUMNS = 'id, tenant_id, event_types, created_at, deleted_at IS NOT NULL AS deleted';
const LIVE_ENDPOINTS = `SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE tenant_id = ANY($1::text[]) AND deleted_at IS NULL`;
const ENDPOINTS_BY_ID = `SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE id = ANY($1::text[])`;

const INSERT = `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id,
    webhook_id, status, attempts, next_attempt_at, first_attempt_at, last_attempt_at, status_reason, replayed_from,
    created_at, updated_at)
  SELECT u.id, u.tenant_id, u.endpoint_id, u.event_id, u.event_seq, u.event_type, u.resource_id, u.webhook_id,
         u.status, u.attempts, u.next_at, u.first_at, u.last_at, u.reason, NULL, u.created_at, u.updated_at
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[],
                $9::text[], $10::int[], $11::bigint[], $12::bigint[], $13::bigint[], $14::text[], $15::bigint[],
                $16::bigint[])
         AS u(id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id, status, attempts,
              next_at, first_at, last_at, reason, created_at, updated_at)
  ON CONFLICT (id) DO NOTHING
  RETURNING id`;

const REFRESH_DUE = `UPDATE endpoint_queue q SET next_due_at = ${RECOMPUTE_DUE} WHERE q.endpoint_id = ANY($1::text[])`;

interface EndpointRow {
  id: string;
  tenant_id: string;
  event_types: string;
  created_at: number;
  deleted: boolean;
}
const endpointNow = (r: EndpointRow): EndpointNow => ({
  id: r.id,
  tenantId: r.tenant_id,
  eventTypes: eventTypes(r.event_types),
  createdAt: r.created_at,
  deleted: r.deleted,
});

export function createPostgresDeliveryReconstruct({
  query,
  tx,
}: PostgresDeliveryStoreDeps): Pick<OperationsStore, 'deliveryReconstruct' | 'deliveryReconstructFloor'> {
  return {
    async deliveryReconstructFloor() {
      const r = await query<{ applied_at: string }>(
        'SELECT applied_at FROM schema_migrations WHERE version = 17',
      );
      if (!r.rows[0]) throw new Error('migration 0017 (attempts.event_id) is not applied');
      return Number(r.rows[0].applied_at);
    },
    async deliveryReconstruct(p) {
      return tx(
        async (c) => {
          await c.query(LOCK);
          const from = walkFrom(p);
          const rows = (
            await c.query<{
              seq: number;
              id: string;
              tenant_id: string;
              type: string;
              resource_id: string | null;
              created_at: number;
              test_event: boolean;
            }>(EVENTS(from.op), [from.id, p.limit])
          ).rows;
          const after = rows.length < p.limit ? null : rows[rows.length - 1]!.id;
          const candidates = rows.filter((r) => !r.test_event);
          if (candidates.length === 0) return { events: rows.length, after, deliveries: [] };
          const tenants = [...new Set(candidates.map((r) => r.tenant_id))].sort(cmp);
          await lockTenantGatesShared(c, tenants);

          const seqs = candidates.map((r) => r.seq);
          const fannedOut = new Set((await c.query<{ seq: number }>(TAKEN, [seqs])).rows.map((r) => r.seq));
          const events = rows.map(
            (r): BatchEvent => ({
              seq: r.seq,
              id: r.id,
              tenantId: r.tenant_id,
              type: r.type,
              resourceId: r.resource_id,
              createdAt: r.created_at,
              fannedOut: fannedOut.has(r.seq),
              testEvent: r.test_event,
            }),
          );
          const taken = events.filter((e) => e.fannedOut && !e.testEvent);
          if (taken.length === 0) return { events: rows.length, after, deliveries: [] };
          const existing = new Set(
            (
              await c.query<{ event_id: string; endpoint_id: string }>(EXISTING, [taken.map((e) => e.seq)])
            ).rows.map((r) => deliveryKey(r.event_id, r.endpoint_id)),
          );
          const lost = (
            await c.query<{
              delivery_id: string;
              endpoint_id: string;
              event_id: string;
              started_at: number;
              finished_at: number;
              outcome: LoggedAttempt['outcome'];
              webhook_id: string | null;
            }>(LOST, [rows[0]!.id, rows[rows.length - 1]!.id])
          ).rows.map(
            (r): LoggedAttempt => ({
              deliveryId: r.delivery_id,
              endpointId: r.endpoint_id,
              eventId: r.event_id,
              startedAt: r.started_at,
              finishedAt: r.finished_at,
              outcome: r.outcome,
              webhookId: r.webhook_id,
            }),
          );
          const lostIds = [...new Set(lost.map((a) => a.deliveryId))];
          const replayed = new Set(
            lostIds.length === 0
              ? []
              : (await c.query<{ replayed_from: string }>(REPLAYED, [lostIds])).rows.map(
                  (r) => r.replayed_from,
                ),
          );
          const live = new Set(
            (await c.query<{ id: string }>(LIVE_TENANTS, [tenants])).rows.map((r) => r.id),
          );
          const endpoints = new Map<string, EndpointNow>();
          for (const r of (await c.query<EndpointRow>(LIVE_ENDPOINTS, [[...live]])).rows)
            endpoints.set(r.id, endpointNow(r));
          const unread = [...new Set(lost.map((a) => a.endpointId))].filter((id) => !endpoints.has(id));
          if (unread.length > 0)
            for (const r of (await c.query<EndpointRow>(ENDPOINTS_BY_ID, [unread])).rows)
              endpoints.set(r.id, endpointNow(r));

          const planned = planReconstruction({
            events: taken,
            existing,
            lost,
            replayed,
            endpoints: [...endpoints.values()],
            deletedTenants: new Set(tenants.filter((t) => !live.has(t))),
            now: p.now,
          });
          const deliveries = planned.map(
            (x): ReconstructedDelivery => ({
              source: x.source,
              deliveryId: x.deliveryId ?? p.ids.delivery(),
              endpointId: x.endpointId,
              eventId: x.event.id,
              status: x.state.status,
              statusReason: x.state.statusReason,
              attempts: x.state.attempts,
              webhookId: x.state.webhookId ?? p.ids.webhookId(),
            }),
          );
          if (p.dryRun || deliveries.length === 0) return { events: rows.length, after, deliveries };

          const due = [
            ...new Set(deliveries.filter((d) => d.status === 'pending').map((d) => d.endpointId)),
          ].sort(cmp);
          if (due.length > 0) await c.query(LOCK_QUEUE_ROWS, [due]);
          const col = <T>(f: (i: number) => T) => planned.map((_, i) => f(i));
          const written = await c.query<{ id: string }>(INSERT, [
            col((i) => deliveries[i]!.deliveryId),
            col((i) => planned[i]!.event.tenantId),
            col((i) => deliveries[i]!.endpointId),
            col((i) => planned[i]!.event.id),
            col((i) => planned[i]!.event.seq),
            col((i) => planned[i]!.event.type),
            col((i) => planned[i]!.event.resourceId),
            col((i) => deliveries[i]!.webhookId),
            col((i) => planned[i]!.state.status),
            col((i) => planned[i]!.state.attempts),
            col((i) => planned[i]!.state.nextAttemptAt),
            col((i) => planned[i]!.state.firstAttemptAt),
            col((i) => planned[i]!.state.lastAttemptAt),
            col((i) => planned[i]!.state.statusReason),
            col((i) => planned[i]!.createdAt),
            col((i) => planned[i]!.state.updatedAt),
          ]);
          if (due.length > 0) await c.query(REFRESH_DUE, [due]);
          const ids = new Set(written.rows.map((r) => r.id));
          return { events: rows.length, after, deliveries: deliveries.filter((d) => ids.has(d.deliveryId)) };
        },
        { probesOnly: true },
      );
    },
  };
}
