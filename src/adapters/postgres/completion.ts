/**
 * Completion of attempts (deliveryComplete) and expiry of leases (deliveryExpireLeases) in the PostgreSQL delivery
 * plane. Both rely on the queue-row invariant described at `lease` (lease.ts); locking: see delivery-store.ts.
 */
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
import type {
  AttemptRecord,
  DeliveryStatus,
  EndpointRecord,
  RecordedCompletion,
} from '../../ports/delivery-store.ts';
import type { TxRunner } from './migrate.ts';
import { insertNotificationsSql, type NewNotification, notificationValues } from './notification-outbox.ts';
import { cmp, type Db, joinJsonTexts, jsonTexts, recomputeDue } from './query-helpers.ts';
import { ATTEMPT_COLUMNS, prefixed, runtimeColumns } from './rows.ts';

interface ProjectionRow {
  id: string;
  endpoint_id: string;
  status: DeliveryStatus;
  status_reason: string | null;
  attempts: number;
  next_attempt_at: number | null;
  first_attempt_at: number | null;
  last_attempt_at: number | null;
  lease_owner: string | null;
  lease_until: number | null;
}

/**
 * Writes changed projection rows by primary key and, in the same statement, the in-flight counts and due times
 * of `endpoints` (sorted; `released` in-flight slots each). The recompute cannot see this statement's own
 * writes: changed ids are excluded, and those left pending and unleased are folded in through `extra`.
 * Completion also passes the endpoints' updated runtimes (`runtimes`; the due time is recomputed only for
 * `touched` endpoints, whose unleased pending deliveries changed) and the notices they call for (`notices`).
 */
const writeProjection = (
  c: Db,
  changed: ProjectionRow[],
  endpoints: string[],
  o: {
    released: Map<string, number>;
    now: number;
    touched?: Set<string>;
    runtimes?: Map<string, EndpointRuntime>;
    notices?: NewNotification[];
  },
) => {
  const extra = new Map<string, number>();
  for (const r of changed) {
    if (r.status !== 'pending' || r.lease_owner !== null || r.next_attempt_at === null) continue;
    extra.set(r.endpoint_id, Math.min(extra.get(r.endpoint_id) ?? r.next_attempt_at, r.next_attempt_at));
  }
  const col = <K extends keyof ProjectionRow>(k: K) => changed.map((r) => r[k]);
  const saved = endpoints.map((id) => {
    const rt = o.runtimes?.get(id);
    return rt ? runtimeColumns(rt) : null;
  });
  const notices = o.notices ?? [];
  return c.query(
    `WITH written AS (
       UPDATE deliveries d
          SET status = u.status, status_reason = u.reason, next_attempt_at = u.next_at, attempts = u.attempts,
              first_attempt_at = u.first_at, last_attempt_at = u.last_at, lease_owner = u.owner,
              lease_until = u.until, updated_at = $4
         FROM unnest($5::text[], $6::text[], $7::text[], $8::bigint[], $9::int[], $10::bigint[], $11::bigint[],
                     $12::text[], $13::bigint[])
              AS u(id, status, reason, next_at, attempts, first_at, last_at, owner, until)
        WHERE d.id = u.id)${
          notices.length > 0
            ? `,
     noticed AS (${insertNotificationsSql(19, '$4::bigint')})`
            : ''
        }
     UPDATE endpoint_queue q
        SET inflight = GREATEST(q.inflight - u.n, 0),
            next_due_at = CASE WHEN u.touched
                               THEN ${recomputeDue({ exclude: '$5::text[]', extra: 'u.extra' })}
                               ELSE q.next_due_at END,
            runtime = COALESCE(u.runtime, q.runtime),
            failing_since = CASE WHEN u.runtime IS NULL THEN q.failing_since ELSE u.failing_since END,
            digest_due_at = CASE WHEN u.runtime IS NULL THEN q.digest_due_at ELSE u.digest_due_at END,
            blocked_until = CASE WHEN u.runtime IS NULL THEN q.blocked_until ELSE u.blocked_until END
       FROM unnest($1::text[], $2::int[], $3::bigint[], $14::boolean[], $15::text[], $16::bigint[],
                   $17::bigint[], $18::bigint[])
            AS u(endpoint_id, n, extra, touched, runtime, failing_since, digest_due_at, blocked_until)
      WHERE q.endpoint_id = u.endpoint_id`,
    [
      endpoints,
      endpoints.map((id) => o.released.get(id) ?? 0),
      endpoints.map((id) => extra.get(id) ?? null),
      o.now,
      col('id'),
      col('status'),
      col('status_reason'),
      col('next_attempt_at'),
      col('attempts'),
      col('first_attempt_at'),
      col('last_attempt_at'),
      col('lease_owner'),
      col('lease_until'),
      endpoints.map((id) => o.touched?.has(id) ?? true),
      saved.map((x) => x?.json ?? null),
      saved.map((x) => x?.failingSince ?? null),
      saved.map((x) => x?.digestDueAt ?? null),
      saved.map((x) => x?.blockedUntil ?? null),
      ...(notices.length > 0 ? notificationValues(notices) : []),
    ],
  );
};

const PROJECTION_COLUMNS =
  'id, endpoint_id, status, status_reason, attempts, next_attempt_at, first_attempt_at, last_attempt_at, lease_owner, lease_until';

/** What completion needs of an endpoint besides its queue row, read after the queue row lock is held. */
type CompletionRow = ProjectionRow & {
  /** How many attempts this statement appended (the same on every row). */
  appended: number;
  ep_id: string;
  ep_status: EndpointRecord['status'];
  ep_url: string;
  ep_tenant_id: string;
  notification_email: string | null;
};

export async function complete(
  tx: TxRunner,
  completions: RecordedCompletion[],
  now: number,
  ids: { notification(): string } | undefined,
) {
  // Sorted by endpoint (lock order); stable, so completions of one delivery keep their input order.
  const sorted = [...completions].sort((a, b) => cmp(a.attempt.endpointId, b.attempt.endpointId));
  const endpointIds = [...new Set(sorted.map((x) => x.attempt.endpointId))];
  const a = <T>(f: (x: AttemptRecord) => T) => sorted.map((x) => f(x.attempt));
  const notificationId = () => (ids ? ids.notification() : newId('notification', now, randomBytes(10)));

  await tx(
    async (c) => {
      // The queue rows, locked, with the runtime records on them (current versions: they are what was locked) and
      // the time of the last `recovered` notice.
      const queueRows = (
        await c.query<{ endpoint_id: string; runtime: string | null; recovered_notice_at: string | null }>(
          `SELECT endpoint_id, runtime, recovered_notice_at FROM endpoint_queue WHERE endpoint_id = ANY($1::text[])
            ORDER BY endpoint_id FOR UPDATE`,
          [endpointIds],
        )
      ).rows;
      const locked = new Map(queueRows.map((r) => [r.endpoint_id, parseRuntime(r.runtime)]));
      const recoveredAt = new Map(
        queueRows.map((r) => [
          r.endpoint_id,
          r.recovered_notice_at === null ? null : Number(r.recovered_notice_at),
        ]),
      );
      const recoveredNow = new Set<string>();
      // The attempts (always appended: the log records what happened), and per endpoint its status, URL and
      // tenant channel with the current projection rows of its completed deliveries. A later statement than the
      // lock, so it sees what the previous holder of the queue rows committed (a disable above all).
      // Every row is read by one primary-key probe (fenced LATERALs). Joined on `d.id = ANY(…)`, the plan was a
      // sequential scan of `deliveries` whenever the table had fewer than ~15 pages per id (bench:delivery: up to its
      // whole 3,500 pages, for one completion of 460 attempts). Probes by construction, the statement is planned once
      // per connection (PROBES_ONLY): planned per call, binding it cost ~11 µs of backend CPU per attempt in
      // bench:delivery, against ~2 µs.
      const current = await c.query<CompletionRow>(
        `WITH appended AS (
         INSERT INTO attempts (${ATTEMPT_COLUMNS})
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[],
                              $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::int[], $12::text[],
                              $13::text[], ${jsonTexts('$14')}, ${jsonTexts('$15')}, $16::text[], $17::bigint[],
                              $18::bigint[],
                              $19::bigint[], $20::text[])
         ON CONFLICT (id) DO NOTHING
         RETURNING id)
       SELECT e.id AS ep_id, e.status AS ep_status, e.url AS ep_url, e.tenant_id AS ep_tenant_id,
              t.notification_email, (SELECT count(*) FROM appended)::int AS appended,
              ${prefixed('d', PROJECTION_COLUMNS)}
         FROM unnest($21::text[]) AS ke(id)
        CROSS JOIN LATERAL (SELECT id, status, url, tenant_id FROM endpoints WHERE id = ke.id OFFSET 0) e
         LEFT JOIN LATERAL (SELECT notification_email FROM tenants WHERE id = e.tenant_id OFFSET 0) t ON true
         LEFT JOIN (SELECT x.* FROM (SELECT DISTINCT id FROM unnest($2::text[]) AS u(id)) k
                     CROSS JOIN LATERAL (SELECT ${PROJECTION_COLUMNS} FROM deliveries WHERE id = k.id OFFSET 0) x) d
                ON d.endpoint_id = e.id`,
        [
          a((x) => x.id),
          a((x) => x.deliveryId),
          a((x) => x.endpointId),
          a((x) => x.tenantId),
          a((x) => x.attemptNo),
          a((x) => x.url),
          a((x) => x.dueAt),
          a((x) => x.startedAt),
          a((x) => x.finishedAt),
          a((x) => x.outcome),
          a((x) => x.statusCode),
          a((x) => x.errorClass),
          a((x) => x.errorMessage),
          joinJsonTexts(a((x) => JSON.stringify(x.request))),
          joinJsonTexts(a((x) => (x.responseHeaders ? JSON.stringify(x.responseHeaders) : null))),
          a((x) => x.responseBody),
          a((x) => x.queueMs),
          a((x) => x.platformMs),
          a((x) => x.consumerMs),
          a((x) => x.eventId),
          [...locked.keys()],
        ],
      );
      const endpoints = new Map<
        string,
        { rt: EndpointRuntime; disabled: boolean; url: string; tenantId: string; email: string | null }
      >();
      // None appended: every attempt is in the log already, recorded by an earlier try of this same batch whose
      // COMMIT went through though its answer was lost (a connection cut at that moment). That try applied
      // everything else too, and a batch is written whole or not at all, so there is nothing left to do. (A caller
      // mixing recorded and new attempts in one batch would have them all applied; the delivery worker retries the
      // very batch that failed.)
      if (sorted.length > 0 && current.rows.length > 0 && current.rows[0]!.appended === 0) return;
      const rows = new Map<string, ProjectionRow>();
      for (const r of current.rows) {
        if (!endpoints.has(r.ep_id)) {
          endpoints.set(r.ep_id, {
            rt: locked.get(r.ep_id)!,
            disabled: r.ep_status !== 'enabled',
            url: r.ep_url,
            tenantId: r.ep_tenant_id,
            email: r.notification_email,
          });
        }
        if (r.id !== null) rows.set(r.id, r);
      }

      // Applied in order, exactly as the sequential reference does, on rows nobody else can change now.
      const changed = new Set<ProjectionRow>();
      const released = new Map<string, number>();
      const touched = new Set<string>();
      const notices: NewNotification[] = [];
      for (const x of sorted) {
        const r = rows.get(x.attempt.deliveryId);
        let wrote = false;
        // Fenced to the lease the attempt was made under: owner and lease_until together (the owner is per process,
        // and a re-lease after expiry by the same process differs only in lease_until), compared on the row already
        // read by its key. A skip (owner null, never leased) matches an unleased row; without leaseUntil, the owner
        // alone.
        const ours =
          r !== undefined &&
          r.lease_owner === x.leaseOwner &&
          (x.leaseUntil === undefined || r.lease_until === x.leaseUntil);
        // Unknown, or filed under an endpoint whose queue row this transaction does not hold: not ours to write.
        if (!r || !locked.has(r.endpoint_id) || r.endpoint_id !== x.attempt.endpointId) {
          // (nothing to write)
        } else if (ours && r.status === 'pending') {
          r.status = x.next.status;
          r.status_reason = x.next.status === 'dead' ? x.next.reason : null;
          r.next_attempt_at = x.next.status === 'pending' ? x.next.nextAttemptAt : null;
          r.attempts += 1;
          r.first_attempt_at ??= x.attempt.startedAt;
          r.last_attempt_at = x.attempt.startedAt;
          r.lease_owner = null;
          r.lease_until = null;
          wrote = true;
          changed.add(r);
          // A skip held no in-flight slot.
          if (x.leaseOwner !== null) released.set(r.endpoint_id, (released.get(r.endpoint_id) ?? 0) + 1);
          if (completionMovesDueTime(x.next.status, x.leaseOwner !== null)) touched.add(r.endpoint_id);
        } else if (x.leaseOwner !== null && ours && r.status === 'cancelled') {
          // Cancelled (unsubscribed, endpoint or tenant deleted) while this attempt was in flight: no retry, but
          // the attempt is counted on the record, one that arrived makes it delivered, and the slot is free now
          // rather than when the lease would have expired.
          if (x.next.status === 'delivered') {
            r.status = 'delivered';
            r.status_reason = null;
          }
          r.attempts += 1;
          r.first_attempt_at ??= x.attempt.startedAt;
          r.last_attempt_at = x.attempt.startedAt;
          r.lease_owner = null;
          r.lease_until = null;
          changed.add(r);
          released.set(r.endpoint_id, (released.get(r.endpoint_id) ?? 0) + 1);
        } else if (x.next.status === 'delivered') {
          // The lease expired and the delivery went back to the queue (or to a later lease, of this process or
          // another) while this attempt was still running; it did arrive, so record that — a second send may still
          // happen (at-least-once).
          if (r.status === 'pending' && r.lease_owner === null) {
            r.status = 'delivered';
            r.status_reason = null;
            r.next_attempt_at = null;
            changed.add(r);
          }
          touched.add(r.endpoint_id);
        }
        // Circuit, streak and health learn from every attempt that happened; a notice only for a dead letter
        // this completion actually wrote. Health changes before any notice goes out (same transaction, ADR-09).
        const ep = endpoints.get(x.attempt.endpointId);
        if (!ep) continue;
        const at = x.attempt;
        const before = ep.rt;
        const applied = applyAttempt(
          ep.rt,
          {
            at: at.finishedAt,
            outcome: at.outcome,
            errorClass: at.errorClass,
            probe: x.probe === true,
            deadLetter:
              wrote && x.next.status === 'dead'
                ? at.outcome === 'permanent'
                  ? 'permanent_failure'
                  : 'dead_letter'
                : null,
          },
          ep.disabled,
        );
        ep.rt = applied.runtime;
        const { notices: kinds, recovered } = attemptNotices(
          before,
          applied,
          recoveredAt.get(at.endpointId) ?? null,
        );
        if (recovered) {
          recoveredAt.set(at.endpointId, at.finishedAt);
          recoveredNow.add(at.endpointId);
        }
        for (const notice of kinds) {
          notices.push({
            id: notificationId(),
            tenantId: ep.tenantId,
            endpointId: at.endpointId,
            kind: notice.kind,
            ...noticeText(notice.kind, {
              endpointId: at.endpointId,
              url: ep.url,
              at: at.finishedAt,
              count: notice.count,
            }),
            emailTo: ep.email,
          });
        }
      }
      const runtimes = new Map([...endpoints].map(([id, ep]) => [id, ep.rt]));
      const all = [...new Set([...touched, ...runtimes.keys()])].sort(cmp);
      if (all.length > 0) {
        await writeProjection(c, [...changed], all, { released, now, touched, runtimes, notices });
      }
      // Rare (once per noticed incident), so a statement of its own rather than a column of the projection write.
      if (recoveredNow.size > 0) {
        const recovered = [...recoveredNow].sort(cmp);
        await c.query(
          `UPDATE endpoint_queue q SET recovered_notice_at = u.at
             FROM unnest($1::text[], $2::bigint[]) AS u(endpoint_id, at) WHERE q.endpoint_id = u.endpoint_id`,
          [recovered, recovered.map((id) => recoveredAt.get(id) ?? null)],
        );
      }
    },
    { probesOnly: true },
  );
}

/**
 * Expired leases returned per transaction. The sweep reads them oldest first through deliveries_leased by a plain
 * index scan, which marks the entries of completed leases dead as it passes them (a bitmap scan would not), so each
 * later sweep steps over them in the index instead of visiting their rows again.
 */
const EXPIRE_BATCH = 1_000;

export async function expire(tx: TxRunner, now: number) {
  let total = 0;
  for (;;) {
    const { found, released } = await expireBatch(tx, now);
    total += released;
    if (found < EXPIRE_BATCH || released === 0) return total;
  }
}

async function expireBatch(tx: TxRunner, now: number) {
  return tx(
    async (c) => {
      // Lock the queue rows of endpoints with expired leases first (lock order), then release those leases. The
      // expired leases are read on their own (MATERIALIZED), in lease_until order through deliveries_leased: written
      // as a semi-join, the planner walked every queue row's deliveries through deliveries_endpoint, every delivery
      // ever made on every sweep (bench:delivery, PostgreSQL: 120,000-150,000 buffers and 0.2-0.6 s per sweep at
      // 20,000 deliveries, growing with the table).
      const locked = await c.query<{ endpoint_id: string; found: number }>(
        `WITH x AS MATERIALIZED (SELECT endpoint_id FROM deliveries
                                WHERE lease_owner IS NOT NULL AND lease_until <= $1
                                ORDER BY lease_until LIMIT $2),
            e AS (SELECT DISTINCT endpoint_id FROM x)
       SELECT q.endpoint_id, (SELECT count(*) FROM x)::int AS found
         FROM endpoint_queue q JOIN e ON e.endpoint_id = q.endpoint_id
        ORDER BY q.endpoint_id FOR UPDATE OF q`,
        [now, EXPIRE_BATCH],
      );
      if (locked.rows.length === 0) return { found: 0, released: 0 };
      const found = locked.rows[0]!.found;
      const mine = new Set(locked.rows.map((r) => r.endpoint_id));
      // The same walk again, now that those endpoints' deliveries cannot change under us; a lease that expired since
      // the lock, or one of an endpoint not locked, is left for the next batch or sweep.
      const expired = (
        await c.query<ProjectionRow>(
          `SELECT ${PROJECTION_COLUMNS} FROM deliveries WHERE lease_owner IS NOT NULL AND lease_until <= $1
          ORDER BY lease_until LIMIT $2`,
          [now, EXPIRE_BATCH],
        )
      ).rows.filter((r) => mine.has(r.endpoint_id));
      if (expired.length === 0) return { found, released: 0 };
      const released = new Map<string, number>();
      for (const r of expired) {
        r.lease_owner = null;
        r.lease_until = null;
        released.set(r.endpoint_id, (released.get(r.endpoint_id) ?? 0) + 1);
      }
      await writeProjection(c, expired, [...released.keys()].sort(cmp), { released, now });
      return { found, released: expired.length };
    },
    { probesOnly: true },
  );
}
