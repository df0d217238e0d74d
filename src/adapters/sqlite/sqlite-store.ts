/**
 * SQLite adapter (better-sqlite3): the embedded default, one process.
 *
 * Durability: WAL with `synchronous=FULL`, so a transaction is on disk when COMMIT returns. The pipeline's writes
 * (`eventInsertBatch`, fan-out, lease, completion, circuit-open pass, lease expiry) share one transaction per
 * event-loop turn (turn-commit.ts): one WAL append for every stage's batch of that turn, synced on the thread pool
 * (group commit) before any of them settles.
 * better-sqlite3 is synchronous: every method runs to completion on the event loop, so a connection's transactions
 * never interleave. A second connection (the pipeline thread's, bootstrap/pipeline-thread.ts) writes in IMMEDIATE
 * transactions too, so writers are serialised by SQLite and every transaction reads what the other committed; the
 * two turn commits share a write lock (write-lock.ts). What SQLite lacks and is emulated here:
 *   - `FOR UPDATE SKIP LOCKED` is unnecessary (one process, serial write transactions);
 *   - there is no BIGINT/boolean: times are INTEGER milliseconds, flags are 0/1.
 */
import { readdirSync, readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { OperationsStore } from '../../ports/operations-store.ts';
import type {
  ApiKeyKind,
  ApiKeyRecord,
  EventInsertOutcome,
  EventRecord,
  NewEvent,
  StepUpState,
  Store,
  TenantRecord,
} from '../../ports/store.ts';
import { StoreUnavailableError } from '../../ports/store.ts';
import { writeAudit } from './audit.ts';
import { BACKSTOP_PAGES, startCheckpointer } from './checkpointer.ts';
import { createSqliteDeliveryStore } from './delivery-store.ts';
import { UNFANNED_COUNT_SQL } from './fanout.ts';
import { createSqliteOperationsStore } from './operations-store.ts';
import { page } from './rows.ts';
import { createTurnCommit } from './turn-commit.ts';
import type { WriteLock } from './write-lock.ts';

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

type Row = Record<string, unknown>;

const tenantFromRow = (r: Row): TenantRecord => ({
  id: r.id as string,
  name: r.name as string,
  totpSeedSealed: r.totp_seed_sealed as string,
  createdAt: r.created_at as number,
  deletedAt: (r.deleted_at as number | null) ?? null,
});

const stepUpStateFromRow = (r: Row): StepUpState => ({
  lastStep: (r.totp_last_step as number | null) ?? null,
  failures: r.totp_failures as number,
  failuresSince: (r.totp_failures_since as number | null) ?? null,
});
/**
 * Whose step-up row: a live tenant's, or (no tenant) the operator's (migration 0021), where `:tenantId` is null
 * and only keeps the parameters the same for both.
 */
const stepUpRow = (tenantId: string | null) =>
  tenantId === null
    ? { table: 'operator_step_up', where: 'id = 1 AND :tenantId IS NULL' }
    : { table: 'tenants', where: 'id = :tenantId AND deleted_at IS NULL' };
const stepUpAcceptSql = (tenantId: string | null) => {
  const { table, where } = stepUpRow(tenantId);
  return `UPDATE ${table} SET totp_last_step = :step, totp_failures = 0, totp_failures_since = NULL
    WHERE ${where} AND (totp_last_step IS NULL OR totp_last_step < :step)`;
};
// Every SET expression reads the row as it was, so both see the same window.
const stepUpChargeSql = (tenantId: string | null) => {
  const { table, where } = stepUpRow(tenantId);
  return `UPDATE ${table}
    SET totp_failures = CASE WHEN totp_failures_since IS NULL OR :now - totp_failures_since >= :windowMs
                             THEN 1 ELSE totp_failures + 1 END,
        totp_failures_since = CASE WHEN totp_failures_since IS NULL OR :now - totp_failures_since >= :windowMs
                                   THEN :now ELSE totp_failures_since END
    WHERE ${where}
      AND (totp_failures_since IS NULL OR :now - totp_failures_since >= :windowMs OR totp_failures < :max)`;
};

const keyFromRow = (r: Row): ApiKeyRecord => ({
  id: r.id as string,
  kind: r.kind as ApiKeyKind,
  tenantId: (r.tenant_id as string | null) ?? null,
  name: (r.name as string | null) ?? null,
  hash: r.hash as string,
  prefix: r.prefix as string,
  createdAt: r.created_at as number,
  revokedAt: (r.revoked_at as number | null) ?? null,
});

const eventFromRow = (r: Row): EventRecord => ({
  id: r.id as string,
  tenantId: r.tenant_id as string,
  type: r.type as string,
  resourceId: (r.resource_id as string | null) ?? null,
  data: r.data as string,
  idempotencyKey: (r.idempotency_key as string | null) ?? null,
  requestHash: (r.request_hash as string | null) ?? null,
  createdAt: r.created_at as number,
});

export interface SqliteStoreOptions {
  /** File path, or ':memory:' for throwaway stores. */
  filename: string;
  /** Shared with another thread's store on the same file (write-lock.ts). */
  writeLock?: WriteLock;
  /**
   * Who checkpoints the WAL: this connection inside its COMMITs (default, SQLite's own rule), a thread this store
   * starts (`thread`: checkpointer.ts), or the thread of another store on the same file (`elsewhere`). With
   * either of the last two this connection checkpoints itself only past BACKSTOP_PAGES.
   */
  checkpoints?: 'commit' | 'thread' | 'elsewhere';
}

export function createSqliteStore(opts: SqliteStoreOptions): Store & OperationsStore {
  let db: Database.Database;
  try {
    db = new Database(opts.filename);
  } catch (err) {
    throw new StoreUnavailableError(err);
  }
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');

  const migrate = () => {
    db.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
    );
    const applied = new Set(
      (db.prepare('SELECT version FROM schema_migrations').all() as Row[]).map((r) => r.version as number),
    );
    const files = readdirSync(MIGRATIONS_DIR)
      .filter((f) => /^\d{4}_.*\.sql$/.test(f))
      .sort();
    for (const file of files) {
      const version = Number(file.slice(0, 4));
      if (applied.has(version)) continue;
      const sql = readFileSync(new URL(file, MIGRATIONS_DIR), 'utf8');
      db.transaction(() => {
        db.exec(sql);
        db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(
          version,
          Date.now(),
        );
      }).immediate();
    }
  };

  // Statements are prepared lazily (after migrate) and cached.
  const cache = new Map<string, Database.Statement>();
  const st = (sql: string): Database.Statement => {
    let s = cache.get(sql);
    if (!s) {
      s = db.prepare(sql);
      cache.set(sql, s);
    }
    return s;
  };

  const insertEvent = (e: NewEvent) => {
    // Fan-out takes it by its seq (fanout.ts; migration 0010): nothing else to write.
    st(
      `INSERT INTO events (id, tenant_id, type, resource_id, data, idempotency_key, request_hash, created_at,
         trace_parent)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      e.id,
      e.tenantId,
      e.type,
      e.resourceId,
      e.data,
      e.idempotencyKey,
      e.requestHash,
      e.createdAt,
      e.traceParent ?? null,
    );
  };

  // Runs inside a transaction (turn-commit.ts).
  const insertBatch = (events: NewEvent[], now: number, windowMs: number): EventInsertOutcome[] => {
    const out: EventInsertOutcome[] = [];
    for (const e of events) {
      if (e.idempotencyKey === null) {
        insertEvent(e);
        out.push({ kind: 'created', event: e });
        continue;
      }
      const existing = st('SELECT * FROM idempotency_keys WHERE tenant_id = ? AND key = ?').get(
        e.tenantId,
        e.idempotencyKey,
      ) as Row | undefined;
      // A key recorded at c is live for [c, c + window): at exactly c + window it is free again (as on PostgreSQL).
      if (existing && now < (existing.created_at as number) + windowMs) {
        const original = eventFromRow(st('SELECT * FROM events WHERE id = ?').get(existing.event_id) as Row);
        out.push({
          kind: existing.request_hash === e.requestHash ? 'duplicate' : 'key_conflict',
          event: original,
        });
        continue;
      }
      insertEvent(e);
      st(
        `INSERT INTO idempotency_keys (tenant_id, key, event_id, request_hash, created_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (tenant_id, key) DO UPDATE SET event_id = excluded.event_id,
             request_hash = excluded.request_hash, created_at = excluded.created_at`,
      ).run(e.tenantId, e.idempotencyKey, e.id, e.requestHash, e.createdAt);
      out.push({ kind: 'created', event: e });
    }
    return out;
  };

  // Every method wraps SQLite errors that mean "the database is not usable" (disk I/O, locked past the timeout).
  const mapError = (err: unknown) =>
    /^SQLITE_(IOERR|BUSY|LOCKED|CANTOPEN|FULL|READONLY)/.test((err as { code?: string }).code ?? '')
      ? new StoreUnavailableError(err)
      : err;
  const guard = <T>(fn: () => T): Promise<T> => {
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(mapError(err));
    }
  };

  const inMemory = opts.filename === ':memory:' || opts.filename === '';
  const turn = createTurnCommit(db, {
    ...(inMemory ? {} : { walFile: `${opts.filename}-wal` }),
    ...(opts.writeLock ? { lock: opts.writeLock } : {}),
  });
  const checkpoints = inMemory ? 'commit' : (opts.checkpoints ?? 'commit');
  if (checkpoints !== 'commit') db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
  const checkpointer =
    checkpoints === 'thread'
      ? startCheckpointer(opts.filename, (message) => {
          // A failed pass is retried by the next; the writers' backstop keeps the WAL bounded meanwhile.
          process.emitWarning(`SQLite checkpoint failed: ${message}`);
        })
      : null;
  const { refreshDue, ...deliveryStore } = createSqliteDeliveryStore(db, st, turn);
  const delivery = { ...deliveryStore, ...createSqliteOperationsStore(db, st, refreshDue) };
  const guarded = Object.fromEntries(
    Object.entries(delivery).map(([name, fn]) => [
      name,
      (p: unknown) =>
        (fn as (p: unknown) => Promise<unknown>)(p).catch((err) => {
          throw mapError(err);
        }),
    ]),
  ) as unknown as typeof delivery;

  const store: Store & OperationsStore = {
    ...guarded,
    capabilities: { multiProcess: false, sharedTurn: true, kind: 'sqlite' },
    migrate: () => guard(migrate),
    ping: () => guard(() => void st('SELECT 1').get()),
    close: async () => {
      if (!db.open) return;
      turn.flush();
      await checkpointer?.close();
      db.close();
    },

    tenantCreate: ({ tenant, tenantKey }) =>
      guard(() =>
        db.transaction(() => {
          st(
            'INSERT INTO tenants (id, name, totp_seed_sealed, created_at, deleted_at) VALUES (?, ?, ?, ?, ?)',
          ).run(tenant.id, tenant.name, tenant.totpSeedSealed, tenant.createdAt, tenant.deletedAt);
          insertKey(tenantKey);
        })(),
      ),
    tenantGet: ({ id }) =>
      guard(() => {
        const r = st('SELECT * FROM tenants WHERE id = ? AND deleted_at IS NULL').get(id) as Row | undefined;
        return r ? tenantFromRow(r) : null;
      }),
    stepUpState: ({ tenantId }) =>
      guard(() => {
        const { table, where } = stepUpRow(tenantId);
        const r = st(
          `SELECT totp_last_step, totp_failures, totp_failures_since FROM ${table} WHERE ${where}`,
        ).get({ tenantId }) as Row | undefined;
        return r ? stepUpStateFromRow(r) : null;
      }),
    stepUpAccept: ({ tenantId, step }) =>
      guard(() => st(stepUpAcceptSql(tenantId)).run({ tenantId, step }).changes === 1),
    stepUpCharge: ({ tenantId, now, windowMs, max }) =>
      guard(() => st(stepUpChargeSql(tenantId)).run({ tenantId, now, windowMs, max }).changes === 1),
    tenantList: ({ limit, cursor }) =>
      guard(() => {
        const rows = (
          cursor
            ? st(
                'SELECT * FROM tenants WHERE deleted_at IS NULL AND id < ? ORDER BY id DESC LIMIT ? + 0',
              ).all(cursor, limit + 1)
            : st('SELECT * FROM tenants WHERE deleted_at IS NULL ORDER BY id DESC LIMIT ? + 0').all(limit + 1)
        ) as Row[];
        return page(rows.map(tenantFromRow), limit);
      }),
    tenantDelete: ({ id, now, audit }) =>
      guard(() =>
        db.transaction(() => {
          const res = st('UPDATE tenants SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL').run(
            now,
            id,
          );
          if (res.changes === 0) return false;
          st('UPDATE api_keys SET revoked_at = ? WHERE tenant_id = ? AND revoked_at IS NULL').run(now, id);
          st(
            `UPDATE deliveries SET status = 'cancelled', status_reason = 'tenant_deleted', next_attempt_at = NULL,
               updated_at = ? WHERE tenant_id = ? AND status = 'pending'`,
          ).run(now, id);
          st(
            `UPDATE endpoint_queue SET next_due_at = NULL
             WHERE endpoint_id IN (SELECT id FROM endpoints WHERE tenant_id = ?)`,
          ).run(id);
          st('UPDATE endpoints SET deleted_at = ? WHERE tenant_id = ? AND deleted_at IS NULL').run(now, id);
          // Notices not mailed yet stay listed but are not mailed: the tenant is gone ('logged', as without a channel).
          st(
            "UPDATE notifications SET status = 'logged', next_attempt_at = NULL WHERE tenant_id = ? AND status = 'pending'",
          ).run(id);
          writeAudit(st, audit, undefined);
          return true;
        })(),
      ),

    apiKeyCreate: ({ key }) => guard(() => insertKey(key)),
    apiKeyFindByHash: ({ hash }) =>
      guard(() => {
        const r = st(
          `SELECT k.* FROM api_keys k LEFT JOIN tenants t ON t.id = k.tenant_id
           WHERE k.hash = ? AND k.revoked_at IS NULL AND (k.tenant_id IS NULL OR t.deleted_at IS NULL)`,
        ).get(hash) as Row | undefined;
        return r ? keyFromRow(r) : null;
      }),
    apiKeyList: ({ kind, limit, cursor }) =>
      guard(() => {
        const rows = (
          cursor
            ? st(
                'SELECT * FROM api_keys WHERE kind = ? AND revoked_at IS NULL AND id < ? ORDER BY id DESC LIMIT ? + 0',
              ).all(kind, cursor, limit + 1)
            : st(
                'SELECT * FROM api_keys WHERE kind = ? AND revoked_at IS NULL ORDER BY id DESC LIMIT ? + 0',
              ).all(kind, limit + 1)
        ) as Row[];
        return page(rows.map(keyFromRow), limit);
      }),
    apiKeyRevoke: ({ id, kind, now }) =>
      guard(
        () =>
          st('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND kind = ? AND revoked_at IS NULL').run(
            now,
            id,
            kind,
          ).changes > 0,
      ),
    // IMMEDIATE: it reads the tenant before writing, and the pipeline thread's connection may write in between.
    tenantKeyReplace: ({ tenantId, key, now, audit }) =>
      guard(() =>
        db
          .transaction(() => {
            if (!st('SELECT 1 FROM tenants WHERE id = ? AND deleted_at IS NULL').get(tenantId)) return false;
            st(
              `UPDATE api_keys SET revoked_at = ?
               WHERE kind = 'tenant' AND tenant_id = ? AND revoked_at IS NULL`,
            ).run(now, tenantId);
            insertKey(key);
            writeAudit(st, audit, undefined);
            return true;
          })
          .immediate(),
      ),

    eventInsertBatch: ({ events, now, idempotencyWindowMs }) =>
      turn
        .submit(() => insertBatch(events, now, idempotencyWindowMs))
        .catch((err) => {
          throw mapError(err);
        }),
    eventGet: ({ id, tenantId }) =>
      guard(() => {
        const r = (
          tenantId === null
            ? st('SELECT * FROM events WHERE id = ?').get(id)
            : st('SELECT * FROM events WHERE id = ? AND tenant_id = ?').get(id, tenantId)
        ) as Row | undefined;
        return r ? eventFromRow(r) : null;
      }),
    eventList: ({ tenantId, type, limit, cursor }) =>
      guard(() => {
        const where: string[] = [];
        const args: unknown[] = [];
        if (tenantId !== null) {
          where.push('tenant_id = ?');
          args.push(tenantId);
        }
        if (type) {
          where.push('type = ?');
          args.push(type);
        }
        if (cursor) {
          where.push('id < ?');
          args.push(cursor);
        }
        const sql = `SELECT * FROM events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ? + 0`;
        const rows = st(sql).all(...args, limit + 1) as Row[];
        return page(rows.map(eventFromRow), limit);
      }),

    fanoutPendingCount: () => guard(() => (st(UNFANNED_COUNT_SQL).get() as Row).n as number),
    idempotencyPrune: ({ olderThan, limit }) =>
      guard(
        () =>
          st(
            `DELETE FROM idempotency_keys WHERE rowid IN (
               SELECT rowid FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ? + 0)`,
          ).run(olderThan, limit).changes,
      ),
    // No MVCC garbage: a deleted row's space is reused by the next insert.
    housekeeping: async () => {},
  };

  function insertKey(k: ApiKeyRecord) {
    st(
      `INSERT INTO api_keys (id, kind, tenant_id, name, hash, prefix, created_at, revoked_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(k.id, k.kind, k.tenantId, k.name, k.hash, k.prefix, k.createdAt, k.revokedAt);
  }

  return store;
}
