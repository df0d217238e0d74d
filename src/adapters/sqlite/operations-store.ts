/**
 * SQLite half of the operations store (src/ports/operations-store.ts): runtime records, statistics, re-enable,
 * auto-disable, the notification outbox, replay and audit. Transactions are serial (one process, synchronous
 * driver), so a runtime record read and written back in one transaction needs no further locking.
 */
import type Database from 'better-sqlite3';
import { autoDisableDue } from '../../domain/endpoint-health.ts';
import {
  type EndpointRuntime,
  parseRuntime,
  reassess,
  runtimeAfterEnable,
  runtimeIndexColumns,
} from '../../domain/endpoint-runtime.ts';
import { matchesEventType } from '../../domain/event-types.ts';
import { idFloor } from '../../domain/ids.ts';
import { noticeText } from '../../domain/notice-text.ts';
import { replayStart, singleReplayRefusal } from '../../domain/replay.ts';
import type { EndpointRecord, NotificationKind, NotificationRecord } from '../../ports/delivery-store.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import { JUDGES_ENDPOINT_SQL } from '../judged-attempts.ts';
import { auditFromRow, insertAudit, writeAudit } from './audit.ts';
import { createSqliteDeliveryReconstruct } from './delivery-reconstruct.ts';
import { deliveryFromRow, endpointFromRow } from './delivery-store.ts';
import { createSqliteEndpointSeries } from './endpoint-series.ts';
import { createSqliteLanes } from './lanes.ts';
import { createSqliteQueueRebuild } from './queue-rebuild.ts';
import { createSqliteBulkReplay, INSERT_REPLAY, LATEST_PENDING_REPLAY } from './replay.ts';
import { createSqliteRetention } from './retention.ts';
import { page } from './rows.ts';
import { createSqliteTestEvents } from './test-event.ts';

type Row = Record<string, unknown>;
type St = (sql: string) => Database.Statement;

const notificationFromRow = (r: Row): NotificationRecord => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  endpointId: (r.endpoint_id as string | null) ?? null,
  kind: r.kind as NotificationKind,
  subject: r.subject as string,
  body: r.body as string,
  emailTo: (r.email_to as string | null) ?? null,
  status: r.status as NotificationRecord['status'],
  attempts: r.attempts as number,
  nextAttemptAt: (r.next_attempt_at as number | null) ?? null,
  lastError: (r.last_error as string | null) ?? null,
  createdAt: r.created_at as number,
  sentAt: (r.sent_at as number | null) ?? null,
});

/**
 * Writes a runtime record and its index columns, and releases `released` in-flight slots in the same write (the
 * completion path: one write of the queue row per endpoint per batch). Shared with the delivery store.
 */
export function saveRuntime(st: St, endpointId: string, rt: EndpointRuntime, released = 0): void {
  const cols = runtimeIndexColumns(rt);
  st(
    `UPDATE endpoint_queue SET runtime = ?, failing_since = ?, digest_due_at = ?, blocked_until = ?,
       inflight = max(inflight - ?, 0) WHERE endpoint_id = ?`,
  ).run(JSON.stringify(rt), cols.failingSince, cols.digestDueAt, cols.blockedUntil, released, endpointId);
}

function loadRuntime(st: St, endpointId: string): EndpointRuntime {
  const r = st('SELECT runtime FROM endpoint_queue WHERE endpoint_id = ?').get(endpointId) as Row | undefined;
  return parseRuntime((r?.runtime as string | null) ?? null);
}

/** Puts a notification in the outbox (or straight into the log when the tenant has no e-mail channel). */
export function insertNotification(
  st: St,
  n: {
    id: string;
    tenantId: string;
    endpointId: string | null;
    kind: NotificationKind;
    subject: string;
    body: string;
  },
  now: number,
): void {
  const t = st('SELECT notification_email FROM tenants WHERE id = ?').get(n.tenantId) as Row | undefined;
  const email = (t?.notification_email as string | null) ?? null;
  st(
    `INSERT INTO notifications (id, tenant_id, endpoint_id, kind, subject, body, email_to, status, attempts,
       next_attempt_at, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)`,
  ).run(
    n.id,
    n.tenantId,
    n.endpointId,
    n.kind,
    n.subject,
    n.body,
    email,
    email ? 'pending' : 'logged',
    email ? now : null,
    now,
  );
}

export function createSqliteOperationsStore(
  db: Database.Database,
  st: St,
  refreshDue: (id: string) => void,
): OperationsStore {
  const insertReplay = (original: Row, deliveryId: string, now: number, dueAt = now) =>
    st(INSERT_REPLAY).run(deliveryId, dueAt, now, now, original.id);

  return {
    ...createSqliteLanes(db, st),
    ...createSqliteBulkReplay(db, st, refreshDue),
    ...createSqliteTestEvents(db, st, refreshDue),
    ...createSqliteRetention(db, st),
    ...createSqliteQueueRebuild(db, st),
    ...createSqliteDeliveryReconstruct(db, st, refreshDue),
    ...createSqliteEndpointSeries(st),
    async endpointRuntime({ endpointId }) {
      const r = st('SELECT inflight, runtime FROM endpoint_queue WHERE endpoint_id = ?').get(endpointId) as
        | Row
        | undefined;
      if (!r) return null;
      return {
        endpointId,
        inflight: r.inflight as number,
        runtime: parseRuntime((r.runtime as string) ?? null),
      };
    },

    async attemptStats({ endpointId, since }) {
      // Counts in SQL; latencies from the newest 1,000 sent attempts only (a busy endpoint's day is large).
      const sent = `endpoint_id = ? AND id >= ? AND ${JUDGES_ENDPOINT_SQL}`;
      const floor = idFloor('attempt', since);
      const counts = st(
        `SELECT count(*) AS n, coalesce(sum(outcome = 'delivered'), 0) AS ok FROM attempts WHERE ${sent}`,
      ).get(endpointId, floor) as Row;
      const recent = st(
        `SELECT queue_ms, platform_ms, consumer_ms FROM attempts WHERE ${sent} ORDER BY id DESC LIMIT 1000`,
      ).all(endpointId, floor) as Row[];
      const dead = st(
        `SELECT count(*) AS n FROM deliveries WHERE endpoint_id = ? AND status = 'dead' AND updated_at >= ?`,
      ).get(endpointId, since) as Row;
      return {
        attempts: counts.n as number,
        successes: counts.ok as number,
        deadLetters: dead.n as number,
        queueMs: recent.map((r) => r.queue_ms as number).sort((a, b) => a - b),
        platformMs: recent.map((r) => r.platform_ms as number).sort((a, b) => a - b),
        consumerMs: recent
          .map((r) => r.consumer_ms as number | null)
          .filter((x): x is number => x !== null)
          .sort((a, b) => a - b),
      };
    },

    async backlogStats({ endpointId }) {
      const rt = loadRuntime(st, endpointId);
      const pending = st(
        `SELECT count(*) AS n, min(created_at) AS oldest FROM deliveries WHERE endpoint_id = ? AND status = 'pending'`,
      ).get(endpointId) as Row;
      const since = rt.failingSince;
      const dead =
        since === null
          ? { n: 0, oldest: null }
          : (st(
              `SELECT count(*) AS n, min(created_at) AS oldest FROM deliveries d
               WHERE d.endpoint_id = ? AND d.status = 'dead' AND d.updated_at >= ?
                 AND NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.replayed_from = d.id)`,
            ).get(endpointId, since) as Row);
      const oldest = [pending.oldest, dead.oldest].filter((x): x is number => typeof x === 'number');
      return {
        pending: pending.n as number,
        deadLetters: dead.n as number,
        oldestCreatedAt: oldest.length > 0 ? Math.min(...oldest) : null,
        oldestPendingAt: (pending.oldest as number | null) ?? null,
      };
    },

    async endpointEnable({ id, tenantId, choice, now, ids, audit }) {
      return db
        .transaction(() => {
          const e = st('SELECT * FROM endpoints WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL').get(
            id,
            tenantId,
          ) as Row | undefined;
          if (e?.status !== 'disabled') return null;
          const rt = loadRuntime(st, id);
          const pending = st(
            `SELECT d.id, ev.created_at AS ev_at FROM deliveries d JOIN events ev ON ev.id = d.event_id
           WHERE d.endpoint_id = ? AND d.status = 'pending' AND d.lease_owner IS NULL`,
          ).all(id) as Row[];
          // The streak's dead letters, as a bulk replay picks them: not replayed before (a bulk replay while
          // disabled already queued those, and its replays are pending above) and of a type still subscribed to.
          const subscribed = JSON.parse(e.event_types as string) as string[];
          const dead =
            rt.failingSince === null
              ? []
              : (
                  st(
                    `SELECT d.id, d.event_type, ev.created_at AS ev_at FROM deliveries d
                       JOIN events ev ON ev.id = d.event_id
                      WHERE d.endpoint_id = ? AND d.status = 'dead' AND d.updated_at >= ?
                        AND NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.replayed_from = d.id)
                      ORDER BY d.id`,
                  ).all(id, rt.failingSince) as Row[]
                ).filter((r) => matchesEventType(subscribed, r.event_type as string));
          const keep = (r: Row) =>
            choice.kind === 'deliver' || (choice.kind === 'resume_from' && (r.ev_at as number) >= choice.at);
          let requeued = 0;
          let skipped = 0;
          const due = st('UPDATE deliveries SET next_attempt_at = ?, updated_at = ? WHERE id = ?');
          const skip = st(
            `UPDATE deliveries SET status = 'skipped', status_reason = 'skipped_on_enable', next_attempt_at = NULL,
             updated_at = ? WHERE id = ?`,
          );
          for (const r of pending) {
            if (keep(r)) {
              due.run(now, now, r.id);
              requeued++;
            } else {
              skip.run(now, r.id);
              skipped++;
            }
          }
          for (const r of dead) {
            if (!keep(r)) continue;
            insertReplay(r, ids.delivery(), now);
            requeued++;
          }
          st(
            "UPDATE endpoints SET status = 'enabled', disabled_reason = NULL, updated_at = ? WHERE id = ?",
          ).run(now, id);
          saveRuntime(st, id, runtimeAfterEnable(rt, now));
          refreshDue(id);
          const endpoint = endpointFromRow(st('SELECT * FROM endpoints WHERE id = ?').get(id) as Row);
          return writeAudit(st, audit, { endpoint, requeued, skipped });
        })
        .immediate();
    },

    async endpointAutoDisable({ now, afterMs, ids }) {
      return db
        .transaction(() => {
          const rows = st(
            `SELECT q.endpoint_id FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
           WHERE q.failing_since <= ? AND e.status = 'enabled' AND e.deleted_at IS NULL`,
          ).all(now - afterMs) as Row[];
          const out: EndpointRecord[] = [];
          for (const r of rows) {
            const endpointId = r.endpoint_id as string;
            const rt = loadRuntime(st, endpointId);
            if (
              !autoDisableDue({
                firstFailureOfStreakAt: rt.failingSince,
                lastSuccessAt: rt.lastSuccessAt,
                now,
              })
            ) {
              continue;
            }
            st(
              "UPDATE endpoints SET status = 'disabled', disabled_reason = 'auto_disabled', updated_at = ? WHERE id = ?",
            ).run(now, endpointId);
            saveRuntime(st, endpointId, reassess(rt, now, true));
            refreshDue(endpointId);
            const endpoint = endpointFromRow(
              st('SELECT * FROM endpoints WHERE id = ?').get(endpointId) as Row,
            );
            insertAudit(st, {
              id: ids.audit(),
              tenantId: endpoint.tenantId,
              actor: 'system',
              action: 'endpoint.auto_disabled',
              targetType: 'endpoint',
              targetId: endpointId,
              details: { failing_since: rt.failingSince, reason: 'auto_disabled' },
              createdAt: now,
            });
            const text = noticeText('auto_disabled', { endpointId, url: endpoint.url, at: now, count: 0 });
            insertNotification(
              st,
              {
                id: ids.notification(),
                tenantId: endpoint.tenantId,
                endpointId,
                kind: 'auto_disabled',
                ...text,
              },
              now,
            );
            out.push(endpoint);
          }
          return out;
        })
        .immediate();
    },

    async notificationDigestRun({ now, ids }) {
      return db
        .transaction(() => {
          // A deleted endpoint or tenant gets no digest: its window is closed without one (`gone`).
          const rows = st(
            `SELECT q.endpoint_id, e.url, e.tenant_id,
                    e.deleted_at IS NOT NULL OR t.deleted_at IS NOT NULL AS gone
               FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
               LEFT JOIN tenants t ON t.id = e.tenant_id
              WHERE q.digest_due_at <= ?`,
          ).all(now) as Row[];
          let sent = 0;
          for (const r of rows) {
            const endpointId = r.endpoint_id as string;
            const rt = loadRuntime(st, endpointId);
            for (const cause of ['dead_letter', 'permanent_failure'] as const) {
              const w = rt.notices[cause];
              if (w.pending === 0 || (w.lastNoticeAt ?? 0) + 24 * 3600 * 1000 > now) continue;
              if (r.gone) {
                rt.notices[cause] = { lastNoticeAt: w.lastNoticeAt, pending: 0 };
                continue;
              }
              const text = noticeText('digest', {
                endpointId,
                url: r.url as string,
                at: now,
                count: w.pending,
              });
              insertNotification(
                st,
                {
                  id: ids.notification(),
                  tenantId: r.tenant_id as string,
                  endpointId,
                  kind: 'digest',
                  ...text,
                },
                now,
              );
              rt.notices[cause] = { lastNoticeAt: now, pending: 0 };
              sent++;
            }
            saveRuntime(st, endpointId, rt);
          }
          return sent;
        })
        .immediate();
    },

    async notificationClaim({ now, limit, leaseMs }) {
      return db
        .transaction(() => {
          const rows = st(
            `SELECT * FROM notifications WHERE status = 'pending' AND next_attempt_at <= ?
           ORDER BY next_attempt_at LIMIT ? + 0`,
          ).all(now, limit) as Row[];
          const claim = st(
            'UPDATE notifications SET next_attempt_at = ?, attempts = attempts + 1 WHERE id = ?',
          );
          for (const r of rows) claim.run(now + leaseMs, r.id);
          return rows.map((r) => ({ ...notificationFromRow(r), attempts: (r.attempts as number) + 1 }));
        })
        .immediate();
    },

    async notificationMark({ id, now, result }) {
      if (result.kind === 'sent') {
        st("UPDATE notifications SET status = 'sent', sent_at = ?, next_attempt_at = NULL WHERE id = ?").run(
          now,
          id,
        );
      } else if (result.kind === 'logged') {
        st("UPDATE notifications SET status = 'logged', next_attempt_at = NULL WHERE id = ?").run(id);
      } else {
        st('UPDATE notifications SET next_attempt_at = ?, last_error = ? WHERE id = ?').run(
          result.at,
          result.error,
          id,
        );
      }
    },

    async notificationList({ tenantId, limit, cursor }) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (tenantId !== null) {
        where.push('tenant_id = ?');
        args.push(tenantId);
      }
      if (cursor) {
        where.push('id < ?');
        args.push(cursor);
      }
      const rows = st(
        `SELECT * FROM notifications ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ? + 0`,
      ).all(...args, limit + 1) as Row[];
      return page(rows.map(notificationFromRow), limit);
    },

    async tenantNotificationEmail({ tenantId }) {
      const r = st('SELECT notification_email FROM tenants WHERE id = ?').get(tenantId) as Row | undefined;
      return (r?.notification_email as string | null) ?? null;
    },

    async tenantSetNotificationEmail({ tenantId, email, audit }) {
      db.transaction(() => {
        st('UPDATE tenants SET notification_email = ? WHERE id = ?').run(email, tenantId);
        writeAudit(st, audit, undefined);
      }).immediate();
    },

    async deliveryReplay({ id, tenantId, now, ratePerSecond, ids, audit }) {
      return db
        .transaction(() => {
          const original = st('SELECT * FROM deliveries WHERE id = ? AND tenant_id = ?').get(id, tenantId) as
            | Row
            | undefined;
          if (!original) return 'not_found' as const;
          const e = st('SELECT status, event_types FROM endpoints WHERE id = ? AND deleted_at IS NULL').get(
            original.endpoint_id,
          ) as Row | undefined;
          if (!e) return 'endpoint_gone' as const;
          const addressed = st('SELECT endpoint_id FROM events WHERE seq = ?').get(original.event_seq) as
            | Row
            | undefined;
          const refused = singleReplayRefusal(
            original.status as string,
            original.event_type as string,
            JSON.parse(e.event_types as string) as string[],
            (addressed?.endpoint_id ?? null) !== null,
          );
          if (refused) return refused;
          const newId = ids.delivery();
          const latest = st(LATEST_PENDING_REPLAY).get(original.endpoint_id) as { at: number | null };
          insertReplay(original, newId, now, replayStart(now, latest.at, ratePerSecond));
          refreshDue(original.endpoint_id as string);
          const replay = deliveryFromRow(st('SELECT * FROM deliveries WHERE id = ?').get(newId) as Row);
          return writeAudit(st, audit, replay);
        })
        .immediate();
    },

    async queueStats() {
      const pending = st("SELECT count(*) AS n FROM deliveries WHERE status = 'pending'").get() as Row;
      const open = st(
        `SELECT count(*) AS n FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
          WHERE e.deleted_at IS NULL AND e.status = 'enabled'
            AND json_extract(q.runtime, '$.circuit.state') IN ('open', 'half_open')`,
      ).get() as Row;
      return { pending: pending.n as number, circuitsOpen: open.n as number };
    },

    async auditAppend({ record }) {
      insertAudit(st, record);
    },

    async auditList({ tenantId, limit, cursor, ascending }) {
      const where: string[] = [];
      const args: unknown[] = [];
      if (tenantId !== null) {
        where.push('tenant_id = ?');
        args.push(tenantId);
      }
      if (cursor) {
        where.push(ascending ? 'id > ?' : 'id < ?');
        args.push(cursor);
      }
      const rows = st(
        `SELECT * FROM audit_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY id ${ascending ? 'ASC' : 'DESC'} LIMIT ? + 0`,
      ).all(...args, limit + 1) as Row[];
      return page(rows.map(auditFromRow), limit);
    },
  };
}
