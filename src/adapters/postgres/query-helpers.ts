/**
 * Query building blocks shared by the PostgreSQL delivery and operations stores: the connection they run on, the
 * global lock order, WHERE clauses, the queue due-time recompute and the per-tenant fan-out gate.
 */
import type { QueryResult, QueryResultRow } from 'pg';
import type { TxRunner } from './migrate.ts';

export interface PostgresDeliveryStoreDeps {
  /** One statement on the pool, errors mapped (StoreUnavailableError). */
  query: <R extends QueryResultRow>(text: string, values?: unknown[]) => Promise<QueryResult<R>>;
  /** BEGIN/COMMIT on one client, errors mapped, deadlocks and serialization failures retried. */
  tx: TxRunner;
}

export type Db = { query: PostgresDeliveryStoreDeps['query'] };

/** Plain code-unit order (= COLLATE "C"), the same in every process: the global lock order for queue rows. */
export const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * JSON texts (event data, an attempt's request and response headers) as one text parameter: joined by U+001E and
 * split in SQL by `jsonTexts('$n')` into a text[]. JSON text never holds a raw control character (JSON escapes
 * them as \u00XX), so the separator cannot occur inside one, and no JSON text is empty, so '' stands for NULL.
 * Sent as a text[] instead, every element was escaped (each quote) by pg and unescaped by PostgreSQL's array
 * parser: per kilobyte of JSON ~6 µs in Hookrail and ~3 µs more in the backend than splitting (measured alone).
 */
export function joinJsonTexts(texts: ReadonlyArray<string | null>): string {
  for (const t of texts)
    if (t === '' || t?.includes('\x1e')) throw new Error('not JSON text: empty or holds U+001E');
  return texts.map((t) => t ?? '').join('\x1e');
}
export const jsonTexts = (param: string) => `string_to_array(${param}::text, E'\\x1e', '')`;

/**
 * The settings of a transaction made of key probes only (the lease, the completion, the expiry sweep: TxRunner's
 * `probesOnly`, sent in the same round trip as BEGIN). Its statements get plans made once per connection (generic
 * plans) instead of on every call: per-call planning with the id arrays inlined as constants was the costliest part
 * of binding the delivery plane's largest statements (1-2 ms per call for the lease's pick). And every plan that
 * reads a table whole is priced out — sequential scans, and hash and merge joins (which read a whole side) — so
 * each statement reaches its rows through index probes whatever the tables' sizes and statistics: a plan made while
 * a table is small must not scan it once it is large, and per call, on a young table without statistics, the
 * planner took a scan of `deliveries` for cheaper than a few hundred probes (bench:delivery: 39 of 154 lease marks
 * and 48 of 136 completion writes). Pricing out forbids nothing; plan-shapes.test.ts checks every statement of
 * these transactions on empty, unanalysed tables, where a scan looks cheapest.
 *
 * One round trip, not one per setting change: in bulk the delivery thread's event loop is busy, and each round trip
 * of a lease waited ~3 ms for it while holding the leased endpoints' queue rows.
 */
export const PROBES_ONLY = [
  'SET LOCAL plan_cache_mode = force_generic_plan',
  'SET LOCAL enable_seqscan = off',
  'SET LOCAL enable_hashjoin = off',
  'SET LOCAL enable_mergejoin = off',
].join('; ');

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
 * `exclude` names a text[] of delivery ids whose row is being changed, `extra` a bigint due time to fold in. The
 * exclusion is a hashed subplan, built once per statement: `<> ALL(array)` compares each row visited with every
 * element (a lease of 300 visits ~8 rows per endpoint before its first unleased one, each against all 300 ids).
 */
export function recomputeDue(o: { exclude?: string; extra?: string } = {}): string {
  const visible = `(SELECT d.next_attempt_at FROM deliveries d
                     WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending' AND d.lease_owner IS NULL
                       ${o.exclude ? `AND d.id NOT IN (SELECT unnest(${o.exclude}))` : ''}
                     ORDER BY d.next_attempt_at LIMIT 1)`;
  return `CASE WHEN EXISTS (SELECT 1 FROM endpoints e
                             WHERE e.id = q.endpoint_id AND e.status = 'enabled' AND e.deleted_at IS NULL)
          THEN ${o.extra ? `LEAST(${visible}, ${o.extra})` : visible}
        END`;
}
export const RECOMPUTE_DUE = recomputeDue();

/** Locks queue rows in endpoint_id order (never in plan order, which differs between statements). */
export const LOCK_QUEUE_ROWS = `SELECT endpoint_id FROM endpoint_queue WHERE endpoint_id = ANY($1::text[])
                          ORDER BY endpoint_id FOR UPDATE`;

/**
 * The per-tenant fan-out gate (see the header of delivery-store.ts): shared for fan-out, exclusive for writers
 * that fan-out must not race (endpoint PATCH/DELETE/status, tenant deletion). Transaction-scoped; keys are
 * namespaced hashes.
 */
export const lockTenantGate = (db: Db, tenantId: string) =>
  db.query(`SELECT pg_advisory_xact_lock(hashtextextended('hookrail.tenant:' || $1::text, 0))`, [tenantId]);
/** The fan-out gates of several tenants, exclusive, in the given (sorted) order: see lockTenantGate. */
export const lockTenantGates = (db: Db, sortedTenantIds: string[]) =>
  db.query(
    `SELECT pg_advisory_xact_lock(hashtextextended('hookrail.tenant:' || t, 0))
       FROM unnest($1::text[]) WITH ORDINALITY AS u(t, ord) ORDER BY ord`,
    [sortedTenantIds],
  );

export const lockTenantGatesShared = (db: Db, sortedTenantIds: string[]) =>
  db.query(
    `SELECT pg_advisory_xact_lock_shared(hashtextextended('hookrail.tenant:' || t, 0))
       FROM unnest($1::text[]) WITH ORDINALITY AS u(t, ord) ORDER BY ord`,
    [sortedTenantIds],
  );
