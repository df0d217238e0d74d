/**
 * SQLite half of the delivery plane (see src/ports/delivery-store.ts). One process owns the database and
 * better-sqlite3 runs each transaction to completion on the event loop, so the row locking the PostgreSQL adapter
 * needs (SKIP LOCKED leasing, FOR SHARE at fan-out) is unnecessary here: transactions are serial by construction.
 */

import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import { decideAttempt } from '../../domain/circuit-breaker.ts';
import { applyAttempt, type EndpointRuntime, parseRuntime } from '../../domain/endpoint-runtime.ts';
import { matchesEventType } from '../../domain/event-types.ts';
import { newId } from '../../domain/ids.ts';
import { noticeText } from '../../domain/notice-text.ts';
import { effectiveCap } from '../../domain/ramp.ts';
import type {
  AttemptRecord,
  DeliveryRecord,
  DeliveryStatus,
  DeliveryStore,
  EndpointRecord,
  LeasedDelivery,
  SecretRecord,
} from '../../ports/delivery-store.ts';
import type { Page } from '../../ports/store.ts';
import { insertNotification, loadRuntime, saveRuntime } from './operations-store.ts';

type Row = Record<string, unknown>;
type St = (sql: string) => Database.Statement;

export const endpointFromRow = (r: Row): EndpointRecord => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  url: r.url as string,
  description: (r.description as string | null) ?? null,
  eventTypes: JSON.parse(r.event_types as string),
  ordering: r.ordering as EndpointRecord['ordering'],
  maxConcurrency: r.max_concurrency as number,
  headers: JSON.parse(r.headers as string),
  status: r.status as EndpointRecord['status'],
  disabledReason: (r.disabled_reason as string | null) ?? null,
  createdAt: r.created_at as number,
  updatedAt: r.updated_at as number,
});

const secretFromRow = (r: Row): SecretRecord => ({
  id: r.id as string,
  endpointId: r.endpoint_id as string,
  tenantId: r.tenant_id as string,
  sealed: r.sealed as string,
  activeFrom: r.active_from as number,
  activeUntil: (r.active_until as number | null) ?? null,
  createdAt: r.created_at as number,
});

export const deliveryFromRow = (r: Row): DeliveryRecord => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  endpointId: r.endpoint_id as string,
  eventId: r.event_id as string,
  eventType: r.event_type as string,
  resourceId: (r.resource_id as string | null) ?? null,
  webhookId: r.webhook_id as string,
  status: r.status as DeliveryStatus,
  attempts: r.attempts as number,
  nextAttemptAt: (r.next_attempt_at as number | null) ?? null,
  firstAttemptAt: (r.first_attempt_at as number | null) ?? null,
  lastAttemptAt: (r.last_attempt_at as number | null) ?? null,
  statusReason: (r.status_reason as string | null) ?? null,
  replayedFrom: (r.replayed_from as string | null) ?? null,
  createdAt: r.created_at as number,
  updatedAt: r.updated_at as number,
});

const attemptFromRow = (r: Row): AttemptRecord => ({
  id: r.id as string,
  deliveryId: r.delivery_id as string,
  endpointId: r.endpoint_id as string,
  tenantId: r.tenant_id as string,
  attemptNo: r.attempt_no as number,
  url: r.url as string,
  dueAt: r.due_at as number,
  startedAt: r.started_at as number,
  finishedAt: r.finished_at as number,
  outcome: r.outcome as AttemptRecord['outcome'],
  statusCode: (r.status_code as number | null) ?? null,
  errorClass: (r.error_class as string | null) ?? null,
  errorMessage: (r.error_message as string | null) ?? null,
  request: JSON.parse(r.request as string),
  responseHeaders: r.response_headers ? JSON.parse(r.response_headers as string) : null,
  responseBody: (r.response_body as string | null) ?? null,
  queueMs: r.queue_ms as number,
  platformMs: r.platform_ms as number,
  consumerMs: (r.consumer_ms as number | null) ?? null,
});

function page<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const more = rows.length > limit;
  const data = more ? rows.slice(0, limit) : rows;
  return { data, nextCursor: more ? (data[data.length - 1]?.id ?? null) : null };
}

const tenantClause = (tenantId: string | null, alias = '') =>
  tenantId === null
    ? { sql: '', args: [] as unknown[] }
    : { sql: ` AND ${alias}tenant_id = ?`, args: [tenantId] };

export function createSqliteDeliveryStore(
  db: Database.Database,
  st: St,
): DeliveryStore & { refreshDue(endpointId: string): void } {
  /** Earliest due time among unleased pending deliveries of an enabled endpoint (NULL otherwise). */
  const refreshDue = (endpointId: string) =>
    st(
      `UPDATE endpoint_queue SET next_due_at = (
         SELECT min(d.next_attempt_at) FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
         WHERE d.endpoint_id = @id AND d.status = 'pending' AND d.lease_owner IS NULL
           AND e.status = 'enabled' AND e.deleted_at IS NULL)
       WHERE endpoint_id = @id`,
    ).run({ id: endpointId }); // named: better-sqlite3 binds `?1` by name, not by position

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

  const insertDelivery = (...args: unknown[]) =>
    st(
      `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id,
       status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, NULL, ?, ?)`,
    ).run(...args);

  const fanout = db.transaction(
    (now: number, limit: number, ids: { delivery(): string; webhookId(): string }) => {
      const pending = st(
        `SELECT f.event_seq, e.id, e.tenant_id, e.type, e.resource_id FROM fanout_pending f
       JOIN events e ON e.seq = f.event_seq ORDER BY f.event_seq LIMIT ?`,
      ).all(limit) as Row[];
      if (pending.length === 0) return { events: 0, deliveries: 0 };
      const endpointsByTenant = new Map<string, EndpointRecord[]>();
      const touched = new Set<string>();
      let deliveries = 0;
      for (const ev of pending) {
        const tenantId = ev.tenant_id as string;
        let endpoints = endpointsByTenant.get(tenantId);
        if (!endpoints) {
          endpoints = (
            st(
              `SELECT e.* FROM endpoints e JOIN tenants t ON t.id = e.tenant_id
             WHERE e.tenant_id = ? AND e.deleted_at IS NULL AND t.deleted_at IS NULL`,
            ).all(tenantId) as Row[]
          ).map(endpointFromRow);
          endpointsByTenant.set(tenantId, endpoints);
        }
        for (const ep of endpoints) {
          if (!matchesEventType(ep.eventTypes, ev.type as string)) continue;
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
          if (ep.status === 'enabled') touched.add(ep.id);
        }
      }
      const due = st(
        `UPDATE endpoint_queue SET next_due_at = min(coalesce(next_due_at, @now), @now) WHERE endpoint_id = @id`,
      );
      for (const id of touched) due.run({ now, id });
      st('DELETE FROM fanout_pending WHERE event_seq <= ?').run(pending[pending.length - 1]?.event_seq);
      return { events: pending.length, deliveries };
    },
  );

  const lease = db.transaction(
    (owner: string, now: number, limit: number, perEndpoint: number, leaseMs: number): LeasedDelivery[] => {
      // The ramp: after an outage the cap climbs from 10 % to 100 % over five minutes (ADR-08). An endpoint at its
      // ramped cap is passed over and takes no candidate place (else, with a small `limit`, it would hold up every
      // other endpoint until its in-flight attempts end): the next ones in rotation order are read instead.
      const candidates: Array<{ c: Row; runtime: EndpointRuntime; cap: number }> = [];
      for (let after: [number, string] = [-1, '']; candidates.length < limit; ) {
        const want = limit - candidates.length;
        const batch = st(
          `SELECT q.endpoint_id, q.inflight, q.runtime, q.last_served_at, e.max_concurrency, e.ordering, e.url,
             e.headers, e.tenant_id
           FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
           WHERE q.next_due_at <= ? AND q.inflight < e.max_concurrency
             AND (q.last_served_at > ? OR (q.last_served_at = ? AND q.endpoint_id > ?))
           ORDER BY q.last_served_at, q.endpoint_id LIMIT ?`,
        ).all(now, after[0], after[0], after[1], want) as Row[];
        for (const c of batch) {
          const runtime = parseRuntime((c.runtime as string | null) ?? null);
          const cap = effectiveCap(c.max_concurrency as number, runtime.circuit.closedAt, now);
          if (cap > (c.inflight as number)) candidates.push({ c, runtime, cap });
        }
        const last = batch[batch.length - 1];
        if (!last || batch.length < want) break;
        after = [last.last_served_at as number, last.endpoint_id as string];
      }
      const out: LeasedDelivery[] = [];
      const leaseUntil = now + leaseMs;
      const mark = st(
        `UPDATE deliveries SET lease_owner = ?, lease_until = ?, updated_at = ? WHERE id = ? AND lease_owner IS NULL`,
      );
      for (const { c, runtime, cap } of candidates) {
        if (out.length >= limit) break;
        const endpointId = c.endpoint_id as string;
        const room = Math.min(cap - (c.inflight as number), perEndpoint, limit - out.length);
        if (room <= 0) continue;
        let rows: Row[];
        if (c.ordering === 'endpoint') {
          // Strict order: one in flight, and only the head — the oldest undelivered event — may go.
          rows =
            (c.inflight as number) > 0
              ? []
              : (st(
                  `SELECT d.*, ev.data AS ev_data, ev.created_at AS ev_created_at FROM deliveries d
                   JOIN events ev ON ev.id = d.event_id
                   WHERE d.endpoint_id = ? AND d.status = 'pending' ORDER BY d.event_seq LIMIT 1`,
                ).all(endpointId) as Row[]);
          rows = rows.filter((r) => r.lease_owner === null && (r.next_attempt_at as number) <= now);
        } else {
          // `resource`: only the oldest pending delivery of its resource may go (so at most one per resource is in
          // flight); deliveries without a resource id, and every delivery under `none`, are unordered.
          rows = st(
            `SELECT d.*, ev.data AS ev_data, ev.created_at AS ev_created_at FROM deliveries d
             JOIN events ev ON ev.id = d.event_id
             WHERE d.endpoint_id = ? AND d.status = 'pending' AND d.lease_owner IS NULL AND d.next_attempt_at <= ?
               AND (? = 0 OR d.resource_id IS NULL OR NOT EXISTS (
                 SELECT 1 FROM deliveries x WHERE x.endpoint_id = d.endpoint_id AND x.resource_id = d.resource_id
                   AND x.status = 'pending' AND x.resource_id IS NOT NULL AND x.event_seq < d.event_seq))
             ORDER BY d.next_attempt_at LIMIT ?`,
          ).all(endpointId, now, c.ordering === 'resource' ? 1 : 0, room) as Row[];
        }
        const endpoint = {
          id: endpointId,
          tenantId: c.tenant_id as string,
          url: c.url as string,
          headers: JSON.parse(c.headers as string),
        };
        let claimed = false;
        for (const r of rows) {
          mark.run(owner, leaseUntil, now, r.id);
          // The circuit decides per delivery, in this transaction: send, send as the one probe, or skip.
          const decision = decideAttempt(runtime.circuit, now);
          if (decision.kind === 'send' && decision.probe) {
            runtime.circuit = decision.claim;
            claimed = true;
          }
          out.push({
            mode: decision.kind === 'skip' ? 'circuit_open' : decision.probe ? 'probe' : 'send',
            // As stored after the lease (which sets updated_at), like deliveryGet would return it.
            delivery: { ...deliveryFromRow(r), updatedAt: now },
            endpoint,
            event: {
              id: r.event_id as string,
              type: r.event_type as string,
              createdAt: r.ev_created_at as number,
              data: r.ev_data as string,
            },
            leaseUntil,
          });
        }
        st('UPDATE endpoint_queue SET inflight = inflight + ?, last_served_at = ? WHERE endpoint_id = ?').run(
          rows.length,
          now,
          endpointId,
        );
        if (claimed) saveRuntime(st, endpointId, runtime);
        refreshDue(endpointId);
      }
      return out;
    },
  );

  const complete = db.transaction(
    (
      completions: Parameters<DeliveryStore['deliveryComplete']>[0]['completions'],
      now: number,
      ids: { notification(): string } | undefined,
    ) => {
      const runtimes = new Map<
        string,
        { rt: EndpointRuntime; disabled: boolean; url: string; tenantId: string }
      >();
      const runtimeOf = (endpointId: string) => {
        let entry = runtimes.get(endpointId);
        if (!entry) {
          const e = st('SELECT status, url, tenant_id FROM endpoints WHERE id = ?').get(endpointId) as Row;
          entry = {
            rt: loadRuntime(st, endpointId),
            disabled: e.status !== 'enabled',
            url: e.url as string,
            tenantId: e.tenant_id as string,
          };
          runtimes.set(endpointId, entry);
        }
        return entry;
      };
      const insertAttempt = st(
        `INSERT INTO attempts (id, delivery_id, endpoint_id, tenant_id, attempt_no, url, due_at, started_at, finished_at,
         outcome, status_code, error_class, error_message, request, response_headers, response_body, queue_ms,
         platform_ms, consumer_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      );
      const touched = new Set<string>();
      for (const c of completions) {
        const a = c.attempt;
        insertAttempt.run(
          a.id,
          a.deliveryId,
          a.endpointId,
          a.tenantId,
          a.attemptNo,
          a.url,
          a.dueAt,
          a.startedAt,
          a.finishedAt,
          a.outcome,
          a.statusCode,
          a.errorClass,
          a.errorMessage,
          JSON.stringify(a.request),
          a.responseHeaders ? JSON.stringify(a.responseHeaders) : null,
          a.responseBody,
          a.queueMs,
          a.platformMs,
          a.consumerMs,
        );
        const next = c.next;
        const res = st(
          `UPDATE deliveries SET status = ?, status_reason = ?, next_attempt_at = ?, attempts = attempts + 1,
           first_attempt_at = coalesce(first_attempt_at, ?), last_attempt_at = ?, lease_owner = NULL,
           lease_until = NULL, updated_at = ?
         WHERE id = ? AND lease_owner = ? AND status = 'pending'`,
        ).run(
          next.status,
          next.status === 'dead' ? next.reason : null,
          next.status === 'pending' ? next.nextAttemptAt : null,
          a.startedAt,
          a.startedAt,
          now,
          a.deliveryId,
          c.leaseOwner,
        );
        // Circuit, streak and health learn from every attempt that happened; a notice only for a dead letter
        // this completion actually wrote.
        const entry = runtimeOf(a.endpointId);
        const applied = applyAttempt(
          entry.rt,
          {
            at: a.finishedAt,
            outcome: a.outcome,
            circuitOpen: a.errorClass === 'circuit_open',
            probe: c.probe === true,
            deadLetter:
              res.changes > 0 && next.status === 'dead'
                ? a.outcome === 'permanent'
                  ? 'permanent_failure'
                  : 'dead_letter'
                : null,
          },
          entry.disabled,
        );
        entry.rt = applied.runtime;
        for (const notice of applied.notices) {
          const text = noticeText(notice.cause, {
            endpointId: a.endpointId,
            url: entry.url,
            at: a.finishedAt,
            count: notice.digested,
          });
          insertNotification(
            st,
            {
              id: ids ? ids.notification() : newId('notification', now, randomBytes(10)),
              tenantId: entry.tenantId,
              endpointId: a.endpointId,
              kind: notice.cause,
              ...text,
            },
            now,
          );
        }
        if (res.changes > 0) {
          st('UPDATE endpoint_queue SET inflight = max(inflight - 1, 0) WHERE endpoint_id = ?').run(
            a.endpointId,
          );
          touched.add(a.endpointId);
        } else if (next.status === 'delivered') {
          // The lease expired and the delivery went back to the queue (or to another worker) while this attempt
          // was still running; it did arrive, so record that — a second send may still happen (at-least-once).
          st(
            `UPDATE deliveries SET status = 'delivered', status_reason = NULL, next_attempt_at = NULL, updated_at = ?
           WHERE id = ? AND status = 'pending' AND lease_owner IS NULL`,
          ).run(now, a.deliveryId);
          touched.add(a.endpointId);
        }
      }
      for (const [id, entry] of runtimes) saveRuntime(st, id, entry.rt);
      for (const id of touched) refreshDue(id);
    },
  );

  const expire = db.transaction((now: number) => {
    const rows = st(
      `SELECT id, endpoint_id FROM deliveries WHERE lease_owner IS NOT NULL AND lease_until <= ?`,
    ).all(now) as Row[];
    const touched = new Set<string>();
    for (const r of rows) {
      st('UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ?').run(
        now,
        r.id,
      );
      st('UPDATE endpoint_queue SET inflight = max(inflight - 1, 0) WHERE endpoint_id = ?').run(
        r.endpoint_id,
      );
      touched.add(r.endpoint_id as string);
    }
    for (const id of touched) refreshDue(id);
    return rows.length;
  });

  return {
    refreshDue: (endpointId: string) => void refreshDue(endpointId),
    async endpointCreate({ endpoint: e, secret }) {
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
        st('INSERT INTO endpoint_queue (endpoint_id) VALUES (?)').run(e.id);
        insertSecret(secret);
      }).immediate();
    },
    async endpointGet({ id, tenantId }) {
      return getEndpoint(id, tenantId);
    },
    async endpointList({ tenantId, limit, cursor }) {
      const t = tenantClause(tenantId);
      const c = cursor ? { sql: ' AND id < ?', args: [cursor] } : { sql: '', args: [] };
      const rows = st(
        `SELECT * FROM endpoints WHERE deleted_at IS NULL${t.sql}${c.sql} ORDER BY id DESC LIMIT ?`,
      ).all(...t.args, ...c.args, limit + 1) as Row[];
      return page(rows.map(endpointFromRow), limit);
    },
    async endpointUpdate({ id, tenantId, patch, now }) {
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
            const pending = st(
              `SELECT id, event_type FROM deliveries WHERE endpoint_id = ? AND status = 'pending'`,
            ).all(id) as Row[];
            const unsubscribed = pending
              .filter((d) => !matchesEventType(next.eventTypes, d.event_type as string))
              .map((d) => d.id as string);
            if (unsubscribed.length > 0) {
              cancelPending(id, 'unsubscribed', now, unsubscribed);
              refreshDue(id);
            }
          }
          return next;
        })
        .immediate();
    },
    async endpointDelete({ id, tenantId, now }) {
      return db
        .transaction(() => {
          const res = st(
            'UPDATE endpoints SET deleted_at = ?, updated_at = ? WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL',
          ).run(now, now, id, tenantId);
          if (res.changes === 0) return false;
          cancelPending(id, 'endpoint_deleted', now);
          st('UPDATE endpoint_queue SET next_due_at = NULL WHERE endpoint_id = ?').run(id);
          return true;
        })
        .immediate();
    },
    async endpointSetStatus({ id, tenantId, status, reason, now }) {
      return db
        .transaction(() => {
          const res = st(
            `UPDATE endpoints SET status = ?, disabled_reason = ?, updated_at = ?
           WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL`,
          ).run(status, status === 'disabled' ? reason : null, now, id, tenantId);
          if (res.changes === 0) return null;
          refreshDue(id);
          return getEndpoint(id, tenantId);
        })
        .immediate();
    },

    async secretRotate({ secret, previousActiveUntil, now }) {
      db.transaction(() => {
        const active = activeSecrets(secret.endpointId, now);
        // Keep the newest active one for the overlap; anything older is retired now (at most two active).
        active.forEach((s, i) => {
          const until = i === 0 ? Math.min(s.activeUntil ?? previousActiveUntil, previousActiveUntil) : now;
          st('UPDATE endpoint_secrets SET active_until = ? WHERE id = ?').run(until, s.id);
        });
        insertSecret(secret);
      }).immediate();
    },
    async secretListActive({ endpointId, now }) {
      return activeSecrets(endpointId, now);
    },
    async secretRetire({ id, endpointId, now }) {
      return db
        .transaction(() => {
          const active = activeSecrets(endpointId, now);
          if (!active.some((s) => s.id === id)) return 'not_found' as const;
          if (active.length === 1) return 'last' as const;
          st('UPDATE endpoint_secrets SET active_until = ? WHERE id = ?').run(now, id);
          return 'retired' as const;
        })
        .immediate();
    },

    async fanoutRun({ now, limit, ids }) {
      return fanout.immediate(now, limit, ids);
    },
    async deliveryLease({ owner, now, limit, perEndpoint, leaseMs }) {
      return lease.immediate(owner, now, limit, perEndpoint, leaseMs);
    },
    async deliveryComplete({ completions, now, ids }) {
      if (completions.length > 0) complete.immediate(completions, now, ids);
    },
    async deliveryExpireLeases({ now }) {
      return expire.immediate(now);
    },
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
        `SELECT * FROM deliveries WHERE endpoint_id = ?${t.sql}${s.sql}${c.sql} ORDER BY id DESC LIMIT ?`,
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
