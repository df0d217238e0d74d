/**
 * PostgreSQL half of the operations store (src/ports/operations-store.ts): runtime records, statistics, re-enable,
 * auto-disable, replay and audit (the notification outbox: notifications-store.ts; lanes: lanes.ts). Same behaviour as the SQLite reference
 * (src/adapters/sqlite/operations-store.ts); the concurrency control follows the delivery store's rules
 * (delivery-store.ts header):
 *
 * - One lock order for every writer — tenant gate, tenants, endpoints, endpoint_queue (sorted by endpoint_id),
 *   deliveries — so these transactions never deadlock with leasing, completion, fan-out or each other.
 * - The runtime record lives on the endpoint's queue row and is only read-modified-written under that row's lock.
 * - Maintenance passes (auto-disable, digests) may run in several processes at once, and re-check their
 *   condition on the locked (current) queue row before acting, so each disable or digest happens exactly once.
 *   Digests lock the queue rows `FOR UPDATE SKIP LOCKED` (a row another process holds is left for the next pass).
 *   Auto-disable holds the tenants' gates and the endpoint rows first, so it can afford to wait for the queue rows
 *   (a lease or completion holds one for milliseconds; no holder of one waits for a gate or an endpoint row):
 *   skipping them instead would let a busy failing endpoint — circuit_open retries leased and recorded back to
 *   back — escape every pass. A second pass waits at the gate and then finds the endpoint disabled.
 *   The outbox is claimed `FOR UPDATE SKIP LOCKED`: two mailers never claim the same notification.
 */
import { autoDisableDue } from '../../domain/endpoint-health.ts';
import {
  type EndpointRuntime,
  parseRuntime,
  reassess,
  runtimeAfterEnable,
} from '../../domain/endpoint-runtime.ts';
import { matchesEventType } from '../../domain/event-types.ts';
import { idFloor } from '../../domain/ids.ts';
import { noticeText } from '../../domain/notice-text.ts';
import { replayStart, singleReplayRefusal } from '../../domain/replay.ts';
import type { AuditRecord, EndpointRecord } from '../../ports/delivery-store.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import { JUDGES_ENDPOINT_SQL } from '../judged-attempts.ts';
import { AUDIT_COLUMNS, type AuditRow, auditValues, insertAuditSql, toAudit, writeAudit } from './audit.ts';
import { createPostgresDeliveryReconstruct } from './delivery-reconstruct.ts';
import {
  cmp,
  DELIVERY_COLUMNS,
  type DeliveryRow,
  ENDPOINT_COLUMNS,
  type EndpointRow,
  insertNotificationsSql,
  lockTenantGate,
  lockTenantGates,
  lockTenantGatesShared,
  type NewNotification,
  notificationValues,
  type PostgresDeliveryStoreDeps,
  prefixed,
  recomputeDue,
  runtimeColumns,
  toDelivery,
  toEndpoint,
  toPage,
  where,
} from './delivery-store.ts';
import { createPostgresEndpointSeries } from './endpoint-series.ts';
import { BULK_DEADLINE_TX } from './endpoints-store.ts';
import { createPostgresLanes } from './lanes.ts';
import { createPostgresNotifications } from './notifications-store.ts';
import { createPostgresQueueRebuild } from './queue-rebuild.ts';
import { createPostgresBulkReplay, insertReplaysSql, LATEST_PENDING_REPLAY } from './replay.ts';
import { createPostgresRetention } from './retention.ts';
import { createPostgresTestEvents } from './test-event.ts';

/** int8[] comes back as strings (the pool parses only scalar int8 as numbers). */
const numbers = (xs: Array<number | string>) => xs.map(Number);

export function createPostgresOperationsStore({ query, tx }: PostgresDeliveryStoreDeps): OperationsStore {
  const RECOMPUTE_DUE = recomputeDue();

  return {
    ...createPostgresLanes({ query, tx }),
    ...createPostgresNotifications({ query, tx }),
    ...createPostgresBulkReplay({ query, tx }),
    ...createPostgresTestEvents({ query, tx }),
    ...createPostgresRetention({ query, tx }),
    ...createPostgresQueueRebuild({ query, tx }),
    ...createPostgresDeliveryReconstruct({ query, tx }),
    ...createPostgresEndpointSeries({ query, tx }),
    async endpointRuntime({ endpointId }) {
      const res = await query<{ inflight: number; runtime: string | null }>(
        'SELECT inflight, runtime FROM endpoint_queue WHERE endpoint_id = $1',
        [endpointId],
      );
      const r = res.rows[0];
      if (!r) return null;
      return { endpointId, inflight: r.inflight, runtime: parseRuntime(r.runtime) };
    },

    async attemptStats({ endpointId, since }) {
      // Counts over the whole window; latencies of the newest 1,000 only, sorted ascending.
      const res = await query<{
        attempts: number;
        successes: number;
        dead_letters: number;
        queue_ms: Array<number | string>;
        platform_ms: Array<number | string>;
        consumer_ms: Array<number | string>;
      }>(
        `WITH w AS (
           SELECT id, outcome, queue_ms, platform_ms, consumer_ms FROM attempts
            WHERE endpoint_id = $1 AND id >= $2 AND ${JUDGES_ENDPOINT_SQL}),
         recent AS (SELECT queue_ms, platform_ms, consumer_ms FROM w ORDER BY id DESC LIMIT 1000)
         SELECT (SELECT count(*) FROM w) AS attempts,
                (SELECT count(*) FROM w WHERE outcome = 'delivered') AS successes,
                (SELECT count(*) FROM deliveries
                  WHERE endpoint_id = $1 AND status = 'dead' AND updated_at >= $3) AS dead_letters,
                ARRAY(SELECT queue_ms FROM recent ORDER BY queue_ms) AS queue_ms,
                ARRAY(SELECT platform_ms FROM recent ORDER BY platform_ms) AS platform_ms,
                ARRAY(SELECT consumer_ms FROM recent WHERE consumer_ms IS NOT NULL ORDER BY consumer_ms)
                  AS consumer_ms`,
        [endpointId, idFloor('attempt', since), since],
      );
      const r = res.rows[0]!;
      return {
        attempts: r.attempts,
        successes: r.successes,
        deadLetters: r.dead_letters,
        queueMs: numbers(r.queue_ms),
        platformMs: numbers(r.platform_ms),
        consumerMs: numbers(r.consumer_ms),
      };
    },

    async backlogStats({ endpointId }) {
      // Dead letters of the current failure streak: failing_since is the runtime's, kept in step with it.
      const res = await query<{
        pending: number;
        pending_oldest: number | null;
        dead: number;
        dead_oldest: number | null;
      }>(
        `SELECT p.n AS pending, p.oldest AS pending_oldest, d.n AS dead, d.oldest AS dead_oldest
           FROM (SELECT count(*) AS n, min(created_at) AS oldest FROM deliveries
                  WHERE endpoint_id = $1 AND status = 'pending') p,
                (SELECT count(*) AS n, min(created_at) AS oldest FROM deliveries x
                  WHERE x.endpoint_id = $1 AND x.status = 'dead'
                    AND x.updated_at >= (SELECT failing_since FROM endpoint_queue WHERE endpoint_id = $1)
                    AND NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.replayed_from = x.id)) d`,
        [endpointId],
      );
      const r = res.rows[0]!;
      const oldest = [r.pending_oldest, r.dead_oldest].filter((x): x is number => x !== null);
      return {
        pending: r.pending,
        deadLetters: r.dead,
        oldestCreatedAt: oldest.length > 0 ? Math.min(...oldest) : null,
        oldestPendingAt: r.pending_oldest,
      };
    },

    async endpointEnable({ id, tenantId, choice, now, ids, audit }) {
      return tx(async (c) => {
        // Lock order: the tenant gate (fan-out must not race the status change), the endpoint, its queue row.
        await lockTenantGate(c, tenantId);
        const e = await c.query<EndpointRow>(
          `SELECT ${ENDPOINT_COLUMNS} FROM endpoints
            WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL FOR UPDATE`,
          [id, tenantId],
        );
        if (e.rows[0]?.status !== 'disabled') return null;
        const q = await c.query<{ runtime: string | null }>(
          'SELECT runtime FROM endpoint_queue WHERE endpoint_id = $1 FOR UPDATE',
          [id],
        );
        const rt = parseRuntime(q.rows[0]?.runtime ?? null);
        // The backlog: unleased pending deliveries, and the dead letters of the current streak as a bulk replay
        // picks them: not replayed before (a bulk replay while disabled already queued those, and its replays are
        // pending here) and of a type still subscribed to. A later statement than the lock, so it sees everything
        // the previous holder of the queue row committed.
        const backlog = await c.query<{ id: string; status: string; event_type: string; ev_at: number }>(
          `SELECT d.id, d.status, d.event_type, ev.created_at AS ev_at
             FROM deliveries d JOIN events ev ON ev.id = d.event_id
            WHERE d.endpoint_id = $1
              AND ((d.status = 'pending' AND d.lease_owner IS NULL)
                OR (d.status = 'dead' AND d.updated_at >= $2
                    AND NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.replayed_from = d.id)))
            ORDER BY d.id`,
          [id, rt.failingSince],
        );
        const subscribed = JSON.parse(e.rows[0]!.event_types) as string[];
        const keep = (evAt: number) =>
          choice.kind === 'deliver' || (choice.kind === 'resume_from' && evAt >= choice.at);
        const due: string[] = [];
        const skip: string[] = [];
        const replayOf: string[] = [];
        const replayIds: string[] = [];
        for (const r of backlog.rows) {
          if (r.status === 'pending') (keep(r.ev_at) ? due : skip).push(r.id);
          else if (keep(r.ev_at) && matchesEventType(subscribed, r.event_type)) {
            replayOf.push(r.id);
            replayIds.push(ids.delivery());
          }
        }
        const enabled = await c.query<EndpointRow>(
          `WITH due AS (
             UPDATE deliveries SET next_attempt_at = $2, updated_at = $2 WHERE id = ANY($3::text[])),
           skipped AS (
             UPDATE deliveries SET status = 'skipped', status_reason = 'skipped_on_enable', next_attempt_at = NULL,
                    updated_at = $2
              WHERE id = ANY($4::text[])),
           replayed AS (${insertReplaysSql('$5::text[]', '$6::text[]', '$7::bigint[]', '$2::bigint')})
           UPDATE endpoints SET status = 'enabled', disabled_reason = NULL, updated_at = $2 WHERE id = $1
           RETURNING ${ENDPOINT_COLUMNS}`,
          [id, now, due, skip, replayIds, replayOf, replayIds.map(() => now)],
        );
        // The ramp starts now; the due time sees the writes above (a later statement).
        const saved = runtimeColumns(runtimeAfterEnable(rt, now));
        await c.query(
          `UPDATE endpoint_queue q
              SET runtime = $2, failing_since = $3, digest_due_at = $4, blocked_until = $5,
                  next_due_at = ${RECOMPUTE_DUE}
            WHERE q.endpoint_id = $1`,
          [id, saved.json, saved.failingSince, saved.digestDueAt, saved.blockedUntil],
        );
        return writeAudit(c, audit, {
          endpoint: toEndpoint(enabled.rows[0]!),
          requeued: due.length + replayIds.length,
          skipped: skip.length,
        });
      }, BULK_DEADLINE_TX);
    },

    async endpointAutoDisable({ now, afterMs, ids }) {
      const cutoff = now - afterMs;
      // Candidates, unlocked; everything is re-checked under the locks below.
      const found = await query<{ endpoint_id: string; tenant_id: string }>(
        `SELECT q.endpoint_id, e.tenant_id FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
          WHERE q.failing_since <= $1 AND e.status = 'enabled' AND e.deleted_at IS NULL`,
        [cutoff],
      );
      if (found.rows.length === 0) return [];
      return tx(async (c) => {
        // Lock order: the tenants' gates (sorted; fan-out must not race the status change), the endpoints
        // (still enabled?), then their queue rows (still failing long enough? re-checked on the current row).
        await lockTenantGates(c, [...new Set(found.rows.map((r) => r.tenant_id))].sort(cmp));
        const eps = await c.query<EndpointRow & { notification_email: string | null }>(
          `SELECT ${prefixed('e', ENDPOINT_COLUMNS)}, t.notification_email
             FROM endpoints e LEFT JOIN tenants t ON t.id = e.tenant_id
            WHERE e.id = ANY($1::text[]) AND e.status = 'enabled' AND e.deleted_at IS NULL
            ORDER BY e.id FOR UPDATE OF e`,
          [found.rows.map((r) => r.endpoint_id).sort(cmp)],
        );
        if (eps.rows.length === 0) return [];
        const queue = await c.query<{ endpoint_id: string; runtime: string | null }>(
          `SELECT endpoint_id, runtime FROM endpoint_queue
            WHERE endpoint_id = ANY($1::text[]) AND failing_since <= $2
            ORDER BY endpoint_id FOR UPDATE`,
          [eps.rows.map((r) => r.id), cutoff],
        );
        const byId = new Map(eps.rows.map((r) => [r.id, r]));
        const disable: Array<{ id: string; runtime: EndpointRuntime }> = [];
        const audits: AuditRecord[] = [];
        const notices: NewNotification[] = [];
        for (const q of queue.rows) {
          const rt = parseRuntime(q.runtime);
          if (
            !autoDisableDue({ firstFailureOfStreakAt: rt.failingSince, lastSuccessAt: rt.lastSuccessAt, now })
          ) {
            continue;
          }
          const e = byId.get(q.endpoint_id)!;
          disable.push({ id: e.id, runtime: reassess(rt, now, true) });
          audits.push({
            id: ids.audit(),
            tenantId: e.tenant_id,
            actor: 'system',
            action: 'endpoint.auto_disabled',
            targetType: 'endpoint',
            targetId: e.id,
            details: { failing_since: rt.failingSince, reason: 'auto_disabled' },
            createdAt: now,
          });
          notices.push({
            id: ids.notification(),
            tenantId: e.tenant_id,
            endpointId: e.id,
            kind: 'auto_disabled',
            ...noticeText('auto_disabled', { endpointId: e.id, url: e.url, at: now, count: 0 }),
            emailTo: e.notification_email,
          });
        }
        if (disable.length === 0) return [];
        const saved = disable.map((d) => runtimeColumns(d.runtime));
        // A disabled endpoint has no due time (NULL, as the recompute would give).
        const res = await c.query<EndpointRow>(
          `WITH disabled AS (
             UPDATE endpoints SET status = 'disabled', disabled_reason = 'auto_disabled', updated_at = $2
              WHERE id = ANY($1::text[])
             RETURNING ${ENDPOINT_COLUMNS}),
           queue AS (
             UPDATE endpoint_queue q
                SET runtime = u.runtime, failing_since = u.failing_since, digest_due_at = u.digest_due_at,
                    next_due_at = NULL
               FROM unnest($1::text[], $3::text[], $4::bigint[], $5::bigint[])
                    AS u(endpoint_id, runtime, failing_since, digest_due_at)
              WHERE q.endpoint_id = u.endpoint_id),
           audited AS (${insertAuditSql(6)}),
           noticed AS (${insertNotificationsSql(14, '$2::bigint')})
           SELECT * FROM disabled ORDER BY id`,
          [
            disable.map((d) => d.id),
            now,
            saved.map((s) => s.json),
            saved.map((s) => s.failingSince),
            saved.map((s) => s.digestDueAt),
            ...auditValues(audits),
            ...notificationValues(notices),
          ],
        );
        return res.rows.map(toEndpoint);
      });
    },

    async deliveryReplay({ id, tenantId, now, ratePerSecond, ids, audit }) {
      return tx(async (c) => {
        // As fan-out does: the tenant gate and the endpoint row shared, so the endpoint cannot be disabled or
        // deleted until this commits, then the queue row last (only to bring its due time forward).
        await lockTenantGatesShared(c, [tenantId]);
        // With whether it is a test event's (addressed to its endpoint alone: events.endpoint_id).
        const original = await c.query<DeliveryRow & { test_event: boolean }>(
          `SELECT ${DELIVERY_COLUMNS},
                  EXISTS (SELECT 1 FROM events e WHERE e.seq = d.event_seq AND e.endpoint_id IS NOT NULL) AS test_event
             FROM deliveries d WHERE id = $1 AND tenant_id = $2`,
          [id, tenantId],
        );
        const o = original.rows[0];
        if (!o) return 'not_found' as const;
        const e = await c.query<{ status: EndpointRecord['status']; event_types: string }>(
          'SELECT status, event_types FROM endpoints WHERE id = $1 AND deleted_at IS NULL FOR SHARE',
          [o.endpoint_id],
        );
        if (!e.rows[0]) return 'endpoint_gone' as const;
        const refused = singleReplayRefusal(
          o.status,
          o.event_type,
          JSON.parse(e.rows[0].event_types) as string[],
          o.test_event,
        );
        if (refused) return refused;
        // The queue row locked before the latest pending replay is read, as in a bulk replay: two replays of one
        // endpoint at once take their due times one after the other.
        await c.query('SELECT 1 FROM endpoint_queue WHERE endpoint_id = $1 FOR UPDATE', [o.endpoint_id]);
        const latest = await c.query<{ at: string | number | null }>(LATEST_PENDING_REPLAY, [o.endpoint_id]);
        const at = latest.rows[0]?.at;
        const due = replayStart(now, at == null ? null : Number(at), ratePerSecond);
        const res = await c.query<DeliveryRow>(
          `WITH replayed AS (${insertReplaysSql('$1::text[]', '$2::text[]', '$7::bigint[]', '$3::bigint')}
                             RETURNING ${DELIVERY_COLUMNS}),
                bumped AS (UPDATE endpoint_queue q SET next_due_at = LEAST(COALESCE(q.next_due_at, $6), $6)
                            WHERE q.endpoint_id = $4 AND $5::boolean)
           SELECT * FROM replayed`,
          [[ids.delivery()], [o.id], now, o.endpoint_id, e.rows[0].status === 'enabled', due, [due]],
        );
        return writeAudit(c, audit, toDelivery(res.rows[0]!));
      });
    },

    async queueStats() {
      const res = await query<{ pending: number; circuits_open: number }>(
        `SELECT (SELECT count(*) FROM deliveries WHERE status = 'pending') AS pending,
                (SELECT count(*) FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
                  WHERE e.deleted_at IS NULL AND e.status = 'enabled'
                    AND q.runtime::jsonb #>> '{circuit,state}' IN ('open', 'half_open')) AS circuits_open`,
      );
      const r = res.rows[0]!;
      return { pending: r.pending, circuitsOpen: r.circuits_open };
    },

    async auditAppend({ record }) {
      await query(`${insertAuditSql(1)}`, auditValues([record]));
    },

    async auditList({ tenantId, limit, cursor, ascending }) {
      const w = where([
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
        ...(cursor === null ? [] : [[ascending ? 'id > ?' : 'id < ?', cursor] as [string, unknown]]),
      ]);
      const res = await query<AuditRow>(
        `SELECT ${AUDIT_COLUMNS} FROM audit_events ${w.sql ? `WHERE ${w.sql}` : ''}
          ORDER BY id ${ascending ? 'ASC' : 'DESC'} LIMIT ${w.next()}`,
        [...w.values, limit + 1],
      );
      return toPage(res.rows, limit, toAudit);
    },
  };
}
