/** Endpoint CRUD and signing secrets of the SQLite delivery plane. */
import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import { statusChangeNotice } from '../../domain/endpoint-health.ts';
import { matchesEventType } from '../../domain/event-types.ts';
import { newId } from '../../domain/ids.ts';
import { DEFAULT_SHARED_LANES, laneSchemeTag, sharedLane } from '../../domain/lanes.ts';
import { noticeText } from '../../domain/notice-text.ts';
import type { DeliveryStore, EndpointRecord, SecretRecord } from '../../ports/delivery-store.ts';
import { writeAudit } from './audit.ts';
import { insertNotification } from './operations-store.ts';
import type { RefreshDue } from './queue-due.ts';
import { endpointFromRow, page, type Row, type St, secretFromRow, tenantClause } from './rows.ts';

/**
 * The secret whose end to lift when `retiredId` is retired out of `active` (active now, newest first), so that a
 * retirement never leaves the endpoint without a signing secret once the overlaps end: when none of the others is
 * open-ended (retiring the new secret of a rotation, whose predecessor ends with the overlap), the newest of them
 * stays in force, which undoes the rotation. Null when one of the others is already open-ended.
 */
function secretToKeep(active: SecretRecord[], retiredId: string): string | null {
  const rest = active.filter((s) => s.id !== retiredId);
  if (rest.length === 0 || rest.some((s) => s.activeUntil === null)) return null;
  return rest[0]!.id;
}

export function createEndpointsStore(
  db: Database.Database,
  st: St,
  refreshDue: RefreshDue,
): Pick<
  DeliveryStore,
  | 'endpointCreate'
  | 'endpointGet'
  | 'endpointList'
  | 'endpointUpdate'
  | 'endpointDelete'
  | 'endpointSetStatus'
  | 'secretRotate'
  | 'secretListActive'
  | 'secretRetire'
> {
  const cancelPending = (endpointId: string, reason: string, now: number, ids?: string[]) => {
    if (ids) {
      const stmt = st(
        `UPDATE deliveries SET status = 'cancelled', status_reason = ?, next_attempt_at = NULL, updated_at = ?
         WHERE id = ? AND status = 'pending'`,
      );
      for (const id of ids) stmt.run(reason, now, id);
    } else {
      st(
        `UPDATE deliveries SET status = 'cancelled', status_reason = ?, next_attempt_at = NULL, updated_at = ?
         WHERE endpoint_id = ? AND status = 'pending'`,
      ).run(reason, now, endpointId);
    }
  };

  const getEndpoint = (id: string, tenantId: string | null) => {
    const t = tenantClause(tenantId);
    const r = st(`SELECT * FROM endpoints WHERE id = ? AND deleted_at IS NULL${t.sql}`).get(id, ...t.args) as
      | Row
      | undefined;
    return r ? endpointFromRow(r) : null;
  };

  const insertSecret = (s: SecretRecord) =>
    st(
      `INSERT INTO endpoint_secrets (id, endpoint_id, tenant_id, sealed, active_from, active_until, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(s.id, s.endpointId, s.tenantId, s.sealed, s.activeFrom, s.activeUntil, s.createdAt);

  const activeSecrets = (endpointId: string, now: number) =>
    (
      st(
        `SELECT * FROM endpoint_secrets WHERE endpoint_id = ? AND active_from <= ?
         AND (active_until IS NULL OR active_until > ?) ORDER BY id DESC`,
      ).all(endpointId, now, now) as Row[]
    ).map(secretFromRow);

  return {
    async endpointCreate({ endpoint: e, secret, sharedLanes = DEFAULT_SHARED_LANES, audit }) {
      db.transaction(() => {
        st(
          `INSERT INTO endpoints (id, tenant_id, url, description, event_types, ordering, max_concurrency, headers,
             status, disabled_reason, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          e.id,
          e.tenantId,
          e.url,
          e.description,
          JSON.stringify(e.eventTypes),
          e.ordering,
          e.maxConcurrency,
          JSON.stringify(e.headers),
          e.status,
          e.disabledReason,
          e.createdAt,
          e.updatedAt,
        );
        st('INSERT INTO endpoint_queue (endpoint_id, lane, lane_since, lane_scheme) VALUES (?, ?, ?, ?)').run(
          e.id,
          sharedLane(e.id, sharedLanes),
          e.createdAt,
          laneSchemeTag(sharedLanes),
        );
        insertSecret(secret);
        writeAudit(st, audit, undefined);
      }).immediate();
    },
    async endpointGet({ id, tenantId }) {
      return getEndpoint(id, tenantId);
    },
    async endpointList({ tenantId, limit, cursor }) {
      const t = tenantClause(tenantId);
      const c = cursor ? { sql: ' AND id < ?', args: [cursor] } : { sql: '', args: [] };
      const rows = st(
        `SELECT * FROM endpoints WHERE deleted_at IS NULL${t.sql}${c.sql} ORDER BY id DESC LIMIT ? + 0`,
      ).all(...t.args, ...c.args, limit + 1) as Row[];
      return page(rows.map(endpointFromRow), limit);
    },
    async endpointUpdate({ id, tenantId, patch, now, audit }) {
      return db
        .transaction(() => {
          const current = getEndpoint(id, tenantId);
          if (!current) return null;
          const next = { ...current, ...patch, updatedAt: now };
          st(
            `UPDATE endpoints SET url = ?, description = ?, event_types = ?, ordering = ?, max_concurrency = ?,
             headers = ?, updated_at = ? WHERE id = ?`,
          ).run(
            next.url,
            next.description,
            JSON.stringify(next.eventTypes),
            next.ordering,
            next.maxConcurrency,
            JSON.stringify(next.headers),
            now,
            id,
          );
          if (patch.eventTypes) {
            // An acknowledged unsubscribe binds: cancel the pending deliveries whose type no longer matches. Not a
            // test event's: it was addressed to this endpoint whatever it subscribes to (events.endpoint_id).
            const pending = st(
              `SELECT d.id, d.event_type FROM deliveries d JOIN events e ON e.seq = d.event_seq
                WHERE d.endpoint_id = ? AND d.status = 'pending' AND e.endpoint_id IS NULL`,
            ).all(id) as Row[];
            const unsubscribed = pending
              .filter((d) => !matchesEventType(next.eventTypes, d.event_type as string))
              .map((d) => d.id as string);
            if (unsubscribed.length > 0) {
              cancelPending(id, 'unsubscribed', now, unsubscribed);
              refreshDue(id);
            }
          }
          return writeAudit(st, audit, next);
        })
        .immediate();
    },
    async endpointDelete({ id, tenantId, now, audit }) {
      return db
        .transaction(() => {
          const res = st(
            'UPDATE endpoints SET deleted_at = ?, updated_at = ? WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL',
          ).run(now, now, id, tenantId);
          if (res.changes === 0) return false;
          cancelPending(id, 'endpoint_deleted', now);
          st('UPDATE endpoint_queue SET next_due_at = NULL WHERE endpoint_id = ?').run(id);
          writeAudit(st, audit, undefined);
          return true;
        })
        .immediate();
    },
    async endpointSetStatus({ id, tenantId, status, reason, now, ids, audit }) {
      return db
        .transaction(() => {
          const previous = getEndpoint(id, tenantId);
          if (!previous) return null;
          st(
            `UPDATE endpoints SET status = ?, disabled_reason = ?, updated_at = ?
           WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL`,
          ).run(status, status === 'disabled' ? reason : null, now, id, tenantId);
          refreshDue(id);
          const endpoint = getEndpoint(id, tenantId) as EndpointRecord;
          const notice = statusChangeNotice(previous.status, status);
          if (notice) {
            insertNotification(
              st,
              {
                id: ids ? ids.notification() : newId('notification', now, randomBytes(10)),
                tenantId,
                endpointId: id,
                kind: notice,
                ...noticeText(notice, { endpointId: id, url: endpoint.url, at: now, count: 0 }),
              },
              now,
            );
          }
          return writeAudit(st, audit, endpoint);
        })
        .immediate();
    },

    async secretRotate({ secret, previousActiveUntil, now, audit }) {
      return db
        .transaction(() => {
          if (!getEndpoint(secret.endpointId, secret.tenantId)) return 'not_found' as const;
          const active = activeSecrets(secret.endpointId, now);
          // Keep the newest active one for the overlap; anything older is retired now (at most two active).
          const kept = active.map((s, i) => {
            const until = i === 0 ? Math.min(s.activeUntil ?? previousActiveUntil, previousActiveUntil) : now;
            st('UPDATE endpoint_secrets SET active_until = ? WHERE id = ?').run(until, s.id);
            return { ...s, activeUntil: until };
          })[0];
          insertSecret(secret);
          return writeAudit(st, audit, kept ?? null);
        })
        .immediate();
    },
    async secretListActive({ endpointId, now }) {
      return activeSecrets(endpointId, now);
    },
    async secretRetire({ id, endpointId, now, audit }) {
      return db
        .transaction(() => {
          if (!getEndpoint(endpointId, null)) return 'not_found' as const;
          const active = activeSecrets(endpointId, now);
          if (!active.some((s) => s.id === id)) return 'not_found' as const;
          if (active.length === 1) return 'last' as const;
          st('UPDATE endpoint_secrets SET active_until = ? WHERE id = ?').run(now, id);
          const lift = secretToKeep(active, id);
          if (lift) st('UPDATE endpoint_secrets SET active_until = NULL WHERE id = ?').run(lift);
          writeAudit(st, audit, undefined);
          return 'retired' as const;
        })
        .immediate();
    },
  };
}
