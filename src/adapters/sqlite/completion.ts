/** Completion of attempts (deliveryComplete) and expiry of leases (deliveryExpireLeases) in SQLite. */
import { randomBytes } from 'node:crypto';
import { completionMovesDueTime } from '../../domain/due-time.ts';
import {
  applyAttempt,
  attemptNotices,
  type EndpointRuntime,
  parseRuntime,
} from '../../domain/endpoint-runtime.ts';
import { newId } from '../../domain/ids.ts';
import { noticeText } from '../../domain/notice-text.ts';
import type { RecordedCompletion } from '../../ports/delivery-store.ts';
import { insertNotification, saveRuntime } from './operations-store.ts';
import type { RefreshDue } from './queue-due.ts';
import type { Row, St } from './rows.ts';

/** Both run inside a transaction (the caller's: turn-commit.ts). */
export function createCompletion(st: St, refreshDue: RefreshDue) {
  const complete = (
    completions: RecordedCompletion[],
    now: number,
    ids: { notification(): string } | undefined,
  ) => {
    const runtimes = new Map<
      string,
      {
        rt: EndpointRuntime;
        disabled: boolean;
        url: string;
        tenantId: string;
        /** The last `recovered` notice (endpoint_queue.recovered_notice_at) and whether this batch wrote one. */
        recoveredAt: number | null;
        recoveredNow: boolean;
      }
    >();
    const runtimeOf = (endpointId: string) => {
      let entry = runtimes.get(endpointId);
      if (!entry) {
        const e = st(
          `SELECT e.status, e.url, e.tenant_id, q.runtime, q.recovered_notice_at FROM endpoints e
             LEFT JOIN endpoint_queue q ON q.endpoint_id = e.id WHERE e.id = ?`,
        ).get(endpointId) as Row;
        entry = {
          rt: parseRuntime((e.runtime as string | null) ?? null),
          disabled: e.status !== 'enabled',
          url: e.url as string,
          tenantId: e.tenant_id as string,
          recoveredAt: (e.recovered_notice_at as number | null) ?? null,
          recoveredNow: false,
        };
        runtimes.set(endpointId, entry);
      }
      return entry;
    };
    const insertAttempt = st(
      `INSERT INTO attempts (id, delivery_id, endpoint_id, tenant_id, attempt_no, url, due_at, started_at, finished_at,
         outcome, status_code, error_class, error_message, request, response_headers, response_body, queue_ms,
         platform_ms, consumer_ms, event_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO NOTHING`,
    );
    const touched = new Set<string>();
    const released = new Map<string, number>(); // endpoint → in-flight slots this batch frees
    for (const c of completions) {
      const a = c.attempt;
      const appended = insertAttempt.run(
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
        a.eventId,
      ).changes;
      // Already in the log: an earlier try of this write committed it, with everything below, though the caller
      // saw it fail (the WAL sync after the commit failed). Recorded once, applied once.
      if (appended === 0) continue;
      const next = c.next;
      // Fenced to the lease the attempt was made under: owner and lease_until together (the owner is per process,
      // and a re-lease after expiry by the same process differs only in lease_until). A skip (owner null, never
      // leased) matches an unleased row; a completion without leaseUntil, the owner alone.
      const until = c.leaseUntil ?? null;
      const res = st(
        `UPDATE deliveries SET status = ?, status_reason = ?, next_attempt_at = ?, attempts = attempts + 1,
           first_attempt_at = coalesce(first_attempt_at, ?), last_attempt_at = ?, lease_owner = NULL,
           lease_until = NULL, updated_at = ?
         WHERE id = ? AND lease_owner IS ? AND (? IS NULL OR lease_until = ?) AND status = 'pending'`,
      ).run(
        next.status,
        next.status === 'dead' ? next.reason : null,
        next.status === 'pending' ? next.nextAttemptAt : null,
        a.startedAt,
        a.startedAt,
        now,
        a.deliveryId,
        c.leaseOwner,
        until,
        until,
      );
      // Circuit, streak and health learn from every attempt that happened; a notice only for a dead letter
      // this completion actually wrote.
      const entry = runtimeOf(a.endpointId);
      const before = entry.rt;
      const applied = applyAttempt(
        entry.rt,
        {
          at: a.finishedAt,
          outcome: a.outcome,
          errorClass: a.errorClass,
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
      const { notices: kinds, recovered } = attemptNotices(before, applied, entry.recoveredAt);
      if (recovered) {
        entry.recoveredAt = a.finishedAt;
        entry.recoveredNow = true;
      }
      for (const notice of kinds) {
        const text = noticeText(notice.kind, {
          endpointId: a.endpointId,
          url: entry.url,
          at: a.finishedAt,
          count: notice.count,
        });
        insertNotification(
          st,
          {
            id: ids ? ids.notification() : newId('notification', now, randomBytes(10)),
            tenantId: entry.tenantId,
            endpointId: a.endpointId,
            kind: notice.kind,
            ...text,
          },
          now,
        );
      }
      if (res.changes > 0) {
        // A skip held no in-flight slot.
        if (c.leaseOwner !== null) released.set(a.endpointId, (released.get(a.endpointId) ?? 0) + 1);
        if (completionMovesDueTime(next.status, c.leaseOwner !== null)) touched.add(a.endpointId);
      } else if (
        c.leaseOwner !== null &&
        st(
          `UPDATE deliveries SET status = CASE WHEN ? THEN 'delivered' ELSE status END,
             status_reason = CASE WHEN ? THEN NULL ELSE status_reason END, attempts = attempts + 1,
             first_attempt_at = coalesce(first_attempt_at, ?), last_attempt_at = ?, lease_owner = NULL,
             lease_until = NULL, updated_at = ?
           WHERE id = ? AND lease_owner = ? AND (? IS NULL OR lease_until = ?) AND status = 'cancelled'`,
        ).run(
          next.status === 'delivered' ? 1 : 0,
          next.status === 'delivered' ? 1 : 0,
          a.startedAt,
          a.startedAt,
          now,
          a.deliveryId,
          c.leaseOwner,
          until,
          until,
        ).changes > 0
      ) {
        // Cancelled (unsubscribed, endpoint or tenant deleted) while this attempt was in flight: no retry, but the
        // attempt is counted on the record, one that arrived makes it delivered, and the slot is free now rather
        // than when the lease would have expired.
        released.set(a.endpointId, (released.get(a.endpointId) ?? 0) + 1);
      } else if (next.status === 'delivered') {
        // The lease expired and the delivery went back to the queue (or to a later lease, of this process or another)
        // while this attempt was still running; it did arrive, so record that — a second send may still happen
        // (at-least-once).
        st(
          `UPDATE deliveries SET status = 'delivered', status_reason = NULL, next_attempt_at = NULL, updated_at = ?
           WHERE id = ? AND status = 'pending' AND lease_owner IS NULL`,
        ).run(now, a.deliveryId);
        touched.add(a.endpointId);
      }
    }
    // Per endpoint, one write of its queue row: the runtime and the in-flight slots released (and, rarely, a second
    // for the time of a recovered notice this batch wrote).
    for (const [id, entry] of runtimes) {
      saveRuntime(st, id, entry.rt, released.get(id) ?? 0);
      if (entry.recoveredNow) {
        st('UPDATE endpoint_queue SET recovered_notice_at = ? WHERE endpoint_id = ?').run(
          entry.recoveredAt,
          id,
        );
      }
    }
    for (const id of touched) refreshDue(id);
  };

  const expire = (now: number) => {
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
  };

  return { complete, expire };
}
