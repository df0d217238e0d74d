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
    if (t === '' || (t !== null && t.includes('\x1e')))
      throw new Error('not JSON text: empty or holds U+001E');
  return texts.map((t) => t ?? '').join('\x1e');
}
export const jsonTexts = (param: string) => `string_to_array(${param}::text, E'\\x1e', '')`;

/**
 * Runs `fn`'s statements, inside the caller's transaction, with plans made once per connection (generic plans)
 * instead of on every call. Per-call planning with the id arrays inlined as constants was the costliest part of
 * binding the delivery plane's largest statements (1-2 ms per call for the lease's pick). Only for statements in
 * which every table is reached through an index probe whatever the tables' sizes (fenced LATERAL probes, index
 * order matching ORDER BY … LIMIT): a generic plan made while a table is small must not scan it once it is large.
 * plan-shapes.test.ts checks each such statement's generic plan on empty, unanalysed tables.
 */
export async function withPlansOncePerConnection<T>(
  c: Db,
  fn: () => Promise<T>,
  o: { thenKeyedWrites?: boolean } = {},
): Promise<T> {
  await c.query('SET LOCAL plan_cache_mode = force_generic_plan');
  const result = await fn();
  // One round trip for both settings: the lease and the completion end with their keyed writes.
  await c.query(`SET LOCAL plan_cache_mode TO DEFAULT${o.thenKeyedWrites ? `; ${KEYED_WRITES}` : ''}`);
  return result;
}

/**
 * For the rest of the transaction, writes keyed by primary key (`id = ANY($n)`, or `FROM unnest(…)` joined on the
 * key) reach their rows by index probes whatever the statistics. They are planned per call, with the keys as
 * constants, and on a young table without statistics (autovacuum off, or not yet run) the planner prices a
 * sequential scan below a few hundred probes: in bench:delivery on PostgreSQL, `auto_explain` caught 39 of the
 * lease's marks and 48 of the completion's projection writes scanning all of `deliveries` (and the recompute's
 * endpoint check hashing all of `endpoints`), each about twice as slow as the probes and growing with the table.
 * Only for transactions that end with such writes: `enable_seqscan = off` prices every scan out, it forbids none.
 */
export const KEYED_WRITES = 'SET LOCAL enable_seqscan = off';

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
export const lockTenantGatesShared = (db: Db, sortedTenantIds: string[]) =>
  db.query(
    `SELECT pg_advisory_xact_lock_shared(hashtextextended('hookrail.tenant:' || t, 0))
       FROM unnest($1::text[]) WITH ORDINALITY AS u(t, ord) ORDER BY ord`,
    [sortedTenantIds],
  );
