/** Endpoint CRUD and signing secrets of the PostgreSQL delivery plane (locking: see delivery-store.ts). */
import { randomBytes } from 'node:crypto';
import { statusChangeNotice } from '../../domain/endpoint-health.ts';
import { matchesEventType } from '../../domain/event-types.ts';
import { newId } from '../../domain/ids.ts';
import { DEFAULT_SHARED_LANES, laneSchemeTag, sharedLane } from '../../domain/lanes.ts';
import { noticeText } from '../../domain/notice-text.ts';
import type { DeliveryStore, EndpointRecord, SecretRecord } from '../../ports/delivery-store.ts';
import { writeAudit } from './audit.ts';
import { BULK_DEADLINE_MS } from './deadlines.ts';
import { insertNotificationsSql, type NewNotification, notificationValues } from './notification-outbox.ts';
import {
  type Db,
  lockTenantGate,
  type PostgresDeliveryStoreDeps,
  RECOMPUTE_DUE,
  where,
} from './query-helpers.ts';
import {
  ENDPOINT_COLUMNS,
  type EndpointRow,
  SECRET_COLUMNS,
  type SecretRow,
  toEndpoint,
  toPage,
  toSecret,
} from './rows.ts';

/**
 * The tx option of the transactions that rewrite a whole backlog in one statement (this file's delete and
 * unsubscribe, endpointEnable, laneRebalance, tenantDelete): their statements get BULK_DEADLINE_MS (deadlines.ts,
 * which says why) instead of the short answer deadline.
 */
export const BULK_DEADLINE_TX = { deadlineMs: BULK_DEADLINE_MS } as const;

/** The delivery (`alias`) is not a test event's (one addressed to its endpoint alone, events.endpoint_id). */
const NOT_A_TEST_EVENT = (alias: string) =>
  `NOT EXISTS (SELECT 1 FROM events e WHERE e.seq = ${alias}.event_seq AND e.endpoint_id IS NOT NULL)`;

const activeSecrets = async (db: Db, endpointId: string, now: number) =>
  (
    await db.query<SecretRow>(
      `SELECT ${SECRET_COLUMNS} FROM endpoint_secrets
        WHERE endpoint_id = $1 AND active_from <= $2 AND (active_until IS NULL OR active_until > $2)
        ORDER BY id DESC`,
      [endpointId, now],
    )
  ).rows.map(toSecret);

/**
 * Serialises secret changes of one endpoint (two rotations must not both keep their predecessor active). An
 * advisory lock of its own, not the endpoints row, so a rotation never waits for endpoint writes or fan-out.
 */
const lockSecrets = (db: Db, endpointId: string) =>
  db.query(`SELECT pg_advisory_xact_lock(hashtextextended('hookrail.endpoint_secrets:' || $1::text, 0))`, [
    endpointId,
  ]);

/**
 * The endpoint exists and is not deleted, its row held `FOR SHARE` until commit, so a deletion (which updates the
 * row) waits for a secret change under way and a secret change after it sees the deletion. Lock order: the secrets'
 * advisory lock, then the endpoint row; a deletion takes no secrets lock, so the two cannot wait on each other.
 */
const liveEndpoint = async (db: Db, endpointId: string) =>
  (await db.query('SELECT 1 FROM endpoints WHERE id = $1 AND deleted_at IS NULL FOR SHARE', [endpointId]))
    .rows.length === 1;

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

const insertSecret = (db: Db, s: SecretRecord) =>
  db.query(`INSERT INTO endpoint_secrets (${SECRET_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
    s.id,
    s.endpointId,
    s.tenantId,
    s.sealed,
    s.activeFrom,
    s.activeUntil,
    s.createdAt,
  ]);

export function createEndpointsStore({
  query,
  tx,
}: PostgresDeliveryStoreDeps): Pick<
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
  return {
    async endpointCreate({ endpoint: e, secret, sharedLanes = DEFAULT_SHARED_LANES, audit }) {
      await tx(async (c) => {
        await c.query(
          `INSERT INTO endpoints (${ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
          [
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
          ],
        );
        await c.query(
          'INSERT INTO endpoint_queue (endpoint_id, lane, lane_since, lane_scheme) VALUES ($1, $2, $3, $4)',
          [e.id, sharedLane(e.id, sharedLanes), e.createdAt, laneSchemeTag(sharedLanes)],
        );
        await insertSecret(c, secret);
        await writeAudit(c, audit, undefined);
      });
    },

    async endpointGet({ id, tenantId }) {
      const w = where([
        ['id = ?', id],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
      ]);
      const res = await query<EndpointRow>(
        `SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE ${w.sql} AND deleted_at IS NULL`,
        w.values,
      );
      return res.rows[0] ? toEndpoint(res.rows[0]) : null;
    },

    async endpointList({ tenantId, limit, cursor }) {
      const w = where([
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
        ...(cursor === null ? [] : [['id < ?', cursor] as [string, unknown]]),
      ]);
      const res = await query<EndpointRow>(
        `SELECT ${ENDPOINT_COLUMNS} FROM endpoints
          WHERE deleted_at IS NULL ${w.sql ? `AND ${w.sql}` : ''}
          ORDER BY id DESC LIMIT ${w.next()}`,
        [...w.values, limit + 1],
      );
      return toPage(res.rows, limit, toEndpoint);
    },

    async endpointUpdate({ id, tenantId, patch, now, audit }) {
      // An unsubscribe reads and cancels the endpoint's whole pending backlog.
      const deadline = patch.eventTypes ? BULK_DEADLINE_TX : undefined;
      return tx(async (c) => {
        await lockTenantGate(c, tenantId);
        const cur = await c.query<EndpointRow>(
          `SELECT ${ENDPOINT_COLUMNS} FROM endpoints
            WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL FOR UPDATE`,
          [id, tenantId],
        );
        if (!cur.rows[0]) return null;
        // Serialise with leasing and completion for this endpoint.
        await c.query('SELECT 1 FROM endpoint_queue WHERE endpoint_id = $1 FOR UPDATE', [id]);
        const next: EndpointRecord = { ...toEndpoint(cur.rows[0]), ...patch, updatedAt: now };
        await c.query(
          `UPDATE endpoints SET url = $2, description = $3, event_types = $4, ordering = $5, max_concurrency = $6,
             headers = $7, updated_at = $8 WHERE id = $1`,
          [
            id,
            next.url,
            next.description,
            JSON.stringify(next.eventTypes),
            next.ordering,
            next.maxConcurrency,
            JSON.stringify(next.headers),
            now,
          ],
        );
        if (patch.eventTypes) {
          // An acknowledged unsubscribe binds: cancel the pending deliveries whose type no longer matches. Not a
          // test event's: it was addressed to this endpoint whatever it subscribes to (events.endpoint_id).
          const types = await c.query<{ event_type: string }>(
            `SELECT DISTINCT d.event_type FROM deliveries d
              WHERE d.endpoint_id = $1 AND d.status = 'pending' AND ${NOT_A_TEST_EVENT('d')}`,
            [id],
          );
          const gone = types.rows
            .map((r) => r.event_type)
            .filter((t) => !matchesEventType(next.eventTypes, t));
          if (gone.length > 0) {
            await c.query(
              `UPDATE deliveries SET status = 'cancelled', status_reason = 'unsubscribed', next_attempt_at = NULL,
                 updated_at = $3
               WHERE endpoint_id = $1 AND status = 'pending' AND event_type = ANY($2::text[])
                 AND ${NOT_A_TEST_EVENT('deliveries')}`,
              [id, gone, now],
            );
            await c.query(
              `UPDATE endpoint_queue q SET next_due_at = ${RECOMPUTE_DUE} WHERE q.endpoint_id = $1`,
              [id],
            );
          }
        }
        return writeAudit(c, audit, next);
      }, deadline);
    },

    async endpointDelete({ id, tenantId, now, audit }) {
      return tx(async (c) => {
        await lockTenantGate(c, tenantId);
        const res = await c.query(
          `UPDATE endpoints SET deleted_at = $3, updated_at = $3
            WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL`,
          [id, tenantId, now],
        );
        if (res.rowCount !== 1) return false;
        await c.query('UPDATE endpoint_queue SET next_due_at = NULL WHERE endpoint_id = $1', [id]);
        await c.query(
          `UPDATE deliveries SET status = 'cancelled', status_reason = 'endpoint_deleted', next_attempt_at = NULL,
             updated_at = $2
           WHERE endpoint_id = $1 AND status = 'pending'`,
          [id, now],
        );
        await writeAudit(c, audit, undefined);
        return true;
      }, BULK_DEADLINE_TX);
    },

    async endpointSetStatus({ id, tenantId, status, reason, now, ids, audit }) {
      return tx(async (c) => {
        await lockTenantGate(c, tenantId);
        // The status it had, read under the row lock the update takes anyway (after the tenant gate: lock order),
        // so that a disable racing another one or auto-disable sees their committed status and writes no notice.
        const previous = (
          await c.query<{ status: EndpointRecord['status']; notification_email: string | null }>(
            `SELECT e.status, t.notification_email FROM endpoints e JOIN tenants t ON t.id = e.tenant_id
              WHERE e.id = $1 AND e.tenant_id = $2 AND e.deleted_at IS NULL FOR UPDATE OF e`,
            [id, tenantId],
          )
        ).rows[0];
        if (!previous) return null;
        const res = await c.query<EndpointRow>(
          `UPDATE endpoints SET status = $3, disabled_reason = $4, updated_at = $5
            WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL
           RETURNING ${ENDPOINT_COLUMNS}`,
          [id, tenantId, status, status === 'disabled' ? reason : null, now],
        );
        if (!res.rows[0]) return null;
        const endpoint = toEndpoint(res.rows[0]);
        await c.query(`UPDATE endpoint_queue q SET next_due_at = ${RECOMPUTE_DUE} WHERE q.endpoint_id = $1`, [
          id,
        ]);
        const notice = statusChangeNotice(previous.status, status);
        if (notice) {
          const n: NewNotification = {
            id: ids ? ids.notification() : newId('notification', now, randomBytes(10)),
            tenantId,
            endpointId: id,
            kind: notice,
            ...noticeText(notice, { endpointId: id, url: endpoint.url, at: now, count: 0 }),
            emailTo: previous.notification_email,
          };
          await c.query(insertNotificationsSql(2, '$1::bigint'), [now, ...notificationValues([n])]);
        }
        return writeAudit(c, audit, endpoint);
      });
    },

    async secretRotate({ secret, previousActiveUntil, now, audit }) {
      return tx(async (c) => {
        await lockSecrets(c, secret.endpointId);
        if (!(await liveEndpoint(c, secret.endpointId))) return 'not_found' as const;
        const active = await activeSecrets(c, secret.endpointId, now);
        // Keep the newest active one for the overlap; anything older is retired now (at most two active).
        const ids = active.map((s) => s.id);
        const until = active.map((s, i) =>
          i === 0 ? Math.min(s.activeUntil ?? previousActiveUntil, previousActiveUntil) : now,
        );
        if (ids.length > 0) {
          await c.query(
            `UPDATE endpoint_secrets s SET active_until = u.until
               FROM unnest($1::text[], $2::bigint[]) AS u(id, until) WHERE s.id = u.id`,
            [ids, until],
          );
        }
        await insertSecret(c, secret);
        const kept = active[0] ? { ...active[0], activeUntil: until[0] as number } : null;
        return writeAudit(c, audit, kept);
      });
    },

    async secretListActive({ endpointId, now }) {
      return activeSecrets({ query }, endpointId, now);
    },

    async secretRetire({ id, endpointId, now, audit }) {
      return tx(async (c) => {
        await lockSecrets(c, endpointId);
        if (!(await liveEndpoint(c, endpointId))) return 'not_found' as const;
        const active = await activeSecrets(c, endpointId, now);
        if (!active.some((s) => s.id === id)) return 'not_found' as const;
        if (active.length === 1) return 'last' as const;
        await c.query('UPDATE endpoint_secrets SET active_until = $2 WHERE id = $1', [id, now]);
        const lift = secretToKeep(active, id);
        if (lift) await c.query('UPDATE endpoint_secrets SET active_until = NULL WHERE id = $1', [lift]);
        await writeAudit(c, audit, undefined);
        return 'retired' as const;
      });
    },
  };
}
