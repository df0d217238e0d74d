/**
 * Numbered SQL migrations (`migrations/0001_init.sql`, ...) tracked in `schema_migrations`. Each migration runs in
 * its own transaction that first takes a transaction-scoped advisory lock, so any number of processes may call
 * migrate() at once: the first applies, the others wait on the lock, then see the version recorded and skip it.
 * A failed migration rolls back whole (PostgreSQL DDL is transactional) and leaves no version row behind.
 */
import { readdir, readFile } from 'node:fs/promises';
import type { QueryResult, QueryResultRow } from 'pg';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** What a transaction's statements run on (see preparing in prepared-statements.ts). */
export interface TxClient {
  // biome-ignore lint/suspicious/noExplicitAny: the row type is the caller's, as with pg's own query
  query<R extends QueryResultRow = any>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}
/**
 * `probesOnly`: the transaction runs with PROBES_ONLY (query-helpers.ts), sent with its BEGIN. `deadlineMs`: every
 * statement of the transaction, COMMIT included, has this long to answer instead of the store's short deadline
 * (BULK_DEADLINE_TX, MIGRATION_TX).
 */
export type TxRunner = <T>(
  fn: (client: TxClient) => Promise<T>,
  o?: { probesOnly?: boolean; deadlineMs?: number },
) => Promise<T>;

/**
 * A migration's statements have a day to answer, and so does the wait for another process's migration (the advisory
 * lock): building an index on a table of millions of rows takes minutes, and under the short deadline every start
 * gave up on it and rolled it back, so the upgrade never landed. A day rather than none, because pg has no "none"
 * once the pool sets a deadline, and a dead server is still noticed eventually.
 */
export const MIGRATION_TX = { deadlineMs: 24 * 60 * 60 * 1000 } as const;

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
const FILE_RE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** Read once per process: the files ship with the code and never change while it runs. */
let cached: Promise<Migration[]> | null = null;

export function loadMigrations(): Promise<Migration[]> {
  cached ??= (async () => {
    const names = (await readdir(MIGRATIONS_DIR)).filter((n) => FILE_RE.test(n)).sort();
    const out: Migration[] = [];
    for (const file of names) {
      const m = FILE_RE.exec(file)!;
      const version = Number(m[1]);
      if (out.some((x) => x.version === version)) throw new Error(`duplicate migration version ${version}`);
      out.push({ version, name: m[2]!, sql: await readFile(new URL(file, MIGRATIONS_DIR), 'utf8') });
    }
    return out;
  })().catch((err: unknown) => {
    cached = null; // do not remember a transient read failure
    throw err;
  });
  return cached;
}

/** Identifiers are interpolated into DDL and the connection's search_path, so only plain lowercase names pass. */
export function assertSchemaName(schema: string): void {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(`invalid schema name ${JSON.stringify(schema)}: use lowercase letters, digits and _`);
  }
}

/** Lock, make sure the schema and the bookkeeping table exist; runs at the start of every migration transaction. */
async function prologue(client: TxClient, schema: string | null): Promise<void> {
  // One lock per schema: tests migrate many schemas of one database in parallel without waiting on each other.
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`hookrail.migrate:${schema ?? ''}`]);
  // Under the lock, because concurrent CREATE SCHEMA IF NOT EXISTS can still fail with a unique violation.
  if (schema !== null) await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  await client.query(
    `CREATE TABLE IF NOT EXISTS schema_migrations (
       version    INTEGER PRIMARY KEY,
       name       TEXT NOT NULL,
       applied_at BIGINT NOT NULL
     )`,
  );
}

export async function runMigrations(tx: TxRunner, schema: string | null): Promise<void> {
  if (schema !== null) assertSchemaName(schema);
  const migrations = await loadMigrations();
  const applied = await tx(async (client) => {
    await prologue(client, schema);
    const res = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
    return new Set(res.rows.map((r) => r.version));
  }, MIGRATION_TX);
  for (const m of migrations) {
    if (applied.has(m.version)) continue;
    await tx(async (client) => {
      await prologue(client, schema);
      // Re-check under the lock: another process may have applied it since we looked.
      const done = await client.query('SELECT 1 FROM schema_migrations WHERE version = $1', [m.version]);
      if (done.rowCount) return;
      await client.query(m.sql);
      await client.query(
        `INSERT INTO schema_migrations (version, name, applied_at)
         VALUES ($1, $2, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)`,
        [m.version, m.name],
      );
    }, MIGRATION_TX);
  }
}
