/**
 * PostgreSQL half of the delivery plane (see src/ports/delivery-store.ts), for any number of processes sharing
 * the database. Same behaviour as the SQLite reference (src/adapters/sqlite/delivery-store.ts); what differs is
 * the concurrency control, which is all PostgreSQL row locks:
 *
 * - Leasing locks candidate `endpoint_queue` rows `FOR UPDATE SKIP LOCKED`: one transaction at a time leases for
 *   an endpoint, so the in-flight cap holds across processes, and workers never wait for each other.
 * - Fan-out claims `fanout_pending` rows `FOR UPDATE SKIP LOCKED` (each event is fanned out by exactly one
 *   transaction) and reads tenants and endpoints `FOR SHARE`: a concurrent PATCH/DELETE of an endpoint or a tenant
 *   deletion waits for the fan-out to commit and then sees (and cancels) what it created.
 * - Fairness: row-level FOR SHARE lets a new sharer overtake a waiting FOR UPDATE, so with fan-out transactions
 *   overlapping back to back, an endpoint PATCH/DELETE/disable or a tenant deletion could wait forever. A
 *   per-tenant advisory lock is the gate: fan-out takes it shared, those writers exclusive, and PostgreSQL's
 *   heavyweight lock queue makes new shared requests wait behind a waiting exclusive one (bounded wait).
 * - Every writer takes its locks in one order — tenant gate, tenants, endpoints, endpoint_queue (several rows:
 *   sorted by endpoint_id), deliveries — so transactions never deadlock each other (the tx helper retries one that
 *   does).
 * - The per-endpoint runtime record (circuit, streak, health, notice windows: domain/endpoint-runtime.ts) is JSON
 *   on the endpoint's queue row, read with the row lock leasing and completion take anyway (a locked row comes
 *   back in its current version) and written back before COMMIT. Under that lock a probe claim is a
 *   compare-and-set: of two processes that see a probe due, one holds the row and writes the claim, the other
 *   skips the row (leasing) or waits and then sees the claim. Completion writes the notices the runtime calls for
 *   to the notifications outbox in the same transaction (health changes before any notice is sent).
 *
 * READ COMMITTED pitfall avoided throughout: a statement's snapshot is taken before the row locks it acquires, so
 * anything that must see work committed by the previous holder of a queue row lock (the due-time recompute above
 * all) runs in a later statement than the one that took the lock.
 *
 * Every query is index-driven: leasing and fan-out cost depends on `limit`, `perEndpoint` and the endpoints
 * involved, never on the size of the backlog.
 */
import { randomBytes } from 'node:crypto';
import type { QueryResult, QueryResultRow } from 'pg';
import { decideAttempt } from '../../domain/circuit-breaker.ts';
import {
  applyAttempt,
  type EndpointRuntime,
  parseRuntime,
  runtimeIndexColumns,
} from '../../domain/endpoint-runtime.ts';
import { matchesEventType } from '../../domain/event-types.ts';
import { newId } from '../../domain/ids.ts';
import { noticeText } from '../../domain/notice-text.ts';
import { effectiveCap } from '../../domain/ramp.ts';
import type {
  AttemptCompletion,
  AttemptRecord,
  DeliveryIdFactory,
  DeliveryRecord,
  DeliveryStatus,
  DeliveryStore,
  EndpointRecord,
  LeasedDelivery,
  NotificationKind,
  SecretRecord,
} from '../../ports/delivery-store.ts';
import type { Page } from '../../ports/store.ts';
import type { TxRunner } from './migrate.ts';

export interface PostgresDeliveryStoreDeps {
  /** One statement on the pool, errors mapped (StoreUnavailableError). */
  query: <R extends QueryResultRow>(text: string, values?: unknown[]) => Promise<QueryResult<R>>;
  /** BEGIN/COMMIT on one client, errors mapped, deadlocks and serialization failures retried. */
  tx: TxRunner;
}

export interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string | null;
  event_types: string;
  ordering: EndpointRecord['ordering'];
  max_concurrency: number;
  headers: string;
  status: EndpointRecord['status'];
  disabled_reason: string | null;
  created_at: number;
  updated_at: number;
}

interface SecretRow {
  id: string;
  endpoint_id: string;
  tenant_id: string;
  sealed: string;
  active_from: number;
  active_until: number | null;
  created_at: number;
}

export interface DeliveryRow {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  resource_id: string | null;
  webhook_id: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: number | null;
  first_attempt_at: number | null;
  last_attempt_at: number | null;
  status_reason: string | null;
  replayed_from: string | null;
  created_at: number;
  updated_at: number;
}

interface AttemptRow {
  id: string;
  delivery_id: string;
  endpoint_id: string;
  tenant_id: string;
  attempt_no: number;
  url: string;
  due_at: number;
  started_at: number;
  finished_at: number;
  outcome: AttemptRecord['outcome'];
  status_code: number | null;
  error_class: string | null;
  error_message: string | null;
  request: string;
  response_headers: string | null;
  response_body: string | null;
  queue_ms: number;
  platform_ms: number;
  consumer_ms: number | null;
}

export const ENDPOINT_COLUMNS =
  'id, tenant_id, url, description, event_types, ordering, max_concurrency, headers, status, disabled_reason, created_at, updated_at';
const SECRET_COLUMNS = 'id, endpoint_id, tenant_id, sealed, active_from, active_until, created_at';
export const DELIVERY_COLUMNS =
  'id, tenant_id, endpoint_id, event_id, event_type, resource_id, webhook_id, status, attempts, next_attempt_at, first_attempt_at, last_attempt_at, status_reason, replayed_from, created_at, updated_at';
const ATTEMPT_COLUMNS =
  'id, delivery_id, endpoint_id, tenant_id, attempt_no, url, due_at, started_at, finished_at, outcome, status_code, error_class, error_message, request, response_headers, response_body, queue_ms, platform_ms, consumer_ms';
export const prefixed = (alias: string, cols: string) =>
  cols
    .split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');

export const toEndpoint = (r: EndpointRow): EndpointRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  url: r.url,
  description: r.description,
  eventTypes: JSON.parse(r.event_types),
  ordering: r.ordering,
  maxConcurrency: r.max_concurrency,
  headers: JSON.parse(r.headers),
  status: r.status,
  disabledReason: r.disabled_reason,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const toSecret = (r: SecretRow): SecretRecord => ({
  id: r.id,
  endpointId: r.endpoint_id,
  tenantId: r.tenant_id,
  sealed: r.sealed,
  activeFrom: r.active_from,
  activeUntil: r.active_until,
  createdAt: r.created_at,
});

export const toDelivery = (r: DeliveryRow): DeliveryRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  endpointId: r.endpoint_id,
  eventId: r.event_id,
  eventType: r.event_type,
  resourceId: r.resource_id,
  webhookId: r.webhook_id,
  status: r.status,
  attempts: r.attempts,
  nextAttemptAt: r.next_attempt_at,
  firstAttemptAt: r.first_attempt_at,
  lastAttemptAt: r.last_attempt_at,
  statusReason: r.status_reason,
  replayedFrom: r.replayed_from,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const toAttempt = (r: AttemptRow): AttemptRecord => ({
  id: r.id,
  deliveryId: r.delivery_id,
  endpointId: r.endpoint_id,
  tenantId: r.tenant_id,
  attemptNo: r.attempt_no,
  url: r.url,
  dueAt: r.due_at,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  outcome: r.outcome,
  statusCode: r.status_code,
  errorClass: r.error_class,
  errorMessage: r.error_message,
  request: JSON.parse(r.request),
  responseHeaders: r.response_headers === null ? null : JSON.parse(r.response_headers),
  responseBody: r.response_body,
  queueMs: r.queue_ms,
  platformMs: r.platform_ms,
  consumerMs: r.consumer_ms,
});

/** Fetch limit+1 rows (newest first); the extra row only says whether a next page exists. */
export function toPage<R, T extends { id: string }>(rows: R[], limit: number, map: (r: R) => T): Page<T> {
  const data = rows.slice(0, limit).map(map);
  return { data, nextCursor: rows.length > limit && data.length > 0 ? data[data.length - 1]!.id : null };
}

/** Plain code-unit order (= COLLATE "C"), the same in every process: the global lock order for queue rows. */
export const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** WHERE clauses built per call, so every shape gets a plan on the matching index. */
export function where(base: Array<[string, unknown]>) {
  const values: unknown[] = [];
  const parts = base.map(([sql, v]) => {
    values.push(v);
    return sql.replace('?', `$${values.length}`);
  });
  return { sql: parts.join(' AND '), values, next: () => `$${values.length + 1}` };
}

/**
 * The due time of queue row `q`: the earliest next_attempt_at among its unleased pending deliveries when the
 * endpoint is enabled and not deleted, else NULL — one probe of the partial index deliveries_ready (written as
 * ORDER BY … LIMIT 1 so the plan is that probe even without statistics).
 *
 * For use in the same statement as a write to deliveries (which that statement's snapshot does not see):
 * `exclude` names a text[] of delivery ids whose row is being changed, `extra` a bigint due time to fold in.
 */
export function recomputeDue(o: { exclude?: string; extra?: string } = {}): string {
  const visible = `(SELECT d.next_attempt_at FROM deliveries d
                     WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending' AND d.lease_owner IS NULL
                       ${o.exclude ? `AND d.id <> ALL(${o.exclude})` : ''}
                     ORDER BY d.next_attempt_at LIMIT 1)`;
  return `CASE WHEN EXISTS (SELECT 1 FROM endpoints e
                             WHERE e.id = q.endpoint_id AND e.status = 'enabled' AND e.deleted_at IS NULL)
          THEN ${o.extra ? `LEAST(${visible}, ${o.extra})` : visible}
        END`;
}
const RECOMPUTE_DUE = recomputeDue();

/** Locks queue rows in endpoint_id order (never in plan order, which differs between statements). */
const LOCK_QUEUE_ROWS = `SELECT endpoint_id FROM endpoint_queue WHERE endpoint_id = ANY($1::text[])
                          ORDER BY endpoint_id FOR UPDATE`;

export type Db = { query: PostgresDeliveryStoreDeps['query'] };

/**
 * The per-tenant fan-out gate (see the header): shared for fan-out, exclusive for writers that fan-out must not
 * race (endpoint PATCH/DELETE/status, tenant deletion). Transaction-scoped; keys are namespaced hashes.
 */
export const lockTenantGate = (db: Db, tenantId: string) =>
  db.query(`SELECT pg_advisory_xact_lock(hashtextextended('hookrail.tenant:' || $1::text, 0))`, [tenantId]);
export const lockTenantGatesShared = (db: Db, sortedTenantIds: string[]) =>
  db.query(
    `SELECT pg_advisory_xact_lock_shared(hashtextextended('hookrail.tenant:' || t, 0))
       FROM unnest($1::text[]) WITH ORDINALITY AS u(t, ord) ORDER BY ord`,
    [sortedTenantIds],
  );

/** A notification for the outbox; `emailTo` is the tenant's channel as read in the writing transaction. */
export interface NewNotification {
  id: string;
  tenantId: string;
  endpointId: string | null;
  kind: NotificationKind;
  subject: string;
  body: string;
  emailTo: string | null;
}

/**
 * A data-modifying CTE body that puts notifications in the outbox — `pending` and due at `now` when the tenant has
 * an e-mail channel, straight into the log (`logged`) otherwise — from seven arrays starting at parameter
 * `$first`; `now` is an SQL expression. `notificationValues` gives the arrays in the same order.
 */
export const insertNotificationsSql = (first: number, now: string) => {
  const p = (i: number) => `$${first + i}`;
  return `INSERT INTO notifications (id, tenant_id, endpoint_id, kind, subject, body, email_to, status, attempts,
            next_attempt_at, created_at)
          SELECT u.id, u.tenant_id, u.endpoint_id, u.kind, u.subject, u.body, u.email_to,
                 CASE WHEN u.email_to IS NULL THEN 'logged' ELSE 'pending' END, 0,
                 CASE WHEN u.email_to IS NULL THEN NULL ELSE ${now} END, ${now}
            FROM unnest(${p(0)}::text[], ${p(1)}::text[], ${p(2)}::text[], ${p(3)}::text[], ${p(4)}::text[],
                        ${p(5)}::text[], ${p(6)}::text[])
                 AS u(id, tenant_id, endpoint_id, kind, subject, body, email_to)`;
};
export const notificationValues = (ns: NewNotification[]): unknown[] => [
  ns.map((n) => n.id),
  ns.map((n) => n.tenantId),
  ns.map((n) => n.endpointId),
  ns.map((n) => n.kind),
  ns.map((n) => n.subject),
  ns.map((n) => n.body),
  ns.map((n) => n.emailTo),
];

/** A runtime record as stored: the JSON text and its index columns, in the order the SQL below takes them. */
export const runtimeColumns = (rt: EndpointRuntime) => {
  const cols = runtimeIndexColumns(rt);
  return { json: JSON.stringify(rt), failingSince: cols.failingSince, digestDueAt: cols.digestDueAt };
};

export function createPostgresDeliveryStore({ query, tx }: PostgresDeliveryStoreDeps): DeliveryStore {
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
   * advisory lock, not the endpoints row: fan-out's FOR SHARE on that row would starve a FOR UPDATE.
   */
  const lockSecrets = (db: Db, endpointId: string) =>
    db.query(`SELECT pg_advisory_xact_lock(hashtextextended('hookrail.endpoint_secrets:' || $1::text, 0))`, [
      endpointId,
    ]);

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

  async function fanoutRun(now: number, limit: number, ids: DeliveryIdFactory) {
    return tx(async (c) => {
      // Claim: rows another fan-out transaction holds are skipped, so each event is fanned out exactly once.
      const claimed = await c.query<{
        event_seq: number;
        id: string | null;
        tenant_id: string | null;
        type: string | null;
        resource_id: string | null;
      }>(
        `SELECT f.event_seq, e.id, e.tenant_id, e.type, e.resource_id
           FROM fanout_pending f LEFT JOIN events e ON e.seq = f.event_seq
          ORDER BY f.event_seq LIMIT $1
          FOR UPDATE OF f SKIP LOCKED`,
        [limit],
      );
      if (claimed.rows.length === 0) return { events: 0, deliveries: 0 };
      const events = claimed.rows.filter((r) => r.id !== null);

      // Live tenants, locked FOR SHARE: tenantDelete waits for this transaction (and then cancels what it
      // created), or this transaction waits for it and sees the tenant deleted.
      const tenantIds = [...new Set(events.map((e) => e.tenant_id!))].sort(cmp);
      if (tenantIds.length > 0) await lockTenantGatesShared(c, tenantIds);
      const live = tenantIds.length
        ? (
            await c.query<{ id: string }>(
              `SELECT id FROM tenants WHERE id = ANY($1::text[]) AND deleted_at IS NULL
                ORDER BY id FOR SHARE`,
              [tenantIds],
            )
          ).rows.map((r) => r.id)
        : [];
      // Their endpoints, FOR SHARE: a PATCH/DELETE/disable waits for this fan-out to commit.
      const endpointsByTenant = new Map<string, EndpointRecord[]>();
      if (live.length > 0) {
        const eps = await c.query<EndpointRow>(
          `SELECT ${ENDPOINT_COLUMNS} FROM endpoints
            WHERE tenant_id = ANY($1::text[]) AND deleted_at IS NULL
            ORDER BY id FOR SHARE`,
          [live],
        );
        for (const row of eps.rows) {
          const ep = toEndpoint(row);
          const list = endpointsByTenant.get(ep.tenantId);
          if (list) list.push(ep);
          else endpointsByTenant.set(ep.tenantId, [ep]);
        }
      }

      const cols = {
        id: [] as string[],
        tenant: [] as string[],
        endpoint: [] as string[],
        eventId: [] as string[],
        seq: [] as number[],
        type: [] as string[],
        resource: [] as Array<string | null>,
        webhook: [] as string[],
      };
      const touched = new Set<string>();
      for (const ev of events) {
        for (const ep of endpointsByTenant.get(ev.tenant_id!) ?? []) {
          if (!matchesEventType(ep.eventTypes, ev.type!)) continue;
          cols.id.push(ids.delivery());
          cols.tenant.push(ev.tenant_id!);
          cols.endpoint.push(ep.id);
          cols.eventId.push(ev.id!);
          cols.seq.push(ev.event_seq);
          cols.type.push(ev.type!);
          cols.resource.push(ev.resource_id);
          cols.webhook.push(ids.webhookId());
          if (ep.status === 'enabled') touched.add(ep.id);
        }
      }
      if (cols.id.length > 0) {
        await c.query(
          `INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id,
             webhook_id, status, attempts, next_attempt_at, replayed_from, created_at, updated_at)
           SELECT u.id, u.tenant_id, u.endpoint_id, u.event_id, u.event_seq, u.event_type, u.resource_id,
                  u.webhook_id, 'pending', 0, $9::bigint, NULL, $9::bigint, $9::bigint
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[],
                         $8::text[])
                  AS u(id, tenant_id, endpoint_id, event_id, event_seq, event_type, resource_id, webhook_id)`,
          [
            cols.id,
            cols.tenant,
            cols.endpoint,
            cols.eventId,
            cols.seq,
            cols.type,
            cols.resource,
            cols.webhook,
            now,
          ],
        );
      }
      // Exactly the claimed rows: other fan-out processes may hold lower or interleaved seqs.
      await c.query('DELETE FROM fanout_pending WHERE event_seq = ANY($1::bigint[])', [
        claimed.rows.map((r) => r.event_seq),
      ]);
      if (touched.size > 0) {
        // Last, so the queue rows (which leasing skips and completion waits for) are held only until COMMIT.
        // Held they must be: a lease recomputing next_due_at before this commits would not see these deliveries.
        // LEAST on the current row version, not on a value read earlier.
        await c.query(
          `WITH l AS (${LOCK_QUEUE_ROWS})
           UPDATE endpoint_queue q SET next_due_at = LEAST(COALESCE(q.next_due_at, $2), $2)
             FROM l WHERE q.endpoint_id = l.endpoint_id`,
          [[...touched].sort(cmp), now],
        );
      }
      return { events: claimed.rows.length, deliveries: cols.id.length };
    });
  }

  interface Candidate {
    endpoint_id: string;
    inflight: number;
    max_concurrency: number;
    ordering: EndpointRecord['ordering'];
    url: string;
    headers: string;
    tenant_id: string;
    runtime: string | null;
  }

  /**
   * Leasing, completion and expiry rely on one invariant: every writer of an existing delivery row locks its
   * endpoint's queue row first (fan-out only inserts). So once they hold the queue rows, those endpoints'
   * deliveries cannot change under them: they read them in one statement and write them by primary key in the
   * next, without re-checking guards. That also keeps every plan index-driven without statistics: a write
   * guarded by `status = 'pending' AND lease_owner IS NULL` would let the planner pick a full scan of a partial
   * index it believes tiny (O(backlog) per call, seen with autovacuum off).
   */
  async function lease(owner: string, now: number, limit: number, perEndpoint: number, leaseMs: number) {
    if (limit <= 0) return [];
    return tx(async (c) => {
      // 1. Candidate endpoints, least recently served first, locked; rows other workers hold are skipped. The
      //    queue row comes back as locked (its current version), so its runtime is the one to compare-and-set.
      //    The ramp: after an outage the cap climbs from 10 % to 100 % over five minutes (ADR-08). An endpoint at
      //    its ramped cap is passed over and takes no candidate place (else, with a small `limit`, it would hold
      //    up every other endpoint until its in-flight attempts end): the next ones in rotation order are read,
      //    as in the sequential reference. Usually one statement; one more per batch that had such endpoints.
      const cands: Candidate[] = [];
      const runtimes: EndpointRuntime[] = [];
      const free: number[] = [];
      for (let after: [number, string] = [-1, '']; cands.length < limit; ) {
        const want = limit - cands.length;
        const batch = (
          await c.query<Candidate & { last_served_at: number }>(
            `SELECT q.endpoint_id, q.inflight, q.runtime, q.last_served_at, e.max_concurrency, e.ordering, e.url,
                    e.headers, e.tenant_id
               FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
              WHERE q.next_due_at <= $1 AND q.inflight < e.max_concurrency
                AND (q.last_served_at, q.endpoint_id) > ($3::bigint, $4::text)
              ORDER BY q.last_served_at, q.endpoint_id
              LIMIT $2
              FOR UPDATE OF q SKIP LOCKED`,
            [now, want, after[0], after[1]],
          )
        ).rows;
        for (const cd of batch) {
          const rt = parseRuntime(cd.runtime);
          const room = effectiveCap(cd.max_concurrency, rt.circuit.closedAt, now) - cd.inflight;
          if (room <= 0) continue;
          cands.push(cd);
          runtimes.push(rt);
          free.push(room);
        }
        const last = batch[batch.length - 1];
        if (!last || batch.length < want) break;
        after = [last.last_served_at, last.endpoint_id];
      }
      if (cands.length === 0) return [];

      // 2. Their due deliveries, all endpoints in one statement (a LATERAL probe of the partial indexes per
      //    endpoint), cut at `limit` in rotation order. A later statement than 1, so its snapshot includes
      //    everything committed by whoever held the queue rows before (fan-out above all).
      const room = cands.map((cd, i) =>
        cd.ordering === 'endpoint'
          ? cd.inflight > 0
            ? 0
            : Math.min(1, perEndpoint)
          : Math.max(0, Math.min(free[i]!, perEndpoint, limit)),
      );
      const leaseUntil = now + leaseMs;
      type PickedRow = DeliveryRow & { ev_data: string; ev_created_at: number };
      const picked: PickedRow[] = room.some((r) => r > 0)
        ? (
            await c.query<PickedRow>(
              `WITH cand AS (
                 SELECT * FROM unnest($1::text[], $2::int[], $3::boolean[], $6::boolean[])
                        WITH ORDINALITY AS c(endpoint_id, room, head_only, by_resource, rank)
                  WHERE room > 0
               ),
               picked AS (
                 SELECT c.rank, p.* FROM cand c
                  CROSS JOIN LATERAL (
                    (SELECT d.next_attempt_at AS k, ${prefixed('d', DELIVERY_COLUMNS)} FROM deliveries d
                      WHERE NOT c.head_only AND d.endpoint_id = c.endpoint_id AND d.status = 'pending'
                        AND d.lease_owner IS NULL AND d.next_attempt_at <= $4
                        -- Per-resource order: only the oldest pending delivery of its resource may go (so at most
                        -- one per resource is in flight); deliveries without a resource id are unordered.
                        AND (NOT c.by_resource OR d.resource_id IS NULL OR NOT EXISTS (
                              SELECT 1 FROM deliveries x
                               WHERE x.endpoint_id = d.endpoint_id AND x.resource_id = d.resource_id
                                 AND x.status = 'pending' AND x.event_seq < d.event_seq))
                      ORDER BY d.next_attempt_at LIMIT c.room)
                    UNION ALL
                    -- Strict order: only the head (the oldest pending event) may go, once due and unleased.
                    (SELECT h.k, ${prefixed('h', DELIVERY_COLUMNS)} FROM (
                        SELECT d.event_seq AS k, ${prefixed('d', DELIVERY_COLUMNS)}, d.lease_owner AS h_owner
                          FROM deliveries d
                         WHERE c.head_only AND d.endpoint_id = c.endpoint_id AND d.status = 'pending'
                         ORDER BY d.event_seq LIMIT 1) h
                      WHERE h.h_owner IS NULL AND h.next_attempt_at <= $4)
                  ) p
               ),
               cut AS (
                 SELECT * FROM (SELECT *, row_number() OVER (ORDER BY rank, k, id) AS rn FROM picked) x
                  WHERE rn <= $5
               )
               SELECT ${prefixed('cut', DELIVERY_COLUMNS)}, ev.data AS ev_data, ev.created_at AS ev_created_at
                 FROM cut JOIN events ev ON ev.id = cut.event_id
                ORDER BY cut.rn`,
              [
                cands.map((cd) => cd.endpoint_id),
                room,
                cands.map((cd) => cd.ordering === 'endpoint'),
                now,
                limit,
                cands.map((cd) => cd.ordering === 'resource'),
              ],
            )
          ).rows
        : [];

      // 3. The circuit decides per delivery, in rotation order: send, send as the one probe, or skip as
      //    circuit_open. A won probe claim is written back below, under the queue row lock taken in 1 — the
      //    compare-and-set that lets exactly one process probe per interval.
      const index = new Map(cands.map((cd, i) => [cd.endpoint_id, i]));
      const claimed = new Set<string>();
      const modes = picked.map((r): NonNullable<LeasedDelivery['mode']> => {
        const rt = runtimes[index.get(r.endpoint_id)!]!;
        const decision = decideAttempt(rt.circuit, now);
        if (decision.kind === 'skip') return 'circuit_open';
        if (!decision.probe) return 'send';
        rt.circuit = decision.claim;
        claimed.add(r.endpoint_id);
        return 'probe';
      });

      // 4. Mark them leased (by primary key) and update in-flight counts, rotation, due times and claimed runtimes
      //    of the visited endpoints (those reached before `limit` ran out and with room under their cap, as in
      //    the sequential reference) in one statement; its snapshot does not see its own lease marks, so the
      //    recompute excludes the leased ids.
      const count = new Map<string, number>();
      for (const r of picked) count.set(r.endpoint_id, (count.get(r.endpoint_id) ?? 0) + 1);
      const visited: string[] = [];
      const taken: number[] = [];
      const saved: Array<ReturnType<typeof runtimeColumns> | null> = [];
      let total = 0;
      for (const [i, cd] of cands.entries()) {
        if (total >= limit) break;
        if (Math.min(free[i]!, perEndpoint) <= 0) continue;
        const n = count.get(cd.endpoint_id) ?? 0;
        visited.push(cd.endpoint_id);
        taken.push(n);
        saved.push(claimed.has(cd.endpoint_id) ? runtimeColumns(runtimes[i]!) : null);
        total += n;
      }
      if (visited.length > 0) {
        await c.query(
          `WITH leased AS (
             UPDATE deliveries SET lease_owner = $4, lease_until = $5, updated_at = $3
              WHERE id = ANY($6::text[]))
           UPDATE endpoint_queue q
              SET inflight = q.inflight + u.n, last_served_at = $3,
                  next_due_at = ${recomputeDue({ exclude: '$6::text[]' })},
                  runtime = COALESCE(u.runtime, q.runtime),
                  failing_since = CASE WHEN u.runtime IS NULL THEN q.failing_since ELSE u.failing_since END,
                  digest_due_at = CASE WHEN u.runtime IS NULL THEN q.digest_due_at ELSE u.digest_due_at END
             FROM unnest($1::text[], $2::int[], $7::text[], $8::bigint[], $9::bigint[])
                  AS u(endpoint_id, n, runtime, failing_since, digest_due_at)
            WHERE q.endpoint_id = u.endpoint_id`,
          [
            visited,
            taken,
            now,
            owner,
            leaseUntil,
            picked.map((r) => r.id),
            saved.map((x) => x?.json ?? null),
            saved.map((x) => x?.failingSince ?? null),
            saved.map((x) => x?.digestDueAt ?? null),
          ],
        );
      }

      return picked.map((r, i): LeasedDelivery => {
        const cd = cands[index.get(r.endpoint_id)!]!;
        return {
          mode: modes[i]!,
          delivery: { ...toDelivery(r), updatedAt: now },
          endpoint: {
            id: cd.endpoint_id,
            tenantId: cd.tenant_id,
            url: cd.url,
            headers: JSON.parse(cd.headers),
          },
          event: { id: r.event_id, type: r.event_type, createdAt: r.ev_created_at, data: r.ev_data },
          leaseUntil,
        };
      });
    });
  }

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
   * `touched` endpoints, whose deliveries changed) and the notices they call for (`notices`).
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
       noticed AS (${insertNotificationsSql(18, '$4::bigint')})`
              : ''
          }
       UPDATE endpoint_queue q
          SET inflight = GREATEST(q.inflight - u.n, 0),
              next_due_at = CASE WHEN u.touched
                                 THEN ${recomputeDue({ exclude: '$5::text[]', extra: 'u.extra' })}
                                 ELSE q.next_due_at END,
              runtime = COALESCE(u.runtime, q.runtime),
              failing_since = CASE WHEN u.runtime IS NULL THEN q.failing_since ELSE u.failing_since END,
              digest_due_at = CASE WHEN u.runtime IS NULL THEN q.digest_due_at ELSE u.digest_due_at END
         FROM unnest($1::text[], $2::int[], $3::bigint[], $14::boolean[], $15::text[], $16::bigint[],
                     $17::bigint[])
              AS u(endpoint_id, n, extra, touched, runtime, failing_since, digest_due_at)
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
        ...(notices.length > 0 ? notificationValues(notices) : []),
      ],
    );
  };

  const PROJECTION_COLUMNS =
    'id, endpoint_id, status, status_reason, attempts, next_attempt_at, first_attempt_at, last_attempt_at, lease_owner, lease_until';

  /** What completion needs of an endpoint besides its queue row, read after the queue row lock is held. */
  type CompletionRow = ProjectionRow & {
    ep_id: string;
    ep_status: EndpointRecord['status'];
    ep_url: string;
    ep_tenant_id: string;
    notification_email: string | null;
  };

  async function complete(
    completions: AttemptCompletion[],
    now: number,
    ids: { notification(): string } | undefined,
  ) {
    // Sorted by endpoint (lock order); stable, so completions of one delivery keep their input order.
    const sorted = [...completions].sort((a, b) => cmp(a.attempt.endpointId, b.attempt.endpointId));
    const endpointIds = [...new Set(sorted.map((x) => x.attempt.endpointId))];
    const a = (f: (x: AttemptRecord) => unknown) => sorted.map((x) => f(x.attempt));
    const notificationId = () => (ids ? ids.notification() : newId('notification', now, randomBytes(10)));

    await tx(async (c) => {
      // The queue rows, locked, with the runtime records on them (current versions: they are what was locked).
      const locked = new Map(
        (
          await c.query<{ endpoint_id: string; runtime: string | null }>(
            `SELECT endpoint_id, runtime FROM endpoint_queue WHERE endpoint_id = ANY($1::text[])
              ORDER BY endpoint_id FOR UPDATE`,
            [endpointIds],
          )
        ).rows.map((r) => [r.endpoint_id, parseRuntime(r.runtime)]),
      );
      // The attempts (always appended: the log records what happened), and per endpoint its status, URL and
      // tenant channel with the current projection rows of its completed deliveries. A later statement than the
      // lock, so it sees what the previous holder of the queue rows committed (a disable above all).
      const current = await c.query<CompletionRow>(
        `WITH appended AS (
           INSERT INTO attempts (${ATTEMPT_COLUMNS})
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[],
                                $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::int[], $12::text[],
                                $13::text[], $14::text[], $15::text[], $16::text[], $17::bigint[], $18::bigint[],
                                $19::bigint[]))
         SELECT e.id AS ep_id, e.status AS ep_status, e.url AS ep_url, e.tenant_id AS ep_tenant_id,
                t.notification_email, ${prefixed('d', PROJECTION_COLUMNS)}
           FROM endpoints e
           LEFT JOIN tenants t ON t.id = e.tenant_id
           LEFT JOIN deliveries d ON d.id = ANY($2::text[]) AND d.endpoint_id = e.id
          WHERE e.id = ANY($20::text[])`,
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
          a((x) => JSON.stringify(x.request)),
          a((x) => (x.responseHeaders ? JSON.stringify(x.responseHeaders) : null)),
          a((x) => x.responseBody),
          a((x) => x.queueMs),
          a((x) => x.platformMs),
          a((x) => x.consumerMs),
          [...locked.keys()],
        ],
      );
      const endpoints = new Map<
        string,
        { rt: EndpointRuntime; disabled: boolean; url: string; tenantId: string; email: string | null }
      >();
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
        // Unknown, or filed under an endpoint whose queue row this transaction does not hold: not ours to write.
        if (!r || !locked.has(r.endpoint_id) || r.endpoint_id !== x.attempt.endpointId) {
          // (nothing to write)
        } else if (r.lease_owner === x.leaseOwner && r.status === 'pending') {
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
          released.set(r.endpoint_id, (released.get(r.endpoint_id) ?? 0) + 1);
          touched.add(r.endpoint_id);
        } else if (x.next.status === 'delivered') {
          // The lease expired and the delivery went back to the queue (or to another worker) while this attempt
          // was still running; it did arrive, so record that — a second send may still happen (at-least-once).
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
        const applied = applyAttempt(
          ep.rt,
          {
            at: at.finishedAt,
            outcome: at.outcome,
            circuitOpen: at.errorClass === 'circuit_open',
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
        for (const notice of applied.notices) {
          notices.push({
            id: notificationId(),
            tenantId: ep.tenantId,
            endpointId: at.endpointId,
            kind: notice.cause,
            ...noticeText(notice.cause, {
              endpointId: at.endpointId,
              url: ep.url,
              at: at.finishedAt,
              count: notice.digested,
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
    });
  }

  async function expire(now: number) {
    return tx(async (c) => {
      // Lock the queue rows of endpoints with expired leases first (lock order), then release those leases.
      const locked = await c.query<{ endpoint_id: string }>(
        `SELECT q.endpoint_id FROM endpoint_queue q
          WHERE q.endpoint_id IN (SELECT endpoint_id FROM deliveries
                                   WHERE lease_owner IS NOT NULL AND lease_until <= $1)
          ORDER BY q.endpoint_id FOR UPDATE OF q`,
        [now],
      );
      if (locked.rows.length === 0) return 0;
      const mine = new Set(locked.rows.map((r) => r.endpoint_id));
      // deliveries_leased (only in-flight rows); a lease that expired since the lock is left for the next run.
      const expired = (
        await c.query<ProjectionRow>(
          `SELECT ${PROJECTION_COLUMNS} FROM deliveries WHERE lease_owner IS NOT NULL AND lease_until <= $1`,
          [now],
        )
      ).rows.filter((r) => mine.has(r.endpoint_id));
      if (expired.length === 0) return 0;
      const released = new Map<string, number>();
      for (const r of expired) {
        r.lease_owner = null;
        r.lease_until = null;
        released.set(r.endpoint_id, (released.get(r.endpoint_id) ?? 0) + 1);
      }
      await writeProjection(c, expired, [...released.keys()].sort(cmp), { released, now });
      return expired.length;
    });
  }

  return {
    async endpointCreate({ endpoint: e, secret }) {
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
        await c.query('INSERT INTO endpoint_queue (endpoint_id) VALUES ($1)', [e.id]);
        await insertSecret(c, secret);
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

    async endpointUpdate({ id, tenantId, patch, now }) {
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
          // An acknowledged unsubscribe binds: cancel the pending deliveries whose type no longer matches.
          const types = await c.query<{ event_type: string }>(
            `SELECT DISTINCT event_type FROM deliveries WHERE endpoint_id = $1 AND status = 'pending'`,
            [id],
          );
          const gone = types.rows
            .map((r) => r.event_type)
            .filter((t) => !matchesEventType(next.eventTypes, t));
          if (gone.length > 0) {
            await c.query(
              `UPDATE deliveries SET status = 'cancelled', status_reason = 'unsubscribed', next_attempt_at = NULL,
                 updated_at = $3
               WHERE endpoint_id = $1 AND status = 'pending' AND event_type = ANY($2::text[])`,
              [id, gone, now],
            );
            await c.query(
              `UPDATE endpoint_queue q SET next_due_at = ${RECOMPUTE_DUE} WHERE q.endpoint_id = $1`,
              [id],
            );
          }
        }
        return next;
      });
    },

    async endpointDelete({ id, tenantId, now }) {
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
        return true;
      });
    },

    async endpointSetStatus({ id, tenantId, status, reason, now }) {
      return tx(async (c) => {
        await lockTenantGate(c, tenantId);
        const res = await c.query<EndpointRow>(
          `UPDATE endpoints SET status = $3, disabled_reason = $4, updated_at = $5
            WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL
           RETURNING ${ENDPOINT_COLUMNS}`,
          [id, tenantId, status, status === 'disabled' ? reason : null, now],
        );
        if (!res.rows[0]) return null;
        await c.query(`UPDATE endpoint_queue q SET next_due_at = ${RECOMPUTE_DUE} WHERE q.endpoint_id = $1`, [
          id,
        ]);
        return toEndpoint(res.rows[0]);
      });
    },

    async secretRotate({ secret, previousActiveUntil, now }) {
      await tx(async (c) => {
        await lockSecrets(c, secret.endpointId);
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
      });
    },

    async secretListActive({ endpointId, now }) {
      return activeSecrets({ query }, endpointId, now);
    },

    async secretRetire({ id, endpointId, now }) {
      return tx(async (c) => {
        await lockSecrets(c, endpointId);
        const active = await activeSecrets(c, endpointId, now);
        if (!active.some((s) => s.id === id)) return 'not_found' as const;
        if (active.length === 1) return 'last' as const;
        await c.query('UPDATE endpoint_secrets SET active_until = $2 WHERE id = $1', [id, now]);
        return 'retired' as const;
      });
    },

    fanoutRun: ({ now, limit, ids }) => fanoutRun(now, limit, ids),
    deliveryLease: ({ owner, now, limit, perEndpoint, leaseMs }) =>
      lease(owner, now, limit, perEndpoint, leaseMs),
    async deliveryComplete({ completions, now, ids }) {
      if (completions.length > 0) await complete(completions, now, ids);
    },
    deliveryExpireLeases: ({ now }) => expire(now),

    async deliveryGet({ id, tenantId }) {
      const w = where([
        ['id = ?', id],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
      ]);
      const res = await query<DeliveryRow>(
        `SELECT ${DELIVERY_COLUMNS} FROM deliveries WHERE ${w.sql}`,
        w.values,
      );
      return res.rows[0] ? toDelivery(res.rows[0]) : null;
    },

    async deliveryList({ endpointId, tenantId, status, limit, cursor }) {
      const w = where([
        ['endpoint_id = ?', endpointId],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
        ...(status === null ? [] : [['status = ?', status] as [string, unknown]]),
        ...(cursor === null ? [] : [['id < ?', cursor] as [string, unknown]]),
      ]);
      const res = await query<DeliveryRow>(
        `SELECT ${DELIVERY_COLUMNS} FROM deliveries WHERE ${w.sql} ORDER BY id DESC LIMIT ${w.next()}`,
        [...w.values, limit + 1],
      );
      return toPage(res.rows, limit, toDelivery);
    },

    async attemptList({ deliveryId, tenantId }) {
      const w = where([
        ['delivery_id = ?', deliveryId],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
      ]);
      const res = await query<AttemptRow>(
        `SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE ${w.sql} ORDER BY attempt_no, id`,
        w.values,
      );
      return res.rows.map(toAttempt);
    },

    async attemptGet({ id, tenantId }) {
      const w = where([
        ['id = ?', id],
        ...(tenantId === null ? [] : [['tenant_id = ?', tenantId] as [string, unknown]]),
      ]);
      const res = await query<AttemptRow>(`SELECT ${ATTEMPT_COLUMNS} FROM attempts WHERE ${w.sql}`, w.values);
      return res.rows[0] ? toAttempt(res.rows[0]) : null;
    },
  };
}
