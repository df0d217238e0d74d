/**
 * The notification outbox and the tenant's e-mail channel on PostgreSQL (part of the operations store,
 * src/ports/operations-store.ts; concurrency rules in operations-store.ts's header): digests written once per due
 * queue row (`FOR UPDATE SKIP LOCKED`, re-checked on the locked row), notifications claimed `FOR UPDATE SKIP LOCKED`
 * so two mailers never claim the same one.
 */
import { parseRuntime } from '../../domain/endpoint-runtime.ts';
import { noticeText } from '../../domain/notice-text.ts';
import type { NotificationKind, NotificationRecord } from '../../ports/delivery-store.ts';
import type { OperationsStore } from '../../ports/operations-store.ts';
import { writeAudit } from './audit.ts';
import {
  cmp,
  insertNotificationsSql,
  lockTenantGate,
  type NewNotification,
  notificationValues,
  type PostgresDeliveryStoreDeps,
  prefixed,
  runtimeColumns,
  toPage,
  where,
} from './delivery-store.ts';

interface NotificationRow {
  id: string;
  tenant_id: string;
  endpoint_id: string | null;
  kind: NotificationKind;
  subject: string;
  body: string;
  email_to: string | null;
  status: NotificationRecord['status'];
  attempts: number;
  next_attempt_at: number | null;
  last_error: string | null;
  created_at: number;
  sent_at: number | null;
}

const NOTIFICATION_COLUMNS =
  'id, tenant_id, endpoint_id, kind, subject, body, email_to, status, attempts, next_attempt_at, last_error, created_at, sent_at';
const toNotification = (r: NotificationRow): NotificationRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  endpointId: r.endpoint_id,
  kind: r.kind,
  subject: r.subject,
  body: r.body,
  emailTo: r.email_to,
  status: r.status,
  attempts: r.attempts,
  nextAttemptAt: r.next_attempt_at,
  lastError: r.last_error,
  createdAt: r.created_at,
  sentAt: r.sent_at,
});

type NotificationMethods = Pick<
  OperationsStore,
  | 'notificationDigestRun'
  | 'notificationClaim'
  | 'notificationMark'
  | 'notificationList'
  | 'tenantNotificationEmail'
  | 'tenantSetNotificationEmail'
>;

export function createPostgresNotifications({ query, tx }: PostgresDeliveryStoreDeps): NotificationMethods {
  return {
    async notificationDigestRun({ now, ids }) {
      return tx(async (c) => {
        // Queue rows with a digest due, locked; those another process holds are skipped (it is writing them).
        // The WHERE is re-checked on the locked, current row, so a digest already written is not written twice.
        const due = await c.query<{
          endpoint_id: string;
          runtime: string | null;
          url: string;
          tenant_id: string;
          notification_email: string | null;
          gone: boolean;
        }>(
          // A deleted endpoint or tenant gets no digest: its window is closed without one (`gone`).
          `SELECT q.endpoint_id, q.runtime, e.url, e.tenant_id, t.notification_email,
                  e.deleted_at IS NOT NULL OR t.deleted_at IS NOT NULL AS gone
             FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
             LEFT JOIN tenants t ON t.id = e.tenant_id
            WHERE q.digest_due_at <= $1
            ORDER BY q.endpoint_id FOR UPDATE OF q SKIP LOCKED`,
          [now],
        );
        if (due.rows.length === 0) return 0;
        const notices: NewNotification[] = [];
        const saved = due.rows.map((r) => {
          const rt = parseRuntime(r.runtime);
          for (const cause of ['dead_letter', 'permanent_failure'] as const) {
            const w = rt.notices[cause];
            if (w.pending === 0 || (w.lastNoticeAt ?? 0) + 24 * 3600 * 1000 > now) continue;
            if (r.gone) {
              rt.notices[cause] = { lastNoticeAt: w.lastNoticeAt, pending: 0 };
              continue;
            }
            notices.push({
              id: ids.notification(),
              tenantId: r.tenant_id,
              endpointId: r.endpoint_id,
              kind: 'digest',
              ...noticeText('digest', { endpointId: r.endpoint_id, url: r.url, at: now, count: w.pending }),
              emailTo: r.notification_email,
            });
            rt.notices[cause] = { lastNoticeAt: now, pending: 0 };
          }
          return runtimeColumns(rt);
        });
        await c.query(
          `WITH noticed AS (${insertNotificationsSql(6, '$5::bigint')})
           UPDATE endpoint_queue q
              SET runtime = u.runtime, failing_since = u.failing_since, digest_due_at = u.digest_due_at
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
                  AS u(endpoint_id, runtime, failing_since, digest_due_at)
            WHERE q.endpoint_id = u.endpoint_id`,
          [
            due.rows.map((r) => r.endpoint_id),
            saved.map((s) => s.json),
            saved.map((s) => s.failingSince),
            saved.map((s) => s.digestDueAt),
            now,
            ...notificationValues(notices),
          ],
        );
        return notices.length;
      });
    },

    async notificationClaim({ now, limit, leaseMs }) {
      // One statement: due rows locked SKIP LOCKED (a row another claimer holds is not ours), pushed out by the
      // lease. A row claimed and committed by another process since this statement's snapshot is re-checked on
      // its current version (next_attempt_at is in the future now) and dropped. Returned as they were when due.
      const res = await query<NotificationRow & { due_at: number }>(
        `UPDATE notifications n SET next_attempt_at = $2, attempts = n.attempts + 1
           FROM (SELECT id, next_attempt_at FROM notifications
                  WHERE status = 'pending' AND next_attempt_at <= $1
                  ORDER BY next_attempt_at, id LIMIT $3
                  FOR UPDATE SKIP LOCKED) c
          WHERE n.id = c.id
         RETURNING ${prefixed('n', NOTIFICATION_COLUMNS)}, c.next_attempt_at AS due_at`,
        [now, now + leaseMs, limit],
      );
      return res.rows
        .sort((a, b) => a.due_at - b.due_at || cmp(a.id, b.id))
        .map((r) => ({ ...toNotification(r), nextAttemptAt: r.due_at }));
    },

    async notificationMark({ id, now, result }) {
      if (result.kind === 'sent') {
        await query(
          "UPDATE notifications SET status = 'sent', sent_at = $2, next_attempt_at = NULL WHERE id = $1",
          [id, now],
        );
      } else if (result.kind === 'logged') {
        await query("UPDATE notifications SET status = 'logged', next_attempt_at = NULL WHERE id = $1", [id]);
      } else {
        await query('UPDATE notifications SET next_attempt_at = $2, last_error = $3 WHERE id = $1', [
          id,
          result.at,
          result.error,
        ]);
      }
    },

    async notificationList({ tenantId, limit, cursor }) {
      const w = where([
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
        ...(cursor === null ? [] : [['id < ?', cursor] as [string, unknown]]),
      ]);
      const res = await query<NotificationRow>(
        `SELECT ${NOTIFICATION_COLUMNS} FROM notifications ${w.sql ? `WHERE ${w.sql}` : ''}
          ORDER BY id DESC LIMIT ${w.next()}`,
        [...w.values, limit + 1],
      );
      return toPage(res.rows, limit, toNotification);
    },

    async tenantNotificationEmail({ tenantId }) {
      const res = await query<{ notification_email: string | null }>(
        'SELECT notification_email FROM tenants WHERE id = $1',
        [tenantId],
      );
      return res.rows[0]?.notification_email ?? null;
    },

    async tenantSetNotificationEmail({ tenantId, email, audit }) {
      await tx(async (c) => {
        // Under the gate, like the tenant's other writes: a fan-out reads the tenant row after taking it shared.
        await lockTenantGate(c, tenantId);
        await c.query('UPDATE tenants SET notification_email = $2 WHERE id = $1', [tenantId, email]);
        await writeAudit(c, audit, undefined);
      });
    },
  };
}
