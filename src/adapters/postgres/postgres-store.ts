/**
 * The PostgreSQL Store: the scale-out adapter that any number of Hookrail processes on any number of machines
 * share. Every method is one statement or one short transaction on a pg Pool; concurrency control is left to
 * PostgreSQL (unique constraints, ON CONFLICT waits, row locks), never to in-process state, so correctness does
 * not depend on how many processes run.
 *
 * Availability: any error that means "the database cannot be reached" is rethrown as StoreUnavailableError (the
 * API answers 503 with Retry-After). Broken clients are destroyed instead of returned to the pool, and the pool
 * opens new connections on demand, so the store recovers by itself once the database is back.
 */

import type { PoolClient, QueryConfig, QueryResultRow } from 'pg';
import pg from 'pg';
import type { OperationsStore } from '../../ports/operations-store.ts';
import {
  type ApiKeyKind,
  type ApiKeyRecord,
  type EventInsertOutcome,
  type EventRecord,
  type Page,
  type Store,
  StoreUnavailableError,
  type TenantRecord,
} from '../../ports/store.ts';
import { API_KEY_COLUMNS, createPostgresTenantKeys, insertApiKey } from './api-keys.ts';
import { writeAudit } from './audit.ts';
import { createPostgresDeliveryStore, lockTenantGate } from './delivery-store.ts';
import { BULK_DEADLINE_TX } from './endpoints-store.ts';
import { EVENT_COLUMNS, type EventRow, insertEventBatch, toEvent } from './event-batch.ts';
import { assertSchemaName, runMigrations, type TxClient } from './migrate.ts';
import { createPostgresOperationsStore } from './operations-store.ts';
import { isRetryableTransactionError, isUnavailableError } from './pg-errors.ts';
import { preparing } from './prepared-statements.ts';
import { PROBES_ONLY } from './query-helpers.ts';
import { toPage } from './rows.ts';
import { createPostgresStepUpState } from './step-up-state.ts';

const BEGIN_PROBES_ONLY = `BEGIN; ${PROBES_ONLY}`;

/** Sent with BEGIN, so that a statement_timeout the operator set for the role or the URL cannot cut them short. */
const beginWithDeadline = (ms: number) => `BEGIN; SET LOCAL statement_timeout = ${Math.trunc(ms)}`;

/**
 * The client as preparing() sees it (it calls query alone), with every statement given `ms` as its answer deadline:
 * pg reads `query_timeout` from the query's config before the pool's (pg/lib/client.js), though @types/pg's
 * QueryConfig does not declare it.
 */
function withDeadline(client: PoolClient, ms: number): PoolClient {
  const query = (q: string | QueryConfig, values?: unknown[]) => {
    const config: QueryConfig & { query_timeout: number } =
      typeof q === 'string' ? { text: q, values, query_timeout: ms } : { ...q, query_timeout: ms };
    return client.query(config);
  };
  return { query } as unknown as PoolClient;
}

export interface PostgresStoreOptions {
  connectionString: string;
  /** Schema for every table (created by migrate()); default: the connection's default search_path. */
  schema?: string;
  poolSize?: number;
  /** Per-statement answer deadline (default 3 s); the backlog-wide transactions have BULK_DEADLINE_MS, migrations MIGRATION_TX. */
  queryTimeoutMs?: number;
  /** pino-like; only `warn` is used, for errors of idle connections that no caller is waiting on. */
  logger?: unknown;
}

/**
 * BIGINT (int8, OID 20) comes back from pg as a string by default, to avoid silent precision loss. Every BIGINT
 * here is epoch milliseconds, a count or a bigserial, all far below 2^53, so parse them as numbers — per pool
 * (the `types` option), not with a process-wide `pg.types.setTypeParser` that would change other pg users.
 */
const INT8_OID = 20;
const parseInt8 = (v: string) => Number(v);
const poolTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? parseInt8
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** A transaction that deadlocked or failed serialization changed nothing; run it again this many times in all. */
const TX_ATTEMPTS = 3;

interface TenantRow {
  id: string;
  name: string;
  totp_seed_sealed: string;
  created_at: number;
  deleted_at: number | null;
}

interface ApiKeyRow {
  id: string;
  kind: ApiKeyKind;
  tenant_id: string | null;
  name: string | null;
  hash: string;
  prefix: string;
  created_at: number;
  revoked_at: number | null;
}

const toTenant = (r: TenantRow): TenantRecord => ({
  id: r.id,
  name: r.name,
  totpSeedSealed: r.totp_seed_sealed,
  createdAt: r.created_at,
  deletedAt: r.deleted_at,
});

const toApiKey = (r: ApiKeyRow): ApiKeyRecord => ({
  id: r.id,
  kind: r.kind,
  tenantId: r.tenant_id,
  name: r.name,
  hash: r.hash,
  prefix: r.prefix,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
});

function warn(logger: unknown, obj: Record<string, unknown>, msg: string): void {
  const fn = (logger as { warn?: unknown } | null | undefined)?.warn;
  if (typeof fn === 'function') fn.call(logger, obj, msg);
}

/** Hookrail's server settings: plans per call (see prepared-statements.ts) and, with a schema, the search_path. */
const serverOptions = (schema: string | null) =>
  `-c plan_cache_mode=force_custom_plan${schema !== null ? ` -c search_path=${schema}` : ''}`;

/**
 * The connection string with Hookrail's server settings appended to libpq's `options` parameter, after any the
 * operator gave. pg lets a URL's `options` replace the pool's `options` setting as a whole, so settings passed
 * beside the URL were lost whenever it had options of its own (`?options=-c search_path=…`). A string that is not
 * a URL (a bare socket directory) is returned as it is; the pool's `options` setting then applies.
 */
export function withServerOptions(connectionString: string, schema: string | null): string {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return connectionString;
  }
  const given = url.searchParams.get('options');
  url.searchParams.set('options', given ? `${given} ${serverOptions(schema)}` : serverOptions(schema));
  return url.toString();
}

export function createPostgresStore(opts: PostgresStoreOptions): Store & OperationsStore {
  const schema = opts.schema ?? null;
  if (schema !== null) assertSchemaName(schema);

  const pool = new pg.Pool({
    connectionString: withServerOptions(opts.connectionString, schema),
    max: opts.poolSize ?? 10,
    // Fail fast while the database is down: callers get StoreUnavailableError (503) in ~2 s, not a hung request.
    connectionTimeoutMillis: 2_000,
    // A statement that gets no answer within this time fails as "unavailable" (503 for intake) instead of waiting
    // out a network partition; every statement Hookrail runs takes milliseconds, except those of the backlog-wide
    // transactions, which get BULK_DEADLINE_MS per statement instead, and migrations (MIGRATION_TX).
    query_timeout: opts.queryTimeoutMs ?? 3_000,
    idleTimeoutMillis: 30_000,
    // Detect half-open connections (database host gone without a FIN) instead of waiting for the kernel default.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    application_name: 'hookrail',
    types: poolTypes,
    // A schema that does not exist yet is fine here: migrate() creates it, and PostgreSQL re-resolves the path.
    options: serverOptions(schema),
  });
  // Idle clients get errors when the server restarts or an admin terminates them. pg-pool already drops such a
  // client; without a listener the 'error' event would be thrown and crash the process.
  // The message and code only: pg-pool hangs the client on the error, and with it the connection's password.
  pool.on('error', (err) =>
    warn(
      opts.logger,
      { err: { message: err.message, code: (err as { code?: unknown }).code } },
      'postgres idle client error; connection discarded',
    ),
  );

  let closed: Promise<void> | null = null;

  const unavailableOr = (err: unknown): unknown =>
    isUnavailableError(err) ? new StoreUnavailableError(err) : err;

  /**
   * One statement on a pooled connection. A connection that failed as "unavailable" (including a query that hit
   * the read timeout during a network partition) is destroyed rather than returned: after a partition heals, a
   * connection whose peer state was lost would otherwise hang every later query sent on it.
   */
  function query<R extends QueryResultRow>(text: string, values?: unknown[]) {
    return onConnection((client) => client.query<R>(text, values));
  }

  /** fn's statements on one pooled connection, each committing on its own (no transaction); as for query. */
  async function onConnection<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw unavailableOr(err);
    }
    let destroy = false;
    const onError = () => {
      destroy = true;
    };
    client.on('error', onError);
    try {
      return await fn(client);
    } catch (err) {
      if (isUnavailableError(err)) destroy = true;
      throw unavailableOr(err);
    } finally {
      client.removeListener('error', onError);
      client.release(destroy ? true : undefined);
    }
  }

  /**
   * Runs fn inside BEGIN/COMMIT on one client. On failure it rolls back; a client whose connection broke (or
   * whose rollback failed) is destroyed, never returned to the pool half-way through a transaction.
   * `deadlineMs`: every statement of the transaction, COMMIT included, has this long to answer (TxRunner).
   */
  async function tx<T>(
    fn: (client: TxClient) => Promise<T>,
    o?: { probesOnly?: boolean; deadlineMs?: number },
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let client: PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw unavailableOr(err);
      }
      // pg-pool removes its own error listener while a client is checked out; a socket error between two of our
      // statements would otherwise be an unhandled 'error' event. The failing query reports it to us anyway.
      let broken: unknown = null;
      const onError = (err: unknown) => {
        broken = err;
      };
      client.on('error', onError);
      let destroy = false;
      const deadline = o?.deadlineMs;
      const c = deadline === undefined ? client : withDeadline(client, deadline);
      try {
        await c.query(
          deadline !== undefined ? beginWithDeadline(deadline) : o?.probesOnly ? BEGIN_PROBES_ONLY : 'BEGIN',
        );
        const result = await fn(preparing(c));
        await c.query('COMMIT');
        return result;
      } catch (err) {
        if (broken !== null || isUnavailableError(err)) destroy = true;
        else await client.query('ROLLBACK').catch(() => (destroy = true));
        if (!destroy && attempt < TX_ATTEMPTS && isRetryableTransactionError(err)) continue;
        // A COMMIT that failed on a lost connection has an unknown outcome; callers that retry rely on
        // idempotency keys, exactly as for a lost HTTP response.
        throw unavailableOr(err);
      } finally {
        client.removeListener('error', onError);
        client.release(destroy ? true : undefined);
      }
    }
  }

  const store: Store & OperationsStore = {
    ...createPostgresDeliveryStore({ query, tx }),
    ...createPostgresOperationsStore({ query, tx }),
    ...createPostgresTenantKeys({ tx }),
    ...createPostgresStepUpState({ query }),
    capabilities: { multiProcess: true, sharedTurn: false, kind: 'postgres' },

    async migrate() {
      try {
        await runMigrations(tx, schema);
      } catch (err) {
        throw unavailableOr(err);
      }
    },

    async ping() {
      try {
        await pool.query('SELECT 1');
      } catch (err) {
        // ping's contract is to reject with StoreUnavailableError, whatever went wrong.
        throw err instanceof StoreUnavailableError ? err : new StoreUnavailableError(err);
      }
    },

    close() {
      closed ??= pool.end();
      return closed;
    },

    async tenantCreate({ tenant, tenantKey }) {
      await tx(async (c) => {
        await c.query(
          `INSERT INTO tenants (id, name, totp_seed_sealed, created_at, deleted_at) VALUES ($1, $2, $3, $4, $5)`,
          [tenant.id, tenant.name, tenant.totpSeedSealed, tenant.createdAt, tenant.deletedAt],
        );
        await insertApiKey(c, tenantKey);
      });
    },

    async tenantGet({ id }) {
      const res = await query<TenantRow>('SELECT * FROM tenants WHERE id = $1 AND deleted_at IS NULL', [id]);
      return res.rows[0] ? toTenant(res.rows[0]) : null;
    },

    async tenantList({ limit, cursor }) {
      // Live tenants only, like tenantGet: a deleted tenant is gone from the operator's point of view.
      const res = await query<TenantRow>(
        `SELECT * FROM tenants
          WHERE deleted_at IS NULL AND ($1::text IS NULL OR id < $1)
          ORDER BY id DESC LIMIT $2`,
        [cursor, limit + 1],
      );
      return toPage(res.rows, limit, toTenant);
    },

    async tenantDelete({ id, now, audit }) {
      return tx(async (c) => {
        // The fan-out gate first (fair against a stream of fan-outs), then the delivery plane's lock order.
        await lockTenantGate(c, id);
        const res = await c.query('UPDATE tenants SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL', [
          id,
          now,
        ]);
        if (res.rowCount !== 1) return false;
        // Same transaction: once deletion is acknowledged, no key of the tenant authenticates any more, and no
        // new attempt starts (ADR-16). The gate and the tenant row lock serialise with fan-out (which holds both
        // shared); then endpoints, their queue rows (sorted) and deliveries.
        await c.query('UPDATE api_keys SET revoked_at = $2 WHERE tenant_id = $1 AND revoked_at IS NULL', [
          id,
          now,
        ]);
        await c.query('UPDATE endpoints SET deleted_at = $2 WHERE tenant_id = $1 AND deleted_at IS NULL', [
          id,
          now,
        ]);
        await c.query(
          `WITH l AS (SELECT q.endpoint_id FROM endpoint_queue q
                       WHERE q.endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.tenant_id = $1)
                       ORDER BY q.endpoint_id FOR UPDATE OF q)
           UPDATE endpoint_queue q SET next_due_at = NULL FROM l WHERE q.endpoint_id = l.endpoint_id`,
          [id],
        );
        // Through the tenant's endpoints (index deliveries_head), not a scan of every delivery by tenant_id.
        await c.query(
          `UPDATE deliveries SET status = 'cancelled', status_reason = 'tenant_deleted', next_attempt_at = NULL,
             updated_at = $2
           WHERE endpoint_id IN (SELECT e.id FROM endpoints e WHERE e.tenant_id = $1)
             AND tenant_id = $1 AND status = 'pending'`,
          [id, now],
        );
        // Notices not mailed yet stay listed but are not mailed: the tenant is gone ('logged', as without a channel).
        await c.query(
          `UPDATE notifications SET status = 'logged', next_attempt_at = NULL
            WHERE tenant_id = $1 AND status = 'pending'`,
          [id],
        );
        await writeAudit(c, audit, undefined);
        return true;
      }, BULK_DEADLINE_TX);
    },

    async apiKeyCreate({ key }) {
      try {
        await insertApiKey({ query }, key);
      } catch (err) {
        throw unavailableOr(err);
      }
    },

    async apiKeyFindByHash({ hash }) {
      const res = await query<ApiKeyRow>(
        `SELECT ${API_KEY_COLUMNS.split(', ')
          .map((c) => `k.${c}`)
          .join(', ')}
           FROM api_keys AS k LEFT JOIN tenants AS t ON t.id = k.tenant_id
          WHERE k.hash = $1 AND k.revoked_at IS NULL
            AND (k.tenant_id IS NULL OR (t.id IS NOT NULL AND t.deleted_at IS NULL))`,
        [hash],
      );
      return res.rows[0] ? toApiKey(res.rows[0]) : null;
    },

    async apiKeyList({ limit, cursor, kind }) {
      // Unrevoked keys only: a revoked key is deleted as far as the API is concerned.
      const res = await query<ApiKeyRow>(
        `SELECT ${API_KEY_COLUMNS} FROM api_keys
          WHERE kind = $1 AND revoked_at IS NULL AND ($2::text IS NULL OR id < $2)
          ORDER BY id DESC LIMIT $3`,
        [kind, cursor, limit + 1],
      );
      return toPage(res.rows, limit, toApiKey);
    },

    async apiKeyRevoke({ id, kind, now }) {
      const res = await query(
        'UPDATE api_keys SET revoked_at = $3 WHERE id = $1 AND kind = $2 AND revoked_at IS NULL',
        [id, kind, now],
      );
      return res.rowCount === 1;
    },

    async eventInsertBatch({ events, now, idempotencyWindowMs }): Promise<EventInsertOutcome[]> {
      if (events.length === 0) return [];
      // Without idempotency keys a batch is one statement (the events and their fan-out rows), atomic and durable
      // on its own: no BEGIN and COMMIT round trips. Below saturation a batch is often a single event.
      if (events.every((e) => e.idempotencyKey === null))
        return onConnection((c) => insertEventBatch(preparing(c), events, now, idempotencyWindowMs));
      return tx((c) => insertEventBatch(c, events, now, idempotencyWindowMs));
    },

    async eventGet({ id, tenantId }) {
      const res =
        tenantId === null
          ? await query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE id = $1`, [id])
          : await query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE id = $1 AND tenant_id = $2`, [
              id,
              tenantId,
            ]);
      return res.rows[0] ? toEvent(res.rows[0]) : null;
    },

    async eventList({ limit, cursor, tenantId, type }): Promise<Page<EventRecord>> {
      // Built per call (rather than `$1 IS NULL OR ...`) so each shape gets a plan on the matching index.
      const where: string[] = [];
      const values: unknown[] = [];
      const add = (sql: string, v: unknown) => {
        values.push(v);
        where.push(sql.replace('?', `$${values.length}`));
      };
      if (tenantId !== null) add('tenant_id = ?', tenantId);
      if (type != null) add('type = ?', type);
      if (cursor !== null) add('id < ?', cursor);
      values.push(limit + 1);
      const res = await query<EventRow>(
        `SELECT ${EVENT_COLUMNS} FROM events ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
          ORDER BY id DESC LIMIT $${values.length}`,
        values,
      );
      return toPage(res.rows, limit, toEvent);
    },

    async fanoutPendingCount() {
      const res = await query<{ n: number }>('SELECT count(*) AS n FROM fanout_pending');
      return res.rows[0]!.n;
    },

    async idempotencyPrune({ olderThan, limit }) {
      const res = await query(
        `DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM idempotency_keys WHERE created_at < $1 ORDER BY created_at LIMIT $2))`,
        [olderThan, limit],
      );
      return res.rowCount ?? 0;
    },

    /**
     * Every fan-out deletes the fanout_pending rows it claimed, and every lease and completion rewrites endpoint
     * queue rows, so both tables hold a few live rows behind thousands of dead versions a minute. The claim
     * (`ORDER BY event_seq LIMIT … SKIP LOCKED`) and the lease's rotation walk step over all of them: in
     * bench:isolation the claim took 7–9 ms per call after a minute at 300 events/s, 1.6 ms with this VACUUM
     * every few seconds. Autovacuum's default thresholds and one-minute nap are too coarse for tables this hot.
     * Cheap (the tables are tiny); SKIP_LOCKED: another process's VACUUM of the same table is enough.
     */
    async housekeeping() {
      await query('VACUUM (SKIP_LOCKED) fanout_pending, endpoint_queue');
    },
  };
  return store;
}
