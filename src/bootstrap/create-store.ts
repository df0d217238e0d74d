import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createPostgresStore } from '../adapters/postgres/postgres-store.ts';
import { createSqliteStore } from '../adapters/sqlite/sqlite-store.ts';
import type { WriteLock } from '../adapters/sqlite/write-lock.ts';
import type { Config } from '../config/config.ts';
import type { Store } from '../ports/store.ts';

/** The SQLite store's file in the data directory. */
export const sqliteFile = (dataDir: string) => join(dataDir, 'hookrail.db');

/**
 * SQLite in the data directory unless DATABASE_URL selects PostgreSQL. A second SQLite store of the same process
 * (the pipeline thread's) shares the first one's write lock and leaves checkpoints to its thread. `logger`: where
 * PostgreSQL's errors of idle connections, which no caller waits on, are reported.
 */
export function createStore(
  config: Pick<Config, 'databaseUrl' | 'dataDir'>,
  sqlite: { writeLock?: WriteLock; second?: boolean } = {},
  logger?: unknown,
): Store {
  if (config.databaseUrl) return createPostgresStore({ connectionString: config.databaseUrl, logger });
  mkdirSync(config.dataDir, { recursive: true });
  return createSqliteStore({
    filename: sqliteFile(config.dataDir),
    checkpoints: sqlite.second ? 'elsewhere' : 'thread',
    ...(sqlite.writeLock ? { writeLock: sqlite.writeLock } : {}),
  });
}
