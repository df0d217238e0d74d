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
 *
 * READ COMMITTED pitfall avoided throughout: a statement's snapshot is taken before the row locks it acquires, so
 * anything that must see work committed by the previous holder of a queue row lock (the due-time recompute above
 * all) runs in a later statement than the one that took the lock.
 *
 * Every query is index-driven: leasing and fan-out cost depends on `limit`, `perEndpoint` and the endpoints
 * involved, never on the size of the backlog.
 */
import type { QueryResult, QueryResultRow } from 'pg';
import { matchesEventType } from '../../domain/event-types.ts';
import type {
  AttemptCompletion,
  AttemptRecord,
  DeliveryIdFactory,
  DeliveryRecord,
  DeliveryStatus,
  DeliveryStore,
  EndpointRecord,
  LeasedDelivery,
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

interface EndpointRow {
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

interface DeliveryRow {
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

const ENDPOINT_COLUMNS =
  'id, tenant_id, url, description, event_types, ordering, max_concurrency, headers, status, disabled_reason, created_at, updated_at';
const SECRET_COLUMNS = 'id, endpoint_id, tenant_id, sealed, active_from, active_until, created_at';
const DELIVERY_COLUMNS =
  'id, tenant_id, endpoint_id, event_id, event_type, resource_id, webhook_id, status, attempts, next_attempt_at, first_attempt_at, last_attempt_at, status_reason, replayed_from, created_at, updated_at';
const ATTEMPT_COLUMNS =
  'id, delivery_id, endpoint_id, tenant_id, attempt_no, url, due_at, started_at, finished_at, outcome, status_code, error_class, error_message, request, response_headers, response_body, queue_ms, platform_ms, consumer_ms';
const prefixed = (alias: string, cols: string) =>
  cols
    .split(', ')
    .map((c) => `${alias}.${c}`)
    .join(', ');

const toEndpoint = (r: EndpointRow): EndpointRecord => ({
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

const toDelivery = (r: DeliveryRow): DeliveryRecord => ({
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
function toPage<R, T extends { id: string }>(rows: R[], limit: number, map: (r: R) => T): Page<T> {
  const data = rows.slice(0, limit).map(map);
  return { data, nextCursor: rows.length > limit && data.length > 0 ? data[data.length - 1]!.id : null };
}

/** Plain code-unit order (= COLLATE "C"), the same in every process: the global lock order for queue rows. */
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** WHERE clauses built per call, so every shape gets a plan on the matching index. */
function where(base: Array<[string, unknown]>) {
  const values: unknown[] = [];
  const parts = base.map(([sql, v]) => {
    values.push(v);
    return sql.replace('?', `$${values.length}`);
  });
  return { sql: parts.join(' AND '), values, next: () => `$${values.length + 1}` };
}

/**
 * The due time of queue row `q`: the earliest next_attempt_at among its unleased pending deliveries when the
 * endpoint is enabled and not deleted, else NULL. `min` over the partial index deliveries_ready is one index probe.
 */
const RECOMPUTE_DUE = `CASE WHEN EXISTS (SELECT 1 FROM endpoints e
                                  WHERE e.id = q.endpoint_id AND e.status = 'enabled' AND e.deleted_at IS NULL)
       THEN (SELECT min(d.next_attempt_at) FROM deliveries d
              WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending' AND d.lease_owner IS NULL)
     END`;

/** Locks queue rows in endpoint_id order (never in plan order, which differs between statements). */
const LOCK_QUEUE_ROWS = `SELECT endpoint_id FROM endpoint_queue WHERE endpoint_id = ANY($1::text[])
                          ORDER BY endpoint_id FOR UPDATE`;

type Db = { query: PostgresDeliveryStoreDeps['query'] };

/**
 * The per-tenant fan-out gate (see the header): shared for fan-out, exclusive for writers that fan-out must not
 * race (endpoint PATCH/DELETE/status, tenant deletion). Transaction-scoped; keys are namespaced hashes.
 */
export const lockTenantGate = (db: Db, tenantId: string) =>
  db.query(`SELECT pg_advisory_xact_lock(hashtextextended('hookrail.tenant:' || $1::text, 0))`, [tenantId]);
const lockTenantGatesShared = (db: Db, sortedTenantIds: string[]) =>
  db.query(
    `SELECT pg_advisory_xact_lock_shared(hashtextextended('hookrail.tenant:' || t, 0))
       FROM unnest($1::text[]) WITH ORDINALITY AS u(t, ord) ORDER BY ord`,
    [sortedTenantIds],
  );

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
  }

  async function lease(owner: string, now: number, limit: number, perEndpoint: number, leaseMs: number) {
    if (limit <= 0) return [];
    return tx(async (c) => {
      // 1. Candidate endpoints, least recently served first, locked; rows other workers hold are skipped.
      const cands = (
        await c.query<Candidate>(
          `SELECT q.endpoint_id, q.inflight, e.max_concurrency, e.ordering, e.url, e.headers, e.tenant_id
             FROM endpoint_queue q JOIN endpoints e ON e.id = q.endpoint_id
            WHERE q.next_due_at <= $1 AND q.inflight < e.max_concurrency
            ORDER BY q.last_served_at, q.endpoint_id
            LIMIT $2
            FOR UPDATE OF q SKIP LOCKED`,
          [now, limit],
        )
      ).rows;
      if (cands.length === 0) return [];

      // 2. Their due deliveries, all endpoints in one statement (a LATERAL probe of the partial indexes per
      //    endpoint), cut at `limit` in rotation order, and marked leased. A later statement than 1, so it sees
      //    everything committed by whoever held the queue rows before.
      const room = cands.map((cd) =>
        cd.ordering === 'endpoint'
          ? cd.inflight > 0
            ? 0
            : Math.min(1, perEndpoint)
          : Math.max(0, Math.min(cd.max_concurrency - cd.inflight, perEndpoint, limit)),
      );
      const leaseUntil = now + leaseMs;
      type LeasedRow = DeliveryRow & { rn: number; ev_data: string; ev_created_at: number };
      const leasedRows: LeasedRow[] = room.some((r) => r > 0)
        ? (
            await c.query<LeasedRow>(
              `WITH cand AS (
                 SELECT * FROM unnest($1::text[], $2::int[], $3::boolean[])
                        WITH ORDINALITY AS c(endpoint_id, room, head_only, rank)
                  WHERE room > 0
               ),
               picked AS (
                 SELECT p.id, c.rank, p.k
                   FROM cand c
                  CROSS JOIN LATERAL (
                    (SELECT d.id, d.next_attempt_at AS k FROM deliveries d
                      WHERE NOT c.head_only AND d.endpoint_id = c.endpoint_id AND d.status = 'pending'
                        AND d.lease_owner IS NULL AND d.next_attempt_at <= $4
                      ORDER BY d.next_attempt_at LIMIT c.room)
                    UNION ALL
                    -- Strict order: only the head (the oldest pending event) may go, once due and unleased.
                    (SELECT h.id, h.event_seq FROM (
                        SELECT d.id, d.event_seq, d.lease_owner, d.next_attempt_at FROM deliveries d
                         WHERE c.head_only AND d.endpoint_id = c.endpoint_id AND d.status = 'pending'
                         ORDER BY d.event_seq LIMIT 1) h
                      WHERE h.lease_owner IS NULL AND h.next_attempt_at <= $4)
                  ) p
               ),
               cut AS (
                 SELECT id, rn FROM (SELECT id, row_number() OVER (ORDER BY rank, k, id) AS rn FROM picked) x
                  WHERE rn <= $5
               )
               UPDATE deliveries d SET lease_owner = $6, lease_until = $7, updated_at = $4
                 FROM cut, events ev
                WHERE d.id = cut.id AND ev.id = d.event_id AND d.status = 'pending' AND d.lease_owner IS NULL
               RETURNING cut.rn, ${prefixed('d', DELIVERY_COLUMNS)}, ev.data AS ev_data,
                         ev.created_at AS ev_created_at`,
              [
                cands.map((cd) => cd.endpoint_id),
                room,
                cands.map((cd) => cd.ordering === 'endpoint'),
                now,
                limit,
                owner,
                leaseUntil,
              ],
            )
          ).rows.sort((a, b) => a.rn - b.rn)
        : [];

      // 3. In-flight counts, rotation and due times of the visited endpoints (those reached before `limit` ran
      //    out, as in the sequential reference), in one statement that sees the leases of statement 2.
      const count = new Map<string, number>();
      for (const r of leasedRows) count.set(r.endpoint_id, (count.get(r.endpoint_id) ?? 0) + 1);
      const visited: string[] = [];
      const taken: number[] = [];
      let total = 0;
      for (const cd of cands) {
        if (total >= limit) break;
        const n = count.get(cd.endpoint_id) ?? 0;
        visited.push(cd.endpoint_id);
        taken.push(n);
        total += n;
      }
      await c.query(
        `UPDATE endpoint_queue q
            SET inflight = q.inflight + u.n, last_served_at = $3, next_due_at = ${RECOMPUTE_DUE}
           FROM unnest($1::text[], $2::int[]) AS u(endpoint_id, n)
          WHERE q.endpoint_id = u.endpoint_id`,
        [visited, taken, now],
      );

      const byId = new Map(cands.map((cd) => [cd.endpoint_id, cd]));
      return leasedRows.map((r): LeasedDelivery => {
        const cd = byId.get(r.endpoint_id)!;
        return {
          delivery: toDelivery(r),
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

  async function complete(completions: AttemptCompletion[], now: number) {
    // Sorted by endpoint (lock order); stable, so completions of one delivery keep their input order.
    const sorted = [...completions].sort((a, b) => cmp(a.attempt.endpointId, b.attempt.endpointId));
    const endpointIds = [...new Set(sorted.map((x) => x.attempt.endpointId))];
    // The first completion per delivery goes through the set-based update; any repeat sees its result, as it
    // would sequentially (the lease is gone, so only the 'delivered' fallback can apply).
    const first: AttemptCompletion[] = [];
    const repeats: AttemptCompletion[] = [];
    const seen = new Set<string>();
    for (const x of sorted) {
      if (seen.has(x.attempt.deliveryId)) repeats.push(x);
      else {
        seen.add(x.attempt.deliveryId);
        first.push(x);
      }
    }
    const col = <T>(xs: AttemptCompletion[], f: (x: AttemptCompletion) => T) => xs.map(f);

    await tx(async (c) => {
      await c.query(LOCK_QUEUE_ROWS, [endpointIds]);
      const a = (f: (x: AttemptRecord) => unknown) => col(sorted, (x) => f(x.attempt));
      await c.query(
        `INSERT INTO attempts (${ATTEMPT_COLUMNS})
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[],
                              $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::int[], $12::text[],
                              $13::text[], $14::text[], $15::text[], $16::text[], $17::bigint[], $18::bigint[],
                              $19::bigint[])`,
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
        ],
      );

      // The projection, only where this worker still holds the lease.
      const updated = await c.query<{ id: string; endpoint_id: string }>(
        `UPDATE deliveries d
            SET status = u.status, status_reason = u.reason, next_attempt_at = u.next_at,
                attempts = d.attempts + 1, first_attempt_at = COALESCE(d.first_attempt_at, u.started_at),
                last_attempt_at = u.started_at, lease_owner = NULL, lease_until = NULL, updated_at = $7
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
                AS u(id, owner, status, reason, next_at, started_at)
          WHERE d.id = u.id AND d.lease_owner = u.owner AND d.status = 'pending'
         RETURNING d.id, d.endpoint_id`,
        [
          col(first, (x) => x.attempt.deliveryId),
          col(first, (x) => x.leaseOwner),
          col(first, (x) => x.next.status),
          col(first, (x) => (x.next.status === 'dead' ? x.next.reason : null)),
          col(first, (x) => (x.next.status === 'pending' ? x.next.nextAttemptAt : null)),
          col(first, (x) => x.attempt.startedAt),
          now,
        ],
      );
      const released = new Map<string, number>();
      const matched = new Set<string>();
      for (const r of updated.rows) {
        matched.add(r.id);
        released.set(r.endpoint_id, (released.get(r.endpoint_id) ?? 0) + 1);
      }
      // The lease expired and the delivery went back to the queue (or to another worker) while this attempt was
      // still running; it did arrive, so record that — a second send may still happen (at-least-once).
      const fallback = [...first.filter((x) => !matched.has(x.attempt.deliveryId)), ...repeats].filter(
        (x) => x.next.status === 'delivered',
      );
      if (fallback.length > 0) {
        await c.query(
          `UPDATE deliveries SET status = 'delivered', status_reason = NULL, next_attempt_at = NULL, updated_at = $2
            WHERE id = ANY($1::text[]) AND status = 'pending' AND lease_owner IS NULL`,
          [fallback.map((x) => x.attempt.deliveryId), now],
        );
      }
      const touched = new Set([...released.keys(), ...fallback.map((x) => x.attempt.endpointId)]);
      if (touched.size > 0) {
        const ids = [...touched].sort(cmp);
        await c.query(
          `UPDATE endpoint_queue q
              SET inflight = GREATEST(q.inflight - u.n, 0), next_due_at = ${RECOMPUTE_DUE}
             FROM unnest($1::text[], $2::int[]) AS u(endpoint_id, n)
            WHERE q.endpoint_id = u.endpoint_id`,
          [ids, ids.map((id) => released.get(id) ?? 0)],
        );
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
      const released = await c.query<{ endpoint_id: string; n: number }>(
        `WITH x AS (
           UPDATE deliveries SET lease_owner = NULL, lease_until = NULL, updated_at = $1
            WHERE lease_owner IS NOT NULL AND lease_until <= $1 AND endpoint_id = ANY($2::text[])
           RETURNING endpoint_id)
         SELECT endpoint_id, count(*) AS n FROM x GROUP BY endpoint_id`,
        [now, locked.rows.map((r) => r.endpoint_id)],
      );
      if (released.rows.length === 0) return 0;
      await c.query(
        `UPDATE endpoint_queue q
            SET inflight = GREATEST(q.inflight - u.n, 0), next_due_at = ${RECOMPUTE_DUE}
           FROM unnest($1::text[], $2::int[]) AS u(endpoint_id, n)
          WHERE q.endpoint_id = u.endpoint_id`,
        [released.rows.map((r) => r.endpoint_id), released.rows.map((r) => r.n)],
      );
      return released.rows.reduce((s, r) => s + r.n, 0);
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
    async deliveryComplete({ completions, now }) {
      if (completions.length > 0) await complete(completions, now);
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
